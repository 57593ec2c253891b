#!/usr/bin/python
"""Bring the sandbox control plane up, report on it, or tear it down."""

DOCUMENTATION = r"""
module: sandbox_cluster
short_description: Run the clusterproof sandbox, a real control plane with KWOK-simulated GPU nodes
version_added: 0.1.0
author:
  - clusterproof developers
description:
  - Starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK as local processes
    listening on 127.0.0.1, generates their certificates and an admin kubeconfig (mode 0600) under
    O(state_dir), and makes the simulated nodes exactly the declared ones (GPU count, GPU feature
    discovery labels, CPU, memory, taints), waiting until they are Ready.
  - etcd serves TLS only and answers only clients with a certificate of the sandbox CA (the API
    server's and the readiness check's).
  - C(up) on a sandbox that already runs as declared changes nothing.
  - C(up) heals the sandbox; it restarts a process that runs but does not answer its readiness
    check within 10 s (a kube-apiserver shutting down, say), after waiting for it to exit, and
    every process started into the sandbox since (an engine's, the GPU agent) that has died, from
    its run record.
  - C(status) lists every process, the control plane's and those started into the sandbox; it fails,
    saying so, when there is no sandbox in O(state_dir) (no such directory, or one no C(up) made).
  - C(down) stops only the processes this module started (by their recorded pid and start time) and
    removes O(state_dir).
  - The binaries come from the sandbox build (see C(clusterproof.gpu.sandbox_binaries)).
extends_documentation_fragment:
  - clusterproof.gpu.simulated_nodes
options:
  state:
    description:
      - C(up) to run the sandbox as declared, C(status) to report on it, C(down) to stop it and remove its state.
    type: str
    choices: [up, status, down]
    default: up
  state_dir:
    description: Directory holding the sandbox's certificates, kubeconfig, etcd data, logs and pid records.
    type: path
    required: true
  bin_dir:
    description:
      - Directory with the etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok binaries.
      - Required with O(state=up).
    type: path
  port_base:
    description:
      - First of the loopback ports; etcd uses it and the next, the API server base+3, the
        controller-manager base+4, the scheduler base+5, KWOK base+6.
    type: int
    default: 16440
  nodes:
    description:
      - The GPU nodes to simulate, as the C(clusterproof.gpu.site_inventory) declaration lists them
        (name, gpu_count, gpu_product, gpu_memory_mib, cpu_cores, memory_gib, labels, taints).
      - Required with O(state=up).
    type: list
    elements: dict
  kwok_stages:
    description: Path of the KWOK stages file the sandbox runs with. Required with O(state=up).
    type: path
"""

EXAMPLES = r"""
- name: Run the sandbox with the inventory's nodes
  clusterproof.gpu.sandbox_cluster:
    state: up
    state_dir: "{{ ansible_env.HOME }}/.local/state/clusterproof/sandbox"
    bin_dir: "{{ sandbox_binaries.bin_dir }}"
    nodes: "{{ clusterproof_site.nodes }}"
    kwok_stages: "{{ role_path }}/files/kwok-stages.yaml"

- name: Stop it and remove its state
  clusterproof.gpu.sandbox_cluster:
    state: down
    state_dir: "{{ ansible_env.HOME }}/.local/state/clusterproof/sandbox"
"""

RETURN = r"""
kubeconfig:
  description: Path of the admin kubeconfig.
  returned: always
  type: str
api_server:
  description: URL of the API server.
  returned: always
  type: str
components:
  description:
    - Each process with running, pid, rss_bytes, ready and log path; the control plane's, then
      every process started into the sandbox (KAI's, the GPU agent...).
  returned: always
  type: list
  elements: dict
started:
  description: Components started (or restarted) by this run.
  returned: state=up
  type: list
  elements: str
not_restarted:
  description:
    - Processes started into the sandbox by an earlier version of clusterproof that have died and
      that this run could not start again (their record holds no environment); a warning says
      which playbook starts them.
  returned: state=up
  type: list
  elements: str
stopped:
  description: Components stopped by this run.
  returned: state=down
  type: list
  elements: str
nodes:
  description: Simulated nodes created, updated and deleted by this run, and how many are Ready.
  returned: state=up or state=status
  type: dict
"""

from pathlib import Path

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import control_plane, lifecycle


def run(module):
    params = module.params
    layout = control_plane.Layout(Path(params["state_dir"]))
    # Only 'up' runs the binaries; the other states need the component names alone.
    bin_dir = Path(params["bin_dir"] or "/nonexistent")
    ports = control_plane.Ports(params["port_base"])
    highest = 65535 - len(ports.all())
    if not 1024 <= ports.base <= highest:
        raise runner.ModuleError("port_base: expected a port from 1024 to %d, found %d" % (highest, ports.base))
    result = {
        "changed": False,
        "kubeconfig": str(layout.kubeconfig),
        "api_server": "https://%s:%d" % (control_plane.LOOPBACK, ports.apiserver),
    }
    if params["state"] == "down":
        names = [component.name for component in control_plane.components(layout, bin_dir, ports)]
        result.update(lifecycle.down(layout, names, module.check_mode))
    elif params["state"] == "status":
        absent = lifecycle.missing(layout)
        if absent:
            raise runner.ModuleError(
                "%s (state_dir); nothing to report: bring one up with ./clusterproof site or playbooks/sandbox.yml"
                % absent
            )
        result["nodes"] = lifecycle.node_status(layout, bin_dir, ports)
    else:
        stages = Path(params["kwok_stages"]).read_text()
        result.update(
            lifecycle.up(layout, bin_dir, ports, params["nodes"], stages, params["timeout"], module.check_mode)
        )
        for name in result.get("not_restarted", []):
            module.warn(
                "%s is not running and was started by an earlier version of clusterproof, which did not record "
                "how to start it again: re-run the playbook that installed it (playbooks/scheduler.yml, "
                "playbooks/storage.yml)" % name
            )
    result["components"] = control_plane.status(layout, bin_dir, ports)
    return result


def main():
    runner.run_simulated_nodes(
        {
            "state": {"type": "str", "choices": ["up", "status", "down"], "default": "up"},
            "state_dir": {"type": "path", "required": True},
            "bin_dir": {"type": "path"},
            "port_base": {"type": "int", "default": 16440},
            "nodes": {"type": "list", "elements": "dict"},
            "kwok_stages": {"type": "path"},
        },
        work=run,
        doing="running the sandbox",
        required_if=[("state", "up", ("bin_dir", "nodes", "kwok_stages"))],
        expected=(control_plane.SandboxError,),
    )


if __name__ == "__main__":
    main()
