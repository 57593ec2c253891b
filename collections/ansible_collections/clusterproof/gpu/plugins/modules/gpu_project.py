#!/usr/bin/python
"""Make a GPU project (tenant) exist as declared: namespace, scheduler queue (KAI or Kueue), member access."""

DOCUMENTATION = r"""
module: gpu_project
short_description: Make a GPU project exist as declared, with its namespace, scheduler queue and member access
version_added: 0.1.0
author:
  - clusterproof developers
description:
  - A project becomes its namespace (annotated with its node affinity and interactive time limit),
    its scheduler queue (a KAI scheduler Queue under the department queue, or a Kueue ClusterQueue
    and LocalQueue, see O(scheduler)) with its GPU quota, over-quota weight, limit and priority,
    and a Role and RoleBinding that let its users and groups submit workloads in its
    namespace only.
  - Idempotent; supports check mode and C(--diff).
  - With O(state=absent), refuses to remove a project whose namespace still has pending or running
    pods unless O(force=true).
options:
  name:
    description: Project name; a lower-case DNS label, used for the namespace and the queue.
    type: str
    required: true
  state:
    description: present or absent.
    type: str
    choices: [present, absent]
    default: present
  gpu_quota:
    description: Guaranteed GPUs; may be fractional. Required with O(state=present).
    type: float
  gpu_limit:
    description: The most GPUs the project may use, over quota included; unlimited when omitted.
    type: float
  over_quota_weight:
    description: Share of spare GPUs; defaults to O(gpu_quota) (the Run:AI split in proportion to quota).
    type: float
  priority:
    description: KAI queue priority (higher is served first when over quota).
    type: int
  node_affinity:
    description: Node names training and interactive workloads of the project may run on; empty means any.
    type: dict
    suboptions:
      training:
        description: Nodes for training workloads.
        type: list
        elements: str
        default: []
      interactive:
        description: Nodes for interactive workloads.
        type: list
        elements: str
        default: []
  interactive_time_limit_seconds:
    description: Interactive workloads of the project end after this many seconds.
    type: int
  users:
    description: Users who may submit workloads in the project.
    type: list
    elements: str
    default: []
  groups:
    description: Groups whose members may submit workloads in the project.
    type: list
    elements: str
    default: []
  force:
    description: With O(state=absent), remove the project even if it still has workloads.
    type: bool
    default: false
  scheduler:
    description:
      - The scheduler backend the project's queue is made for.
      - C(kai) makes a KAI scheduler Queue under the department queue.
      - C(kueue) makes a Kueue ClusterQueue in the C(clusterproof) cohort (nominal quota O(gpu_quota),
        borrowing limit O(gpu_limit) minus O(gpu_quota), lending limit O(gpu_lending_limit), fair-sharing
        weight O(over_quota_weight)) and a LocalQueue of the same name in the project's namespace.
    type: str
    choices: [kai, kueue]
    default: kai
  gpu_lending_limit:
    description:
      - With O(scheduler=kueue), the most of its quota the project lends to other projects; all of it when omitted.
      - At most O(gpu_quota).
    type: float
  cpu_quota:
    description:
      - Guaranteed CPU cores (in thousandths), beside the GPUs; none when omitted (KAI's -1).
      - Only with O(scheduler=kai), whose queues divide CPU and memory as they divide GPUs.
    type: float
  cpu_limit:
    description:
      - The most CPU cores the project may use, not below O(cpu_quota); unlimited when omitted.
      - O(scheduler=kai) only.
    type: float
  memory_quota:
    description: Guaranteed memory in GiB (in MiB steps), beside the GPUs; none when omitted. O(scheduler=kai) only.
    type: float
  memory_limit:
    description:
      - The most memory (GiB) the project may use, not below O(memory_quota); unlimited when omitted.
      - O(scheduler=kai) only.
    type: float
  pod_security:
    description:
      - The Pod Security Standard enforced in the project's namespace (Pod Security Admission labels).
      - C(baseline) refuses privileged pods, host networking and host paths; C(privileged) only for a
        project the site declared an exception for.
    type: str
    choices: [restricted, baseline, privileged]
    default: baseline
  network_isolation:
    description:
      - Whether the project's namespace gets its NetworkPolicy (ingress only from itself, kube-system, the
        engine's namespace and O(ingress_namespaces)); false removes one made before.
    type: bool
    default: true
  ingress_namespaces:
    description: Namespaces beside kube-system and the engine's whose pods may reach the project's (monitoring).
    type: list
    elements: str
    default: []
  ingress_from_all_projects:
    description: Every project's pods may reach this project's (a shared service, a declared exception).
    type: bool
    default: false
  resource_quota:
    description:
      - What the project may hold beside its GPUs, as the ResourceQuota C(clusterproof-project) in its namespace
        (C(pods), C(persistentvolumeclaims), C(requests.storage), C(requests.cpu), C(requests.memory), object
        counts; Kubernetes quantities). A ceiling on CPU or memory also gets the LimitRange
        C(clusterproof-project-defaults), which gives containers that state no requests C(100m) and C(128Mi).
      - When omitted, the defaults (pods 500, persistentvolumeclaims 100, requests.storage 10Ti, services 100,
        configmaps 500, secrets 500); C({}) holds nothing and removes the ResourceQuota made before.
    type: dict
extends_documentation_fragment:
  - clusterproof.gpu.kube_auth
"""

