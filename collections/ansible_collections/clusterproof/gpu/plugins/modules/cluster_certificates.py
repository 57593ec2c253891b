#!/usr/bin/python
"""Ansible module: read when a host's cluster certificates expire, and renew kubeadm's."""

from __future__ import annotations

DOCUMENTATION = r"""
module: cluster_certificates
short_description: Read the expiry of a host's Kubernetes certificates, and renew kubeadm's
version_added: 0.3.0
author:
  - clusterproof developers
description:
  - On a control plane (O(kubeadm=true)), reads C(kubeadm certs check-expiration -o json), every certificate
    kubeadm made and its CAs; on every host, the kubelet's client certificate (O(kubelet_certificate)) through
    C(openssl x509 -enddate), when the host has one.
  - Returns them as C(certificates), with the seconds left by the host's clock; the site_report's section is
    made from all hosts' lists by the filter C(clusterproof.gpu.certificate_section).
  - With O(state=renewed) on a control plane, renews all of kubeadm's certificates (C(kubeadm certs renew all),
    as an upgrade does) when one of them has under O(renew_days) left (or always, with O(force)), then
    restarts the control plane's static pods one at a time so that they load the new ones (etcd, the API
    server, the controller manager, the scheduler), and reads them again. Nothing to renew is no change.
    Check mode says what would be renewed.
extends_documentation_fragment:
  - clusterproof.gpu.static_pods
options:
  host:
    description: The host's name in the inventory, as the report names it.
    type: str
    required: true
  state:
    description: C(read) only reads; C(renewed) renews what is due.
    type: str
    choices: [read, renewed]
    default: read
  kubeadm:
    description: Whether the host is a control plane whose certificates kubeadm made.
    type: bool
    default: false
  kubelet_certificate:
    description: The kubelet's client certificate (the kubelet rotates it; kubeadm's default place).
    type: path
    default: /var/lib/kubelet/pki/kubelet-client-current.pem
  renew_days:
    description: With O(state=renewed), renew when a certificate of kubeadm's has fewer days left than this.
    type: int
    default: 30
  force:
    description: With O(state=renewed), renew every certificate whatever its days left.
    type: bool
    default: false
  restart_timeout:
    description: Seconds each component may take to stop, and again to start, when restarted.
    type: int
    default: 180
requirements:
  - C(kubeadm) on a control plane, C(openssl) where the kubelet's certificate is read.
"""

EXAMPLES = r"""
- name: Read this host's certificates
  clusterproof.gpu.cluster_certificates:
    host: "{{ inventory_hostname }}"
    kubeadm: "{{ inventory_hostname in groups['kube_control_plane'] }}"
  become: true
  register: certificates

- name: Renew the control plane's certificates when one has under 30 days left
  clusterproof.gpu.cluster_certificates:
    host: "{{ inventory_hostname }}"
    state: renewed
    kubeadm: true
  become: true
"""

RETURN = r"""
certificates:
  description: Each certificate read (after any renewal) - host, name, kind, expires (RFC 3339, UTC), seconds_left.
  returned: always
  type: list
  elements: dict
renewed:
  description: The certificates renewed (kubeadm's names), empty when none was due.
  returned: always
  type: list
  elements: str
restarted:
  description: The static pods restarted after a renewal.
  returned: always
  type: list
  elements: str
"""

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.maintenance import certificates

OPTIONS = {
    **runner.STATIC_POD_MANIFESTS_ARG_SPEC,
    "host": {"type": "str", "required": True},
    "state": {"type": "str", "choices": ["read", "renewed"], "default": "read"},
    "kubeadm": {"type": "bool", "default": False},
    "kubelet_certificate": {"type": "path", "default": certificates.KUBELET_CLIENT_CERTIFICATE},
    "renew_days": {"type": "int", "default": 30},
    "force": {"type": "bool", "default": False},
    "restart_timeout": {"type": "int", "default": 180},
}
# Where the manifests wait while their component stops (outside the kubelet's manifest directory).
PARKING_DIR = "/etc/kubernetes/clusterproof/restarting"


def _work(module) -> dict:
    params = module.params
    host = params["host"]
    if params["renew_days"] < 0:
        raise ValueError("renew_days: expected 0 or more days; found %r" % params["renew_days"])
    if params["state"] == "renewed" and not params["kubeadm"]:
        raise ValueError(
            "kubeadm: state=renewed renews kubeadm's certificates, on a control plane (kubeadm=true); found false"
        )
    found = certificates.read_host(host, params["kubeadm"], params["kubelet_certificate"])
    result = {"certificates": [c.to_dict() for c in found], "renewed": [], "restarted": []}
    if params["state"] == "read":
        return result
    if not params["force"] and not certificates.due(found, params["renew_days"]):
        return result
    result.update(changed=True, renewed=sorted(c.name for c in found if c.kind == certificates.KUBEADM))
    if module.check_mode:
        return result
    certificates.renew(["all"])
    result["restarted"] = certificates.restart_static_pods(
        params["manifest_dir"], PARKING_DIR, params["restart_timeout"]
    )
    result["certificates"] = [c.to_dict() for c in certificates.read_host(host, True, params["kubelet_certificate"])]
    return result


def main() -> None:
    runner.run_host_command(OPTIONS, _work, doing="reading the host's certificates")


if __name__ == "__main__":
    main()
