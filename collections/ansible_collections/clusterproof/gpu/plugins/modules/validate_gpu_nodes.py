#!/usr/bin/python
"""Check the GPU nodes the inventory declares against the Nodes the cluster reports.

Reads the cluster's Nodes and the ResourceSlices of NVIDIA's DRA driver (nothing else, and writes
nothing); the comparison itself is
``module_utils/validate/nodes.py``. Failed checks do not fail the task: they go into the site
report, which decides the run's verdict.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: validate_gpu_nodes
short_description: Check declared GPU nodes against the cluster's Nodes
version_added: 0.1.0
author:
  - clusterproof developers
description:
  - Reads every Node of the cluster and checks, for each declared GPU node, that it is present,
    Ready, reports the declared number of GPUs, and carries the declared C(nvidia.com/gpu.product)
    and C(nvidia.com/gpu.memory) labels (when declared) and any other declared labels.
  - Counts a node's GPUs from the device plugin (allocatable C(nvidia.com/gpu)) or from dynamic
    resource allocation (the whole GPUs in the ResourceSlices of NVIDIA's DRA driver
    C(gpu.nvidia.com) for that node, newest pool generation only), and says which in the check's
    message and the node table's C(gpu_source). A cluster that does not serve
    C(resource.k8s.io/v1) has no DRA GPUs; that is no error.
  - Checks that the cluster's total allocatable GPUs equal the sum declared, and warns (without
    failing) about GPU nodes in the cluster that the inventory does not declare.
  - Failed checks do not fail the task; they are returned for the site report. The task fails only
    when the cluster cannot be read or the arguments are invalid.
  - Only reads the cluster, so it never reports a change and runs the same in check mode.
options:
  nodes:
    description:
      - The GPU nodes the site declares.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: The Kubernetes node name.
        type: str
        required: true
      gpu_count:
        description: How many GPUs the node must report as allocatable C(nvidia.com/gpu).
        type: int
        required: true
      gpu_product:
        description: Expected value of the C(nvidia.com/gpu.product) label; not checked when omitted.
        type: str
      gpu_memory_mib:
        description: Expected value of the C(nvidia.com/gpu.memory) label in MiB; not checked when omitted.
        type: int
      cpu_cores:
        description: CPU cores the node has; recorded, not compared (a Node's capacity is never the nominal figure).
        type: int
      memory_gib:
        description: Memory the node has in GiB; recorded, not compared.
        type: int
      host:
        description: The inventory host that declares the node.
        type: str
      taints:
        description: Taints the inventory declares; recorded, not compared.
        type: list
        elements: dict
        default: []
      simulated:
        description: A KWOK node of a test bed (inventory group simulated_gpu_nodes); its checks say so.
        type: bool
        default: false
      labels:
        description: Labels the Node must carry, with these values.
        type: dict
        default: {}
  device_layer:
    description:
      - The checked inventory's device layer (C(clusterproof_site.device_layer)). When it time-slices
        C(nvidia.com/gpu), each GPU is advertised C(replicas) times and the expected allocatable
        count is C(gpu_count) times that (for nodes counted from the device plugin; DRA publishes each
        GPU once).
    type: dict
  gpu_count_preference:
    description:
      - Which source counts a node's GPUs when both report some. C(device_plugin) takes the device
        plugin's count when it reports any GPUs, else DRA's; C(dra) takes DRA's when it reports any
        whole GPUs, else the device plugin's. Either way the message says that both report GPUs
        (they would hand out the same GPUs twice).
    type: str
    choices: [device_plugin, dra]
    default: device_plugin
  section_file:
    description:
      - Write the report section to this file as JSON (its directory is created) and return its
        path instead of the section. On a large site the section is tens of megabytes that Ansible
        would otherwise carry through its variables (10,000 nodes have 60,000 checks).
    type: path
extends_documentation_fragment:
  - clusterproof.gpu.kube_auth
requirements:
  - kubernetes (Python) on the controller
"""

EXAMPLES = r"""
- name: Check the GPU nodes of the site
  clusterproof.gpu.validate_gpu_nodes:
    kubeconfig: /etc/kubernetes/admin.conf
    nodes:
      - name: dgx1-1
        gpu_count: 8
        gpu_product: Tesla-V100-SXM2-32GB
        gpu_memory_mib: 32768
      - name: dgx1-2
        gpu_count: 8
        gpu_product: Tesla-V100-SXM2-32GB
        gpu_memory_mib: 32768
  register: gpu_nodes

- name: Check a 10,000-node site, the section written to a file rather than carried by Ansible
  clusterproof.gpu.validate_gpu_nodes:
    nodes: "{{ clusterproof_site.nodes }}"
    section_file: "{{ clusterproof_report_dir }}/sections/gpu-nodes.json"

- name: Show how many checks failed
  ansible.builtin.debug:
    msg: "{{ gpu_nodes.failed_checks }} GPU node checks failed"
"""