EXAMPLES = r"""
- name: Team A with 4 guaranteed GPUs, a 1-hour limit on interactive work
  clusterproof.gpu.gpu_project:
    name: team-a
    gpu_quota: 4
    interactive_time_limit_seconds: 3600
    node_affinity:
      interactive: [dgx1-1]
    users: [alice]
    kubeconfig: "{{ clusterproof_active_kubeconfig }}"

- name: Remove team-e even though jobs still run there
  clusterproof.gpu.gpu_project:
    name: team-e
    state: absent
    force: true
"""

RETURN = r"""
changed_objects:
  description: Objects created, changed or deleted (kind/name).
  returned: always
  type: list
  elements: str
"""

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import registry
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import projects, resource_quota

ARGUMENT_SPEC = {
    "name": {"type": "str", "required": True},
    "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
    "gpu_quota": {"type": "float"},
    "gpu_limit": {"type": "float"},
    "over_quota_weight": {"type": "float"},
    "priority": {"type": "int"},
    "node_affinity": {
        "type": "dict",
        "options": {
            "training": {"type": "list", "elements": "str", "default": []},
            "interactive": {"type": "list", "elements": "str", "default": []},
        },
    },
    "interactive_time_limit_seconds": {"type": "int"},
    "users": {"type": "list", "elements": "str", "default": []},
    "groups": {"type": "list", "elements": "str", "default": []},
    "force": {"type": "bool", "default": False},
    "gpu_lending_limit": {"type": "float"},
    "cpu_quota": {"type": "float"},
    "cpu_limit": {"type": "float"},
    "memory_quota": {"type": "float"},
    "memory_limit": {"type": "float"},
    "pod_security": {"type": "str", "choices": ["restricted", "baseline", "privileged"], "default": "baseline"},
    "network_isolation": {"type": "bool", "default": True},
    "ingress_namespaces": {"type": "list", "elements": "str", "default": []},
    "ingress_from_all_projects": {"type": "bool", "default": False},
    "resource_quota": {"type": "dict"},
}
# The project's fields its rules cover (tenancy/projects.py); gpu_quota is required when present.
_RULED = (
    "gpu_limit",
    "over_quota_weight",
    "gpu_lending_limit",
    "interactive_time_limit_seconds",
    *projects.RESOURCE_FIELDS,
)


