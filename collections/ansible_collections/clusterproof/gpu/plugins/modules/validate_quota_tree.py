#!/usr/bin/python
"""Check the elastic quota tree on the cluster against the inventory, with the quota dashboard."""

DOCUMENTATION = r"""
module: validate_quota_tree
short_description: Check an elastic quota tree against the inventory and show used / min / max per node
description:
  - For each node of the declared tree, checks that its KAI Queue exists under the declared parent with
    the declared min (quota) and max (limit), and that each leaf's namespaces exist.
  - Adds a table like the Alibaba quota dashboard (node, namespaces, resource, max, min, used), where
    used is read from the running pods in the leaves' namespaces (requests), summed up the tree.
  - Reads only; reports C(changed=false).
version_added: 0.1.0
options:
  tree:
    description: The tree's nodes, parents first (name, parent, min, max, namespaces).
    type: list
    elements: dict
    required: true
  scheduler:
    description:
      - The site's scheduler; its objects for the tree are checked (KAI Queues, or Kueue Cohorts and ClusterQueues).
    type: str
    default: kai
    choices: [kai, kueue]
extends_documentation_fragment:
  - clusterproof.gpu.kube_auth
author:
  - clusterproof developers
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
  description: How many checks failed.
  returned: always
  type: int
"""

import copy

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import kai, kueue
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import quota_tree


def _requests(pod):
    from kubernetes.utils import parse_quantity

    amounts = {"cpu": 0.0, "memory": 0.0, "gpu": kai.pod_gpus(pod)}
    for container in pod.spec.containers:
        requests = (container.resources.requests if container.resources else None) or {}
        limits = (container.resources.limits if container.resources else None) or {}
        for resource, scale in (("cpu", 1.0), ("memory", 1024**3)):
            raw = requests.get(resource) or limits.get(resource)
            if raw is not None:
                amounts[resource] += float(parse_quantity(raw)) / scale
    return amounts


def main():
    spec = {
        "tree": {"type": "list", "elements": "dict", "required": True},
        "scheduler": {"type": "str", "default": "kai", "choices": ["kai", "kueue"]},
    }
    spec.update(copy.deepcopy(kube.AUTH_ARG_SPEC))
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    nodes, problems = quota_tree.check_tree(module.params["tree"])
    if problems:
        module.fail_json(msg="quota tree: %s" % "; ".join("%s: %s" % (p.where, p.field) for p in problems))
    try:
        api = kube.api_client(module.params["kubeconfig"], module.params["context"])
        core = kube.core_v1(api)
        custom = kube.k8s_client.CustomObjectsApi(api)
        on_kueue = module.params["scheduler"] == "kueue"
        if on_kueue:
            group, version = kueue.API_VERSION.split("/")
            queues = {
                (item["kind"], item["metadata"]["name"]): item
                for plural in ("cohorts", "clusterqueues")
                for item in custom.list_cluster_custom_object(group, version, plural)["items"]
            }
        else:
            queues = {
                item["metadata"]["name"]: item for item in custom.list_cluster_custom_object(*kai.QUEUE_API)["items"]
            }
        existing = {ns.metadata.name for ns in core.list_namespace().items}
        pods = {}
        for node in nodes:
            for namespace in node.namespaces:
                if namespace in existing:
                    pods[namespace] = [
                        _requests(pod)
                        for pod in core.list_namespaced_pod(namespace).items
                        if pod.status.phase == "Running" and pod.spec.node_name and not pod.metadata.deletion_timestamp
                    ]
    except kube.KubeError as error:
        module.fail_json(msg=str(error))
    except kube.ApiException as error:
        module.fail_json(
            msg="reading the quota tree failed: %s %s (is the scheduler installed?)" % (error.status, error.reason)
        )
    declared = quota_tree.declared_resources(nodes)
    kueue_objects = {
        manifest["metadata"]["name"]: manifest
        for manifest in quota_tree.kueue_manifests(nodes)
        if manifest["kind"] in ("Cohort", "ClusterQueue")
    }
    checks = []
    for node in nodes:
        if on_kueue:
            wanted = kueue_objects[node.name]
            difference = quota_tree.kueue_configured(node, queues.get((wanted["kind"], node.name)), wanted)
        else:
            difference = quota_tree.kai_configured(node, queues.get(node.name), declared)
        missing = [namespace for namespace in node.namespaces if namespace not in existing]
        if missing:
            difference = "; ".join(part for part in (difference, "namespaces missing: %s" % ", ".join(missing)) if part)
        checks.append(
            {
                "id": "quota-tree/%s" % node.name,
                "title": "quota tree node %s is configured as declared" % node.name,
                "status": "fail" if difference else "pass",
                "expected": "min %s, max %s, under %s"
                % (node.min or "none", node.max or "none", node.parent or "the top"),
                "observed": difference or "as declared",
                "message": "" if not difference else "re-run playbooks/scheduler.yml",
            }
        )
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
    module.exit_json(changed=False, section=section, failed_checks=sum(1 for c in checks if c["status"] == "fail"))


if __name__ == "__main__":
    main()
