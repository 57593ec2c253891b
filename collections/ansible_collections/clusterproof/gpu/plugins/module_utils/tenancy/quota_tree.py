"""Elastic quota trees (the Alibaba guide): declared in the inventory, checked, and mapped to a backend. Pure.

A tree's nodes have a ``min`` (guaranteed; given back by preemption when another node needs its own)
and a ``max`` (a cap) per resource: ``cpu`` in cores, ``memory`` in GiB, ``gpu`` in GPUs. Idle
capacity is borrowed up to ``max``. A namespace is attached to a leaf and is bound by every node on
its path from the root. The rules of the guide are checked before anything is installed:

- a parent is declared before its children; names are DNS labels, used once;
- per resource, ``min`` ≤ ``max``; the children's ``min`` add up to no more than their parent's
  ``min``; no child's ``max`` exceeds its parent's;
- namespaces are attached to leaves only, each namespace to one leaf.

KAI scheduler maps the tree to queues under their parent queues (quota = min, limit = max, over-quota
weight = min, CPU in millicpus, memory in megabytes); a pod goes to its leaf's queue by the
``kai.scheduler/queue`` label (KAI v0.12 has no namespace default), so the leaf's namespaces are
labelled with their leaf for tools and admission policies to read. Kueue maps it to cohorts
(module_utils/scheduler/kueue.py).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import kai

SITE_VARIABLES = {
    "clusterproof_quota_tree": "an elastic quota tree: nodes with min/max per resource (cpu, memory, gpu), "
    "namespaces attached to leaves",
}
RESOURCES = ("cpu", "memory", "gpu")
NODE_FIELDS = ("name", "parent", "min", "max", "namespaces")
# The namespace label naming the leaf a namespace is attached to.
LEAF_LABEL = "clusterproof.io/quota-tree-leaf"
MANAGED_BY = {"app.kubernetes.io/managed-by": "clusterproof"}
# KAI's units: CPU in millicpus, memory in megabytes (10^6 bytes).
_KAI_SCALE = {"cpu": 1000.0, "memory": 1024**3 / 10**6, "gpu": 1.0}
_KAI_NAMES = {"cpu": "cpu", "memory": "memory", "gpu": "gpu"}
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@dataclasses.dataclass(frozen=True)
class TreeNode:
    name: str
    parent: str | None
    min: dict[str, float]
    max: dict[str, float]
    namespaces: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class TreeProblem:
    where: str
    field: str
    expected: str
    found: Any


def _amounts(where: str, field: str, value: Any, problems: list[TreeProblem]) -> dict[str, float]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        problems.append(TreeProblem(where, field, "a mapping of resource (%s) to amount" % ", ".join(RESOURCES), value))
        return {}
    amounts = {}
    for resource, amount in value.items():
        if resource not in RESOURCES:
            problems.append(
                TreeProblem(
                    where, "%s.%s" % (field, resource), "one of %s" % ", ".join(RESOURCES), "an unknown resource"
                )
            )
        elif isinstance(amount, bool) or not isinstance(amount, (int, float)) or amount < 0:
            problems.append(TreeProblem(where, "%s.%s" % (field, resource), "a non-negative number", amount))
        else:
            amounts[str(resource)] = float(amount)
    return amounts


def check_tree(data: Any) -> tuple[list[TreeNode], list[TreeProblem]]:
    """The declared tree, checked against the guide's rules; every problem names node and field."""
    if data is None:
        return [], []
    where_all = "clusterproof_quota_tree"
    if not isinstance(data, list):
        return [], [TreeProblem("group all", where_all, "a list of tree nodes (%s)" % ", ".join(NODE_FIELDS), data)]
    problems: list[TreeProblem] = []
    nodes: list[TreeNode] = []
    by_name: dict[str, TreeNode] = {}
    namespace_leaf: dict[str, str] = {}
    for index, item in enumerate(data):
        where = "%s[%d]" % (where_all, index)
        if not isinstance(item, Mapping):
            problems.append(TreeProblem(where, "node", "a mapping with %s" % ", ".join(NODE_FIELDS), item))
            continue
        name = item.get("name")
        if isinstance(name, str):
            where = "quota tree node %s" % name
        for key in sorted(set(item) - set(NODE_FIELDS), key=str):
            problems.append(TreeProblem(where, str(key), "one of %s" % ", ".join(NODE_FIELDS), "an unknown field"))
        if not isinstance(name, str) or not _DNS_LABEL.match(name) or name in by_name:
            problems.append(TreeProblem(where, "name", "a DNS label no other tree node uses", name))
            continue
        parent = item.get("parent")
        if parent is not None and parent not in by_name:
            declared = ", ".join(by_name) or "none yet"
            problems.append(TreeProblem(where, "parent", "a node declared before it (%s)" % declared, parent))
            continue
        minimum = _amounts(where, "min", item.get("min"), problems)
        maximum = _amounts(where, "max", item.get("max"), problems)
        for resource, amount in minimum.items():
            if resource in maximum and maximum[resource] < amount:
                problems.append(
                    TreeProblem(
                        where, "max.%s" % resource, "at least min.%s (%g)" % (resource, amount), maximum[resource]
                    )
                )
        namespaces = item.get("namespaces") or []
        if not isinstance(namespaces, list) or not all(
            isinstance(ns, str) and _DNS_LABEL.match(ns) for ns in namespaces
        ):
            problems.append(TreeProblem(where, "namespaces", "a list of namespace names (DNS labels)", namespaces))
            namespaces = []
        for namespace in namespaces:
            if namespace in namespace_leaf:
                problems.append(
                    TreeProblem(
                        where,
                        "namespaces",
                        "namespaces no other leaf has (%s is %s's)" % (namespace, namespace_leaf[namespace]),
                        namespace,
                    )
                )
            namespace_leaf[namespace] = name
        node = TreeNode(name, parent, minimum, maximum, tuple(namespaces))
        by_name[name] = node
        nodes.append(node)
    problems += _check_against_parents(nodes, by_name)
    return nodes, problems


