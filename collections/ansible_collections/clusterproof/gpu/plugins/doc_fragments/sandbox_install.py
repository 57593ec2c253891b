"""Documentation of the options every module that installs something on the sandbox shares
(module_utils/kube/runner.py SANDBOX_INSTALL_ARG_SPEC); a module adds which ones it requires.
CLUSTER_MODE documents the choice between the sandbox and a real cluster (ENGINE_MODE_ARG_SPEC) of an
engine that a real cluster installs from its Helm chart."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  state_dir:
    description: The sandbox's state directory (as for C(clusterproof.gpu.sandbox_cluster)).
    type: path
  bin_dir:
    description: Directory with the binaries of the sandbox build (C(clusterproof.gpu.sandbox_binaries)).
    type: path
  share_dir:
    description: The sandbox build's share directory, where the build copies each engine's CRDs and charts.
    type: path
  port_base:
    description: The sandbox's port base (as for C(clusterproof.gpu.sandbox_cluster)); each engine listens above it.
    type: int
    default: 16440
  timeout:
    description: Seconds to wait for CRDs to be served and for each process to become ready.
    type: int
    default: 120
"""

    CLUSTER_MODE = r"""
options:
  mode:
    description:
      - C(sandbox) installs the engine on the sandbox, as described above.
      - C(cluster) only makes clusterproof's own objects for the engine (see above), on a cluster where the
        engine's Helm chart is installed.
    type: str
    choices: [sandbox, cluster]
    default: sandbox
  kubeconfig:
    description: Kubeconfig of the cluster with O(mode=cluster).
    type: path
"""
