"""Documentation of the options the modules that ask clusterproof's Prometheus share (validate_monitoring,
monitoring_timeline, validate_scenario; module_utils/kube/runner.py PROMETHEUS_ARG_SPEC): where it answers."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  prometheus_url:
    description: Prometheus's address, C(http://host:port); left out, the sandbox's at O(sandbox_port_base).
    type: str
  sandbox_port_base:
    description: The sandbox's port base, whose Prometheus (base+24) is asked when O(prometheus_url) is left out.
    type: int
  prometheus_in_cluster:
    description:
      - Ask the Prometheus the monitoring stage runs as pods on a kubeadm site, through the API server's proxy with
        the kubeconfig's credentials (nothing exposed); O(prometheus_url) and O(sandbox_port_base) are then unused.
    type: bool
    default: false
"""
