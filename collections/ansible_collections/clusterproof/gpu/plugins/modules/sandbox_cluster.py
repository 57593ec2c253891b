#!/usr/bin/python
"""Bring the sandbox control plane up, report on it, or tear it down."""

DOCUMENTATION = r"""
module: sandbox_cluster
short_description: Run the clusterproof sandbox, a real control plane with KWOK-simulated GPU nodes
description:
  - Starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK as local processes
    listening on 127.0.0.1, generates their certificates and an admin kubeconfig (mode 0600) under
    O(state_dir), and makes the simulated nodes exactly the declared ones (GPU count, GPU feature
    discovery labels, CPU, memory, taints), waiting until they are Ready.
  - C(up) on a sandbox that already runs as declared changes nothing.
  - C(down) stops only the processes this module started (by their recorded pid and start time) and
    removes O(state_dir).
  - The binaries come from the sandbox build (see C(clusterproof.gpu.sandbox_binaries)).
version_added: 0.1.0
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
  timeout:
    description: Seconds to wait for each process to become ready and for the nodes to be Ready.
    type: int
    default: 120
author:
  - clusterproof developers
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
  description: Each process with running, pid, rss_bytes, ready and log path.
  returned: always
  type: list
  elements: dict
started:
  description: Components started by this run.
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

import time
from pathlib import Path

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import control_plane as sandbox


def _node_api(layout):
    return kube.core_v1(kube.api_client(str(layout.kubeconfig)))


def _existing_nodes(core):
    items = core.list_node(label_selector=f"{sandbox.SANDBOX_NODE_LABEL}=true").items
    return [core.api_client.sanitize_for_serialization(item) for item in items]


def _apply_node_plan(core, plan):
    for manifest in plan.create:
        core.create_node(manifest)
    for manifest in plan.replace:
        name = manifest["metadata"]["name"]
        core.patch_node(name, {"metadata": {"labels": manifest["metadata"]["labels"]}, "spec": manifest["spec"]})
        core.patch_node_status(name, {"status": manifest["status"]})
    for name in plan.delete:
        core.delete_node(name)


def _ready_count(nodes):
    ready = 0
    for node in nodes:
        for condition in (node.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "Ready" and condition.get("status") == "True":
                ready += 1
    return ready


def _wait_nodes_ready(core, expected, timeout):
    deadline = time.monotonic() + timeout
    while True:
        ready = _ready_count(_existing_nodes(core))
        if ready >= expected or time.monotonic() > deadline:
            return ready
        time.sleep(0.5)


def run_module():
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["up", "status", "down"], "default": "up"},
            "state_dir": {"type": "path", "required": True},
            "bin_dir": {"type": "path"},
            "port_base": {"type": "int", "default": 16440},
            "nodes": {"type": "list", "elements": "dict"},
            "kwok_stages": {"type": "path"},
            "timeout": {"type": "int", "default": 120},
        },
        required_if=[("state", "up", ("bin_dir", "nodes", "kwok_stages"))],
        supports_check_mode=True,
    )
    params = module.params
    layout = sandbox.Layout(Path(params["state_dir"]))
    # Only 'up' runs the binaries; the other states need the component names alone.
    bin_dir = Path(params["bin_dir"] or "/nonexistent")
    ports = sandbox.Ports(params["port_base"])
    if not 1024 <= ports.base <= 65535 - len(ports.all()):
        module.fail_json(
            msg="port_base: expected a port from 1024 to %d, found %d" % (65535 - len(ports.all()), ports.base)
        )
    result = {
        "changed": False,
        "kubeconfig": str(layout.kubeconfig),
        "api_server": "https://%s:%d" % (sandbox.LOOPBACK, ports.apiserver),
    }
    names = [component.name for component in sandbox.components(layout, bin_dir, ports)]
    try:
        if params["state"] == "down":
            every = names + [name for name in sandbox.recorded_components(layout) if name not in names]
            running = [name for name in every if sandbox.running_pid(layout, name) is not None]
            result["changed"] = bool(running) or layout.root.exists()
            result["stopped"] = running
            if not module.check_mode:
                result["stopped"] = sandbox.tear_down(layout, names)
        elif params["state"] == "status":
            result["nodes"] = {}
            if sandbox.running_pid(layout, "kube-apiserver") is not None:
                nodes = _existing_nodes(_node_api(layout))
                result["nodes"] = {"simulated": len(nodes), "ready": _ready_count(nodes)}
        else:
            result.update(_up(module, layout, bin_dir, ports))
        result["components"] = sandbox.status(layout, bin_dir, ports)
    except (sandbox.SandboxError, kube.KubeError, OSError) as error:
        module.fail_json(msg=str(error), **result)
    except kube.ApiException as error:
        module.fail_json(msg=f"the sandbox API server refused a request: {error.status} {error.reason}", **result)
    module.exit_json(**result)


def _up(module, layout, bin_dir, ports):
    params = module.params
    kwok_stages = Path(params["kwok_stages"]).read_text()
    wanted = sandbox.components(layout, bin_dir, ports)
    not_running = [c.name for c in wanted if sandbox.running_pid(layout, c.name, c.argv) is None]
    if module.check_mode:
        changed = bool(not_running)
        if not changed:
            changed = sandbox.plan_nodes(params["nodes"], _existing_nodes(_node_api(layout))).changed
        return {"changed": changed, "started": not_running}
    busy = sandbox.ports_taken_by_others(layout, ports)
    if busy:
        raise sandbox.SandboxError(
            "ports %s on 127.0.0.1 are in use by another program; "
            "set clusterproof_sandbox_port_base to a free range" % ", ".join(str(port) for port in busy)
        )
    changed = sandbox.prepare_state(layout, kwok_stages, ports)
    started = sandbox.bring_up(layout, bin_dir, ports, params["timeout"])
    core = _node_api(layout)
    plan = sandbox.plan_nodes(params["nodes"], _existing_nodes(core))
    _apply_node_plan(core, plan)
    ready = _wait_nodes_ready(core, len(params["nodes"]), params["timeout"])
    if ready < len(params["nodes"]):
        raise sandbox.SandboxError(
            "%d of %d simulated nodes became Ready within %d s; see %s"
            % (ready, len(params["nodes"]), params["timeout"], layout.log("kwok"))
        )
    return {
        "changed": changed or bool(started) or plan.changed,
        "started": started,
        "nodes": {
            "created": [m["metadata"]["name"] for m in plan.create],
            "updated": [m["metadata"]["name"] for m in plan.replace],
            "deleted": plan.delete,
            "ready": ready,
        },
    }


def main():
    run_module()


if __name__ == "__main__":
    main()
