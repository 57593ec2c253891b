"""Documentation of what the two modules that run KWOK-simulated GPU nodes share (sandbox_cluster, with
the sandbox's control plane, and simulated_gpu_nodes, beside a real cluster; both through
module_utils/sandbox): how long they wait for their processes and nodes."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  timeout:
    description: Seconds to wait for each process to become ready and for the nodes to be Ready.
    type: int
    default: 120
"""
