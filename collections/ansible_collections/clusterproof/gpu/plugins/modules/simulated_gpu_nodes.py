#!/usr/bin/python
"""Attach KWOK-simulated GPU nodes to a real cluster without GPUs (a test bed), or detach them."""

DOCUMENTATION = r"""
module: simulated_gpu_nodes
short_description: Give a real cluster without GPUs simulated GPU nodes (KWOK run beside it)
version_added: 0.1.0
author:
  - clusterproof developers
description:
  - For test beds only (the lab, docs/lab.md). Runs KWOK on the machine this module runs on, with a
    copy of the cluster's admin kubeconfig (mode 0600) in O(state_dir), and makes the simulated nodes
    exactly the declared ones (GPU count, GPU feature discovery labels, CPU, memory, taints), each
    annotated for KWOK and labelled C(clusterproof.io/sandbox-node=true), waiting until they are Ready.
    Pods bound to them are faked by KWOK with the sandbox's stages; they stay Running until deleted.
  - With O(gpu_agent), also runs the sandbox GPU agent, which answers KAI's reservation pods of GPU
    fractions on the simulated nodes with a GPU index, as the node's own probe would.
  - Only nodes with the simulated label are ever created, changed or deleted.
  - C(absent) deletes the simulated nodes while the cluster answers, stops the processes it started,
    and removes what it wrote in O(state_dir) (the kubeconfig copy, the KWOK stages, the logs and
    process records), and the directory when that leaves it empty.
  - Idempotent; supports check mode.
extends_documentation_fragment:
  - clusterproof.gpu.simulated_nodes
options:
  state:
    description: C(present) or C(absent).
    type: str
    choices: [present, absent]
    default: present
  state_dir:
    description: Where the kubeconfig copy, the KWOK stages, the logs and the process records are kept.
    type: path
    required: true
  kubeconfig_content:
    description: The cluster's admin kubeconfig (its text). Required with O(state=present).
    type: str
  kwok_binary:
    description: The kwok program (the sandbox build's). Required with O(state=present).
    type: path
  kwok_stages:
    description: Path of the KWOK stages file (the sandbox's). Required with O(state=present).
    type: path
  nodes:
    description:
      - The simulated nodes, as the C(clusterproof.gpu.site_inventory) declaration lists them (name,
        gpu_count, gpu_product, gpu_memory_mib, cpu_cores, memory_gib, labels, taints).
    type: list
    elements: dict
    default: []
  port:
    description: Loopback port of KWOK's health endpoint.
    type: int
    default: 16479
  gpu_agent:
    description: Run the GPU agent for KAI's GPU fractions.
    type: bool
    default: false
  agent_pythonpath:
    description: Directory to put on PYTHONPATH for the GPU agent (the repository's collections folder).
    type: path
"""

EXAMPLES = r"""
- name: Give the lab's cluster two simulated 8-GPU nodes
  clusterproof.gpu.simulated_gpu_nodes:
    state_dir: ~/.local/state/clusterproof/simulated/lab
    kubeconfig_content: "{{ admin_conf.content | b64decode }}"
    kwok_binary: "{{ binaries.bin_dir }}/kwok"
    kwok_stages: roles/sandbox_cluster/files/kwok-stages.yaml
    nodes: "{{ clusterproof_site.nodes | selectattr('simulated') }}"
    gpu_agent: true
    agent_pythonpath: "{{ playbook_dir }}/../collections"
"""

RETURN = r"""
started:
  description: The processes started by this run (C(kwok), C(gpu-agent)).
  returned: with state present
  type: list
  elements: str
nodes:
  description: The simulated nodes created, updated and deleted by this run.
  returned: with state present
  type: dict
stopped:
  description: The processes stopped.
  returned: with state absent
  type: list
  elements: str
deleted:
  description: The simulated nodes deleted.
  returned: with state absent
  type: list
  elements: str
"""

from pathlib import Path

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube.client import KubeError
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import control_plane, simulated_nodes


def run(module):
    params = module.params
    layout = control_plane.Layout(Path(params["state_dir"]))
    if params["state"] == "absent":
        return simulated_nodes.absent(layout, module.check_mode)
    if not 1024 <= params["port"] <= 65535:
        raise runner.ModuleError("port: expected a port from 1024 to 65535, found %d" % params["port"])
    if params["gpu_agent"] and not params["agent_pythonpath"]:
        raise runner.ModuleError("agent_pythonpath: expected the collections folder with gpu_agent true, found none")
    return simulated_nodes.present(
        layout,
        params["kubeconfig_content"],
        Path(params["kwok_stages"]).read_text(),
        Path(params["kwok_binary"]),
        params["nodes"],
        params["port"],
        params["gpu_agent"],
        params["agent_pythonpath"] or "",
        params["timeout"],
        module.check_mode,
    )


def main():
    runner.run_simulated_nodes(
        {
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "state_dir": {"type": "path", "required": True},
            "kubeconfig_content": {"type": "str", "no_log": True},
            "kwok_binary": {"type": "path"},
            "kwok_stages": {"type": "path"},
            "nodes": {"type": "list", "elements": "dict", "default": []},
            "port": {"type": "int", "default": 16479},
            "gpu_agent": {"type": "bool", "default": False},
            "agent_pythonpath": {"type": "path"},
        },
        work=run,
        doing="attaching the simulated GPU nodes",
        required_if=[("state", "present", ("kubeconfig_content", "kwok_binary", "kwok_stages"))],
        expected=(control_plane.SandboxError, KubeError),
    )


if __name__ == "__main__":
    main()
