"""KAI's reclaim action: a pending job below its project's level takes running jobs of projects above
theirs, in two tiers (first the fair share, then the quota part of it: KAI's two reclaim strategies).

Entitled pending jobs claim in submission order; a claim tries the nodes of the best-ranked victims
(``model.victims``) and takes the first node where the claimant fits (``model.rules``); a gang's core
pods claim on any nodes at once. Nested Kueue cohorts reclaim this way too, with Kueue's choice of
victims (``model.fair_sharing``). An action of ``Policy.actions``.

May import the standard library, ``model.data``, ``model.engine`` and ``model.victims``. Touches
nothing but the engine it is given.
"""

from __future__ import annotations

from collections.abc import Iterator

from ansible_collections.clusterproof.gpu.plugins.module_utils.model.data import EPS
from ansible_collections.clusterproof.gpu.plugins.module_utils.model.engine import Engine
from ansible_collections.clusterproof.gpu.plugins.module_utils.model.victims import without_unneeded


def reclaim(engine: Engine) -> bool:
    """Entitled pending jobs, in submission order, preempt from projects above their level.

    runai has two tiers, as KAI: first a project below its fair share takes from projects above
    theirs; failing that, a project below its quota takes from projects above their quota.
    Either way no victim's project (nor an ancestor it does not share with the claimant) drops
    below the tier's level, so every reclaim shrinks what is owed and the loop ends.
    """
    changed = False
    engine.over_heaps = [engine.over_heap(level) for level in engine.tiers]
    # Within one pass victims only get scarcer for a given claimant project, so a claim that failed
    # fails again for as big a job of that project, unless preemption left idle room behind, or a
    # claim of an earlier tier lifted some project above a later tier's level (its quota).
    failed: dict[tuple[int, int, bool], tuple[int, tuple[int, int], int]] = {}
    successes = [0] * len(engine.tiers)
    alloc, start_units = engine.alloc, engine.start_units
    try:
        for j in engine.pending_jobs():
            if not any(engine.over_heaps):
                break
            if engine.gang_pods and engine.gang_blocked(j):
                continue
            if engine.policy.preempts_for_quota and engine.used + engine.start_units[j] <= engine.cohort_cap + EPS:
                # Kueue preempts for quota, not for room on the nodes: a workload its cohort's
                # quotas still cover is admitted and waits for the scheduler to find it a node.
                continue
            q = engine.leaf[j]
            for tier, level in enumerate(engine.tiers):
                if alloc[q] + start_units[j] > level[q] + EPS:
                    continue  # above the level once started (within_level's first test, inline: most fail it)
                if not engine.over_heaps[tier] or not engine.within_level(j, level):
                    continue
                if engine.in_core[j]:
                    if _claim_gang(engine, j, level):
                        successes[tier] += 1
                        changed = True
                        break
                    continue
                key = (tier, engine.leaf[j], bool(engine.whole[j]))
                room = (engine.free_whole, engine.room_total)
                lifted = sum(successes[:tier])
                # multi-resource: a job as big in GPUs may ask less CPU or memory, no memo
                known = None if engine.multi else failed.get(key)
                still = known is not None and _within(room, known[1]) and lifted == known[2]
                if still and engine.units[j] >= known[0]:  # type: ignore[index]
                    continue
                if _claim(engine, j, tier, level):
                    successes[tier] += 1
                    changed = True
                    break
                if not still or engine.units[j] < known[0]:  # type: ignore[index]
                    failed[key] = (engine.units[j], room, lifted)
    finally:
        engine.over_heaps = None
        engine.node_heaps = None
    return changed


def _claim(engine: Engine, j: int, tier: int, level: list[float]) -> bool:
    """Find victims for job ``j``: the nodes of the best-ranked victims first; the first that works."""
    if engine.node_heaps is None:
        engine.start_node_bounds()
    if engine.whole[j] and engine.best_node_bound(tier) < engine.whole[j]:
        return False  # no node could free enough whole GPUs even if every eligible job went
    claimant_path = set(engine.tree.path[engine.leaf[j]])
    leaves = engine.victim_leaves(tier, claimant_path, level)
    try:
        return _claim_from(engine, j, leaves, claimant_path, level, tier)
    finally:
        leaves.close()  # puts back what the lazy heap walk took out


def _claim_from(
    engine: Engine, j: int, leaves: Iterator[int], claimant_path: set[int], level: list[float], tier: int
) -> bool:
    visited: set[int] = set()
    g = engine.whole[j]
    for q in leaves:
        for v in sorted(engine.leaf_running[q], reverse=True):
            if not engine.preemptible[v]:
                continue
            n = engine.place[v][0]  # type: ignore[index]
            if n in visited:
                continue
            if g and engine.node_bound(tier, n) < g:
                visited.add(n)  # the bound does not move while this claim looks
                continue
            if not engine.eligible(v, {}, claimant_path, level):
                continue
            visited.add(n)
            candidates = [
                w
                for w in sorted(engine.node_jobs[n])
                if engine.preemptible[w]
                and engine.leaf[w] not in claimant_path
                and engine.eligible(w, {}, claimant_path, level)
            ]
            # A quick necessary test: could job j fit on node n if every candidate went?
            if not engine.gpus_fit(j, n, candidates):
                continue
            victims = engine.victims_on(j, n, candidates, claimant_path, level)
            if victims is None:
                continue
            engine.evict(victims)
            engine.place_on(j, n)
            return True
    return False


def _claim_gang(engine: Engine, j: int, level: list[float]) -> bool:
    """Find victims for the core pods of job ``j``'s gang, on any nodes: eligible jobs of the
    projects above ``level`` are taken in victim rank until every core pod fits (bin-packed as
    admission packs them), then those not needed are put back (KAI's solver adds victims until
    the whole job fits; a gang is one job there)."""
    core = [m for m in engine.gang_core[engine.gang[j]] if engine.place[m] is None]
    claimant_path = set(engine.tree.path[engine.leaf[j]])
    over = [
        q
        for q in range(len(engine.alloc))
        if not engine.tree.children[q] and engine.above(q, level) and q not in claimant_path
    ]
    left = [v for q in over for v in engine.leaf_running[q] if engine.preemptible[v]]
    chosen: list[int] = []
    removed: dict[int, int] = {}
    while not engine.gang_fits(core, chosen, removed):
        usable = [v for v in left if engine.eligible(v, removed, claimant_path, level)]
        if not usable:
            return False
        pick = min(usable, key=lambda v: engine.rank(v, removed, claimant_path, level))
        chosen.append(pick)
        going = set(engine.gang_mates(pick))
        left = [v for v in left if v not in going]
        removed = engine.removed_in(chosen)
    chosen = without_unneeded(chosen, lambda trial: engine.gang_fits(core, trial, engine.removed_in(trial)))
    engine.evict(chosen)
    started = engine.start_gang(j)
    assert started, "the gang's victims were chosen so that its core pods fit"
    return True


def _within(room: tuple[int, int], known: tuple[int, int]) -> bool:
    return room[0] <= known[0] and room[1] <= known[1]
