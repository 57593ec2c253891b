"""Koordinator's scheduler (koord-scheduler) as clusterproof runs it on the sandbox. Pure.

Koordinator (github.com/koordinator-sh/koordinator, Alibaba's open-source scheduler) implements the
elastic quota tree of Alibaba's guide in its ElasticQuota plugin: a tree of ``ElasticQuota`` objects
(the scheduler-plugins CRD, ``scheduling.sigs.k8s.io/v1alpha1``) with a ``min`` and ``max`` each,
linked by labels: a child names its parent in ``quota.scheduling.koordinator.sh/parent`` and a node
with children says so in ``quota.scheduling.koordinator.sh/is-parent``. A node without a parent hangs
under Koordinator's own root quota, whose size is the cluster's allocatable resources.

A pod belongs to a quota by the ``quota.scheduling.koordinator.sh/name`` label, or else by its
namespace: a quota named like the namespace, or one whose ``quota.scheduling.koordinator.sh/namespaces``
annotation (a JSON list) names it. clusterproof keeps the whole tree in one namespace (``SYSTEM_NAMESPACE``,
where Koordinator creates its own root, system and default quotas too) and attaches the leaves'
namespaces with the annotation.

How the plugin shares capacity (pkg/scheduler/plugins/elasticquota at the pin,
``versions.KOORDINATOR``): each quota gets a *runtime* quota, recomputed as pods come and go: its
``min`` (or its request, if smaller), plus a share of what its parent has left, by shared weight
(``max`` unless annotated), never beyond its request capped at ``max``. A pod is admitted while its
quota's used stays within runtime. Reclaim is not done by the scheduler's preemption (the plugin's
PostFilter preempts only lower-priority pods of the preemptor's own quota) but by a revoke
controller that evicts pods of any quota whose used has stayed above its runtime for
``delayEvictTime``; it runs only with ``monitorAllQuotas`` on.

On the sandbox koord-scheduler runs as a local process with the sandbox kubeconfig, like KAI's
components; koord-manager (webhooks that validate and default quotas, and the colocation controllers)
is not run: clusterproof writes complete quotas, checked before by module_utils/tenancy/quota_tree.py.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.common.fields import PortAt
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox.control_plane import (
    LOOPBACK,
    Component,
    Layout,
    port_block,
)
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy.quota_tree import MANAGED_BY, TreeNode

SCHEDULER_NAME = "koord-scheduler"
# Koordinator creates its root, system and default quotas here at start; the tree lives here too.
SYSTEM_NAMESPACE = "koordinator-system"
QUOTA_API = ("scheduling.sigs.k8s.io", "v1alpha1", "elasticquotas")
_PREFIX = "quota.scheduling.koordinator.sh"
PARENT_LABEL = _PREFIX + "/parent"
IS_PARENT_LABEL = _PREFIX + "/is-parent"
# On a pod: the quota it belongs to (else its namespace decides).
QUOTA_NAME_LABEL = _PREFIX + "/name"
NAMESPACES_ANNOTATION = _PREFIX + "/namespaces"
# Koordinator's resource names for the tree's resources (cpu in cores, memory in GiB, gpu in GPUs).
_RESOURCE_NAMES = {"cpu": "cpu", "memory": "memory", "gpu": "nvidia.com/gpu"}
# A max the tree leaves open: Koordinator's own "unlimited" for its default quota (MaxInt64/5; a
# larger value overflows its status patch).
UNLIMITED = str((2**63 - 1) // 5)

PLUGIN = "ElasticQuota"
# Scheduler profile as Koordinator's own deployment configures it for quota (config/manager), less the
# plugins of Koordinator's node agent (LoadAwareScheduling reads NodeMetrics koordlet writes) and
# devices (DeviceShare, NodeNUMAResource), which the sandbox has no agent for.
_EXTENSION_POINTS = ("preFilter", "postFilter", "reserve")


@dataclasses.dataclass(frozen=True)
class ElasticQuotaSettings:
    """The ElasticQuota plugin's arguments clusterproof sets (ElasticQuotaArgs, v1beta3 names)."""

    # Seconds a quota's used may stay above its runtime before its pods are evicted (Koordinator's
    # default is 120; the guide's steps settle faster than that on the sandbox).
    delay_evict_seconds: int = 5
    # Evict pods of quotas over their runtime: the only way one quota takes back its min from another.
    monitor_all_quotas: bool = True
    # Admit a pod only if every quota on its path from the root stays within runtime, not just its
    # leaf: the guide binds a namespace by every node of its path.
    check_parent_quota: bool = True
    # Runtime quota (min plus a weighted share of idle capacity) rather than max for admission.
    runtime_quota: bool = True


