"""Kueue's fair-sharing reclaim on one cohort of ClusterQueues (the pinned Kueue's pkg/scheduler/preemption
``fairPreemptions``): a workload the cohort's quotas no longer cover preempts, from its own queue,
work of lower priority, and from other queues, work of those that borrow, as dominant resource
shares order them (``kueue_fair_targets``, pure; ``model.shares.kueue_drs``). Preemption is for quota: the
claimant is admitted and waits for a node; a workload is preempted at most once per prediction.

``reclaim`` is policy kueue's reclaim action (``Policy.actions``): on one cohort (flat projects) the
above; in nested cohorts the tiered reclaim (``model.reclaim``) with Kueue's choice of victims
(``model.victims``).

May import the standard library, ``model.data``, ``model.engine``, ``model.reclaim`` and
``model.shares``. Touches
nothing but the engine it is given.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence

from ansible_collections.clusterproof.gpu.plugins.module_utils.model import reclaim as tiered
from ansible_collections.clusterproof.gpu.plugins.module_utils.model.data import EPS, INF
from ansible_collections.clusterproof.gpu.plugins.module_utils.model.engine import Engine
from ansible_collections.clusterproof.gpu.plugins.module_utils.model.shares import kueue_drs


def reclaim(engine: Engine) -> bool:
    """One cohort: Kueue's fair sharing (``_one_cohort``); nested cohorts: the tiered reclaim."""
    if engine.flat:
        return _one_cohort(engine)
    return tiered.reclaim(engine)


def _one_cohort(engine: Engine) -> bool:
    """kueue, one cohort of ClusterQueues: each pending workload the cohort's quotas no longer
    cover, in submission order, preempts as Kueue's fair sharing does (``kueue_fair_targets``):
    from its own queue, work of lower priority; from other queues, work of those that borrow.
    Preemption is for quota: the claimant is admitted and waits its turn for a node."""
    changed = False
    tree, alloc, quota, weight, stamp = engine.tree, engine.alloc, engine.tree.quota, engine.tree.weight, engine.stamp
    lendable = engine.cohort_cap
    failed: set[tuple[int, int, bool]] = set()  # claims that found nothing since the last change
    # A workload is preempted at most once per prediction: claims across queues of different
    # priorities can otherwise chase each other for ever (the engine would not settle either).
    preempted = engine.kueue_preempted
    # The queues that borrow and hold work that may still be preempted, the highest share first:
    # (-flag, -share, queue, stamp), an entry whose stamp is no longer its queue's being stale.
    # Most claims find no queue above them: the top of the heap says so without a scan.
    targets: list[tuple[int, float, int, int]] = []
    pushed = [-1] * len(tree.projects)  # the stamp of each queue's live entry

    def push(q: int) -> None:
        if pushed[q] == stamp[q] or alloc[q] <= quota[q] + EPS:
            return
        if all(v in preempted for v in engine.leaf_running[q]) and all(v in preempted for v in engine.leaf_reserved[q]):
            return
        flag, value = kueue_drs(alloc[q] - quota[q], lendable, weight[q])
        pushed[q] = stamp[q]
        heapq.heappush(targets, (-flag, -value, q, stamp[q]))

    def live_top() -> tuple[int, float, int, int] | None:
        while targets:
            top = targets[0]
            if top[3] == stamp[top[2]]:
                return top
            heapq.heappop(targets)
            push(top[2])
        return None

    def queues_at_least(lowest: tuple[int, float], p: int) -> list[int]:
        """The queues but ``p`` whose share is at least ``lowest`` (the heap left as it was)."""
        taken: list[tuple[int, float, int, int]] = []
        found: list[int] = []
        while (top := live_top()) is not None and (-top[0], -top[1]) >= lowest:
            taken.append(heapq.heappop(targets))
            if top[2] != p:
                found.append(top[2])
        for entry in taken:
            heapq.heappush(targets, entry)
        return found

    for q in range(len(tree.projects)):
        push(q)
    for j in engine.pending_jobs():
        if j in engine.reserved or engine.place[j] is not None:
            continue  # admitted, or placed since the pass began (a waiting workload given the room)
        p, units, priority = engine.leaf[j], engine.units[j], engine.jobs[j].interactive
        if engine.within_limits(j):
            continue  # admitted: it waits for a node, preempting nothing (Kueue preempts for quota)
        if (p, units, priority) in failed:
            continue  # as the claim that just found nothing
        # The claimant's own candidates: work of lower priority (none below training).
        own = (
            [
                v
                for queued in (engine.leaf_running[p], engine.leaf_reserved[p])
                for v in queued
                if engine.jobs[v].interactive < priority and v not in preempted
            ]
            if priority
            else []
        )
        least = alloc[p] + units - sum(engine.units[v] for v in own)  # the queue's use, its own candidates gone
        if least > min(tree.limit[p], engine.cohort_cap) + EPS:
            failed.add((p, units, priority))
            continue  # more than the queue may hold even so
        # A queue whose share is below the claimant's, even once the claimant has given up all
        # its own candidates, never loses work to it (neither strategy): leave it out.
        lowest = kueue_drs(least - quota[p], lendable, weight[p])
        others = queues_at_least(lowest, p)
        theirs = [
            v
            for q in others
            for queued in (engine.leaf_running[q], engine.leaf_reserved[q])
            for v in queued
            if v not in preempted
        ]
        if not theirs and not own:
            failed.add((p, units, priority))
            continue
        # Kueue's order of candidates: other queues' before the claimant's own, lower priority
        # first, the most recently admitted first.
        newest_first = engine.admitted.__getitem__
        running = (
            sorted((v for v in theirs if not engine.jobs[v].interactive), key=newest_first, reverse=True)
            + sorted((v for v in theirs if engine.jobs[v].interactive), key=newest_first, reverse=True)
            + sorted(own, key=newest_first, reverse=True)
        )
        candidates = [(engine.leaf[v], engine.units[v]) for v in running]
        chosen = kueue_fair_targets(p, units, alloc, quota, weight, candidates, lendable, tree.limit[p])
        if chosen is None:
            failed.add((p, units, priority))
            continue
        victims = [running[i] for i in chosen]
        for v in victims:
            engine.kueue_evict(v)
        preempted.update(victims)
        # Kueue preempts for quota, whatever the nodes: the claimant is admitted, and its pods
        # join those admitted earlier that wait for a node; the room the victims leave goes to
        # the pods waiting longest (seeds 224, 226: a workload admitted before the claimant
        # takes the freed node, and the claimant waits).
        engine.reserve(j)
        engine.place_reserved()
        push(p)  # the victims' queues only fall: their entries are put right when they come up
        changed = True
        failed.clear()
    return changed


