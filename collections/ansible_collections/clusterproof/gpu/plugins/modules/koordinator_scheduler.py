#!/usr/bin/python
"""Run Koordinator's scheduler (koord-scheduler, with its ElasticQuota plugin) on the sandbox, or stop it."""

DOCUMENTATION = r"""
module: koordinator_scheduler
short_description: Run Koordinator's koord-scheduler on the clusterproof sandbox
description:
  - With O(state=present), applies Koordinator's CRDs (from its Go module, copied into the sandbox cache
    by the build; among them the C(ElasticQuota) of C(scheduling.sigs.k8s.io)) and the
    C(koordinator-system) namespace, writes a scheduler configuration (profile C(koord-scheduler) with the
    ElasticQuota plugin, quota revocation on, no leader election) and runs koord-scheduler as a local
    process with the sandbox kubeconfig, listening on 127.0.0.1 only.
  - Pods whose C(schedulerName) is C(koord-scheduler) are scheduled by it; the sandbox's kube-scheduler keeps
    the rest. The quota tree itself (C(ElasticQuota) objects) is not this module's.
  - With O(state=absent), stops koord-scheduler; the CRDs and quotas stay.
  - Re-running where all of that is in place changes nothing.
  - Only the sandbox is supported; on a real cluster Koordinator is installed from its Helm chart.
version_added: 0.1.0
options:
  state:
    description: present or absent.
    type: str
    choices: [present, absent]
    default: present
  state_dir:
    description: The sandbox's state directory (as for C(clusterproof.gpu.sandbox_cluster)).
    type: path
    required: true
  bin_dir:
    description: Directory with the C(koord-scheduler) binary from the sandbox build; required with O(state=present).
    type: path
  share_dir:
    description:
      - The build's share directory, holding Koordinator's CRDs in C(koordinator/crds).
      - Required with O(state=present).
    type: path
  port_base:
    description: The sandbox's port base; koord-scheduler listens on base+22 (HTTPS) and base+23 (plain health).
    type: int
    default: 16440
  delay_evict_seconds:
    description:
      - Seconds a quota may use more than its runtime quota before koord-scheduler evicts its pods
        (the ElasticQuota plugin's C(delayEvictTime); Koordinator's default is 120).
    type: int
    default: 5
  timeout:
    description: Seconds to wait for CRDs and for koord-scheduler to become ready.
    type: int
    default: 120
author:
  - clusterproof developers
"""

EXAMPLES = r"""
- name: Run koord-scheduler on the sandbox
  clusterproof.gpu.koordinator_scheduler:
    state_dir: "{{ sandbox_cluster_dir }}"
    bin_dir: "{{ sandbox_binaries.bin_dir }}"
    share_dir: "{{ sandbox_binaries.share_dir }}"

- name: Stop it
  clusterproof.gpu.koordinator_scheduler:
    state: absent
    state_dir: "{{ sandbox_cluster_dir }}"
"""

RETURN = r"""
applied:
  description: Objects and files created or changed (kind/name).
  returned: always
  type: list
  elements: str
started:
  description: Processes started by this run.
  returned: always
  type: list
  elements: str
stopped:
  description: Processes stopped by this run (with O(state=absent), or to restart with a new configuration).
  returned: always
  type: list
  elements: str
config:
  description: Path of the scheduler configuration file.
  returned: always
  type: str
"""

from pathlib import Path

import yaml
from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import control_plane as sandbox
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import koordinator


def _crds(directory):
    for path in sorted(Path(directory).glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if document and document.get("kind") == "CustomResourceDefinition":
                # Some of Koordinator's generated CRDs carry "creationTimestamp: null", which the server
                # replaces: left in, the CRD would never look applied and every run would change it.
                document["metadata"].pop("creationTimestamp", None)
                yield document


def _present(module, layout, config_path, result):
    params = module.params
    crd_dir = Path(params["share_dir"]) / "koordinator" / "crds"
    if not crd_dir.is_dir():
        module.fail_json(
            msg="%s has no Koordinator CRDs; run the sandbox build (clusterproof.gpu.sandbox_binaries)" % crd_dir,
            **result,
        )
    components = koordinator.components(
        layout, Path(params["bin_dir"]), koordinator.KoordinatorPorts(params["port_base"]), config_path
    )
    applier = kube.Applier(kube.api_client(str(layout.kubeconfig)), check_mode=module.check_mode)
    crds = list(_crds(crd_dir))
    for manifest in crds + koordinator.system_objects():
        if applier.apply(manifest)[0]:
            result["applied"].append("%s/%s" % (manifest["kind"], manifest["metadata"]["name"]))
    if not module.check_mode:
        applier.wait_established([crd["metadata"]["name"] for crd in crds], params["timeout"])
    settings = koordinator.ElasticQuotaSettings(delay_evict_seconds=params["delay_evict_seconds"])
    config_text = yaml.safe_dump(koordinator.scheduler_config(layout.kubeconfig, settings), sort_keys=False)
    config_changed = not config_path.exists() or config_path.read_text() != config_text
    if config_changed:
        result["applied"].append("file %s" % config_path)
    if module.check_mode:
        result["started"] = [c.name for c in components if config_changed or not _running(layout, c)]
        return
    if config_changed:
        config_path.write_text(config_text)
        # The same command line with a new configuration: koord-scheduler reads it at start.
        if sandbox.stop(layout, koordinator.SCHEDULER_NAME):
            result["stopped"].append(koordinator.SCHEDULER_NAME)
    result["started"] = sandbox.run_components(layout, components, params["timeout"])


def _running(layout, component):
    return sandbox.running_pid(layout, component.name, component.argv) is not None


def main():
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "state_dir": {"type": "path", "required": True},
            "bin_dir": {"type": "path"},
            "share_dir": {"type": "path"},
            "port_base": {"type": "int", "default": 16440},
            "delay_evict_seconds": {"type": "int", "default": 5},
            "timeout": {"type": "int", "default": 120},
        },
        required_if=[("state", "present", ("bin_dir", "share_dir"))],
        supports_check_mode=True,
    )
    params = module.params
    layout = sandbox.Layout(Path(params["state_dir"]))
    config_path = layout.root / "koord-scheduler.yaml"
    result = {"changed": False, "applied": [], "started": [], "stopped": [], "config": str(config_path)}
    if params["delay_evict_seconds"] < 0:
        module.fail_json(
            msg="delay_evict_seconds: expected a number of seconds >= 0, found %d" % params["delay_evict_seconds"],
            **result,
        )
    try:
        if params["state"] == "absent":
            if sandbox.running_pid(layout, koordinator.SCHEDULER_NAME) is not None:
                result["stopped"].append(koordinator.SCHEDULER_NAME)
                if not module.check_mode:
                    sandbox.stop(layout, koordinator.SCHEDULER_NAME)
        elif not layout.kubeconfig.exists():
            module.fail_json(
                msg="no sandbox at %s: bring it up first (clusterproof.gpu.sandbox_cluster state=up)" % layout.root,
                **result,
            )
        else:
            _present(module, layout, config_path, result)
    except (sandbox.SandboxError, kube.KubeError, OSError) as error:
        module.fail_json(msg=str(error), **result)
    except kube.ApiException as error:
        module.fail_json(msg="the API server refused a request: %s %s" % (error.status, error.reason), **result)
    result["changed"] = bool(result["applied"] or result["started"] or result["stopped"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