def elastic_quota_args(settings: ElasticQuotaSettings) -> dict[str, Any]:
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "ElasticQuotaArgs",
        "quotaGroupNamespace": SYSTEM_NAMESPACE,
        "delayEvictTime": "%ds" % settings.delay_evict_seconds,
        "revokePodInterval": "1s",
        "monitorAllQuotas": settings.monitor_all_quotas,
        "enableCheckParentQuota": settings.check_parent_quota,
        "enableRuntimeQuota": settings.runtime_quota,
    }


def scheduler_config(kubeconfig: Path, settings: ElasticQuotaSettings) -> dict[str, Any]:
    """koord-scheduler's KubeSchedulerConfiguration: one profile, ``koord-scheduler``, with the
    ElasticQuota plugin where Koordinator's deployment enables it; no leader election (one process)."""
    plugins: dict[str, Any] = {point: {"enabled": [{"name": PLUGIN}]} for point in _EXTENSION_POINTS}
    # Koordinator's deployment runs the quota's PostFilter (same-quota preemption) before the default one.
    plugins["postFilter"] = {
        "disabled": [{"name": "*"}],
        "enabled": [{"name": PLUGIN}, {"name": "DefaultPreemption"}],
    }
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "profiles": [
            {
                "schedulerName": SCHEDULER_NAME,
                "plugins": plugins,
                "pluginConfig": [{"name": PLUGIN, "args": elastic_quota_args(settings)}],
            }
        ],
    }


def _quantity(resource: str, amount: float) -> str:
    if resource == "memory":
        return "%dMi" % round(amount * 1024)
    if resource == "cpu" and not float(amount).is_integer():
        return "%dm" % round(amount * 1000)
    return str(int(amount)) if float(amount).is_integer() else str(amount)


def _resources(amounts: dict[str, float], declared: Iterable[str], missing: str | None) -> dict[str, str]:
    out = {}
    for resource in sorted(declared):
        if resource in amounts:
            out[_RESOURCE_NAMES[resource]] = _quantity(resource, amounts[resource])
        elif missing is not None:
            out[_RESOURCE_NAMES[resource]] = missing
    return out


def elastic_quota(node: TreeNode, is_parent: bool, declared: Iterable[str]) -> dict[str, Any]:
    """The ElasticQuota of one tree node. Every resource the tree declares is given a min (0 unless
    declared) and a max (``UNLIMITED`` unless declared), so that no dimension is left to defaults."""
    declared = list(declared)
    labels = {**MANAGED_BY, IS_PARENT_LABEL: "true" if is_parent else "false"}
    if node.parent:
        labels[PARENT_LABEL] = node.parent
    metadata: dict[str, Any] = {"name": node.name, "namespace": SYSTEM_NAMESPACE, "labels": labels}
    if node.namespaces:
        metadata["annotations"] = {NAMESPACES_ANNOTATION: json.dumps(list(node.namespaces))}
    return {
        "apiVersion": "/".join(QUOTA_API[:2]),
        "kind": "ElasticQuota",
        "metadata": metadata,
        "spec": {
            "min": _resources(node.min, declared, "0"),
            "max": _resources(node.max, declared, UNLIMITED),
        },
    }


def tree_manifests(nodes: Iterable[TreeNode]) -> list[dict[str, Any]]:
    """The tree's ElasticQuotas, parents first (Koordinator ignores a child whose parent is unknown)."""
    nodes = list(nodes)
    parents = {node.parent for node in nodes if node.parent}
    declared = {resource for node in nodes for resource in (*node.min, *node.max)}
    return [elastic_quota(node, node.name in parents, declared) for node in nodes]