def _bad_input(params):
    """Errors that name the project and the field; nothing is sent to the cluster before these pass."""
    errors = []
    if not projects.valid_name(params["name"]):
        name = params["name"]
        errors.append("project %s: name: expected a lower-case DNS label, found %r" % (name, name))
    if params["state"] == "absent":
        return errors
    values = {
        "gpu_quota": params["gpu_quota"],
        **{field: params[field] for field in _RULED if params[field] is not None},
    }
    backend = registry.backend(params["scheduler"])
    lenders = None if backend.lends_quota else registry.lenders()
    if not backend.cpu_memory_quotas:
        errors += [
            "project %s: %s: expected none with scheduler %s (CPU and memory quotas are for kai only), found %s"
            % (params["name"], field, params["scheduler"], params[field])
            for field in projects.RESOURCE_FIELDS
            if params[field] is not None
        ]
    if params["resource_quota"] is not None:
        _, problems = resource_quota.check_hard(params["resource_quota"], "resource_quota")
        errors += [
            "project %s: %s: expected %s, found %r" % (params["name"], problem.field, problem.expected, problem.found)
            for problem in problems
        ]
    errors += [
        "project %s: ingress_namespaces: expected namespace names (DNS labels), found %r" % (params["name"], namespace)
        for namespace in params["ingress_namespaces"]
        if not projects.valid_name(namespace)
    ]
    return errors + projects.problem_messages(params["name"], values, lenders)


def _present(module, backend, applier, result):
    data = dict(module.params)
    if data["over_quota_weight"] is None:
        data["over_quota_weight"] = data["gpu_quota"]
    before, after = {}, {}
    project = projects.Project.from_dict(data)
    policy = projects.network_policy_manifest(project)
    if not project.network_isolation and applier.delete(policy):
        result["changed_objects"].append("deleted NetworkPolicy/%s" % policy["metadata"]["name"])
    # Ceilings no longer declared: the objects that held them go (an apply would leave them).
    kept = {manifest["kind"] for manifest in projects.resource_quota_manifests(project)}
    for manifest in resource_quota.objects(project.name):
        if manifest["kind"] not in kept and applier.delete(manifest):
            result["changed_objects"].append("deleted %s/%s" % (manifest["kind"], manifest["metadata"]["name"]))
    for manifest in backend.project_manifests(project):
        changed, old, new = applier.apply(manifest)
        if changed:
            key = "%s/%s" % (manifest["kind"], manifest["metadata"]["name"])
            result["changed_objects"].append(key)
            before[key] = _shown(old, manifest)
            after[key] = _shown(new, manifest)
    if module._diff and result["changed_objects"]:
        result["diff"] = {"before": before, "after": after}


def _absent(module, backend, api, applier, result):
    name = module.params["name"]
    project = projects.Project(name, 0, 0)
    if applier.get(projects.namespace_manifest(project)) is not None:
        pods = kube.core_v1(api).list_namespaced_pod(name).items
        active = projects.active_workloads([api.sanitize_for_serialization(pod) for pod in pods])
        if active and not module.params["force"]:
            raise runner.ModuleError(
                "project %s still has %d pending or running workload pod(s) (%s); "
                "nothing was removed; set force: true to remove it anyway" % (name, len(active), ", ".join(active[:5])),
                **result,
            )
    removed = ("Namespace", *backend.removed_kinds)
    for manifest in reversed(backend.project_manifests(project)):
        if manifest["kind"] in removed and applier.delete(manifest):
            result["changed_objects"].append("%s/%s" % (manifest["kind"], manifest["metadata"]["name"]))


def _work(module):
    params = module.params
    errors = _bad_input(params)
    if errors:
        raise runner.ModuleError("; ".join(errors), changed=False)
    backend = registry.backend(params["scheduler"])
    result = {"changed": False, "changed_objects": []}
    try:
        api = kube.api_client(params["kubeconfig"], params["context"])
        applier = kube.Applier(api, check_mode=module.check_mode)
        if params["state"] == "present":
            _present(module, backend, applier, result)
        else:
            _absent(module, backend, api, applier, result)
    except kube.ApiException as error:
        runner.fail_from_exception(module, error, "a request for project %s" % params["name"], backend.hint)
    result["changed"] = bool(result["changed_objects"])
    return result


def main():
    runner.run_cluster_module(ARGUMENT_SPEC, registry.ARG_SPEC, work=_work, doing="making the project exist")


def _shown(obj, manifest):
    """The part of an object that clusterproof manages: the fields of its manifest."""
    if obj is None:
        return {}
    keep = {key: obj.get(key) for key in manifest if key not in ("apiVersion", "kind")}
    metadata = obj.get("metadata") or {}
    keep["metadata"] = {key: metadata.get(key) for key in manifest["metadata"]}
    return keep


if __name__ == "__main__":
    main()
