#!/usr/bin/python
"""Check the elastic quota tree on the cluster against the inventory, with the quota dashboard."""

DOCUMENTATION = r"""
module: validate_quota_tree
short_description: Check an elastic quota tree against the inventory and show used / min / max per node
version_added: 0.1.0
author:
  - clusterproof developers
description:
  - For each node of the declared tree, checks that the scheduler's object for it (a KAI Queue, a Kueue
    Cohort or ClusterQueue) exists under the declared parent with the declared min (quota) and max
    (limit), and that each leaf's namespaces exist.
  - Adds a table like the Alibaba quota dashboard (node, namespaces, resource, max, min, used), where
    used is read from the running pods in the leaves' namespaces (requests), summed up the tree.
  - Reads only; reports C(changed=false).
extends_documentation_fragment:
  - clusterproof.gpu.quota_tree
  - clusterproof.gpu.kube_auth
  - clusterproof.gpu.scheduler
"""

EXAMPLES = r"""
- name: Check the quota tree
  clusterproof.gpu.validate_quota_tree:
    tree: "{{ clusterproof_site.quota_tree }}"
    kubeconfig: "{{ clusterproof_active_kubeconfig }}"
"""

RETURN = r"""
section:
  description: The report section (a check per node, the dashboard table).
  returned: always
  type: dict
failed_checks:
  description: How many nodes are not as declared (one check per node).
  returned: always
  type: int
"""

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import registry
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import quota_tree


def _requests(pod, backend):
    amounts = {"cpu": 0.0, "memory": 0.0, "gpu": backend.pod_gpus(pod)}
    for container in pod.spec.containers:
        requests = (container.resources.requests if container.resources else None) or {}
        limits = (container.resources.limits if container.resources else None) or {}
        for resource, scale in (("cpu", 1.0), ("memory", 1024**3)):
            raw = requests.get(resource) or limits.get(resource)
            if raw is not None:
                amounts[resource] += float(kube.parse_quantity(raw)) / scale
    return amounts


def _read(module, nodes, backend):
    """The engine's objects for the tree, the namespaces that exist, and the leaves' running pods' requests."""
    api = kube.api_client(module.params["kubeconfig"], module.params["context"])
    core = kube.core_v1(api)
    custom = kube.k8s_client.CustomObjectsApi(api)
    found = [item for api_ in backend.tree_apis for item in custom.list_cluster_custom_object(*api_)["items"]]
    existing = {ns.metadata.name for ns in core.list_namespace().items}
    pods = {}
    for node in nodes:
        for namespace in node.namespaces:
            if namespace in existing:
                pods[namespace] = [
                    _requests(pod, backend)
                    for pod in core.list_namespaced_pod(namespace).items
                    if pod.status.phase == "Running" and pod.spec.node_name and not pod.metadata.deletion_timestamp
                ]
    return found, existing, pods


def _check(node, difference, existing):
    missing = [namespace for namespace in node.namespaces if namespace not in existing]
    if missing:
        difference = "; ".join(part for part in (difference, "namespaces missing: %s" % ", ".join(missing)) if part)
    return {
        "id": "quota-tree/%s" % node.name,
        "title": "quota tree node %s is configured as declared" % node.name,
        "status": "fail" if difference else "pass",
        "expected": "min %s, max %s, under %s" % (node.min or "none", node.max or "none", node.parent or "the top"),
        "observed": difference or "as declared",
        "message": "" if not difference else "re-run playbooks/scheduler.yml",
    }


def _work(module):
    backend = registry.backend(module.params["scheduler"])
    nodes, problems = quota_tree.check_tree(module.params["tree"])
    if problems:
        raise runner.ModuleError("quota tree: %s" % "; ".join("%s: %s" % (p.where, p.field) for p in problems))
    try:
        found, existing, pods = _read(module, nodes, backend)
    except kube.ApiException as error:
        runner.fail_from_exception(module, error, "reading the quota tree", backend.hint)
    differences = backend.tree_differences(nodes, found)
    checks = [_check(node, differences[node.name], existing) for node in nodes]
    used = quota_tree.used_by_pods(nodes, pods)
    section = {
        "id": "quota-tree",
        "title": "Elastic quota tree: used / min / max per node",
        "checks": checks,
        "tables": [
            {
                "id": "quota-tree-dashboard",
                "title": "Quota tree (cpu in cores, memory in GiB, gpu in GPUs)",
                "columns": ["Node", "Namespaces", "Resource", "Max", "Min", "Used"],
                "rows": quota_tree.dashboard_rows(nodes, used),
                "row_status": None,
            }
        ],
        "charts": [],
    }
    return {"changed": False, "section": section, "failed_checks": sum(1 for c in checks if c["status"] == "fail")}


def main():
    runner.run_cluster_module(runner.QUOTA_TREE_ARG_SPEC, registry.ARG_SPEC, work=_work, doing="reading the quota tree")


if __name__ == "__main__":
    main()
