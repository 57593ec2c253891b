"""Filters of the site's upkeep: a node's removal planned, the certificates' report section, etcd's backup.

They run on the controller, where the declaration (``clusterproof_site``) and every host's results
are; the logic is in module_utils/maintenance/.
"""

from __future__ import annotations

import dataclasses
import datetime
import json

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterproof.gpu.plugins.module_utils.maintenance import (
    certificates,
    disruption,
    etcd,
    removal,
    upgrade,
)
from ansible_collections.clusterproof.gpu.plugins.module_utils.report import model as report_model


def _plain(value):
    """Ansible's values as plain Python (its tagged strings are str subclasses)."""
    return json.loads(json.dumps(value))


def _project_names(site):
    return [project["name"] for project in _plain(site).get("projects") or []]


def project_work(pods, site):
    """The declared projects' pods by controller (k8s_info's resources), before an upgrade."""
    return disruption.running_work(_plain(pods or []), _project_names(site))


def drain_evicts(pods_on_node, site):
    """What a drain of a node takes from the declared projects (k8s_info's resources of its pods)."""
    return disruption.evicted_from(_plain(pods_on_node or []), _project_names(site))


def upgrade_drains(hostvars, plan):
    """Node name -> what its drain evicted, for each host of the plan drained in this run (the fact
    ``upgrade_evicted`` upgrade_host.yml notes before the drain)."""
    drains = {}
    for host, node in _plain(plan.get("nodes") or {}).items():
        evicted = (hostvars.get(host) or {}).get("upgrade_evicted")
        if evicted is not None:
            drains[node] = _plain(evicted)
    return drains


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
    return report_model.section_to_dict(section)


def _file_names(files):
    """File names from ansible.builtin.find's ``files`` (dicts with a path) or plain paths."""
    return [str(entry["path"] if isinstance(entry, dict) else entry).rsplit("/", 1)[-1] for entry in files or []]


def etcd_snapshot_prune(files, site, keep=7):
    """The files of ``site``'s snapshots beyond the newest ``keep`` (snapshots and their metadata)."""
    try:
        return etcd.to_prune(_file_names(files), str(site), _plain(keep))
    except etcd.EtcdError as error:
        raise AnsibleFilterError(str(error)) from error


def etcd_snapshot_choice(requested, files, site):
    """The snapshot file ``-e snapshot=`` means (``latest`` or a name) among ``files``, or an error naming
    the field ``snapshot`` and the snapshots there are."""
    try:
        return etcd.choose(_plain(requested), _file_names(files), str(site))
    except etcd.EtcdError as error:
        raise AnsibleFilterError("%s; nothing was changed" % error) from error


def etcd_restore_plan(metadata_text, snapshot_stat, members, site):
    """What playbooks/etcd_restore.yml restores: the snapshot's metadata and the restored cluster's
    --initial-cluster, or every refusal at once. ``snapshot_stat``: ansible.builtin.stat of the
    controller's snapshot file (with its sha256 checksum); ``members``: etcd_restore's ``member`` of
    every control plane."""
    try:
        metadata = etcd.Metadata.from_json(str(metadata_text), "the snapshot's metadata")
        found = [etcd.Member.from_dict(member) for member in _plain(members or [])]
    except (etcd.EtcdError, KeyError, TypeError) as error:
        raise AnsibleFilterError("%s; nothing was changed" % error) from error
    stat = _plain(snapshot_stat or {})
    if not stat.get("exists"):
        raise AnsibleFilterError("snapshot: expected the file %s; found none; nothing was changed" % metadata.name)
    refusals = etcd.restore_refusals(
        metadata, str(stat.get("checksum", "")), int(stat.get("size", -1)), found, str(site)
    )
    if refusals:
        raise AnsibleFilterError("; ".join(refusals) + "; nothing was changed")
    return {"metadata": metadata.to_dict(), "initial_cluster": etcd.initial_cluster(found)}


def etcd_backup_section(files, site, now, warn_hours=24, backup_dir="", skipped=""):
    """The report's etcd-backup section: the age of ``site``'s newest snapshot among ``files`` (in
    ``backup_dir``) at ``now`` (RFC 3339, UTC), a warning past ``warn_hours``."""
    hours = _plain(warn_hours)
    if isinstance(hours, bool) or not isinstance(hours, (int, float)) or hours <= 0:
        raise AnsibleFilterError(
            "clusterproof_etcd_backup_warn_hours: expected a number of hours above 0; found %r" % hours
        )
    try:
        when = datetime.datetime.strptime(str(now), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    except ValueError as error:
        raise AnsibleFilterError("etcd_backup_section: now: expected YYYY-MM-DDTHH:MM:SSZ; found %r" % now) from error
    section = etcd.age_section(_file_names(files), str(site), when, hours, str(backup_dir or ""), str(skipped or ""))
    return report_model.section_to_dict(section)


class FilterModule:
    def filters(self):
        return {
            "project_work": project_work,
            "drain_evicts": drain_evicts,
            "upgrade_drains": upgrade_drains,
            "node_removal_plan": node_removal_plan,
            "pods_left_after_drain": pods_left_after_drain,
            "upgrade_plan": upgrade_plan,
            "node_at_version": node_at_version,
            "certificate_section": certificate_section,
            "etcd_snapshot_prune": etcd_snapshot_prune,
            "etcd_snapshot_choice": etcd_snapshot_choice,
            "etcd_restore_plan": etcd_restore_plan,
            "etcd_backup_section": etcd_backup_section,
        }
