"""The allocate actions: pending jobs start in idle capacity, evicting nothing.

``admit`` starts pending jobs in submission order, each within its level (fair share; elastic:
within ``max``) and the limit rules (``model.rules``); ``lend_idle`` then lends what fair shares
leave idle to the project furthest below its fair share (KAI's allocate action, as its queue order
goes). ``place_waiting`` (Kueue) puts workloads admitted by quota whose pods wait onto nodes that
have room now. Each is an action of ``Policy.actions``: it takes the engine and says whether it
changed anything.

May import the standard library, ``model.data`` and ``model.engine``. Touches nothing but the engine
it is given.
"""

from __future__ import annotations

import heapq
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.model.data import EPS, INF
from ansible_collections.clusterproof.gpu.plugins.module_utils.model.engine import Engine


def place_waiting(engine: Engine) -> bool:
    """kueue: the admitted workloads whose pods wait go to nodes that have room now, first admitted first."""
    return engine.place_reserved() if engine.reserved else False


def admission_order(engine: Engine) -> list[int]:
    """The pending jobs in the order they are admitted: submission order; kueue: a queue's
    higher-priority work (interactive) first, as a ClusterQueue orders its workloads."""
    pending = engine.pending_jobs()
    if not engine.policy.interactive_first:
        return pending
    pending = [j for j in pending if j not in engine.reserved]
    interactive = [j for j in pending if engine.jobs[j].interactive]
    return interactive + [j for j in pending if not engine.jobs[j].interactive]


def admit(engine: Engine) -> bool:
    """Start pending jobs in submission order (runai: within fair share; elastic: within max)."""
    changed = False
    fair = engine.policy.fair_share
    alloc, entitled, start_units = engine.alloc, engine.entitled, engine.start_units
    gangs = bool(engine.gang_pods)
    whole_fails = INF  # idle capacity only shrinks in this pass: remember the smallest misfit
    fraction_fails = INF
    reserves = engine.reserves
    for j in admission_order(engine):
        if not reserves and not engine.free_whole and not engine.partial_room:
            break
        g = engine.whole[j]
        if (g and g >= whole_fails) or (not g and engine.units[j] >= fraction_fails):
            continue
        if fair and alloc[engine.leaf[j]] + start_units[j] > entitled[engine.leaf[j]] + EPS:
            continue
        if not engine.may_start(j):
            continue
        if gangs and engine.in_core[j]:
            changed = engine.start_gang(j) or changed  # a gang that does not fit says nothing of one pod
        elif engine.try_place(j):
            changed = True
        elif engine.reserves:
            engine.reserve(j)  # Kueue admits by quota: its pods wait for a node
            changed = True
        elif g:
            whole_fails = g
        else:
            fraction_fails = engine.units[j]
    return changed


def lend_idle(engine: Engine) -> bool:
    """runai: lend what fair shares leave idle, to the project furthest below its fair share;
    in a tree, as KAI orders its queues (``JobsOrderByQueues``), first the department furthest
    below its fair share, then its project furthest below (the key is the gap at each level
    from the top down). Keys only grow as jobs start, so a popped entry whose key is stale goes
    back with its key as it is now (lazily: a department's start moves its children's keys)."""
    queues: dict[int, list[int]] = {}
    for j in admission_order(engine):
        queues.setdefault(engine.leaf[j], []).append(j)
    if not queues:
        return False
    alloc, entitled = engine.alloc, engine.entitled
    tree_order = engine.policy.lend_by_tree and not engine.flat
    if tree_order:
        top_down = {q: engine.tree.path[q][::-1] for q in queues}

        def gap(q: int) -> Any:
            """The key: the gap of each level from the top down."""
            return tuple([alloc[a] - entitled[a] for a in top_down[q]])
    else:

        def gap(q: int) -> Any:
            """The key: the project's gap."""
            return alloc[q] - entitled[q]

    heap = [(gap(q), q, 0) for q in queues]
    heapq.heapify(heap)
    changed = False
    whole_fails = INF
    fraction_fails = INF
    reserves = engine.reserves
    while heap:
        if not reserves and not engine.free_whole and not engine.partial_room:
            break
        key, q, position = heapq.heappop(heap)
        if tree_order and (now := gap(q)) != key:  # flat, only q's own start moves q's key
            heapq.heappush(heap, (now, q, position))
            continue
        jobs = queues[q]
        j = jobs[position]
        g = engine.whole[j]
        placed = False
        if not ((g and g >= whole_fails) or (not g and engine.units[j] >= fraction_fails)) and engine.may_start(j):
            placed = engine.start(j)
            if not placed and engine.reserves:
                engine.reserve(j)
                placed = True
            elif not placed and not engine.in_core[j]:
                if g:
                    whole_fails = g
                else:
                    fraction_fails = engine.units[j]
        changed = changed or placed
        if position + 1 < len(jobs):
            heapq.heappush(heap, (gap(q), q, position + 1))
    return changed
