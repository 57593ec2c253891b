"""Filters of the API endpoint clusterproof installs (role api_endpoint, docs/ha.md): each control
plane's haproxy and keepalived configuration, from the checked declaration and the control planes'
network facts.

They run on the controller, where the declaration (``clusterproof_site``) and every control plane's
facts are; the configuration is made in module_utils/install/api_endpoint.py.
"""

from __future__ import annotations

import json

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterproof.gpu.plugins.module_utils.install import api_endpoint, kubeadm_config


def _plain(value):
    """Ansible's values as plain Python (its tagged strings are str subclasses)."""
    return json.loads(json.dumps(value))


def _facts_of(hostvars, host):
    """``host``'s gathered facts, or an error saying which host has none and what gathers them."""
    facts = _plain(hostvars[host].get("ansible_facts", {})) if host in hostvars else {}
    address = facts.get("default_ipv4", {}).get("address")
    if not address:
        raise AnsibleFilterError(
            "api_endpoint_configs: host %s: ansible_facts.default_ipv4.address: expected the host's address "
            "(the one its API server advertises), found none: gather its network facts first "
            "(ansible.builtin.setup, gather_subset network) on every control plane" % host
        )
    return facts


def api_endpoint_configs(site, host, hostvars):
    """``host``'s haproxy.cfg and keepalived.conf as ``{"haproxy": text, "keepalived": text}``. Each
    control plane goes by its default IPv4 address, the one kubeadm has its API server advertise
    (roles kubeadm_control_plane and kubeadm_join): ``hostvars`` must hold every control plane's
    network facts."""
    site = _plain(site)
    if site.get("cluster_mode") != "kubeadm":
        raise AnsibleFilterError(
            "api_endpoint_configs: site: expected a site of mode kubeadm, found mode %r" % site.get("cluster_mode")
        )
    settings = kubeadm_config.settings_of(site)
    if not settings.control_plane_vip:
        raise AnsibleFilterError(
            "api_endpoint_configs: clusterproof_control_plane_vip: expected the VIP the endpoint serves, found none "
            "(the site brings its own endpoint: do not run role api_endpoint)"
        )
    control_planes = [
        api_endpoint.ControlPlane(plane, _facts_of(hostvars, plane)["default_ipv4"]["address"])
        for plane in settings.control_plane_hosts
    ]
    try:
        return api_endpoint.host_configs(
            str(host),
            settings.control_plane_vip,
            control_planes,
            _facts_of(hostvars, str(host)),
            kubeadm_config.API_SERVER_PORT,
        )
    except api_endpoint.ApiEndpointError as error:
        raise AnsibleFilterError("api_endpoint_configs: host %s: %s" % (host, error)) from error


def api_endpoint_port(site):
    """The port haproxy serves the API on (on the VIP and every control plane's address)."""
    del site
    return api_endpoint.ENDPOINT_PORT


class FilterModule:
    def filters(self):
        return {
            "api_endpoint_configs": api_endpoint_configs,
            "api_endpoint_port": api_endpoint_port,
        }
