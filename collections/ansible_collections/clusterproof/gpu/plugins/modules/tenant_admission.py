#!/usr/bin/python
"""Install the admission policies that hold each project's work to its own quota and devices."""

DOCUMENTATION = r"""
module: tenant_admission
short_description: Bind every project's GPU work to its own queue and to the site's quota scheduler
version_added: 0.2.0
author:
  - clusterproof developers
description:
  - Makes the ValidatingAdmissionPolicies C(clusterproof-project-quota) and C(clusterproof-project-objects),
    the MutatingAdmissionPolicy C(clusterproof-project-devices), and their bindings exist (Kubernetes'
    built-in CEL admission; no webhook, no extra component). The mutating one needs Kubernetes 1.36 or newer;
    where the API server does not serve it, it is left out and named in RV(not_served).
  - In every namespace labelled C(clusterproof.io/queue) (project namespaces and quota-tree leaves) they
    refuse a pod or workload that names another queue than the namespace's, one that asks for GPUs without
    going through the site's engine (KAI's scheduler name; for Kueue a Job naming the project's LocalQueue,
    and a GPU pod only from the Job controller), one that names its node, a priority the engine does not
    give or a DRA claim, a container that names its own devices, a ConfigMap or Secret that carries a device
    variable, and an exposed Service; and they give every container that asks for no GPU
    C(NVIDIA_VISIBLE_DEVICES=void). Each refusal names the project, the field and the rule (docs/tenancy.md).
  - What differs between engines comes from the engine's backend (O(scheduler)).
  - Idempotent; supports check mode. O(state=absent) removes every object.
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
not_served:
  description: Policies left out because the API server does not serve their kind (kind/name).
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
    try:
        changes = kube.Changes.connect(module.params["kubeconfig"], module.params["context"], module.check_mode)
        wanted, not_served = admission.served(
            admission.policy_manifests(backend.admission_rules), changes.applier.serves
        )
        if module.params["state"] == "present":
            changes.apply(wanted)
        else:
            changes.delete(reversed(wanted))
    except kube.ApiException as error:
        runner.fail_from_exception(
            module, error, "the admission policies %s" % admission.POLICY_NAME, "is the API server 1.30 or newer?"
        )
    return {"changed": changes.changed, "changed_objects": changes.applied, "not_served": not_served}


def main():
    runner.run_cluster_module(OPTIONS, registry.ARG_SPEC, work=_work, doing="installing the admission policy")


if __name__ == "__main__":
    main()
