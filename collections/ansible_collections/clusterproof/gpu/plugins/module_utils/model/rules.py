"""Limit rules: whether a job may start, and whether it fits once victims are gone.

Besides fair share, a job starts only within the limits (``max``) of every project on its path and,
for Kueue, its cohort's quotas (``within_limits``); non-preemptible work only within its project's
quota, on KAI within every ancestor's (``interactive_ok``); a gang's pods only with their gang
(``may_start``). ``within_level`` says whether a job keeps its project within a level (fair share or
quota) and so may reclaim. ``fits_on``, ``gpus_fit`` and ``gang_fits`` say whether a claimant
fits once some victims go: the limits counted without them, KAI's saturation test between sibling
queues in a tree (``saturation_ok``), and GPUs on the node. CPU and memory (policy runai, flat
projects) are compared beside the GPUs in every rule.

``Rules`` adds these to the placement state (``model.state``); it changes nothing. The levels it
compares with (``entitled``, ``tiers``, ``res_levels``) are set by the engine (``model.engine``).
May import the standard library, ``model.data`` and ``model.state``. Touches nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.model.data import EPS, INF, RESOURCES, UNITS_PER_GPU
from ansible_collections.clusterproof.gpu.plugins.module_utils.model.state import State


class Rules(State):
    """What may start and what fits: the limits, the interactive rule, gangs, CPU and memory."""

    def _tier(self, level: list[float] | None) -> int:
        """The reclaim tier of a GPU level (None: the fair share), to find the CPU and memory levels beside it."""
        return 0 if level is None or level is self.entitled else 1

    def _start_res(self, j: int, r: int) -> int:
        """What starting job ``j`` adds of resource ``r``: its pods to start (a gang's core pods share a size)."""
        return self.res_req[j][r] * (self.start_units[j] // self.units[j])

    def res_over(self, q: int, level: list[float], removed: Mapping[Any, int] | None = None) -> bool:
        """Whether project ``q`` (less what ``removed`` takes) is above the tier's CPU or memory level."""
        t = self._tier(level)
        for r in range(len(RESOURCES)):
            gone = removed.get((r, q), 0) if removed else 0
            if self.res_alloc[r][q] - gone > self.res_levels[r][t][q] + EPS:
                return True
        return False

    def _res_within_limits(self, q: int, need: Sequence[int], removed: Mapping[Any, int] | None = None) -> bool:
        for r, bounds in enumerate(self.tree.resources):
            alloc = self.res_alloc[r]
            for a in self.tree.path[q]:
                gone = removed.get((r, a), 0) if removed else 0
                if alloc[a] - gone + need[r] > bounds.limit[a] + EPS:
                    return False
        return True

    def above(self, q: int, level: list[float]) -> bool:
        """Whether project ``q`` is above ``level``: in GPUs, or (multi-resource) in CPU or memory."""
        return self.alloc[q] > level[q] + EPS or (self.multi and self.res_over(q, level))

    def within_limits(self, j: int) -> bool:
        units, tree, alloc = self.start_units[j], self.tree, self.alloc
        if self.used + units > self.cohort_cap + EPS:
            return False
        for a in tree.path[self.leaf[j]]:
            if alloc[a] + units > tree.limit[a] + EPS:
                return False
        if self.multi:
            return self._res_within_limits(self.leaf[j], [self._start_res(j, r) for r in range(len(RESOURCES))])
        return True

    def interactive_ok(self, j: int) -> bool:
        """Non-preemptible work starts only within the project's quota (KAI; Koordinator's non-preemptible);
        on KAI within the quota of every ancestor too, each holding its children's non-preemptible
        work (the pinned KAI's ``resultsWithNonPreemptibleOverQuota`` walks the queue's parents)."""
        if self.preemptible[j]:
            return True
        q = self.leaf[j]
        quota, fixed, units = self.tree.quota, self.interactive_alloc, self.start_units[j]
        for a in self.tree.path[q] if self.policy.interactive_quota_up_the_tree else (q,):
            if fixed[a] + units > quota[a] + EPS:
                return False
        if self.multi:  # KAI's capacity policy: every resource within its quota
            for r, bounds in enumerate(self.tree.resources):
                if self.res_fixed[r][q] + self._start_res(j, r) > bounds.quota[q] + EPS:
                    return False
        return True

    def may_start(self, j: int) -> bool:
        """Rules other than fair share: the limits on the path, the interactive rule, and a gang's
        pods starting with their gang."""
        if self.only_fair_share and self.preemptible[j]:
            return True
        if self.gang_pods and self.gang_blocked(j):
            return False
        return self.interactive_ok(j) and self.within_limits(j)

    def within_level(self, j: int, level: list[float] | None = None) -> bool:
        """Whether job ``j`` keeps its project within ``level`` (default: fair share, or elastic min).

        Limits are not checked here: reclaim may free room under a full parent, and `fits_on` checks them.
        """
        q = self.leaf[j]
        bound = (self.entitled if level is None else level)[q]
        if self.gang_pods and self.gang_blocked(j):
            return False
        if self.alloc[q] + self.start_units[j] > bound + EPS or not self.interactive_ok(j):
            return False
        if self.multi:  # KAI's reclaimer: within the level in every resource
            t = self._tier(level)
            for r in range(len(RESOURCES)):
                if self.res_alloc[r][q] + self._start_res(j, r) > self.res_levels[r][t][q] + EPS:
                    return False
        return True

    def gang_fits(self, core: list[int], victims: list[int], removed: dict[int, int]) -> bool:
        """Whether the ``core`` pods (of one gang, whole GPUs each) fit once ``victims`` and their
        gang mates are gone: the limits on the path, and a node for each pod as ``try_place`` picks
        it (the fewest free GPUs that hold it, ties: node order)."""
        need = sum(self.units[m] for m in core)
        gone = self.with_mates(victims)
        if self.cohort_cap < INF and self.used - sum(self.units[v] for v in gone) + need > self.cohort_cap + EPS:
            return False
        if self.saturation_test and not self.saturation_ok(core[0], need, removed):
            return False
        tree, alloc = self.tree, self.alloc
        for a in tree.path[self.leaf[core[0]]]:
            if alloc[a] - removed.get(a, 0) + need > tree.limit[a] + EPS:
                return False
        if self.multi:
            needs = [sum(self.res_req[m][r] for m in core) for r in range(len(RESOURCES))]
            if not self._res_within_limits(self.leaf[core[0]], needs, removed):
                return False
        free = list(self.free)
        shared: dict[tuple[int, int], int] = {}
        for v in gone:
            n, gpus = self.place[v]  # type: ignore[misc]
            if self.whole[v]:
                free[n] += len(gpus)
            else:
                key = (n, gpus[0])
                shared[key] = shared.get(key, 0) + self.units[v]
        for (n, gpu), amount in shared.items():
            if amount == self.node_partial[n][gpu]:
                free[n] += 1
        g = self.whole[core[0]]
        for _ in core:
            fitting = [(room, n) for n, room in enumerate(free) if room >= g]
            if not fitting:
                return False
            _, n = min(fitting)
            free[n] -= g
        return True

    def gpus_fit(self, j: int, n: int, victims: list[int]) -> bool:
        """Whether job ``j`` finds GPUs on node ``n`` once ``victims`` are gone (quota aside): whole GPUs
        for a whole-GPU job, else room on a shared GPU or a free one."""
        freed_whole = 0
        freed_shared: dict[int, int] = {}
        for v in victims:
            if self.whole[v]:
                freed_whole += self.whole[v]
            else:
                gpu = self.place[v][1][0]  # type: ignore[index]
                freed_shared[gpu] = freed_shared.get(gpu, 0) + self.units[v]
        partial = self.node_partial[n]
        emptied = sum(1 for gpu, amount in freed_shared.items() if amount == partial[gpu])
        whole_free = self.free[n] + freed_whole + emptied
        if self.whole[j]:
            return whole_free >= self.whole[j]
        if whole_free >= 1:
            return True
        units = self.units[j]
        return any(used - freed_shared.get(gpu, 0) + units <= UNITS_PER_GPU for gpu, used in partial.items())

    def removed_in(self, victims: list[int]) -> dict[Any, int]:
        """Per project on the victims' paths, the GPU units they free; multi-resource, also per
        (resource, project) the CPU or memory they free."""
        removed: dict[Any, int] = {}
        for v in self.with_mates(victims):
            for a in self.tree.path[self.leaf[v]]:
                removed[a] = removed.get(a, 0) + self.units[v]
                if self.multi:
                    for r, amount in enumerate(self.res_req[v]):
                        removed[(r, a)] = removed.get((r, a), 0) + amount
        return removed

    def fits_on(self, j: int, n: int, victims: list[int], removed: dict[int, int]) -> bool:
        units, tree, alloc = self.units[j], self.tree, self.alloc
        if not self.gang_pods:  # the common case, kept to the victims given (all on node n)
            gone = victims
        else:  # a gang's pods go with it; those on node n make room there
            gone = self.with_mates(victims)
            victims = [v for v in gone if self.place[v][0] == n]  # type: ignore[index]
        if self.cohort_cap < INF and self.used - sum(self.units[v] for v in gone) + units > self.cohort_cap + EPS:
            return False
        for a in tree.path[self.leaf[j]]:
            if alloc[a] - removed.get(a, 0) + units > tree.limit[a] + EPS:
                return False
        if self.multi and not self._res_within_limits(self.leaf[j], self.res_req[j], removed):
            return False
        if self.saturation_test and not self.saturation_ok(j, units, removed):
            return False
        return self.gpus_fit(j, n, victims)

    def saturation_ok(self, j: int, units: int, removed: Mapping[Any, int]) -> bool:
        """runai in a tree: whether KAI lets job ``j`` (``units`` to start) take ``removed``. At each
        level of the claimant's path, a queue that would go above its fair share must stay less
        saturated (held over fair share) than every sibling that loses work, the victims gone (the pinned
        KAI's ``reclaimingQueuesRemainWithinBoundaries``, multiplier 1): a department whose share is 6
        does not take 8 GPUs from a sibling at 7 of its 10, though the claimant's own queue is
        within its share (differential tree seed 125)."""
        alloc, fair, tree = self.alloc, self.entitled, self.tree
        for a in tree.path[self.leaf[j]]:
            held = alloc[a] - removed.get(a, 0) + units
            if held <= fair[a] + EPS:
                continue  # at or below its fair share: a ratio of 1 at most never refuses
            ratio = held / fair[a] if fair[a] > EPS else INF
            parent = tree.parent[a]
            for s in tree.children[parent] if parent >= 0 else tree.top:
                if s == a or s not in removed or fair[s] <= EPS:
                    continue
                if ratio >= (alloc[s] - removed[s]) / fair[s]:
                    return False
        return True
