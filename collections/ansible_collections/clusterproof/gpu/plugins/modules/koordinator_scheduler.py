#!/usr/bin/python
"""Run Koordinator's scheduler (koord-scheduler, with its ElasticQuota plugin) on the sandbox, or stop it."""

DOCUMENTATION = r"""
module: koordinator_scheduler
short_description: Run Koordinator's koord-scheduler on the clusterproof sandbox
version_added: 0.1.0
author:
  - clusterproof developers
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
extends_documentation_fragment:
  - clusterproof.gpu.sandbox_install
options:
  state:
    description: C(present) runs koord-scheduler as declared; C(absent) stops it (its CRDs and quotas stay).
    type: str
    choices: [present, absent]
    default: present
  state_dir: {required: true}  # otherwise as the sandbox_install fragment documents it
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
  description: C(koord-scheduler), when this run started or restarted it.
  returned: always
  type: list
  elements: str
stopped:
  description: Processes stopped by this run (with O(state=absent), or to restart with a new configuration).
  returned: always
  type: list
  elements: str
config:
  description: Path of koord-scheduler's configuration file (profile C(koord-scheduler), ElasticQuota plugin).
  returned: always
  type: str
"""

from pathlib import Path

import yaml

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import install
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox.control_plane import Layout, SandboxError
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import koordinator


def run(module):
    params = module.params
    layout = Layout(Path(params["state_dir"]))
    config_path = layout.root / "koord-scheduler.yaml"
    if params["delay_evict_seconds"] < 0:
        raise runner.ModuleError(
            "delay_evict_seconds: expected a number of seconds >= 0, found %d" % params["delay_evict_seconds"]
        )
    if params["state"] == "absent":
        step = install.InstallStep(layout, applier=None, check_mode=module.check_mode)
        step.stop([koordinator.SCHEDULER_NAME])
    else:
        step = install.InstallStep.on(layout, module.check_mode)
        share = Path(params["share_dir"]) / "koordinator"
        install.require_built(share, "Koordinator CRDs", "crds")
        step.apply_crds(install.load_crds(share / "crds"), koordinator.system_objects(), params["timeout"])
        settings = koordinator.ElasticQuotaSettings(delay_evict_seconds=params["delay_evict_seconds"])
        config = yaml.safe_dump(koordinator.scheduler_config(layout.kubeconfig, settings), sort_keys=False)
        # koord-scheduler reads its configuration only when it starts.
        restart = step.write(config_path, config)
        ports = koordinator.KoordinatorPorts(params["port_base"])
        components = koordinator.components(layout, Path(params["bin_dir"]), ports, config_path)
        step.start(components, params["timeout"], restart=restart)
    return step.result(config=str(config_path))


def main():
    options = {
        "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
        "state_dir": {"type": "path", "required": True},
        "delay_evict_seconds": {"type": "int", "default": 5},
    }
    runner.run_sandbox_install(
        options,
        work=run,
        doing="installing Koordinator",
        required_if=[("state", "present", ("bin_dir", "share_dir"))],
        expected=(SandboxError,),
    )


if __name__ == "__main__":
    main()
