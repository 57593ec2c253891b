#!/usr/bin/python
"""Make a GPU project (tenant) exist as declared: namespace, scheduler queue (KAI or Kueue), member access."""

DOCUMENTATION = r"""
module: gpu_project
short_description: Make a GPU project exist as declared, with its namespace, KAI queue and member access
description:
  - A project becomes its namespace (annotated with its node affinity and interactive time limit),
    its KAI scheduler queue under the department queue (GPU quota, over-quota weight, limit,
    priority) and a Role and RoleBinding that let its users and groups submit workloads in its
    namespace only.
  - Idempotent; supports check mode and C(--diff).
  - With O(state=absent), refuses to remove a project whose namespace still has pending or running
    pods unless O(force=true).
version_added: 0.1.0
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
extends_documentation_fragment:
  - clusterproof.gpu.kube_auth
author:
  - clusterproof developers
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

import copy

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import projects

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
    "scheduler": {"type": "str", "choices": ["kai", "kueue"], "default": "kai"},
    "gpu_lending_limit": {"type": "float"},
}


def _bad_input(params):
    """Errors that name the project and the field; nothing is sent to the cluster before these pass."""
    where = "project %s" % params["name"]
    errors = []
    if not projects.valid_name(params["name"]):
        errors.append("%s: name: expected a lower-case DNS label, found %r" % (where, params["name"]))
    if params["state"] == "absent":
        return errors
    quota = params["gpu_quota"]
    if quota is None or quota < 0:
        errors.append("%s: gpu_quota: expected a non-negative number of GPUs, found %r" % (where, quota))
    limit = params["gpu_limit"]
    if limit is not None and quota is not None and limit < quota:
        errors.append("%s: gpu_limit: expected a number not below gpu_quota (%g), found %g" % (where, quota, limit))
    weight = params["over_quota_weight"]
    if weight is not None and weight < 0:
        errors.append("%s: over_quota_weight: expected a non-negative number, found %g" % (where, weight))
    lending = params["gpu_lending_limit"]
    if lending is not None and params["scheduler"] != "kueue":
        errors.append("%s: gpu_lending_limit: expected only with scheduler kueue, found %g" % (where, lending))
    elif lending is not None and quota is not None and not 0 <= lending <= quota:
        errors.append(
            "%s: gpu_lending_limit: expected a number of GPUs from 0 to gpu_quota (%g), found %g"
            % (where, quota, lending)
        )
    limit_seconds = params["interactive_time_limit_seconds"]
    if limit_seconds is not None and limit_seconds <= 0:
        errors.append(
            "%s: interactive_time_limit_seconds: expected a positive number of seconds, found %d"
            % (where, limit_seconds)
        )
    return errors


def main():
    spec = copy.deepcopy(ARGUMENT_SPEC)
    spec.update(copy.deepcopy(kube.AUTH_ARG_SPEC))
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    params = module.params
    errors = _bad_input(params)
    if errors:
        module.fail_json(msg="; ".join(errors), changed=False)
    result = {"changed": False, "changed_objects": []}
    try:
        api = kube.api_client(params["kubeconfig"], params["context"])
        applier = kube.Applier(api, check_mode=module.check_mode)
        if params["state"] == "present":
            data = dict(params)
            if data["over_quota_weight"] is None:
                data["over_quota_weight"] = data["gpu_quota"]
            project = projects.Project.from_dict(data)
            before, after = {}, {}
            for manifest in projects.manifests(project, params["scheduler"]):
                changed, old, new = applier.apply(manifest)
                if changed:
                    key = "%s/%s" % (manifest["kind"], manifest["metadata"]["name"])
                    result["changed_objects"].append(key)
                    before[key] = _shown(old, manifest)
                    after[key] = _shown(new, manifest)
            if module._diff and result["changed_objects"]:
                result["diff"] = {"before": before, "after": after}
        else:
            project = projects.Project(params["name"], 0, 0)
            namespace = projects.namespace_manifest(project)
            if applier.get(namespace) is not None:
                pods = kube.core_v1(api).list_namespaced_pod(params["name"]).items
                active = projects.active_workloads([api.sanitize_for_serialization(pod) for pod in pods])
                if active and not params["force"]:
                    module.fail_json(
                        msg="project %s still has %d pending or running workload pod(s) (%s); "
                        "nothing was removed; set force: true to remove it anyway"
                        % (params["name"], len(active), ", ".join(active[:5])),
                        **result,
                    )
            for manifest in reversed(projects.manifests(project, params["scheduler"])):
                if manifest["kind"] in ("Queue", "ClusterQueue", "Namespace") and applier.delete(manifest):
                    result["changed_objects"].append("%s/%s" % (manifest["kind"], manifest["metadata"]["name"]))
    except kube.KubeError as error:
        module.fail_json(msg=str(error), **result)
    except kube.ApiException as error:
        module.fail_json(
            msg="the API server refused a request for project %s: %s %s" % (params["name"], error.status, error.reason),
            **result,
        )
    result["changed"] = bool(result["changed_objects"])
    module.exit_json(**result)


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
