"""Filters of the control plane's validation: the endpoint each control plane tries, and the report's
``control-plane`` section from what every control-plane host read.

They run on the controller, where the declaration (``clusterproof_site``) and every host's results
are; the verdicts are in module_utils/validate/control_plane.py.
"""

from __future__ import annotations

import json

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterproof.gpu.plugins.module_utils.install import kubeadm_config
from ansible_collections.clusterproof.gpu.plugins.module_utils.maintenance import removal
from ansible_collections.clusterproof.gpu.plugins.module_utils.report import model as report_model
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import control_plane


def _plain(value):
    """Ansible's values as plain Python (its tagged strings are str subclasses)."""
    return json.loads(json.dumps(value))


def control_plane_endpoint(site):
    """The declared control-plane endpoint as host:port (port 6443 when none is given); empty when the
    site declares none, and the control_plane_status module reads the one kubeadm was given from
    admin.conf (the first control plane's address, as kubeadm_control_plane settled it)."""
    site = _plain(site)
    if site.get("cluster_mode") != "kubeadm":
        return ""
    settings = kubeadm_config.settings_of(site)
    return kubeadm_config.endpoint_of(settings, "") if settings.control_plane_endpoint else ""


def declared_control_planes(site):
    """The kubeadm site's control planes, the first first, each with its node name (its etcd member's)."""
    site = _plain(site)
    names = {entry["host"]: entry["name"] for entry in removal.node_names(site)}
    return [{"host": host, "name": names[host]} for host in kubeadm_config.settings_of(site).control_plane_hosts]


def control_plane_section(site, hostvars=None, lag_entries=control_plane.LAG_ENTRIES, skipped=""):
    """The report's control-plane section from what validate_control_plane left on each control plane:
    the module's ``validate_control_plane_result``, or ``validate_control_plane_unread`` (why the host
    could not be read). ``skipped``: why nothing was read (a site kubeadm did not make)."""
    lag_entries = _plain(lag_entries)
    if isinstance(lag_entries, bool) or not isinstance(lag_entries, int) or lag_entries < 0:
        raise AnsibleFilterError(
            "control_plane_section: lag_entries: expected a whole number of raft entries (0 or more), found %r"
            % (lag_entries,)
        )
    if skipped:
        found = control_plane.section([], {}, skipped=str(skipped))
    elif _plain(site or {}).get("cluster_mode") != "kubeadm":
        raise AnsibleFilterError(
            "control_plane_section: site: expected a site of mode kubeadm (or skipped=<why nothing was read>), "
            "found mode %r" % _plain(site or {}).get("cluster_mode")
        )
    else:
        declared = declared_control_planes(site)
        readings, unread = {}, {}
        for entry in declared:
            facts = hostvars[entry["host"]] if hostvars is not None and entry["host"] in hostvars else {}
            if facts.get("validate_control_plane_unread") is not None:
                unread[entry["host"]] = str(facts["validate_control_plane_unread"])
            elif facts.get("validate_control_plane_result") is not None:
                readings[entry["host"]] = _plain(facts["validate_control_plane_result"])
        found = control_plane.section(declared, readings, unread, lag_entries)
    return report_model.section_to_dict(found)


class FilterModule:
    def filters(self):
        return {
            "control_plane_endpoint": control_plane_endpoint,
            "control_plane_section": control_plane_section,
        }
