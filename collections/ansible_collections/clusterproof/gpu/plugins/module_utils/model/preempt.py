"""KAI's preempt action inside a project: a pending interactive job within its project's quota that
finds no room preempts its own project's training jobs (a build or inference job outranks training
in its queue). An action of ``Policy.actions`` (policy runai).

May import the standard library, ``model.data``, ``model.engine`` and ``model.victims``. Touches
nothing but the engine it is given.
"""

from __future__ import annotations

from ansible_collections.clusterproof.gpu.plugins.module_utils.model.data import EPS
from ansible_collections.clusterproof.gpu.plugins.module_utils.model.engine import Engine
from ansible_collections.clusterproof.gpu.plugins.module_utils.model.victims import without_unneeded


def preempt_within_projects(engine: Engine) -> bool:
    """runai: a pending interactive job within its project's quota that finds no room preempts
    its own project's training jobs (KAI's preempt action: a build or inference job outranks
    training in its queue). On each node it takes the project's training jobs there, the most
    recently submitted first, until it fits there and within its project's limits counted
    without them (KAI checks the preemptor's queue with its victims gone: a project at its
    limit makes room from its own work, differential seed 2 with --resources), then puts back
    those it did not need; the node where that evicts the least wins (ties: node order). The
    project holds no more than before (or its fair share)."""
    changed = False
    for j in engine.pending_jobs():
        if engine.preemptible[j] or engine.gang[j] >= 0 or not engine.interactive_ok(j):
            continue  # an interactive gang preempting its own project: not modelled
        q = engine.leaf[j]
        own = sorted((v for v in engine.leaf_running[q] if engine.preemptible[v] and engine.gang[v] < 0), reverse=True)
        if not own:
            continue
        by_node: dict[int, list[int]] = {}
        for v in own:
            by_node.setdefault(engine.place[v][0], []).append(v)  # type: ignore[index]
        best: tuple[int, int, list[int]] | None = None  # (units freed, node, victims)
        # Within its limits already, the job needs only GPUs (victims lower what the project holds).
        within = engine.within_limits(j)
        for n, candidates in sorted(by_node.items()):

            def fits(trial: list[int], j: int = j, n: int = n, within: bool = within) -> bool:
                if within:
                    return engine.gpus_fit(j, n, trial)
                return engine.fits_on(j, n, trial, engine.removed_in(trial))

            chosen: list[int] = []
            for v in candidates:
                if fits(chosen):
                    break
                chosen.append(v)
            if not chosen or not fits(chosen):
                continue
            chosen = without_unneeded(chosen, fits)
            freed = sum(engine.units[v] for v in chosen)
            if best is None or freed < best[0]:
                best = (freed, n, chosen)
        if best is None:
            continue
        freed, n, chosen = best
        if engine.alloc[q] - freed + engine.units[j] > max(engine.alloc[q], engine.entitled[q]) + EPS:
            continue
        for v in chosen:
            engine.release(v)
        engine.place_on(j, n)
        changed = True
    return changed
