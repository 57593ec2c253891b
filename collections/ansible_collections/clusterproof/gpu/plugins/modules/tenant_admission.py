#!/usr/bin/python
"""Install the admission policy that binds each project's GPU work to its own quota."""

DOCUMENTATION = r"""
module: tenant_admission
short_description: Bind every project's GPU work to its own queue and to the site's quota scheduler
version_added: 0.2.0
author:
  - clusterproof developers
description:
  - Makes the ValidatingAdmissionPolicy C(clusterproof-project-quota) and its binding exist (Kubernetes'
    built-in CEL admission, GA since 1.30; no webhook, no extra component).
  - In every namespace labelled C(clusterproof.io/queue) (project namespaces and quota-tree leaves) it
    refuses a pod or workload that names another queue than the namespace's, and one that asks for GPUs
    without going through the site's engine (KAI's scheduler name; for Kueue a Job naming the project's
    LocalQueue, and a GPU pod only from the Job controller). Each refusal names the project and the rule.
  - What differs between engines comes from the engine's backend (O(scheduler)).
  - Idempotent; supports check mode. O(state=absent) removes both objects.
options:
  state:
    description: present or absent.
    type: str
    choices: [present, absent]
    default: present
extends_documentation_fragment:
  - clusterproof.gpu.kube_auth
  - clusterproof.gpu.scheduler
"""

EXAMPLES = r"""
- name: Bind each project's GPU work to its own KAI queue
  clusterproof.gpu.tenant_admission:
    scheduler: kai
    kubeconfig: "{{ clusterproof_active_kubeconfig }}"
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
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import admission

OPTIONS = {"state": {"type": "str", "choices": ["present", "absent"], "default": "present"}}


def _work(module):
    backend = registry.backend(module.params["scheduler"])
    wanted = admission.policy_manifests(backend.admission_rules)
    try:
        changes = kube.Changes.connect(module.params["kubeconfig"], module.params["context"], module.check_mode)
        if module.params["state"] == "present":
            changes.apply(wanted)
        else:
            changes.delete(reversed(wanted))
    except kube.ApiException as error:
        runner.fail_from_exception(
            module, error, "the admission policy %s" % admission.POLICY_NAME, "is the API server 1.30 or newer?"
        )
    return {"changed": changes.changed, "changed_objects": changes.applied}


def main():
    runner.run_cluster_module(OPTIONS, registry.ARG_SPEC, work=_work, doing="installing the admission policy")


if __name__ == "__main__":
    main()