def _check_against_parents(nodes: list[TreeNode], by_name: Mapping[str, TreeNode]) -> list[TreeProblem]:
    problems = []
    parents = {node.parent for node in nodes if node.parent}
    for node in nodes:
        where = "quota tree node %s" % node.name
        if node.name in parents and node.namespaces:
            expected = "no namespaces: namespaces attach to leaves, and %s has children" % node.name
            problems.append(TreeProblem(where, "namespaces", expected, list(node.namespaces)))
        if node.parent is None:
            continue
        parent = by_name[node.parent]
        for resource, amount in node.max.items():
            if resource in parent.max and amount > parent.max[resource]:
                expected = "at most its parent %s's max.%s (%g)" % (parent.name, resource, parent.max[resource])
                problems.append(TreeProblem(where, "max.%s" % resource, expected, amount))
    for parent in (node for node in nodes if node.name in parents):
        children = [node for node in nodes if node.parent == parent.name]
        for resource in RESOURCES:
            total = sum(child.min.get(resource, 0.0) for child in children)
            if total > parent.min.get(resource, 0.0) + 1e-9:
                expected = "children's min.%s adding up to at most %s's min.%s (%g)" % (
                    resource,
                    parent.name,
                    resource,
                    parent.min.get(resource, 0.0),
                )
                problems.append(
                    TreeProblem("quota tree node %s" % parent.name, "min.%s" % resource, expected, "%g" % total)
                )
    return problems


def leaves(nodes: Iterable[TreeNode]) -> list[TreeNode]:
    nodes = list(nodes)
    parents = {node.parent for node in nodes if node.parent}
    return [node for node in nodes if node.name not in parents]


def from_dicts(data: Iterable[Mapping[str, Any]]) -> list[TreeNode]:
    """The checked tree back from its plain form (``clusterproof_site.quota_tree``)."""
    return [
        TreeNode(
            str(item["name"]),
            item.get("parent"),
            {str(k): float(v) for k, v in (item.get("min") or {}).items()},
            {str(k): float(v) for k, v in (item.get("max") or {}).items()},
            tuple(item.get("namespaces") or ()),
        )
        for item in data
    ]


def _kai_number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else round(float(value), 3)


