#!/usr/bin/python
"""Check that every declared project exists in the scheduler as declared."""

DOCUMENTATION = r"""
module: validate_projects
short_description: Check every declared project's KAI queue and namespace against the inventory
description:
  - Reads the KAI queues and the projects' namespaces and compares them with the declared projects
    (GPU quota, over-quota weight, limit, parent queue, node affinity and interactive time limit).
  - Returns checks and the quota table (declared, configured, GPUs held now) as a report section.
  - Reads only; never changes anything.
version_added: 0.1.0
options:
  projects:
    description: The declared projects (clusterproof_site.projects).
    type: list
    elements: dict
    required: true
  scheduler:
    description: The site's scheduler; KAI queues or Kueue ClusterQueues are read.
    type: str
    default: kai
    choices: [kai, kueue]
extends_documentation_fragment:
  - clusterproof.gpu.kube_auth
author:
  - clusterproof developers
"""

EXAMPLES = r"""
- name: Check the projects
  clusterproof.gpu.validate_projects:
    projects: "{{ clusterproof_site.projects }}"
    kubeconfig: "{{ clusterproof_active_kubeconfig }}"
"""

RETURN = r"""
section:
  description: The report section with the checks and the quota table.
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
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import projects as project_validation


def main():
    spec = {
        "projects": {"type": "list", "elements": "dict", "required": True},
        "scheduler": {"type": "str", "default": "kai", "choices": ["kai", "kueue"]},
    }
    spec.update(copy.deepcopy(kube.AUTH_ARG_SPEC))
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    params = module.params
    try:
        api = kube.api_client(params["kubeconfig"], params["context"])
        core = kube.core_v1(api)
        custom = kube.k8s_client.CustomObjectsApi(api)
        if params["scheduler"] == "kueue":
            group, version = kueue.API_VERSION.split("/")
            queues = custom.list_cluster_custom_object(group, version, "clusterqueues")["items"]
        else:
            queues = custom.list_cluster_custom_object(*kai.QUEUE_API)["items"]
        names = {project["name"] for project in params["projects"]}
        namespaces = [
            api.sanitize_for_serialization(ns) for ns in core.list_namespace().items if ns.metadata.name in names
        ]
        holding = {}
        for name in names & {ns["metadata"]["name"] for ns in namespaces}:
            pods = core.list_namespaced_pod(name).items
            holding[name] = round(
                sum(kai.pod_gpus(p) for p in pods if p.status.phase == "Running" and p.spec.node_name), 3
            )
    except kube.KubeError as error:
        module.fail_json(msg=str(error))
    except kube.ApiException as error:
        module.fail_json(
            msg="reading the projects failed: %s %s (is %s installed?)"
            % (error.status, error.reason, "Kueue" if params["scheduler"] == "kueue" else "KAI scheduler")
        )
    check_projects = (
        project_validation.validate_projects_on_kueue
        if params["scheduler"] == "kueue"
        else project_validation.validate_projects
    )
    checks, table = check_projects(params["projects"], queues, namespaces, holding)
    section = {
        "id": "projects",
        "title": "Projects: quotas as declared",
        "checks": [check.to_dict() for check in checks],
        "tables": [table],
    }
    module.exit_json(changed=False, section=section, failed_checks=sum(1 for c in checks if c.status == "fail"))


if __name__ == "__main__":
    main()
