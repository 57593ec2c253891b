"""Filters of the site's upkeep: a node's removal planned, the certificates' report section.

They run on the controller, where the declaration (``clusterproof_site``) and every host's results
are; the logic is in module_utils/maintenance/.
"""

from __future__ import annotations

import dataclasses
import json

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterproof.gpu.plugins.module_utils.maintenance import certificates, removal, upgrade


def _plain(value):
    """Ansible's values as plain Python (its tagged strings are str subclasses)."""
    return json.loads(json.dumps(value))


def node_removal_plan(node, site, cluster_nodes):
    """What playbooks/remove_node.yml does for ``node`` (a dict), or an error naming the field ``node``."""
    try:
        plan = removal.plan_removal(_plain(node), _plain(site), [str(name) for name in cluster_nodes or []])
    except removal.RemovalError as error:
        raise AnsibleFilterError("%s; nothing was changed" % error) from error
    return {
        "node": plan.node,
        "host": plan.host,
        "role": plan.role,
        "control_plane": plan.control_plane,
        "in_cluster": plan.in_cluster,
        "api_host": plan.api_host,
    }


def upgrade_plan(site, api_version, nodes, madison, last_report="", ignore_validation=False):
    """What playbooks/upgrade.yml does (a dict), or an error listing every refusal. ``madison``: what
    ``apt-cache madison kubeadm`` printed on the first control plane; ``last_report``: the text of the
    site's latest report.json (empty: none)."""
    verdict = None
    if last_report:
        try:
            verdict = json.loads(str(last_report)).get("verdict")
        except (ValueError, AttributeError):
            verdict = "unreadable"
    try:
        plan = upgrade.plan_upgrade(
            _plain(site),
            str(api_version),
            upgrade.node_states(_plain(nodes or [])),
            upgrade.madison_versions(str(madison or "")),
            verdict,
            bool(ignore_validation),
        )
    except upgrade.UpgradeError as error:
        raise AnsibleFilterError(str(error)) from error
    result = dataclasses.asdict(plan)
    result["nothing_to_do"] = plan.nothing_to_do
    result["nodes"] = {entry["host"]: entry["name"] for entry in removal.node_names(_plain(site))}
    return result


def node_at_version(nodes, version):
    """Whether the node (k8s_info's ``resources``, one node) is Ready with its kubelet at ``version``."""
    states = upgrade.node_states(_plain(nodes or []))
    return bool(states) and states[0].ready and states[0].kubelet == str(version)


def pods_left_after_drain(pods):
    """namespace/name of the pods a drain left on its node that it should have moved."""
    return removal.pods_left(_plain(pods or []))


def certificate_section(hosts, hostvars=None, warn_days=30, fail_days=7, skipped=""):
    """The report's certificates section from what validate_certificates left on each of ``hosts``:
    the module's ``validate_certificates_result.certificates``, or ``validate_certificates_unread``
    (why the host could not be read). ``skipped``: why nothing was read (a site kubeadm did not make)."""
    found, unread = [], {}
    for host in hosts or []:
        facts = hostvars[host] if hostvars is not None else {}
        if facts.get("validate_certificates_unread") is not None:
            unread[str(host)] = str(facts["validate_certificates_unread"])
            continue
        found += _plain((facts.get("validate_certificates_result") or {}).get("certificates") or [])
    try:
        warn, fail = certificates.check_days(_plain(warn_days), _plain(fail_days))
        read = [certificates.Certificate.from_dict(entry) for entry in found]
    except (KeyError, TypeError, ValueError) as error:
        raise AnsibleFilterError("certificate_section: %s" % error) from error
    section = certificates.section(read, warn, fail, unread, str(skipped or ""))
    return {
        "id": section.id,
        "title": section.title,
        "checks": [check.to_dict() for check in section.checks],
        "tables": [table.to_dict() for table in section.tables],
    }


class FilterModule:
    def filters(self):
        return {
            "node_removal_plan": node_removal_plan,
            "pods_left_after_drain": pods_left_after_drain,
            "upgrade_plan": upgrade_plan,
            "node_at_version": node_at_version,
            "certificate_section": certificate_section,
        }