RETURN = r"""
failed_checks:
  description: How many checks failed.
  returned: success
  type: int
  sample: 0
section:
  description:
    - The checks and node table as one site report section (C(id), C(title), C(checks), C(node_table)),
      returned once (not also beside it; Ansible's handling of a 10,000-node result costs seconds per copy).
  returned: when I(section_file) is not given
  type: dict
  contains:
    checks:
      description: Every check, in a stable order (per node, then cluster-wide).
      type: list
      elements: dict
      contains:
        id:
          description: Stable identifier, e.g. C(gpu-nodes/dgx1-1/gpu-count) or C(cluster/gpu-total).
          type: str
        title:
          description: What was checked, in words.
          type: str
        status:
          description: One of C(pass), C(fail), C(warn), C(skip), C(needs-hardware).
          type: str
        expected:
          description: What the inventory declares.
          type: raw
        observed:
          description: What the cluster reports.
          type: raw
        message:
          description: For a failure, what was expected, what was found, and where to look.
          type: str
        duration_s:
          description: Seconds the check took, or null.
          type: float
      sample:
        - id: gpu-nodes/dgx1-1/gpu-count
          title: dgx1-1 has 8 allocatable GPUs
          status: pass
          expected: 8
          observed: 8
          message: ""
          duration_s: null
    node_table:
      description: One row per declared node, then one per undeclared GPU node.
      type: list
      elements: dict
      sample:
        - name: dgx1-1
          declared: true
          present: true
          declared_gpus: 8
          found_gpus: 8
          declared_product: Tesla-V100-SXM2-32GB
          found_product: Tesla-V100-SXM2-32GB
          ready: true
          status: pass
          gpu_source: device-plugin
          both_sources: false
section_file:
  description: Where the section was written as JSON, when I(section_file) was given.
  returned: when I(section_file) is given
  type: str
nodes_in_cluster:
  description: How many Nodes the cluster has, GPU or not.
  returned: success
  type: int
  sample: 3
dra_resource_slices:
  description:
    - How many ResourceSlices of C(gpu.nvidia.com) the cluster has; null when it does not serve
      C(resource.k8s.io/v1).
  returned: success
  type: int
  sample: 0
"""

import json
import pathlib

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate.nodes import (
    DRA_GPU_DRIVER,
    PREFERENCES,
    advertised_per_gpu,
    validate_gpu_nodes,
)

NODE_OPTIONS = {
    "name": {"type": "str", "required": True},
    "gpu_count": {"type": "int", "required": True},
    "gpu_product": {"type": "str"},
    "gpu_memory_mib": {"type": "int"},
    "cpu_cores": {"type": "int"},
    "memory_gib": {"type": "int"},
    "labels": {"type": "dict", "default": {}},
    "host": {"type": "str"},
    "taints": {"type": "list", "elements": "dict", "default": []},
    "simulated": {"type": "bool", "default": False},
}


def _observed(params):
    """The cluster's Nodes, and the GPU driver's ResourceSlices (None: the cluster serves no DRA)."""
    try:
        api = kube.api_client(params["kubeconfig"], params["context"])
        nodes = kube.list_nodes(api, request_timeout=params["request_timeout"])
        slices = kube.list_resource_slices(api, DRA_GPU_DRIVER, request_timeout=params["request_timeout"])
    except Exception as error:  # any client or connection error: say which cluster could not be read
        raise runner.ModuleError(
            f"cannot read the cluster's Nodes and ResourceSlices (kubeconfig {params['kubeconfig'] or 'default'}, "
            f"context {params['context'] or 'current'}): {error}. Check that the API server is up and that the "
            "kubeconfig points at it."
        ) from error
    return nodes, slices


def run(module):
    params = module.params
    nodes, slices = _observed(params)
    try:
        outcome = validate_gpu_nodes(
            params["nodes"],
            nodes,
            advertised_per_gpu(params["device_layer"]),
            resource_slices=slices or (),
            gpu_count_preference=params["gpu_count_preference"],
        )
    except ValueError as error:
        raise runner.ModuleError(f"invalid nodes argument: {error}") from error
    section = outcome.section_dict()
    result = {
        # Ansible echoes a module's arguments back (invocation.module_args) unless the module says
        # them itself: 10,000 declared nodes echoed cost the controller seconds to take in.
        "invocation": {"module_args": {**params, "nodes": "%d nodes" % len(params["nodes"])}},
        "failed_checks": len(outcome.failed),
        "nodes_in_cluster": len(nodes),
        "dra_resource_slices": None if slices is None else len(slices),
    }
    if params["section_file"]:
        path = pathlib.Path(params["section_file"])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(section))
        return {**result, "section_file": str(path)}
    return {**result, "section": section}


def main() -> None:
    runner.run_cluster_module(
        {
            "nodes": {"type": "list", "elements": "dict", "required": True, "options": NODE_OPTIONS},
            "device_layer": {"type": "dict"},
            "gpu_count_preference": {"type": "str", "choices": list(PREFERENCES), "default": "device_plugin"},
            "section_file": {"type": "path"},
        },
        work=run,
        doing="validating the GPU nodes",
    )


if __name__ == "__main__":
    main()
