"""A Kubernetes upgrade of a kubeadm site planned, and refused before any change: pure.

``plan_upgrade`` takes the version the inventory now declares (the target), what the cluster runs (the
API server's version, each node's kubelet version and Ready condition), the versions the site's package
source offers (``apt-cache madison kubeadm`` on the first control plane, ``madison_versions``) and the
verdict of the site's last validation, and returns the hosts to upgrade in kubeadm's order, or raises
``UpgradeError`` listing every refusal with the field, what was expected and what was found.

Kubernetes' version policy, as kubeadm enforces it: one minor at a time, never backwards; the control
plane first, then the kubelets, which may lag the API server by up to three minors. A host already at
the target is not touched again, which is how a re-run after an interruption continues where it stopped.
May import: the standard library and ``install.kubeadm_config``. Touches nothing.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.install import kubeadm_config
from ansible_collections.clusterproof.gpu.plugins.module_utils.maintenance import removal

FIELD = "clusterproof_kubernetes_version"
# How many minors a kubelet may lag the API server (Kubernetes' version skew policy since v1.28).
KUBELET_SKEW = 3
_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)")


class UpgradeError(ValueError):
    """An upgrade refused before any change; the message lists every reason."""


def parse_version(text: str) -> tuple[int, int, int]:
    """``v1.30.2`` (or ``1.30.2-1.1``, ``v1.30.2+k3s``) -> (1, 30, 2); ValueError for anything else."""
    match = _VERSION.match(str(text).strip())
    if not match:
        raise ValueError("expected a version v<major>.<minor>.<patch>; found %r" % (text,))
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def _v(version: tuple[int, int, int]) -> str:
    return "v%d.%d.%d" % version


@dataclasses.dataclass(frozen=True)
class NodeState:
    """A node as the API shows it: its name, its kubelet's version and whether it is Ready."""

    name: str
    kubelet: str
    ready: bool


def node_states(nodes: Iterable[Mapping[str, Any]]) -> list[NodeState]:
    """Node objects (kubernetes.core.k8s_info's ``resources``) -> their versions and readiness."""
    states = []
    for node in nodes:
        status = node.get("status") or {}
        conditions = status.get("conditions") or []
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        kubelet = (status.get("nodeInfo") or {}).get("kubeletVersion", "")
        states.append(NodeState(str((node.get("metadata") or {}).get("name", "")), str(kubelet), ready))
    return states


def madison_versions(text: str) -> list[str]:
    """``apt-cache madison kubeadm`` -> the package versions offered (``1.30.2-1.1``), as listed."""
    versions = []
    for line in text.splitlines():
        parts = [part.strip() for part in line.split("|")]
        if len(parts) >= 3 and parts[1]:
            versions.append(parts[1])
    return versions


@dataclasses.dataclass(frozen=True)
class UpgradePlan:
    """What playbooks/upgrade.yml does: ``apply`` (kubeadm upgrade apply on ``first_control_plane``,
    whose API server is older than the target), the other control planes and the workers whose
    kubelet is older than the target, in order (``control_planes``, ``workers``: inventory hosts),
    and the package version to install."""

    target: str
    current: str
    package_version: str
    apply: bool
    first_control_plane: str
    control_planes: tuple[str, ...]
    workers: tuple[str, ...]

    @property
    def nothing_to_do(self) -> bool:
        return not self.apply and not self.control_planes and not self.workers


def plan_upgrade(
    site: Mapping[str, Any],
    api_version: str,
    nodes: Sequence[NodeState],
    offered: Sequence[str],
    last_verdict: str | None,
    ignore_validation: bool = False,
) -> UpgradePlan:
    """The upgrade of ``site`` (mode kubeadm) to the version it declares; see the module."""
    groups = kubeadm_config.host_groups(site)
    if not groups:
        raise UpgradeError(
            "%s: upgrade.yml upgrades the clusters kubeadm installed (clusterproof_cluster_mode: kubeadm); this "
            "site's mode is %r; nothing was changed" % (FIELD, site.get("cluster_mode"))
        )
    settings = kubeadm_config.settings_of(site)
    refusals: list[str] = []
    target = parse_version(settings.version)
    try:
        current = parse_version(api_version)
    except ValueError as error:
        raise UpgradeError("the API server's version: %s; nothing was changed" % error) from error
    if target < current:
        refusals.append(
            "%s: expected %s or later (the API server runs it; Kubernetes is never downgraded); found %s"
            % (FIELD, _v(current), _v(target))
        )
    elif target[:2] > (current[0], current[1] + 1):
        refusals.append(
            "%s: expected v%d.%d.x or v%d.%d.x (one minor at a time from the API server's %s); found %s: upgrade to "
            "v%d.%d first"
            % (FIELD, *current[:2], current[0], current[1] + 1, _v(current), _v(target), current[0], current[1] + 1)
        )
    host_of_node = {entry["name"]: entry["host"] for entry in removal.node_names(site)}
    by_host = {host_of_node.get(node.name, node.name): node for node in nodes}
    for entry in groups:
        host = entry["host"]
        node = by_host.get(host)
        if node is None:
            refusals.append(
                "%s: expected a node of the cluster for every host kubeadm installed; it has none: join it first "
                "(playbooks/cluster.yml) or take it out of the inventory (playbooks/remove_node.yml)" % host
            )
            continue
        if not node.ready:
            refusals.append(
                "%s: expected every node Ready before an upgrade drains any; node %s is not Ready" % (host, node.name)
            )
        try:
            kubelet = parse_version(node.kubelet)
        except ValueError as error:
            refusals.append("%s: the kubelet's version: %s" % (host, error))
            continue
        if target[:2] > (kubelet[0], kubelet[1] + KUBELET_SKEW):
            refusals.append(
                "%s: expected a kubelet no more than %d minors older than %s; node %s runs %s: upgrade it one "
                "minor at a time first" % (host, KUBELET_SKEW, _v(target), node.name, node.kubelet)
            )
    package_version = settings.package_version
    if package_version not in offered:
        refusals.append(
            "%s: expected a version the site's package source offers (kubeadm %s); found %s, which it does not "
            "(the bundle carries the pinned version and the one before)"
            % (FIELD, ", ".join(offered) or "none", package_version)
        )
    if last_verdict == "fail" and not ignore_validation:
        refusals.append(
            "the last validation: expected a passing report before an upgrade (an upgrade is judged against it); "
            "found fail: make it pass, or run with -e clusterproof_upgrade_ignore_validation=true"
        )
    if refusals:
        raise UpgradeError("the upgrade is refused; nothing was changed:\n- " + "\n- ".join(refusals))
    first = groups[0]["host"]
    older = [entry["host"] for entry in groups if parse_version(by_host[entry["host"]].kubelet) < target]
    control_planes = [host for host in older if "clusterproof_kubeadm_worker_join" not in _groups(groups, host)]
    workers = [host for host in older if host not in control_planes]
    return UpgradePlan(
        target=_v(target),
        current=_v(current),
        package_version=package_version,
        apply=current < target,
        first_control_plane=first,
        control_planes=tuple(control_planes),
        workers=tuple(workers),
    )


def _groups(groups: Sequence[Mapping[str, Any]], host: str) -> list[str]:
    return next(entry["groups"] for entry in groups if entry["host"] == host)
