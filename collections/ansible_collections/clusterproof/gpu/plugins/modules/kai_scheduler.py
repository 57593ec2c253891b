#!/usr/bin/python
"""Install KAI scheduler on the sandbox: its CRDs, priority classes and components."""

DOCUMENTATION = r"""
module: kai_scheduler
short_description: Run KAI scheduler on the clusterproof sandbox
version_added: 0.1.0
author:
  - clusterproof developers
description:
  - Applies KAI scheduler's CRDs and priority classes (from its Go module, copied into the sandbox
    cache by the build), its namespaces, the reservation service account and the department queue
    under which every project's queue hangs.
  - Writes the scheduler's configuration (the actions and plugins KAI's operator configures for a
    GPU bin-packing shard) and runs the queue controller, pod-group controller, pod grouper, binder
    and scheduler as local processes with the sandbox kubeconfig, plus the sandbox-only GPU agent
    that answers GPU reservation pods (fractions) for the simulated nodes.
  - Re-running on a sandbox where all of that is in place changes nothing.
  - On a real cluster KAI is installed with its Helm chart instead (the kai_scheduler role installs it
    with C(kubernetes.core.helm)); there, with O(mode=cluster), this module only makes the department queue exist.
extends_documentation_fragment:
  - clusterproof.gpu.sandbox_install
  - clusterproof.gpu.sandbox_install.cluster_mode
options:
  state_dir:
    description:
      - The sandbox's state directory (as for C(clusterproof.gpu.sandbox_cluster)).
      - Required with O(mode=sandbox).
    type: path
  bin_dir:
    description: Directory with the kai-* binaries from the sandbox build; required with O(mode=sandbox).
    type: path
  share_dir:
    description:
      - The build's share directory, holding KAI's Helm chart in C(kai-scheduler/chart) (CRDs, priority classes).
    type: path
  port_base:
    description: The sandbox's port base; KAI's components listen on base+10 to base+18 of 127.0.0.1.
    type: int
    default: 16440
  department_gpu_quota:
    description: GPU quota of the department queue that holds the projects' queues (the site's GPUs).
    type: float
    required: true
  agent_pythonpath:
    description:
      - Directory to put on PYTHONPATH for the sandbox GPU agent (the repository's collections folder).
      - Required with O(mode=sandbox).
    type: path
"""

EXAMPLES = r"""
- name: Run KAI scheduler on the sandbox
  clusterproof.gpu.kai_scheduler:
    state_dir: "{{ sandbox_cluster_dir }}"
    bin_dir: "{{ sandbox_binaries.bin_dir }}"
    share_dir: "{{ sandbox_binaries.share_dir }}"
    department_gpu_quota: "{{ clusterproof_site.total_gpus }}"
    agent_pythonpath: "{{ role_path }}/../../collections"
"""

RETURN = r"""
applied:
  description: Objects created or changed (kind/name), and C(file <path>) when the scheduler configuration changed.
  returned: always
  type: list
  elements: str
started:
  description: Components started by this run.
  returned: always
  type: list
  elements: str
config:
  description: Path of KAI scheduler's configuration file (its actions and plugins); empty with O(mode=cluster).
  returned: always
  type: str
"""

import sys
from pathlib import Path

import yaml

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import install
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox.control_plane import Layout, SandboxError
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import kai

AGENT_MODULE = "ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox.gpu_agent"


def run(module):
    params = module.params
    department = kai.department_queue(params["department_gpu_quota"])
    if params["mode"] == "cluster":
        # On a cluster installed from the Helm chart: only the department queue is clusterproof's.
        step = kube.Changes.connect(params["kubeconfig"], check_mode=module.check_mode)
        step.apply([department])
        return {"changed": step.changed, "applied": step.applied, "started": [], "config": ""}
    layout = Layout(Path(params["state_dir"]))
    chart = Path(params["share_dir"]) / "kai-scheduler" / "chart"
    config_path = layout.root / "kai-scheduler.yaml"
    step = install.InstallStep.on(layout, module.check_mode)
    install.require_built(chart, "KAI CRDs", "crds")
    others = [*install.manifests(chart / "templates" / "priorityclasses"), *kai.system_objects()]
    step.apply_crds(install.load_crds(chart / "crds"), others, params["timeout"])
    step.apply_custom([department])
    step.write(config_path, yaml.safe_dump(kai.scheduler_config(), sort_keys=False))
    agent_argv = (
        sys.executable,
        "-m",
        AGENT_MODULE,
        "--kubeconfig=%s" % layout.kubeconfig,
        "--namespace=%s" % kai.RESERVATION_NAMESPACE,
    )
    ports = kai.KaiPorts(params["port_base"])
    bin_dir = Path(params["bin_dir"])
    components = kai.components(layout, bin_dir, ports, config_path, agent_argv, params["agent_pythonpath"])
    step.start(components, params["timeout"])
    return {"changed": step.changed, "applied": step.applied, "started": step.started, "config": str(config_path)}


def main():
    options = {
        "department_gpu_quota": {"type": "float", "required": True},
        "agent_pythonpath": {"type": "path"},
    }
    runner.run_sandbox_install(
        runner.ENGINE_MODE_ARG_SPEC,
        options,
        work=run,
        doing="installing KAI scheduler",
        required_if=[("mode", "sandbox", ("state_dir", "bin_dir", "share_dir", "agent_pythonpath"))],
        expected=(SandboxError,),
    )


if __name__ == "__main__":
    main()
