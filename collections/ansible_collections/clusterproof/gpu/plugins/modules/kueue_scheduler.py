#!/usr/bin/python
"""Run Kueue on the sandbox (CRDs, webhooks on loopback, the controller process), or stop it; and
make the objects every project's Kueue queue refers to (flavor, cohort, priority classes)."""

DOCUMENTATION = r"""
module: kueue_scheduler
short_description: Run Kueue on the clusterproof sandbox and make its site-wide objects
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
version_added: 0.1.0
options:
  state:
    description: present or absent.
    type: str
    choices: [present, absent]
    default: present
  mode:
    description:
      - C(sandbox) does all of the above on the sandbox.
      - C(cluster) only makes the site-wide objects, on a cluster where Kueue's Helm chart is installed.
    type: str
    choices: [sandbox, cluster]
    default: sandbox
  kubeconfig:
    description: Kubeconfig of the cluster with O(mode=cluster).
    type: path
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
  timeout:
    description: Seconds to wait for Kueue to become ready.
    type: int
    default: 120
author:
  - clusterproof developers
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
  description: Processes started by this run.
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
from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import control_plane as sandbox
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import pki as sandbox_pki
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import kueue

WEBHOOK_CONFIGURATIONS = (
    ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", "kueue-mutating-webhook-configuration"),
    ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "kueue-validating-webhook-configuration"),
)


def _manifests(path):
    for document in yaml.safe_load_all(Path(path).read_text()):
        if document:
            yield document


def _apply_all(applier, manifests, result):
    for manifest in manifests:
        if applier.apply(manifest)[0]:
            result["applied"].append("%s/%s" % (manifest["kind"], manifest["metadata"]["name"]))


def _write_if_changed(path, data, private, result, check_mode):
    """Write bytes unless the file already holds them; True if (it would be) written."""
    path = Path(path)
    if path.exists() and path.read_bytes() == data:
        return False
    result["applied"].append("file %s" % path)
    if not check_mode:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        path.chmod(0o600 if private else 0o644)
    return True


def _certificates(layout, paths, result, check_mode):
    """The webhook serving certificate (for 127.0.0.1, of the sandbox CA), also served for metrics."""
    cert, key = paths.cert_dir / "tls.crt", paths.cert_dir / "tls.key"
    if check_mode:
        if not cert.exists():
            result["applied"].append("file %s" % cert)
            return True
        return False
    changed = sandbox_pki.ensure_serving_certificate(layout.pki, cert, key, "kueue-webhook", (sandbox.LOOPBACK,))
    if changed:
        result["applied"].append("file %s" % cert)
    for name, private in (("tls.crt", False), ("tls.key", True)):
        source = (paths.cert_dir / name).read_bytes()
        changed |= _write_if_changed(paths.metrics_cert_dir / name, source, private, result, check_mode)
    return changed


def _sandbox_present(module, result):
    params = module.params
    layout = sandbox.Layout(Path(params["state_dir"]))
    paths = kueue.SandboxPaths.of(layout)
    ports = kueue.KueuePorts(params["port_base"])
    share = Path(params["share_dir"]) / "kueue"
    unshare = shutil.which("unshare")
    if not layout.kubeconfig.exists():
        module.fail_json(
            msg="no sandbox at %s: bring it up first (clusterproof.gpu.sandbox_cluster state=up)" % layout.root,
            **result,
        )
    if not (share / "crds").is_dir() or not (share / "webhook" / "manifests.yaml").is_file():
        module.fail_json(
            msg="%s has no Kueue CRDs and webhooks; run the sandbox build (clusterproof.gpu.sandbox_binaries)" % share,
            **result,
        )
    if unshare is None:
        module.fail_json(msg="Kueue on the sandbox needs 'unshare' (util-linux) on PATH; it is not there", **result)
    components = kueue.components(layout, Path(params["bin_dir"]) / "kueue", unshare, ports)
    applier = kube.Applier(kube.api_client(str(layout.kubeconfig)), check_mode=module.check_mode)
    ca_pem = layout.pki.ca_cert.read_bytes()
    crds = [kueue.with_conversion_webhook(crd, ports, ca_pem) for crd in _crds(share / "crds")]
    _apply_all(applier, crds + kueue.system_objects(), result)
    if not module.check_mode:
        applier.wait_established([crd["metadata"]["name"] for crd in crds], params["timeout"])
        applier.refresh_discovery()
    for name in kueue.KAI_PROCESSES:
        if sandbox.running_pid(layout, name) is not None:
            result["stopped"].append(name)
            if not module.check_mode:
                sandbox.stop(layout, name)
    config = yaml.safe_dump(kueue.configuration(ports, paths.cert_dir), sort_keys=False).encode()
    restart = _certificates(layout, paths, result, module.check_mode)
    restart |= _write_if_changed(paths.config, config, False, result, module.check_mode)
    if module.check_mode:
        result["started"] = [c.name for c in components if sandbox.running_pid(layout, c.name, c.argv) is None]
    else:
        if restart and sandbox.running_pid(layout, "kueue") is not None:
            # The same command line with a new configuration or certificate: Kueue reads them at start.
            sandbox.stop(layout, "kueue")
            result["stopped"].append("kueue")
        result["started"] = sandbox.run_components(layout, components, params["timeout"])
    # Registered once Kueue serves them: a webhook that does not answer fails every request it covers.
    webhooks = kueue.webhook_configurations(_manifests(share / "webhook" / "manifests.yaml"), ports, ca_pem)
    _apply_all(applier, webhooks, result)


def _crds(directory):
    for path in sorted(Path(directory).glob("*.yaml")):
        for document in _manifests(path):
            if document.get("kind") == "CustomResourceDefinition":
                yield document


def _sandbox_absent(module, result):
    layout = sandbox.Layout(Path(module.params["state_dir"]))
    if not layout.kubeconfig.exists():
        return
    if sandbox.running_pid(layout, "kueue") is not None:
        result["stopped"].append("kueue")
        if not module.check_mode:
            sandbox.stop(layout, "kueue")
    applier = kube.Applier(kube.api_client(str(layout.kubeconfig)), check_mode=module.check_mode)
    for api_version, kind, name in WEBHOOK_CONFIGURATIONS:
        if applier.delete({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}}):
            result["applied"].append("deleted %s/%s" % (kind, name))


def main():
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "mode": {"type": "str", "choices": ["sandbox", "cluster"], "default": "sandbox"},
            "kubeconfig": {"type": "path"},
            "state_dir": {"type": "path"},
            "bin_dir": {"type": "path"},
            "share_dir": {"type": "path"},
            "port_base": {"type": "int", "default": 16440},
            "timeout": {"type": "int", "default": 120},
        },
        required_if=[("mode", "sandbox", ("state_dir",))],
        supports_check_mode=True,
    )
    params = module.params
    result = {"changed": False, "applied": [], "started": [], "stopped": []}
    if params["state"] == "present" and params["mode"] == "sandbox" and not (params["bin_dir"] and params["share_dir"]):
        module.fail_json(msg="mode sandbox, state present: bin_dir and share_dir are required", **result)
    try:
        if params["mode"] == "cluster":
            if params["state"] == "present":
                applier = kube.Applier(kube.api_client(params["kubeconfig"]), check_mode=module.check_mode)
                _apply_all(applier, kueue.site_manifests(), result)
        elif params["state"] == "present":
            _sandbox_present(module, result)
            applier = kube.Applier(
                kube.api_client(str(sandbox.Layout(Path(params["state_dir"])).kubeconfig)),
                check_mode=module.check_mode,
            )
            if module.check_mode and result["applied"]:
                result["applied"] += ["%s/%s" % (m["kind"], m["metadata"]["name"]) for m in kueue.site_manifests()]
            else:
                _apply_all(applier, kueue.site_manifests(), result)
        else:
            _sandbox_absent(module, result)
    except (sandbox.SandboxError, kube.KubeError, OSError) as error:
        module.fail_json(msg=str(error), **result)
    except kube.ApiException as error:
        module.fail_json(msg="the API server refused a request: %s %s" % (error.status, error.reason), **result)
    result["changed"] = bool(result["applied"] or result["started"] or result["stopped"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
