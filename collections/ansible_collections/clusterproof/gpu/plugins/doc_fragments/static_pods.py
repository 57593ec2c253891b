"""Documentation of the option the modules that move, restart or read a kubeadm control plane's static
pods share (cluster_certificates, control_plane_static_pods, etcd_restore, etcd_snapshot;
module_utils/kube/runner.py STATIC_POD_MANIFESTS_ARG_SPEC): where the kubelet reads their manifests."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  manifest_dir:
    description: The kubelet's static pod manifests (kubeadm's place).
    type: path
    default: /etc/kubernetes/manifests
"""
