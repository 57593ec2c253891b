"""KAI's consolidation action: a pending whole-GPU job within its fair share that finds enough idle
GPUs in the cluster, but not on one node, gets a node emptied for it; the training jobs there move to
other nodes, none is evicted for good. An action of ``Policy.actions`` (policy runai).

May import the standard library, ``model.data`` and ``model.engine``. Touches nothing but the engine
it is given.
"""

from __future__ import annotations

import bisect
import heapq

from ansible_collections.clusterproof.gpu.plugins.module_utils.model.data import EPS, INF
from ansible_collections.clusterproof.gpu.plugins.module_utils.model.engine import Engine

# How many nodes (those with the most idle GPUs) the consolidation tries to empty for one job.
CONSOLIDATION_NODES = 32


def consolidate(engine: Engine) -> bool:
    """runai: KAI's consolidation action. A pending whole-GPU job within its fair share that
    finds enough idle GPUs in the cluster, but not on one node, gets a node emptied for it: the
    node needing the fewest GPUs moved (ties: node order), whose training jobs, fewest first,
    move to other nodes where they fit (largest first, each to the node with the fewest free
    GPUs that holds it, a fraction taking a whole GPU's room). Nothing is evicted for good."""
    changed = False
    failed_size = INF  # a node could not be emptied for this many GPUs: nor for more, until something moves
    for j in engine.pending_jobs():
        g = engine.whole[j]
        q = engine.leaf[j]
        if not g or g >= failed_size or engine.free_whole < g or engine.gang[j] >= 0:
            continue  # a gang's pods are not consolidated for (nor moved): not modelled
        if engine.alloc[q] + engine.units[j] > engine.entitled[q] + EPS or not engine.may_start(j):
            continue
        if engine.node_for_whole(g) >= 0:
            continue
        plan = _plan(engine, g)
        if plan is None:
            failed_size = g
            continue
        n, moves = plan
        for v, _ in moves:
            engine.release(v)
        engine.take_whole(j, n, g)
        for v, m in moves:
            if engine.whole[v]:
                engine.take_whole(v, m, engine.whole[v])
            else:
                engine.place_on(v, m)
        changed = True
        failed_size = INF
    return changed


def _plan(engine: Engine, g: int) -> tuple[int, list[tuple[int, int]]] | None:
    """The node to empty for a job of ``g`` whole GPUs and where each moved job goes: the
    first that works of the ``CONSOLIDATION_NODES`` nodes with the most idle GPUs (KAI's
    solver also tries a bounded number of scenarios; a site whose idle GPUs are spread over
    more nodes than that is left fragmented here, as it may be there)."""
    slots = sorted((free, m) for m, free in enumerate(engine.free) if free > 0)
    order = heapq.nsmallest(CONSOLIDATION_NODES, range(len(engine.node_size)), key=lambda n: (-engine.free[n], n))
    for n in order:
        if engine.node_size[n] < g:
            continue
        movable = sorted(
            (v for v in engine.node_jobs[n] if engine.preemptible[v] and engine.gang[v] < 0),
            key=lambda v: (max(engine.whole[v], 1), -v),
        )
        freed, movers = engine.free[n], []
        on_shared: dict[int, int] = {}
        for v in movable:
            if freed >= g:
                break
            movers.append(v)
            if engine.whole[v]:
                freed += engine.whole[v]
            else:
                gpu = engine.place[v][1][0]  # type: ignore[index]
                on_shared[gpu] = on_shared.get(gpu, 0) + engine.units[v]
                if on_shared[gpu] == engine.node_partial[n][gpu]:
                    freed += 1
        if freed < g:
            continue
        room = [slot for slot in slots if slot[1] != n]
        moves = []
        for v in sorted(movers, key=lambda v: (-max(engine.whole[v], 1), v)):
            need = max(engine.whole[v], 1)
            k = bisect.bisect_left(room, (need, -1))  # the node with the fewest free GPUs that holds it
            if k == len(room):
                break
            free, m = room.pop(k)
            if free > need:
                bisect.insort(room, (free - need, m))
            moves.append((v, m))
        else:
            return n, moves
    return None