def kai_queue(node: TreeNode, declared: Iterable[str]) -> dict[str, Any]:
    """The KAI Queue of one tree node. A resource the tree declares nowhere is left unlimited; one
    it declares elsewhere is guaranteed nothing here unless this node's min says so."""
    resources: dict[str, Any] = {}
    for resource in RESOURCES:
        name = _KAI_NAMES[resource]
        if resource not in declared:
            resources[name] = {"quota": -1, "overQuotaWeight": 1, "limit": -1}
            continue
        scale = _KAI_SCALE[resource]
        minimum = node.min.get(resource, 0.0)
        maximum = node.max.get(resource)
        resources[name] = {
            "quota": _kai_number(minimum * scale),
            "overQuotaWeight": _kai_number(minimum),
            "limit": -1 if maximum is None else _kai_number(maximum * scale),
        }
    manifest = kai.queue_manifest(node.name, 0, 0, None, node.parent)
    manifest["spec"]["resources"] = resources
    manifest["metadata"]["labels"] = dict(MANAGED_BY)
    return manifest


def declared_resources(nodes: Iterable[TreeNode]) -> set[str]:
    return {resource for node in nodes for resource in (*node.min, *node.max)}


def namespace_manifest(namespace: str, leaf: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": namespace, "labels": {**MANAGED_BY, LEAF_LABEL: leaf, kai.QUEUE_LABEL: leaf}},
    }


def kai_manifests(nodes: Iterable[TreeNode]) -> list[dict[str, Any]]:
    """Queues, parents first, then the leaves' namespaces."""
    nodes = list(nodes)
    declared = declared_resources(nodes)
    manifests = [kai_queue(node, declared) for node in nodes]
    manifests += [namespace_manifest(namespace, node.name) for node in nodes for namespace in node.namespaces]
    return manifests


def _fmt(value: float | None) -> str:
    if value is None:
        return "—"
    return ("%.2f" % value).rstrip("0").rstrip(".")


def dashboard_rows(nodes: Iterable[TreeNode], used: Mapping[str, Mapping[str, float]]) -> list[list[str]]:
    """The Alibaba quota dashboard: per node and resource, its namespaces, max, min and used."""
    nodes = list(nodes)
    declared = declared_resources(nodes)
    depth: dict[str, int] = {}
    rows = []
    for node in nodes:
        depth[node.name] = 0 if node.parent is None else depth[node.parent] + 1
        for resource in RESOURCES:
            if resource not in declared:
                continue
            rows.append(
                [
                    "  " * depth[node.name] + node.name,
                    ", ".join(node.namespaces) or "—",
                    resource,
                    _fmt(node.max.get(resource)),
                    _fmt(node.min.get(resource, 0.0)),
                    _fmt((used.get(node.name) or {}).get(resource, 0.0)),
                ]
            )
    return rows


def used_by_pods(
    nodes: Iterable[TreeNode], pods_by_namespace: Mapping[str, Iterable[Mapping[str, float]]]
) -> dict[str, dict[str, float]]:
    """What each node holds: its leaves' running pods' requests (cpu cores, memory GiB, GPUs),
    summed up the tree. Engine-independent: read from pods, not from a scheduler's status."""
    nodes = list(nodes)
    parent_of = {node.name: node.parent for node in nodes}
    used: dict[str, dict[str, float]] = {node.name: {} for node in nodes}
    for node in nodes:
        for namespace in node.namespaces:
            for pod in pods_by_namespace.get(namespace, ()):
                holder: str | None = node.name
                while holder is not None:
                    for resource, amount in pod.items():
                        used[holder][resource] = used[holder].get(resource, 0.0) + amount
                    holder = parent_of[holder]
    return used


def kai_configured(node: TreeNode, queue: Mapping[str, Any] | None, declared: Iterable[str]) -> str | None:
    """None when the queue is as the tree declares it, else what differs (a sentence)."""
    if queue is None:
        return "no KAI queue %s" % node.name
    want = kai_queue(node, declared)["spec"]
    have = queue.get("spec") or {}
    differences = []
    if have.get("parentQueue") != want.get("parentQueue"):
        differences.append("parent %s, not %s" % (have.get("parentQueue"), want.get("parentQueue")))
    for name, values in want["resources"].items():
        got = (have.get("resources") or {}).get(name) or {}
        for key, value in values.items():
            if float(got.get(key, -2)) != float(value):
                differences.append("%s.%s %s, not %s" % (name, key, got.get(key), value))
    return "; ".join(differences) or None


# Kueue: inner nodes are Cohorts under their parent, leaves ClusterQueues in their parent cohort.
_KUEUE_NAMES = {"cpu": "cpu", "memory": "memory", "gpu": "nvidia.com/gpu"}


