"""Victim ranking: which running jobs a claimant may take, in which order, and the indexes that keep
the search for them short.

A victim is a running preemptible job of another project such that every project on its path that
the claimant does not share may lose it (``_losable``: KAI and Kueue ask that the project be above
the level before the job goes, elastic that it stay at or above it after; KAI also takes from a
queue above its level in any of CPU and memory). Victims rank by the tree from the top down, the
most over-level project first (``_leaf_rank``; ties as the policy breaks them: KAI the queue
declared last, Kueue the queue with the most recently admitted workload, elastic declaration
order), then the most recently submitted job first (``rank``). On a node, ``victims_on`` takes
eligible victims in rank order, preferring one whose removal lets the claimant fit, then puts back
those it turns out not to need (``without_unneeded``).

While reclaim runs, leaf projects above each level wait in lazy heaps (``over_heap``), and per node
an upper bound on the whole GPUs reclaim could free there in another (``start_node_bounds``);
``note_alloc``, called as jobs move, keeps both current.

``Victims`` adds these to the limit rules (``model.rules``); it moves no job. May import the
standard library, ``model.data`` and ``model.rules``. Touches nothing.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Generator

from ansible_collections.clusterproof.gpu.plugins.module_utils.model.data import EPS
from ansible_collections.clusterproof.gpu.plugins.module_utils.model.rules import Rules


class Victims(Rules):
    """Who may lose work to a claimant, and in which order."""

    def over_heap(self, level: list[float]) -> list[tuple[float, int, int]]:
        """Leaf projects above ``level``, most above first: (-(excess), index, stamp), checked lazily."""
        alloc, children, stamp = self.alloc, self.tree.children, self.stamp
        above = self.above if self.multi else lambda q, level: alloc[q] > level[q] + EPS
        heap = [(level[q] - alloc[q], self._heap_id(q), stamp[q]) for q in range(len(alloc)) if above(q, level)]
        heap = [entry for entry in heap if not children[_heap_q(entry[1])]]
        heapq.heapify(heap)
        return heap

    def _heap_id(self, q: int) -> int:
        """Project ``q`` as the over-level heaps hold it, so that ties go as ``_leaf_rank`` breaks them:
        runai, the project declared last first (``~q``: -1, -2, ...); else declaration order (``q``)."""
        return ~q if self.policy.ties_to_last_declared else q

    def note_alloc(self, q: int, n: int, gone: int = -1) -> None:
        """Keep the reclaim indexes current: leaf ``q``'s holding changed on node ``n`` (job ``gone`` left)."""
        alloc, whole = self.alloc, self.whole
        for heap, level in zip(self.over_heaps, self.tiers, strict=True):  # type: ignore[arg-type]
            if self.above(q, level):
                heapq.heappush(heap, (level[q] - alloc[q], self._heap_id(q), self.stamp[q]))
        if self.node_heaps is None:
            return
        dirty = {n}
        for t, level in enumerate(self.tiers):
            flags, counts = self.eligible_flags[t], self.eligible_whole[t]
            if gone >= 0 and flags[gone]:
                flags[gone] = 0
                counts[n] -= whole[gone]
            for v, now in self._losable_jobs(q, level):
                if now != flags[v]:
                    flags[v] = now
                    node = self.place[v][0]  # type: ignore[index]
                    counts[node] += whole[v] if now else -whole[v]
                    dirty.add(node)
        for node in dirty:
            self._push_node_bound(node)

    def start_node_bounds(self) -> None:
        """Per tier and node, an upper bound on the whole GPUs reclaim could free there, in a lazy max-heap."""
        nodes = len(self.node_size)
        self.eligible_flags = [bytearray(len(self.jobs)) for _ in self.tiers]
        self.eligible_whole = [[0] * nodes for _ in self.tiers]
        self.node_stamp = [0] * nodes
        place, whole = self.place, self.whole
        for t, level in enumerate(self.tiers):
            flags, counts = self.eligible_flags[t], self.eligible_whole[t]
            # only a project above the level has jobs it can lose
            for q in {_heap_q(entry[1]) for entry in self.over_heaps[t]}:  # type: ignore[index]
                for v, losable in self._losable_jobs(q, level):
                    if losable:
                        flags[v] = 1
                        counts[place[v][0]] += whole[v]  # type: ignore[index]
        # node_bound for every node, inline (36,000 calls a pass on the 10,000-project site)
        free, shared = self.free, [len(partial) for partial in self.node_partial]
        self.node_heaps = [
            [(-(free[n] + counts[n] + shared[n]), n, 0) for n in range(nodes)] for counts in self.eligible_whole
        ]
        for heap in self.node_heaps:
            heapq.heapify(heap)

    def _losable_jobs(self, q: int, level: list[float]) -> list[tuple[int, bool]]:
        """Leaf ``q``'s running whole-GPU preemptible jobs, each with whether it may go at this level
        (the node bounds count them). The rule looks at a job's size, not the job: asked once per
        size, and once in all where it does not look at the size (all but elastic)."""
        whole, preemptible = self.whole, self.preemptible
        over = self.multi and self.res_over(q, level)
        if over or not self.policy.victim_keeps_level:
            losable = over or self._losable(q, 0, level)
            return [(v, losable) for v in self.leaf_running[q] if whole[v] and preemptible[v]]
        by_size: dict[int, bool] = {}
        pairs = []
        for v in self.leaf_running[q]:
            if not (whole[v] and preemptible[v]):
                continue
            size = self.units[v]
            if size not in by_size:
                by_size[size] = self._losable(q, size, level)
            pairs.append((v, by_size[size]))
        return pairs

    def _losable(self, q: int, units: int, level: list[float], removed: int = 0) -> bool:
        """Whether project ``q``, less ``removed`` units already taken for the same claim, may lose
        a job of ``units`` at this level: the policy's victim rule, which the victim test
        (``eligible``) and the pruning bounds share. elastic keeps the project at its level after
        the job goes; KAI (runai) and Kueue only ask that it be above it before (the pinned KAI's
        reclaimable/strategies: the reclaimee's allocation, less the victims already chosen, above
        its fair share or quota), so a whole job may go that leaves its queue below its share."""
        if not self.policy.victim_keeps_level:
            return self.alloc[q] - removed >= level[q] + EPS
        return self.alloc[q] - removed - units >= level[q] - EPS

    def node_bound(self, tier: int, n: int) -> int:
        # any shared GPU might be emptied: counting them all keeps this an upper bound
        return self.free[n] + self.eligible_whole[tier][n] + len(self.node_partial[n])

    def _push_node_bound(self, n: int) -> None:
        self.node_stamp[n] += 1
        for t, heap in enumerate(self.node_heaps):
            heapq.heappush(heap, (-self.node_bound(t, n), n, self.node_stamp[n]))

    def best_node_bound(self, tier: int) -> int:
        heap = self.node_heaps[tier]
        while heap:
            bound, n, stamp = heap[0]
            if stamp == self.node_stamp[n]:
                return -bound
            heapq.heappop(heap)
        return 0

    def victim_leaves(self, tier: int, claimant_path: set[int], level: list[float]) -> Generator[int, None, None]:
        """Leaf projects that may lose work to the claimant, in rank order (most over first)."""
        if self.flat:
            heap = self.over_heaps[tier]  # type: ignore[index]
            taken = []
            try:
                while heap:
                    entry = heapq.heappop(heap)
                    q = _heap_q(entry[1])
                    if entry[2] != self.stamp[q]:
                        continue  # stale: the project's holding changed since
                    if not self.above(q, level):
                        continue  # no longer above the level
                    taken.append(entry)
                    if q not in claimant_path:
                        yield q
            finally:
                for entry in taken:
                    if entry[2] == self.stamp[_heap_q(entry[1])]:
                        heapq.heappush(heap, entry)
            return
        alloc, children = self.alloc, self.tree.children
        over = [q for q in range(len(alloc)) if not children[q] and self.above(q, level)]
        over = [q for q in over if q not in claimant_path]
        over.sort(key=lambda q: self._leaf_rank(q, {}, claimant_path, level))
        yield from over

    def eligible(self, v: int, removed: dict[int, int], claimant_path: set[int], level: list[float]) -> bool:
        """Whether job ``v`` may be a victim: every project on its path that the claimant does not
        share may lose it (``_losable``)."""
        units = self.units[v] if not self.gang_pods else sum(self.units[m] for m in self.gang_mates(v))
        for a in self.tree.path[self.leaf[v]]:
            if a in claimant_path:
                break
            if not self._losable(a, units, level, removed.get(a, 0)):
                if self.multi and self.res_over(a, level, removed):
                    continue  # KAI: a queue above its level in any resource may lose work
                return False
        return True

    def _leaf_rank(self, q: int, removed: dict[int, int], claimant_path: set[int], level: list[float]) -> tuple:
        """Top down along the tree, the most over-level node first. Ties: runai, the queue declared
        last (KAI's victim queues are its queue order reversed, whose last resort is the older
        queue first; the scenario runner creates queues in declaration order: differential seeds
        165 and 261); kueue, the queue with the most recently admitted workload; elastic, the
        node declared first."""
        levels = []
        for a in reversed(self.tree.path[q]):
            if a in claimant_path:
                continue
            tie = -a if self.policy.ties_to_last_declared else a  # see the docstring
            if self.policy.ties_to_newest_workload and a == q:
                # Kueue breaks a tie between queues by their candidates: the most recently admitted first.
                tie = -max(self.leaf_running[q], default=-1)
            levels.append((-(self.alloc[a] - removed.get(a, 0) - level[a]), tie))
        return tuple(levels)

    def rank(self, v: int, removed: dict[int, int], claimant_path: set[int], level: list[float]) -> tuple:
        """Victim order: its project's rank, then the most recently submitted job first."""
        return (self._leaf_rank(self.leaf[v], removed, claimant_path, level), -v)

    def victims_on(
        self, j: int, n: int, candidates: list[int], claimant_path: set[int], level: list[float]
    ) -> list[int] | None:
        chosen: list[int] = []
        removed: dict[int, int] = {}
        left = list(candidates)
        while not self.fits_on(j, n, chosen, removed):
            usable = [v for v in left if self.eligible(v, removed, claimant_path, level)]
            if not usable:
                return None
            completing = [v for v in usable if self.fits_on(j, n, chosen + [v], self.removed_in(chosen + [v]))]
            pick = min(completing or usable, key=lambda v: self.rank(v, removed, claimant_path, level))
            chosen.append(pick)
            left.remove(pick)
            removed = self.removed_in(chosen)
        return without_unneeded(chosen, lambda trial: self.fits_on(j, n, trial, self.removed_in(trial)))


def _heap_q(heap_id: int) -> int:
    """The project index of an over-level heap entry's id (``Victims._heap_id``)."""
    return ~heap_id if heap_id < 0 else heap_id


def without_unneeded(chosen: list[int], fits: Callable[[list[int]], bool]) -> list[int]:
    """The victims ``chosen`` (in the order taken), less those the claimant turns out not to need:
    each, the last taken first, is put back when the claimant still ``fits`` without it."""
    for v in list(reversed(chosen)):
        trial = [w for w in chosen if w != v]
        if fits(trial):
            chosen = trial
    return chosen
