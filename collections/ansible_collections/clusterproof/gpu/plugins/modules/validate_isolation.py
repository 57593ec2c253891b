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
    so nothing is created) a GPU workload in its own queue (must be admitted), then each row of the threat
    model (docs/tenancy.md) that applies to the engine, each must be refused by the guard that its check
    names - another project's queue, the default scheduler, a pod that names its node or a priority class
    the engine does not give, GPUs through a DRA claim or a MIG resource, a container that names its own
    devices (env, envFrom prefix, CDI annotation, a ConfigMap key), a privileged, host-network or hostPath
    pod, an exposed Service, a workload in another project's namespace, interactive work without the project's
    time limit, a claim or a pod past the project's ResourceQuota - and asks the API server's
    authorizers (SubjectAccessReview) whether the member may write what RBAC keeps from it (its namespace,
    NetworkPolicies, RoleBindings, EndpointSlices, ephemeral containers, the engine's objects).
  - Reads back the admission policies and each project's NetworkPolicy and ResourceQuota.
  - Where pods really run, tries a connection to each isolated project's Service (busybox's httpd) from a pod of
    another project (must be refused) and from one of its own (must connect, by the Service's DNS name), with
    real pods on the real nodes Ready at the start, labelled C(clusterproof.io/probe=network) and removed at the
    end (and at the start, what an earlier run left). On the sandbox, says that pods do not run. A pod's GPUs
    through C(NVIDIA_VISIBLE_DEVICES) are the runtime's, reported as needing hardware.
  - Declared exceptions (C(clusterproof_tenancy.exceptions)) are shown as such.
  - Returns a report section (category security); changes nothing. The caller's credentials must be allowed to
    impersonate users and groups (a cluster admin's are).
options:
  tenancy:
    description: The site's tenancy (clusterproof_site.tenancy) - pod_security, network_isolation, exceptions.
    type: dict
    default: {}
  pods_run:
    description: Whether the cluster's pods really run (not on the sandbox).
    type: bool
    default: false
  probe_image:
    description:
      - Image of the connection probe's pods (busybox, for its C(nc) and C(httpd)).
      - Left out, the pinned busybox, from C(plugins/module_utils/versions.py).
    type: str
  reach_timeout:
    description: Seconds for the connection probe's pods to start and finish.
    type: int
    default: 120
extends_documentation_fragment:
  - clusterproof.gpu.declared_projects
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

from ansible_collections.clusterproof.gpu.plugins.module_utils import versions
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import registry
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import (
    admission,
    isolation,
    projects,
    resource_quota,
)
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import isolation as isolation_validation
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import kubelets as kubelet_validation
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import reach_probe
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import storage as storage_validation

OPTIONS = {
    "tenancy": {"type": "dict", "default": {}},
    "pods_run": {"type": "bool", "default": False},
    "probe_image": {"type": "str"},
    "reach_timeout": {"type": "int", "default": 120},
}


def _reach(api, params, declared):
    """Where pods run: the connections tried to each isolated project's Service, from the project
    before it in the inventory (and from itself); {} where there is no other project or no node."""
    isolated = [data["name"] for data in declared if projects.Project.from_dict(data).network_isolation]
    names = [data["name"] for data in declared]
    if not params["pods_run"] or len(names) < 2 or not isolated:
        return {}
    sources = {name: names[names.index(name) - 1] for name in isolated}
    nodes, _ = storage_validation.probe_nodes(kube.list_nodes(api), real_only=True)
    if not nodes:
        return {}
    image = params["probe_image"] or versions.BUSYBOX.image
    return reach_probe.try_reach(api, isolated, sources, image, nodes, params["reach_timeout"])


def _resource_quota_check(applier, project):
    """The project's ResourceQuota (and LimitRange) as its namespace holds them, against the declared."""
    found = {manifest["kind"]: applier.get(manifest) for manifest in resource_quota.objects(project.name)}
    return isolation_validation.resource_quota_check(
        project.name, project.resource_quota, found["ResourceQuota"], found["LimitRange"]
    )


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
        policy, not_served = admission.served(admission.policy_manifests(backend.admission_rules), applier.serves)
        checks.append(isolation_validation.policy_check(policy, [applier.get(manifest) for manifest in policy]))
        reached = _reach(api, params, declared)
        for index, data in enumerate(declared):
            name = data["name"]
            project = projects.Project.from_dict(data)
            wanted = projects.network_manifests(project, backend.system_namespace)
            found = applier.get(projects.network_policy_manifest(project))
            checks.append(isolation_validation.network_policy_check(name, wanted[0] if wanted else None, found))
            if project.network_isolation:
                checks.append(isolation_validation.reach_check(name, params["pods_run"], reached.get(name)))
            checks.append(_resource_quota_check(applier, project))
            held = kube.list_pods(api, name)
            checks.append(isolation_validation.held_check(name, project.gpu_quota, held, backend.admission_rules))
            member = isolation_validation.member_of(data)
            if member is None:
                checks.append(isolation_validation.no_member_check(name))
                continue
            target = names[(index + 1) % len(names)] if len(names) > 1 else None
            tried = isolation_validation.attempts(
                name,
                target,
                backend.admission_rules,
                settings,
                project.interactive_nodes,
                project.interactive_time_limit_seconds,
                project.resource_quota,
            )
            for attempt in tried:
                send = kube.resume_as if attempt.resume else kube.create_as
                outcome = isolation_validation.Outcome(*send(api, member.user, member.groups, attempt.manifest))
                checks.append(isolation_validation.judge(attempt, member, outcome, not_served))
        kubelets = kubelet_validation.real_kubelets(api) if params["pods_run"] else {}
        checks.append(isolation_validation.image_credentials_check(params["pods_run"], kubelets))
    except kube.ApiException as error:
        runner.fail_from_exception(module, error, "trying the tenants' escapes", backend.hint)
    checks.append(isolation_validation.gpu_visibility_check())
    return {
        "changed": False,
        "section": isolation_validation.section(checks, settings, backend.admission_rules),
        "failed_checks": sum(1 for check in checks if check.status == "fail"),
    }


def main():
    runner.run_cluster_module(
        runner.DECLARED_PROJECTS_ARG_SPEC, OPTIONS, registry.ARG_SPEC, work=_work, doing="trying the tenants' escapes"
    )


if __name__ == "__main__":
    main()