def runtime_quotas(
    nodes: Iterable[TreeNode], leaf_requests: Mapping[str, float], total: float, resource: str = "cpu"
) -> dict[str, float]:
    """Each node's runtime quota of ``resource`` as the pinned Koordinator computes it (elasticquota/core,
    runtime_quota_calculator.go), for the leaves' requests (their pods', pending ones included) on a
    cluster of ``total``; the model the sandbox is checked against.

    A node requests its pods' (a parent: its children's) request capped at its max. Among siblings,
    one requesting no more than its min gets its request (what it does not use is lent); the others
    get their min, then share what the parent has left by shared weight (max), each up to its
    request, iterating until nothing is left or all are served. The tree's roots share ``total``."""
    nodes = list(nodes)
    children: dict[str | None, list[TreeNode]] = {}
    for node in nodes:
        children.setdefault(node.parent, []).append(node)
    request: dict[str, float] = {}

    def limited_request(node: TreeNode) -> float:
        below = children.get(node.name)
        wanted = sum(limited_request(child) for child in below) if below else leaf_requests.get(node.name, 0.0)
        request[node.name] = min(wanted, node.max.get(resource, float("inf")))
        return request[node.name]

    for root in children.get(None, []):
        limited_request(root)
    runtime: dict[str, float] = {}

    def share(siblings: list[TreeNode], available: float) -> None:
        hungry = []
        for node in siblings:
            minimum = node.min.get(resource, 0.0)
            runtime[node.name] = minimum if request[node.name] > minimum else request[node.name]
            if request[node.name] > minimum:
                hungry.append(node)
            available -= runtime[node.name]
        while available > 0 and hungry:
            weight = sum(node.max.get(resource, 0.0) for node in hungry)
            if weight <= 0:
                break
            left, still_hungry = 0.0, []
            for node in hungry:
                runtime[node.name] += node.max.get(resource, 0.0) * available / weight
                if runtime[node.name] < request[node.name]:
                    still_hungry.append(node)
                else:
                    left += runtime[node.name] - request[node.name]
                    runtime[node.name] = request[node.name]
            available, hungry = left, still_hungry
        for node in siblings:
            if node.name in children:
                share(children[node.name], runtime[node.name])

    share(children.get(None, []), total)
    return runtime


def pod_labels(leaf: str) -> dict[str, str]:
    """Labels that put a pod in ``leaf``'s quota whatever its namespace."""
    return {QUOTA_NAME_LABEL: leaf}


def system_objects() -> list[dict[str, Any]]:
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NAMESPACE}}]


@dataclasses.dataclass(frozen=True)
class KoordinatorPorts:
    """Loopback ports of koord-scheduler on the sandbox (its block of ``control_plane.PORT_TABLE``)."""

    base: int

    secure = PortAt(port_block("koordinator"), 0)
    # Koordinator's scheduler still serves the deprecated plain-HTTP health port (on 0.0.0.0:10251
    # unless told otherwise), so it is pinned to loopback too.
    healthz = PortAt(port_block("koordinator"), 1)


def quota_url(ports: KoordinatorPorts, name: str) -> str:
    """Where koord-scheduler answers with its own view of quota ``name`` (JSON: parentName, min, max,
    request, used, runtime), on the loopback health port; 404 until it has taken the quota in."""
    return "http://%s:%d/apis/v1/plugins/%s/quotas/%s" % (LOOPBACK, ports.healthz, PLUGIN, name)


def components(layout: Layout, bin_dir: Path, ports: KoordinatorPorts, config_path: Path) -> list[Component]:
    """koord-scheduler on the sandbox. Pure."""
    return [
        Component(
            SCHEDULER_NAME,
            (
                str(bin_dir / SCHEDULER_NAME),
                "--config=%s" % config_path,
                "--bind-address=%s" % LOOPBACK,
                "--secure-port=%d" % ports.secure,
                "--address=%s" % LOOPBACK,
                "--port=%d" % ports.healthz,
                "--cert-dir=%s" % (layout.root / "pki" / "koord-scheduler-generated"),
                "--authentication-skip-lookup=true",
            ),
            "http://%s:%d/healthz" % (LOOPBACK, ports.healthz),
            # Its plugins' HTTP API is built on gin, which otherwise logs in debug mode.
            env=(("GIN_MODE", "release"),),
        )
    ]
