"""Documentation of the options the modules that ask clusterproof's Prometheus share (validate_monitoring,
monitoring_timeline; module_utils/kube/runner.py PROMETHEUS_ARG_SPEC): where it answers."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  prometheus_url:
    description: Prometheus's address, C(http://host:port); left out, the sandbox's at O(sandbox_port_base).
    type: str
  sandbox_port_base:
    description: The sandbox's port base, whose Prometheus (base+24) is asked when O(prometheus_url) is left out.
    type: int
"""