def _kueue_quantity(resource: str, amount: float) -> str:
    from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import kueue

    if resource == "memory":
        return "%dMi" % round(amount * 1024)
    return kueue.quantity(amount)


def _kueue_groups(
    node: TreeNode, declared: Iterable[str], own_min: Mapping[str, float], top: bool
) -> list[dict[str, Any]]:
    from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import kueue

    covered = [resource for resource in RESOURCES if resource in declared]
    resources = []
    for resource in covered:
        quota: dict[str, Any] = {
            "name": _KUEUE_NAMES[resource],
            "nominalQuota": _kueue_quantity(resource, own_min.get(resource, 0.0)),
        }
        if not top and resource in node.max:
            # Kueue bounds what a subtree takes from its parent beyond its own quota.
            quota["borrowingLimit"] = _kueue_quantity(resource, node.max[resource] - node.min.get(resource, 0.0))
        resources.append(quota)
    return [
        {
            "coveredResources": [_KUEUE_NAMES[resource] for resource in covered],
            "flavors": [{"name": kueue.FLAVOR, "resources": resources}],
        }
    ]


def kueue_manifests(nodes: Iterable[TreeNode]) -> list[dict[str, Any]]:
    """The tree on Kueue, parents first: a Cohort per inner node (its own nominal quota = its min less
    its children's; borrowing limit = max − min), a ClusterQueue per leaf in its parent cohort
    (nominal = min, borrowing limit = max − min; admitting the leaf's namespaces), and each leaf
    namespace with a LocalQueue named after the leaf."""
    from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import kueue

    nodes = list(nodes)
    declared = declared_resources(nodes)
    parents = {node.parent for node in nodes if node.parent}
    manifests: list[dict[str, Any]] = []
    for node in nodes:
        if node.name in parents:
            children = [child for child in nodes if child.parent == node.name]
            own = {
                resource: max(node.min.get(resource, 0.0) - sum(c.min.get(resource, 0.0) for c in children), 0.0)
                for resource in declared
            }
            spec: dict[str, Any] = {"resourceGroups": _kueue_groups(node, declared, own, node.parent is None)}
            if node.parent:
                spec["parentName"] = node.parent
            manifests.append(
                {
                    "apiVersion": kueue.API_VERSION,
                    "kind": "Cohort",
                    "metadata": {"name": node.name, "labels": dict(MANAGED_BY)},
                    "spec": spec,
                }
            )
            continue
        manifests.append(
            {
                "apiVersion": kueue.API_VERSION,
                "kind": "ClusterQueue",
                "metadata": {"name": node.name, "labels": dict(MANAGED_BY)},
                "spec": {
                    **({"cohortName": node.parent} if node.parent else {}),
                    "namespaceSelector": {"matchLabels": {LEAF_LABEL: node.name}},
                    "queueingStrategy": "BestEffortFIFO",
                    "resourceGroups": _kueue_groups(node, declared, node.min, node.parent is None),
                    "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
                },
            }
        )
    for node in nodes:
        for namespace in node.namespaces:
            manifests.append(
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {"name": namespace, "labels": {**MANAGED_BY, LEAF_LABEL: node.name}},
                }
            )
            manifests.append(
                {
                    "apiVersion": kueue.API_VERSION,
                    "kind": "LocalQueue",
                    "metadata": {"name": node.name, "namespace": namespace, "labels": dict(MANAGED_BY)},
                    "spec": {"clusterQueue": node.name},
                }
            )
    return manifests


def kueue_configured(node: TreeNode, found: Mapping[str, Any] | None, wanted: Mapping[str, Any]) -> str | None:
    """None when the node's Cohort or ClusterQueue is as the tree declares it, else what differs."""
    if found is None:
        return "no Kueue %s %s" % (wanted["kind"], node.name)
    from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube

    have = found.get("spec") or {}
    differences = []
    for key in ("parentName", "cohortName"):
        if wanted["spec"].get(key) != have.get(key):
            differences.append("%s %s, not %s" % (key, have.get(key), wanted["spec"].get(key)))
    if not kube.is_subset(wanted["spec"]["resourceGroups"], have.get("resourceGroups")):
        differences.append("resourceGroups differ from the declared min/max")
    return "; ".join(differences) or None
