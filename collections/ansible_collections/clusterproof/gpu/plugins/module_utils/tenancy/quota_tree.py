"""Elastic quota trees (the Alibaba guide): declared in the inventory, checked, and mapped to a backend. Pure.

A tree's nodes have a ``min`` (guaranteed; given back by preemption when another node needs its own)
and a ``max`` (a cap) per resource: ``cpu`` in cores, ``memory`` in GiB, ``gpu`` in GPUs. Idle
capacity is borrowed up to ``max``. A namespace is attached to a leaf and is bound by every node on
its path from the root. The rules of the guide are checked before anything is installed:

- a parent is declared before its children; names are DNS labels, used once;
- per resource, ``min`` ≤ ``max``; the children's ``min`` add up to no more than their parent's
  ``min``; no child's ``max`` exceeds its parent's;
- namespaces are attached to leaves only, each namespace to one leaf.

How an engine represents the tree is the engine's (``Backend.tree_objects`` in ``scheduler/``: KAI's
queues under parent queues, Kueue's cohorts and ClusterQueues): the same mapping serves the
inventory's tree and a scenario's (``validate/scenario_runner.py``). A leaf's namespaces are
labelled with their leaf (``LEAF_LABEL``) for tools, admission policies and engines to read.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import isolation, names

SITE_VARIABLES = {
    "clusterproof_quota_tree": "an elastic quota tree: nodes with min/max per resource (cpu, memory, gpu), "
    "namespaces attached to leaves",
}
RESOURCES = ("cpu", "memory", "gpu")
NODE_FIELDS = ("name", "parent", "min", "max", "namespaces")
# The namespace label naming the leaf a namespace is attached to.
LEAF_LABEL = "clusterproof.io/quota-tree-leaf"
MANAGED_BY = {"app.kubernetes.io/managed-by": "clusterproof"}


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
        elif isinstance(amount, bool) or not isinstance(amount, (int, float)) or not 0 <= amount < math.inf:
            # NaN and infinity fail the comparison too: neither is an amount a scheduler can hold.
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
        if not isinstance(name, str) or not names.is_dns_label(name) or name in by_name:
            problems.append(TreeProblem(where, "name", "a DNS label no other tree node uses", name))
            continue
        parent = item.get("parent")
        if parent is not None and (not isinstance(parent, str) or parent not in by_name):
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
        if not isinstance(namespaces, list) or not all(names.is_dns_label(ns) for ns in namespaces):
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


def declared_resources(nodes: Iterable[TreeNode]) -> set[str]:
    return {resource for node in nodes for resource in (*node.min, *node.max)}


def namespace_manifest(namespace: str, leaf: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A leaf's namespace; ``labels``: what the engine adds (KAI's queue label)."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": namespace,
            "labels": {**MANAGED_BY, LEAF_LABEL: leaf, isolation.QUEUE_NAMESPACE_LABEL: leaf, **(labels or {})},
        },
    }


def children(node: TreeNode, nodes: Iterable[TreeNode]) -> list[TreeNode]:
    return [child for child in nodes if child.parent == node.name]


def parents(nodes: Iterable[TreeNode]) -> set[str]:
    """Names of the nodes that have children."""
    return {node.parent for node in nodes if node.parent}


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
