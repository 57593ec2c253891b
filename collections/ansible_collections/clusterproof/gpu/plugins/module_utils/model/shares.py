"""The division of shares, as KAI's proportion plugin divides them: per level of the project tree,
each project first deserves its quota (up to its demand), then what is left is split by over-quota
weight, capped by each project's limit and demand.

``divide`` walks the tree from the top down; at each level ``kai_over_quota`` splits the spare in
whole GPUs as the pinned KAI does (policy runai), ``water_fill`` in real numbers (kueue). Amounts in
units (``model.data``). ``kueue_drs`` is Kueue's dominant resource share of one ClusterQueue, by
which Kueue orders admission and preemption in a cohort.

May import the standard library, ``model.data`` and ``model.tree``. Touches nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ansible_collections.clusterproof.gpu.plugins.module_utils.model.data import EPS, UNITS_PER_GPU
from ansible_collections.clusterproof.gpu.plugins.module_utils.model.tree import Tree


def water_fill(amount: float, caps: Sequence[float], weights: Sequence[float]) -> list[float]:
    """Split ``amount`` in proportion to ``weights``, nobody above its cap; zero weights get nothing."""
    out = [0.0] * len(caps)
    order = [i for i in range(len(caps)) if weights[i] > 0 and caps[i] > 0]
    order.sort(key=lambda i: caps[i] / weights[i])
    remaining = float(amount)
    weight_left = sum(weights[i] for i in order)
    for position, i in enumerate(order):
        if remaining <= 0:
            break
        if caps[i] * weight_left <= remaining * weights[i]:
            out[i] = caps[i]
            remaining -= caps[i]
            weight_left -= weights[i]
            continue
        level = remaining / weight_left
        for rest in order[position:]:
            out[rest] = level * weights[rest]
        break
    return out


def kai_over_quota(
    amount: float, requests: Sequence[float], weights: Sequence[float], grain: int = UNITS_PER_GPU
) -> list[float]:
    """KAI's division of what is left once every queue has its quota (the pinned KAI's
    ``proportion/resource_division``): in rounds, each queue that still asks for more gets its
    share of the round's amount by over-quota weight: all it asks if that is no more than the share,
    else the share rounded down to whole GPUs, keeping the fraction it lost. A round that satisfied
    some queue is followed by another over what is left. Then the whole GPUs still left go one each
    to the queues with the largest lost fractions (ties: the older queue, which declaration order
    stands for). Amounts in units; ``requests`` are what each asks beyond its quota; ``grain`` the
    units of one whole GPU (CPU and memory are divided in their own units: millicores, MiB)."""
    extra = [0.0] * len(requests)
    asking = [float(request) for request in requests]
    lost: dict[int, float] = {}
    left = float(amount)
    while left > EPS:
        members = [i for i in range(len(asking)) if asking[i] > EPS and weights[i] > 0]
        weight_sum = sum(weights[i] for i in members)
        if not weight_sum:
            break
        round_amount = left
        another = False
        for i in members:
            if left <= EPS:
                break
            share = round_amount * weights[i] / weight_sum
            if asking[i] <= share + EPS:
                give = asking[i]
                lost.pop(i, None)
                another = True
            else:
                give = math.floor(share / grain + 1e-9) * grain
                if share - give > EPS:
                    lost[i] = share - give
            if give <= 0:
                continue
            extra[i] += give
            asking[i] -= give
            left -= give
        if not another:
            break
    for i in sorted(lost, key=lambda i: (-lost[i], i)):
        if left <= EPS:
            break
        give = min(float(grain), left)
        extra[i] += give
        left -= give
    return extra


def divide(tree: Tree, leaf_demand: Sequence[float], capacity: float, whole_units: bool = False) -> list[float]:
    """Hierarchical fair share in units: at each level quota first, then spare by weight.
    ``whole_units``: KAI's division (runai), else a water-fill in real numbers (kueue).

    A project asks for its demand up to its limit. KAI sums a parent's request from its
    children's whole requests, their limits aside (the pinned KAI's ``updateQueuesResourceUsageFor*``
    adds every pod to each queue up the tree; only a queue's own limit caps what it may ask):
    a department whose child is limited to 6 but asks 21 asks 21. Elsewhere a parent asks what
    its children may take."""
    count = len(tree.projects)
    demand = list(leaf_demand)
    asked = list(leaf_demand)  # KAI: uncapped, summed up the tree
    for i in tree.bottom_up():
        if tree.children[i]:
            asked[i] = sum(asked[c] for c in tree.children[i])
            demand[i] = asked[i] if whole_units else sum(demand[c] for c in tree.children[i])
        demand[i] = min(demand[i], tree.limit[i])
    share = [0.0] * count
    _split(tree, capacity, tree.top, demand, share, whole_units)
    stack = list(tree.top)
    while stack:
        i = stack.pop()
        if tree.children[i]:
            _split(tree, share[i], tree.children[i], demand, share, whole_units)
            stack.extend(tree.children[i])
    return share


def _split(
    tree: Tree, amount: float, members: list[int], demand: list[float], share: list[float], whole_units: bool
) -> None:
    base = [min(tree.quota[i], demand[i]) for i in members]
    if whole_units:
        # KAI: each queue deserves min(quota, demand) even when they add up to more than the
        # amount (quotas above capacity are not scaled down); the rest is divided in whole GPUs.
        extra = [0.0] * len(members)
        if sum(base) < amount:
            requests = [demand[i] - b for i, b in zip(members, base, strict=True)]
            extra = kai_over_quota(amount - sum(base), requests, [tree.weight[i] for i in members], tree.grain)
        for i, b, e in zip(members, base, extra, strict=True):
            share[i] = b + e
        return
    if sum(base) >= amount:
        parts = water_fill(amount, base, [tree.quota[i] for i in members])
    else:
        extra = water_fill(
            amount - sum(base),
            [demand[i] - b for i, b in zip(members, base, strict=True)],
            [tree.weight[i] for i in members],
        )
        parts = [b + e for b, e in zip(base, extra, strict=True)]
    for i, part in zip(members, parts, strict=True):
        share[i] = part


def kueue_drs(borrowed: float, lendable: float, weight: float) -> tuple[int, float]:
    """A ClusterQueue's dominant resource share as the pinned Kueue compares them (pkg/cache/scheduler
    fair_sharing.go: ``dominantResourceShare``, ``CompareDRS``): borrowed x 1000 / the cohort's
    lendable, over the fair-sharing weight. A queue of weight 0 that borrows ranks above every
    queue of weight above 0 (``zeroWeightBorrows``: its weighted share is infinite), and among
    such queues the unweighted ratio decides; a queue that does not borrow has a share of 0 at
    any weight. As a sortable pair: (1 for weight 0 and borrowing, else 0; the ratio)."""
    if borrowed <= 0 or lendable <= 0:
        return (0, 0.0)
    ratio = float(borrowed) * 1000.0 / float(lendable)
    return (1, ratio) if weight == 0 else (0, ratio / weight)
