"""Documentation of the options every cluster-reading module shares (module_utils/kube/client.py AUTH_ARG_SPEC)."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  kubeconfig:
    description: Kubeconfig of the cluster; $KUBECONFIG or ~/.kube/config when omitted.
    type: path
  context:
    description: Kubeconfig context to use; the kubeconfig's current context when omitted.
    type: str
  request_timeout:
    description: Seconds to wait for each API request.
    type: int
    default: 30
"""