def kueue_fair_targets(
    claimant: int,
    request: float,
    usage: Sequence[float],
    nominal: Sequence[float],
    weight: Sequence[float],
    candidates: Sequence[tuple[int, float]],
    cohort_quota: float,
    claimant_limit: float = INF,
) -> list[int] | None:
    """Which ``candidates`` (queue, amount; in Kueue's candidate order) the pinned Kueue preempts so that
    queue ``claimant``'s workload of ``request`` is admitted, or None when fair sharing allows no
    such set: pkg/scheduler/preemption fairPreemptions on one cohort with one resource and no
    borrowing or lending limits (``cohort_quota``: the cohort's nominal quotas, all lendable) but the
    claimant's own (``claimant_limit``: what its queue may hold).

    Shares include the incoming workload. Strategy 1 (LessThanOrEqualToFinalShare): the queue with
    the highest share is targeted first; a candidate of it goes when the claimant's share is at most
    the target's share after the removal, then the target is chosen again; candidates that fail
    wait for strategy 2 (LessThanInitialShare): per queue, highest share first, one candidate goes
    when the claimant's share is below the target's share before. The claimant's own candidates go
    when its queue is the one with the highest share. Targets it turns out not to need are put back,
    the last taken first. Pure."""
    delta: dict[int, float] = {claimant: request}  # usage changed from ``usage``, by queue
    total = [sum(usage) + request]
    amounts = [amount for _, amount in candidates]

    def share(q: int) -> tuple[int, float]:
        return kueue_drs(usage[q] + delta.get(q, 0) - nominal[q], cohort_quota, weight[q])

    def move(q: int, amount: float) -> None:
        delta[q] = delta.get(q, 0) + amount
        total[0] += amount

    def fits() -> bool:
        # The cohort's quotas, and the claimant's own limit (its nominal quota + borrowing limit).
        return total[0] <= cohort_quota + EPS and usage[claimant] + delta[claimant] <= claimant_limit + EPS

    def ordering(indices: Iterable[int]) -> tuple[dict[int, list[int]], list[tuple[int, float, int, int]]]:
        """Candidates by queue (each list reversed: its next at the end), and a heap of the queues,
        the highest share first (ties: the queue whose next candidate comes first)."""
        queues: dict[int, list[int]] = {}
        for i in indices:
            queues.setdefault(candidates[i][0], []).append(i)
        for listed in queues.values():
            listed.reverse()
        return queues, [entry(q, queues) for q in queues]

    def entry(q: int, queues: dict[int, list[int]]) -> tuple[int, float, int, int]:
        flag, value = share(q)
        return (-flag, -value, queues[q][-1], q)

    def next_target(queues: dict[int, list[int]], heap: list[tuple[int, float, int, int]]) -> int | None:
        # Only a queue just taken from (or the claimant) changes its share; its entry is pushed
        # again then, so an entry that no longer matches its queue is stale.
        heapq.heapify(heap)
        while heap:
            popped = heapq.heappop(heap)
            q = popped[3]
            if not queues[q]:
                continue
            if popped != entry(q, queues):
                heapq.heappush(heap, entry(q, queues))
                continue
            if popped[:2] == (0, 0.0) and q != claimant:
                queues[q] = []  # pruned: a queue that does not borrow loses nothing
                continue
            return q
        return None

    targets: list[int] = []

    def take(i: int) -> None:
        move(candidates[i][0], -amounts[i])
        targets.append(i)

    def fill_back() -> list[int]:
        for k in range(len(targets) - 2, -1, -1):
            i = targets[k]
            move(candidates[i][0], amounts[i])
            if fits():
                targets[k] = targets[-1]
                targets.pop()
            else:
                move(candidates[i][0], -amounts[i])
        return sorted(targets)

    queues, heap = ordering(range(len(candidates)))
    retry: list[int] = []
    while (q := next_target(queues, heap)) is not None:
        if q == claimant:
            take(queues[q].pop())
            if fits():
                return fill_back()
        else:
            claimant_share = share(claimant)
            while queues[q]:
                i = queues[q].pop()
                move(q, -amounts[i])
                after = share(q)
                move(q, amounts[i])
                if claimant_share <= after:
                    take(i)
                    if fits():
                        return fill_back()
                    break
                retry.append(i)
        if queues[q]:
            heapq.heappush(heap, entry(q, queues))
    queues, heap = ordering(retry)
    while (q := next_target(queues, heap)) is not None:
        if share(claimant) < share(q):
            take(queues[q].pop())
            if fits():
                return fill_back()
        queues[q] = []  # strategy 2 takes at most one candidate per queue
    return None
