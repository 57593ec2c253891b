#!/usr/bin/python
"""Ansible module: remove what kubeadm reset leaves on a host (iptables chains, CNI interfaces)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: kube_host_cleanup
short_description: Remove the iptables rules and network interfaces Kubernetes left on a reset host
version_added: 0.3.0
author:
  - clusterproof developers
description:
  - C(kubeadm reset) leaves the rules kube-proxy and the CNI wrote in iptables, and the CNI's interfaces,
    and says so. A host joined again with them routes Service addresses to pods that are gone.
  - Removes, from every table of iptables and ip6tables (where the host has them), the chains whose names
    start with O(chain_prefixes) and every rule that jumps to one; the host's own rules stay as they were.
  - Deletes the network interfaces of O(interfaces) the host has.
  - Run after C(kubeadm reset), on a host that is no node any more (its kube-proxy and CNI gone); a second
    run finds nothing and changes nothing. Supports check mode (says what it would remove).
options:
  chain_prefixes:
    description: The prefixes of the chains to remove (kube-proxy's, flannel's, the CNI plugins').
    type: list
    elements: str
    default: [KUBE-, FLANNEL-, CNI-]
  interfaces:
    description: The interfaces to delete where present (flannel's vxlan device and the CNI bridge).
    type: list
    elements: str
    default: [cni0, flannel.1]
requirements:
  - C(iptables-save) and C(iptables-restore) (the kubelet package's dependency), C(ip) (iproute2).
"""

EXAMPLES = r"""
- name: Remove what kube-proxy and flannel left after kubeadm reset
  clusterproof.gpu.kube_host_cleanup:
  become: true
"""

RETURN = r"""
iptables:
  description: Per command (iptables, ip6tables), the chains removed per table and the number of rules.
  returned: always
  type: dict
  sample: {"iptables": {"chains": {"nat": ["KUBE-SERVICES"]}, "rules": {"nat": 12}}}
interfaces:
  description: The interfaces deleted (or that would be, in check mode).
  returned: always
  type: list
  elements: str
"""

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.maintenance import host_cleanup

OPTIONS = {
    "chain_prefixes": {"type": "list", "elements": "str", "default": list(host_cleanup.DEFAULT_PREFIXES)},
    "interfaces": {"type": "list", "elements": "str", "default": list(host_cleanup.DEFAULT_INTERFACES)},
}


def _work(module) -> dict:
    prefixes = [prefix for prefix in module.params["chain_prefixes"] if prefix]
    if not prefixes:
        raise ValueError(
            "chain_prefixes: expected at least one non-empty prefix; found %r" % module.params["chain_prefixes"]
        )
    apply = not module.check_mode
    iptables = host_cleanup.clean_iptables(prefixes, apply)
    interfaces = host_cleanup.clean_interfaces(module.params["interfaces"], apply)
    return {"changed": bool(iptables or interfaces), "iptables": iptables, "interfaces": interfaces}


def main() -> None:
    runner.run_host_command(OPTIONS, _work, doing="removing what kubeadm reset left on the host")


if __name__ == "__main__":
    main()
