#!/usr/bin/python
"""Check that every declared project exists in the scheduler as declared."""

DOCUMENTATION = r"""
module: validate_projects
short_description: Check every declared project's scheduler queue and namespace against the inventory
version_added: 0.1.0
author:
  - clusterproof developers
description:
  - Reads the scheduler's queues (KAI Queues or Kueue ClusterQueues) and the projects' namespaces and
    compares them with the declared projects (GPU quota, over-quota weight, limit, parent queue or
    cohort, node affinity and interactive time limit).
  - Warns about quota settings that the engine accepts but that do not mean what they seem to (quota
    lint) - quotas adding up to more than the cluster's allocatable GPUs, a limit below its quota, an
    over-quota weight of 0 - and says what the engine does with them.
  - Returns checks and the quota table (declared, configured, GPUs held now) as a report section.
  - Reads only; never changes anything.
extends_documentation_fragment:
  - clusterproof.gpu.declared_projects
  - clusterproof.gpu.kube_auth
  - clusterproof.gpu.scheduler
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

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import registry
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import projects as project_validation


def _work(module):
    params = module.params
    backend = registry.backend(params["scheduler"])
    try:
        api = kube.api_client(params["kubeconfig"], params["context"])
        core = kube.core_v1(api)
        custom = kube.k8s_client.CustomObjectsApi(api)
        queues = [item for api_ in backend.project_apis for item in custom.list_cluster_custom_object(*api_)["items"]]
        names = {project["name"] for project in params["projects"]}
        namespaces = [
            api.sanitize_for_serialization(ns) for ns in core.list_namespace().items if ns.metadata.name in names
        ]
        holding = {}
        for name in names & {ns["metadata"]["name"] for ns in namespaces}:
            pods = core.list_namespaced_pod(name).items
            running = [p for p in pods if p.status.phase == "Running" and p.spec.node_name]
            holding[name] = round(sum(backend.pod_gpus(p) for p in running), 3)
        nodes = [api.sanitize_for_serialization(node) for node in core.list_node().items]
    except kube.ApiException as error:
        runner.fail_from_exception(module, error, "reading the projects", backend.hint)
    checks, table = project_validation.validate_projects(params["projects"], queues, namespaces, holding, backend)
    # A cluster whose GPUs no device plugin reports (none yet, or counted by DRA) has no capacity to
    # compare the quotas with here; the node checks say what it has.
    capacity = project_validation.allocatable_gpus(nodes) or None
    checks += project_validation.lint_projects(params["projects"], capacity, backend.policy)
    section = {
        "id": "projects",
        "title": "Projects: quotas as declared",
        "checks": [check.to_dict() for check in checks],
        "tables": [table],
    }
    return {"changed": False, "section": section, "failed_checks": sum(1 for c in checks if c.status == "fail")}


def main():
    runner.run_cluster_module(
        runner.DECLARED_PROJECTS_ARG_SPEC, registry.ARG_SPEC, work=_work, doing="reading the projects"
    )


if __name__ == "__main__":
    main()
