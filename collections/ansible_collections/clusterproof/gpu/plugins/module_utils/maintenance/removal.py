"""Which host a node's removal resets, in which role, and what it refuses: pure.

``plan_removal`` takes the node named (``-e node=NAME`` of playbooks/remove_node.yml), the checked
declaration (``clusterproof_site``), the cluster's node names and the hosts the removal may reach,
and returns what the playbook does, or raises ``RemovalError`` naming the field ``node``, what was
expected and what was found, before anything changes. May import: the standard library and
``install.kubeadm_config``. Touches nothing.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.install import kubeadm_config

CONTROL_PLANE = "control plane"
WORKER = "worker"
# A node's name is a DNS subdomain; an inventory host may be a name or an address.
_NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


class RemovalError(ValueError):
    """A removal refused before any change; the message names the field, the expectation and the value."""


@dataclasses.dataclass(frozen=True)
class RemovalPlan:
    """What remove_node.yml does for one node.

    ``node``: the Kubernetes node's name; ``host``: the inventory host kubeadm installed it on (its
    kubeadm reset and cleanup run there); ``role``: control plane or worker; ``in_cluster``: whether
    the cluster has the node (drained and deleted) or only the host is left (a join that failed
    half-way, a second run): then the host is reset alone; ``api_host``: the first control plane,
    where the drain, the deletion and, for a control plane the host of which is out of reach, the
    etcd member's removal run."""

    node: str
    host: str
    role: str
    in_cluster: bool
    api_host: str

    @property
    def control_plane(self) -> bool:
        return self.role == CONTROL_PLANE


def _node_names(site: Mapping[str, Any]) -> dict[str, str]:
    """{node name: inventory host} of the declared nodes (a node may be named apart from its host)."""
    return {str(node.get("name") or node["host"]): str(node["host"]) for node in site.get("nodes", [])}


def node_names(site: Mapping[str, Any]) -> list[dict[str, str]]:
    """Every host kubeadm installed with its node's name ({host, name}): a declared node's name, else
    the host's (control planes and workers without GPUs are named after their host)."""
    named = {host: name for name, host in _node_names(site).items()}
    return [
        {"host": entry["host"], "name": named.get(entry["host"], entry["host"])}
        for entry in kubeadm_config.host_groups(site)
    ]


def plan_removal(node: Any, site: Mapping[str, Any], cluster_nodes: Iterable[str]) -> RemovalPlan:
    """The removal of ``node`` from the kubeadm site ``site``, whose cluster has ``cluster_nodes``."""
    if not isinstance(node, str) or not node.strip():
        raise RemovalError("node: expected the name of the node to remove (-e node=NAME); found %r" % (node,))
    node = node.strip()
    if not _NODE_NAME.match(node):
        raise RemovalError("node: expected a node name (lower-case letters, digits, '-' and '.'); found %r" % node)
    groups = kubeadm_config.host_groups(site)
    if not groups:
        raise RemovalError(
            "node: remove_node.yml removes the hosts kubeadm installed (clusterproof_cluster_mode: kubeadm); "
            "this site's mode is %r: remove %s the way the cluster was made" % (site.get("cluster_mode"), node)
        )
    simulated = {str(n.get("name") or n["host"]) for n in site.get("nodes", []) if n.get("simulated")}
    if node in simulated:
        raise RemovalError(
            "node: %r is a simulated node (group simulated_gpu_nodes): take it out of the inventory and run "
            "the simulated_gpu_nodes stage, which removes the simulated nodes the inventory no longer declares" % node
        )
    host = _node_names(site).get(node, node)
    roles = {entry["host"]: entry["groups"] for entry in groups}
    first_control_plane = groups[0]["host"]
    in_cluster = node in set(cluster_nodes)
    if host not in roles:
        if in_cluster:
            raise RemovalError(
                "node: %r is a node of the cluster but no host of the inventory's kube_control_plane, gpu_nodes "
                "or kube_workers: remove_node.yml resets the host it removes, so it must be declared; put the "
                "host in the inventory (with how to reach it) and run again" % node
            )
        raise RemovalError(
            "node: expected a node of the cluster or a host of the inventory; %r is neither (the cluster's "
            "nodes: %s)" % (node, ", ".join(sorted(cluster_nodes)) or "none")
        )
    if host == first_control_plane:
        raise RemovalError(
            "node: %r is the first control plane (kube_control_plane's first host), where clusterproof runs "
            "kubeadm, the drain and the validation: put another control plane first in the inventory, run "
            "playbooks/cluster.yml, then remove this one" % node
        )
    role = CONTROL_PLANE if "clusterproof_kubeadm_control_plane_join" in roles[host] else WORKER
    return RemovalPlan(node=node, host=host, role=role, in_cluster=in_cluster, api_host=first_control_plane)


def pods_left(pods: Iterable[Mapping[str, Any]]) -> list[str]:
    """The pods a drain should have moved and did not (namespace/name): all but a DaemonSet's (which a
    drain leaves, and the pod garbage collector removes with the node), a static pod's mirror (which goes
    with kubeadm reset) and those already finished."""
    left = []
    for pod in pods:
        metadata = pod.get("metadata") or {}
        owners = metadata.get("ownerReferences") or []
        if any(owner.get("kind") == "DaemonSet" for owner in owners):
            continue
        if "kubernetes.io/config.mirror" in (metadata.get("annotations") or {}):
            continue
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        left.append("%s/%s" % (metadata.get("namespace", ""), metadata.get("name", "")))
    return sorted(left)
