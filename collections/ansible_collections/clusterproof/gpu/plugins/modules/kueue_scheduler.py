#!/usr/bin/python
"""Run Kueue on the sandbox (CRDs, webhooks on loopback, the controller process), or stop it; and
make the objects every project's Kueue queue refers to (flavor, cohort, priority classes)."""

DOCUMENTATION = r"""
module: kueue_scheduler
short_description: Run Kueue on the clusterproof sandbox and make its site-wide objects
version_added: 0.1.0
author:
  - clusterproof developers
description:
  - With O(mode=sandbox), applies Kueue's CRDs (from its Go module, copied into the sandbox cache by the
    build) with their version conversion served by Kueue on 127.0.0.1, writes Kueue's configuration
    (webhooks on 127.0.0.1 with a certificate of the sandbox CA, fair sharing on, only Jobs labelled with
    a LocalQueue managed) and runs Kueue as a local process; then registers its admission webhooks by URL.
    The sandbox's KAI scheduler processes are stopped first (one backend schedules at a time).
  - In both modes, makes the ResourceFlavor, the C(clusterproof) Cohort and the training and interactive
    WorkloadPriorityClasses that every project's ClusterQueue and workloads refer to.
  - With O(state=absent) on the sandbox, stops Kueue and removes its webhook registrations, so that a
    switch back to KAI leaves nothing of Kueue in the way of Jobs.
  - On a real cluster Kueue itself is installed with its Helm chart (the kueue_scheduler role).
  - Re-running where all of that is in place changes nothing.
extends_documentation_fragment:
  - clusterproof.gpu.sandbox_install
  - clusterproof.gpu.sandbox_install.cluster_mode
options:
  state:
    description:
      - C(present) runs Kueue (with O(mode=sandbox)) and makes its site-wide objects.
      - C(absent) stops Kueue on the sandbox and removes its webhook registrations.
    type: str
    choices: [present, absent]
    default: present
  state_dir:
    description: The sandbox's state directory; required with O(mode=sandbox).
    type: path
  bin_dir:
    description: Directory with the C(kueue) binary from the sandbox build; required with O(mode=sandbox).
    type: path
  share_dir:
    description:
      - The build's share directory, holding Kueue's CRDs in C(kueue/crds) and webhooks in C(kueue/webhook).
      - Required with O(mode=sandbox).
    type: path
  port_base:
    description: The sandbox's port base; Kueue listens on base+19 (webhooks), base+20 (health), base+21 (metrics).
    type: int
    default: 16440
"""

EXAMPLES = r"""
- name: Run Kueue on the sandbox
  clusterproof.gpu.kueue_scheduler:
    state_dir: "{{ sandbox_cluster_dir }}"
    bin_dir: "{{ sandbox_binaries.bin_dir }}"
    share_dir: "{{ sandbox_binaries.share_dir }}"

- name: Stop Kueue on the sandbox (the site switched to KAI)
  clusterproof.gpu.kueue_scheduler:
    state: absent
    state_dir: "{{ sandbox_cluster_dir }}"
"""

RETURN = r"""
applied:
  description: Objects and files created, changed or removed (kind/name).
  returned: always
  type: list
  elements: str
started:
  description: C(kueue), when this run started or restarted it.
  returned: always
  type: list
  elements: str
stopped:
  description: Processes stopped by this run (Kueue with O(state=absent), KAI's when Kueue takes over).
  returned: always
  type: list
  elements: str
"""

import shutil
from pathlib import Path

import yaml

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import install
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox.control_plane import Layout, SandboxError
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import kueue, registry

WEBHOOK_CONFIGURATIONS = (
    ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", "kueue-mutating-webhook-configuration"),
    ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "kueue-validating-webhook-configuration"),
)


def _sandbox_present(step, params):
    layout = step.layout
    paths = kueue.SandboxPaths.of(layout)
    ports = kueue.KueuePorts(params["port_base"])
    share = Path(params["share_dir"]) / "kueue"
    install.require_built(share, "Kueue CRDs and webhooks", "crds", "webhook/manifests.yaml", "chart/templates/crd")
    unshare = shutil.which("unshare")
    if unshare is None:
        raise SandboxError("Kueue on the sandbox needs 'unshare' (util-linux) on PATH; it is not there")
    components = kueue.components(layout, Path(params["bin_dir"]) / "kueue", unshare, ports)
    ca_pem = layout.pki.ca_cert.read_bytes()
    chart_crds = (path.read_text() for path in (share / "chart" / "templates" / "crd").glob("*.yaml"))
    crds = kueue.sandbox_crds(install.load_crds(share / "crds"), chart_crds, ports, ca_pem)
    step.apply_crds(crds, kueue.system_objects(), params["timeout"])
    step.stop(registry.sandbox_processes(other_than=kueue.BACKEND.name))  # one backend schedules at a time
    # Kueue reads its configuration and certificates only when it starts.
    restart = step.serving_certificate(paths.cert_dir, "kueue-webhook", copy_to=paths.metrics_cert_dir)
    restart |= step.write(paths.config, yaml.safe_dump(kueue.configuration(ports, paths.cert_dir), sort_keys=False))
    step.start(components, params["timeout"], restart=restart)
    # Registered once Kueue serves them: a webhook that does not answer fails every request it covers.
    step.apply(kueue.webhook_configurations(install.manifests(share / "webhook" / "manifests.yaml"), ports, ca_pem))


def run(module):
    params = module.params
    on_sandbox, present = params["mode"] == "sandbox", params["state"] == "present"
    if on_sandbox and present and not (params["bin_dir"] and params["share_dir"]):
        raise runner.ModuleError("mode sandbox, state present: bin_dir and share_dir are required")
    nothing = {"applied": [], "started": [], "stopped": []}
    if not on_sandbox:
        # On a cluster Kueue comes from its Helm chart: only the site-wide objects are clusterproof's.
        if not present:
            return nothing
        objects = kube.Changes.connect(params["kubeconfig"], check_mode=module.check_mode)
        objects.apply(kueue.site_manifests())
        return {**nothing, "changed": objects.changed, "applied": objects.applied}
    layout = Layout(Path(params["state_dir"]))
    if present:
        step = install.InstallStep.on(layout, module.check_mode)
        _sandbox_present(step, params)
        step.apply_custom(kueue.site_manifests())
    elif layout.kubeconfig.exists():
        step = install.InstallStep.on(layout, module.check_mode)
        step.stop(kueue.SANDBOX_PROCESSES)
        step.delete({"apiVersion": v, "kind": k, "metadata": {"name": n}} for v, k, n in WEBHOOK_CONFIGURATIONS)
    else:
        return nothing
    return step.result()


def main():
    options = {
        "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
    }
    runner.run_sandbox_install(
        runner.ENGINE_MODE_ARG_SPEC,
        options,
        work=run,
        doing="installing Kueue",
        required_if=[("mode", "sandbox", ("state_dir",))],
        expected=(SandboxError,),
    )


if __name__ == "__main__":
    main()
