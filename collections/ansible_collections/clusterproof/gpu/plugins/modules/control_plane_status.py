#!/usr/bin/python
"""Ansible module: read a control-plane host's view of its control plane (etcd, API server, endpoint, SANs)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: control_plane_status
short_description: Read a kubeadm control-plane host's etcd, API server, endpoint and API server certificate
version_added: 0.3.0
author:
  - clusterproof developers
description:
  - Runs on a control-plane host of a kubeadm site, as root (it reads kubeadm's certificates). Reads only.
  - etcd through the JSON gateway on its client URL (no etcdctl needed) with kubeadm's health-check client
    certificate - the member list from O(etcd_url), then each member's status (leader, raft indices, database size,
    errors) and health on the member's own client URL.
  - The API server's C(/readyz) at the address it advertises (kubeadm's annotation on its static pod, or
    O(apiserver_address)), and through the site's endpoint (O(endpoint), or the server kubeadm wrote into
    O(kubeconfig)), both checked against O(kubernetes_ca).
  - The subjectAltName of O(apiserver_certificate), through C(openssl x509 -ext subjectAltName).
  - Each read gives up after O(timeout) seconds and a read that fails is returned with its reason, never as a
    failure of the module, so that a member whose host is down does not hang the validation. The filter
    C(clusterproof.gpu.control_plane_section) judges every host's result.
options:
  host:
    description: The host's name in the inventory, as the report names it.
    type: str
    required: true
  endpoint:
    description:
      - The site's control-plane endpoint, C(host) or C(host:port) (port 6443 when none).
      - Empty - the server of O(kubeconfig), which kubeadm set to the endpoint (the first control plane's address
        when the site declares none).
    type: str
    default: ""
  kubeconfig:
    description: Where the endpoint is read when O(endpoint) is empty.
    type: path
    default: /etc/kubernetes/admin.conf
  apiserver_address:
    description: The API server's own C(host:port). Empty - the address it advertises, read from O(apiserver_manifest).
    type: str
    default: ""
  apiserver_manifest:
    description: The API server's static pod manifest.
    type: path
    default: /etc/kubernetes/manifests/kube-apiserver.yaml
  apiserver_certificate:
    description: The API server's serving certificate, whose subjectAltName is read.
    type: path
    default: /etc/kubernetes/pki/apiserver.crt
  kubernetes_ca:
    description: The cluster's CA, which the API server's certificate is checked against.
    type: path
    default: /etc/kubernetes/pki/ca.crt
  etcd_url:
    description: This host's etcd client URL, where the member list is read.
    type: str
    default: https://127.0.0.1:2379
  etcd_ca:
    description: etcd's CA.
    type: path
    default: /etc/kubernetes/pki/etcd/ca.crt
  etcd_certificate:
    description: The client certificate etcd is read with.
    type: path
    default: /etc/kubernetes/pki/etcd/healthcheck-client.crt
  etcd_key:
    description: That certificate's key.
    type: path
    default: /etc/kubernetes/pki/etcd/healthcheck-client.key
  timeout:
    description: Seconds each read may take.
    type: int
    default: 5
requirements:
  - C(openssl) on the host.
"""

EXAMPLES = r"""
- name: Read this control plane's etcd, API server and endpoint
  clusterproof.gpu.control_plane_status:
    host: "{{ inventory_hostname }}"
    endpoint: cp.example.com:6443
  become: true
  register: control_plane
"""

RETURN = r"""
host:
  description: The host, as given.
  returned: always
  type: str
etcd:
  description:
    - url, error (why the member list could not be read; then members is null), and members - each with id, name,
      client_urls, peer_urls, learner, status (member_id, leader, raft_term, raft_index, raft_applied_index, db_size,
      version, errors; null when not read), status_error, health (true, false, or null when not read) and
      health_reason.
  returned: always
  type: dict
apiserver:
  description: The API server's own /readyz - address, url, ok, error.
  returned: always
  type: dict
endpoint:
  description: /readyz through the site's endpoint - address, url, ok, error.
  returned: always
  type: dict
sans:
  description: The API server certificate's subjectAltName - dns, ips, error.
  returned: always
  type: dict
"""

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.maintenance import control_plane_status as status

OPTIONS = {
    "host": {"type": "str", "required": True},
    "endpoint": {"type": "str", "default": ""},
    "kubeconfig": {"type": "path", "default": status.ADMIN_KUBECONFIG},
    "apiserver_address": {"type": "str", "default": ""},
    "apiserver_manifest": {"type": "path", "default": status.APISERVER_MANIFEST},
    "apiserver_certificate": {"type": "path", "default": status.APISERVER_CERTIFICATE},
    "kubernetes_ca": {"type": "path", "default": status.KUBERNETES_CA},
    "etcd_url": {"type": "str", "default": status.ETCD_URL},
    "etcd_ca": {"type": "path", "default": status.ETCD_CA},
    "etcd_certificate": {"type": "path", "default": status.ETCD_CLIENT_CERTIFICATE},
    "etcd_key": {"type": "path", "default": status.ETCD_CLIENT_KEY},
    "timeout": {"type": "int", "default": 5},
}


def check_options(params: dict) -> None:
    """Refuse what cannot be read, naming the option, what it takes and what was found."""
    for option in ("endpoint", "apiserver_address"):
        if params[option]:
            try:
                status.host_port(params[option])
            except ValueError as error:
                raise ValueError("%s: %s" % (option, error)) from error
    if not params["etcd_url"].startswith("https://"):
        raise ValueError(
            "etcd_url: expected an https:// URL (kubeadm's etcd serves TLS only), found %r" % params["etcd_url"]
        )


def _work(module) -> dict:
    params = module.params
    check_options(params)
    read = status.read_host(
        etcd_url=params["etcd_url"],
        etcd_tls=(params["etcd_ca"], params["etcd_certificate"], params["etcd_key"]),
        kubernetes_ca=params["kubernetes_ca"],
        endpoint=params["endpoint"],
        apiserver_address=params["apiserver_address"],
        timeout=params["timeout"],
        kubeconfig=params["kubeconfig"],
        apiserver_manifest=params["apiserver_manifest"],
        apiserver_certificate=params["apiserver_certificate"],
    )
    return {"host": params["host"], **read}


def main() -> None:
    runner.run_module(
        runner.argument_spec(OPTIONS),
        _work,
        doing="reading the control plane",
        expected=(ValueError,),
    )


if __name__ == "__main__":
    main()
