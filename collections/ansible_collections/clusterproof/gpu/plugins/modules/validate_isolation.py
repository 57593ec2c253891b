#!/usr/bin/python
"""Try each escape from a project as a member of it, and report what the site did."""

DOCUMENTATION = r"""
module: validate_isolation
short_description: Try every tenant escape as a member of each project and report expected against observed
version_added: 0.2.0
author:
  - clusterproof developers
description:
  - For each project with a declared user or group, sends as that member (impersonated, server-side dry run,
    so nothing is created) a GPU workload in its own queue (must be admitted), one charged to another
    project's queue, one that bypasses the quota scheduler, a privileged pod, a pod on the host's network and
    a workload in another project's namespace (each must be refused, by the guard that the check names).
  - Reads back the admission policy and each project's NetworkPolicy.
  - Where pods really run, says that a connection between projects is not tried yet; on the sandbox, that
    pods do not run. A pod's GPUs through C(NVIDIA_VISIBLE_DEVICES) are the runtime's, reported as needing hardware.
  - Declared exceptions (C(clusterproof_tenancy.exceptions)) are shown as such.
  - Returns a report section (category security); changes nothing. The caller's credentials must be allowed to
    impersonate users and groups (a cluster admin's are).
options:
  projects:
    description: The declared projects (clusterproof_site.projects).
    type: list
    elements: dict
    required: true
  tenancy:
    description: The site's tenancy (clusterproof_site.tenancy) - pod_security, network_isolation, exceptions.
    type: dict
    default: {}
  pods_run:
    description: Whether the cluster's pods really run (not on the sandbox).
    type: bool
    default: false
extends_documentation_fragment:
  - clusterproof.gpu.kube_auth
  - clusterproof.gpu.scheduler
"""

EXAMPLES = r"""
- name: Try every escape as each project's member
  clusterproof.gpu.validate_isolation:
    projects: "{{ clusterproof_site.projects }}"
    tenancy: "{{ clusterproof_site.tenancy }}"
    scheduler: "{{ clusterproof_site.scheduler }}"
    kubeconfig: "{{ clusterproof_active_kubeconfig }}"
"""

RETURN = r"""
section:
  description: The report section with one check per attempt and per read-back object.
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
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import admission, isolation, projects
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import isolation as isolation_validation

OPTIONS = {
    "projects": {"type": "list", "elements": "dict", "required": True},
    "tenancy": {"type": "dict", "default": {}},
    "pods_run": {"type": "bool", "default": False},
}


def _work(module):
    params = module.params
    backend = registry.backend(params["scheduler"])
    settings = isolation.TenancySettings.from_dict(params["tenancy"])
    declared = params["projects"]
    names = [project["name"] for project in declared]
    checks = []
    try:
        api = kube.api_client(params["kubeconfig"], params["context"])
        applier = kube.Applier(api)
        policy = admission.policy_manifests(backend.admission_rules)
        checks.append(isolation_validation.policy_check(policy, [applier.get(manifest) for manifest in policy]))
        for index, data in enumerate(declared):
            name = data["name"]
            project = projects.Project.from_dict(data)
            wanted = projects.network_manifests(project, backend.system_namespace)
            found = applier.get(projects.network_policy_manifest(project))
            checks.append(isolation_validation.network_policy_check(name, wanted[0] if wanted else None, found))
            if project.network_isolation:
                checks.append(isolation_validation.reach_check(name, params["pods_run"]))
            member = isolation_validation.member_of(data)
            if member is None:
                checks.append(isolation_validation.no_member_check(name))
                continue
            target = names[(index + 1) % len(names)] if len(names) > 1 else None
            for attempt in isolation_validation.attempts(name, target, backend.admission_rules, settings):
                outcome = isolation_validation.Outcome(
                    *kube.create_as(api, member.user, member.groups, attempt.manifest)
                )
                checks.append(isolation_validation.judge(attempt, member, outcome))
    except kube.ApiException as error:
        runner.fail_from_exception(module, error, "trying the tenants' escapes", backend.hint)
    checks.append(isolation_validation.gpu_visibility_check())
    return {
        "changed": False,
        "section": isolation_validation.section(checks, settings),
        "failed_checks": sum(1 for check in checks if check.status == "fail"),
    }


def main():
    runner.run_module(
        runner.argument_spec(OPTIONS, registry.ARG_SPEC, auth=True), _work, doing="trying the tenants' escapes"
    )


if __name__ == "__main__":
    main()
