"""Filters that render kubeadm's configuration from the checked site declaration.

They run on the controller, where the declaration (``clusterproof_site``) is; the logic is in
module_utils/install/kubeadm_config.py. The roles write what they return to the hosts with
ansible.builtin.copy, so a changed inventory shows as a changed file.
"""

from __future__ import annotations

import json

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterproof.gpu.plugins.module_utils.install import kubeadm_config, runtime_config


def _plain(value):
    """Ansible's values as plain Python (its tagged strings are str subclasses PyYAML cannot represent)."""
    return json.loads(json.dumps(value))


def kubeadm_init_config(site, host, advertise_address):
    """kubeadm init's --config file for the first control-plane host."""
    return kubeadm_config.to_yaml(kubeadm_config.init_documents(_plain(site), str(host), str(advertise_address)))


def kubeadm_join_config(site, host, join_command, advertise_address="", certificate_key=""):
    """kubeadm join's --config file for ``host``, from the first control plane's join command."""
    try:
        join = kubeadm_config.parse_join_command(str(join_command))
        key = kubeadm_config.parse_certificate_key(str(certificate_key)) if certificate_key else ""
    except ValueError as error:
        raise AnsibleFilterError(str(error)) from error
    documents = kubeadm_config.join_documents(_plain(site), str(host), join, str(advertise_address), key)
    return kubeadm_config.to_yaml(documents)


def kube_scheduler_config(site):
    """kube-scheduler's configuration file (GPUs bin-packed) for every control-plane host. The same for
    every site today: ``site`` is the declaration the other kubeadm filters render from."""
    del site
    return kubeadm_config.scheduler_config_text()


def kube_scheduler_config_digest(site):
    """The SHA-256 of that file, which kubeadm's kube-scheduler static pod carries in its environment."""
    del site
    return kubeadm_config.scheduler_config_digest()


def kubernetes_node_patch(site, host, existing_taints):
    """The labels and taints to patch a joined GPU node to (kubernetes.core.k8s, state patched)."""
    return kubeadm_config.node_patch(_plain(site), str(host), _plain(existing_taints or []))


def kubeadm_host_groups(site):
    """The hosts of mode kubeadm with the groups playbooks/kubernetes.yml runs on; none in other modes."""
    return kubeadm_config.host_groups(_plain(site))


def kubeadm_control_planes(site):
    """The control-plane hosts of mode kubeadm, the first first; none in other modes."""
    return [
        entry["host"]
        for entry in kubeadm_config.host_groups(_plain(site))
        if "clusterproof_kubeadm_worker_join" not in entry["groups"]
    ]


def containerd_cni_bin_dir(config_text):
    """Where a containerd config (the text of config.toml; empty: none) has its CRI look for CNI plugins."""
    try:
        return runtime_config.containerd_cni_bin_dir(str(config_text or ""))
    except (runtime_config.RuntimeConfigError, ValueError) as error:
        raise AnsibleFilterError("cannot read containerd's config: %s" % error) from error


class FilterModule:
    def filters(self):
        return {
            "kubeadm_init_config": kubeadm_init_config,
            "kube_scheduler_config": kube_scheduler_config,
            "kube_scheduler_config_digest": kube_scheduler_config_digest,
            "kubeadm_join_config": kubeadm_join_config,
            "kubernetes_node_patch": kubernetes_node_patch,
            "kubeadm_host_groups": kubeadm_host_groups,
            "kubeadm_control_planes": kubeadm_control_planes,
            "containerd_cni_bin_dir": containerd_cni_bin_dir,
        }
