"""Placement state: where every job of one prediction runs, which GPUs are free, what each project
holds; the primitives that start, place and release jobs (bin packing), gangs, and Kueue's quota
reservations. Indices everywhere, names only at the edges (``result``).

``State`` reads the input (nodes, jobs, the placements of the jobs that ran, the workloads that
waited), checks it (ValueError on an inconsistent one) and keeps the counts current as jobs move.
It decides nothing: which job may start is ``model.rules``, which may go ``model.victims``, and
when, the actions (``model.allocate``, ``consolidation``, ``reclaim``, ``preempt``,
``fair_sharing``). The policy's settings it reads are data of its ``Policy`` (``model.policy``).
While reclaim runs, ``_occupy`` and ``release`` keep its indexes current through ``note_alloc``
(``model.victims``, the engine's).

May import the standard library, ``model.data``, ``model.tree`` and ``model.policy``. Touches
nothing outside its arguments.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Mapping, Sequence

from ansible_collections.clusterproof.gpu.plugins.module_utils.model.data import (
    CPU_UNITS,
    INF,
    MEMORY_UNITS,
    RESOURCES,
    UNITS_PER_GPU,
    Job,
    Node,
    Placement,
    Prediction,
    to_units,
)
from ansible_collections.clusterproof.gpu.plugins.module_utils.model.policy import Policy
from ansible_collections.clusterproof.gpu.plugins.module_utils.model.tree import Tree


class State:
    """Mutable cluster state for one prediction; indices everywhere, names only at the edges."""

    def __init__(
        self,
        policy: Policy,
        nodes: Sequence[Node],
        tree: Tree,
        jobs: Sequence[Job],
        running: Mapping[str, Placement],
        waiting: Sequence[str] = (),
    ) -> None:
        self.policy = policy
        self.tree = tree
        self.node_names = [node.name for node in nodes]
        node_index = {}
        for n, node in enumerate(nodes):
            if node.name in node_index:
                raise ValueError(f"node {node.name!r} is listed twice")
            if node.gpus < 0:
                raise ValueError(f"node {node.name!r} has a negative GPU count")
            node_index[node.name] = n
        self.node_size = [node.gpus for node in nodes]
        cpus = [node.cpu for node in nodes]
        memory = [node.memory for node in nodes]
        # CPU and memory the nodes offer, in all (INF when some node does not say)
        self.res_capacity = [
            INF if None in cpus else sum(round(c * CPU_UNITS) for c in cpus),  # type: ignore[operator]
            INF if None in memory else sum(round(m * MEMORY_UNITS) for m in memory),  # type: ignore[operator]
        ]
        self.capacity = sum(self.node_size) * UNITS_PER_GPU
        # What the engine admits in all, besides the nodes' room: for Kueue its cohort's quotas.
        self.cohort_cap = sum(tree.quota[t] for t in tree.top) if policy.cohort_quotas else INF
        self.used = 0  # units held by running jobs, all projects
        self.free = list(self.node_size)
        self.free_whole = sum(self.node_size)  # idle whole GPUs, all nodes
        self.free_idx = [list(range(size)) for size in self.node_size]
        self.node_partial: list[dict[int, int]] = [{} for _ in nodes]  # gpu index -> units used
        self.partial_room: list[tuple[int, int, int]] = []  # sorted (units free, node, gpu), shared GPUs
        self.room_total = 0  # units free on shared GPUs, all nodes
        self.node_jobs: list[set[int]] = [set() for _ in nodes]

        count = len(tree.projects)
        self.jobs = list(jobs)
        self.units: list[int] = []
        self.whole: list[int] = []
        self.leaf: list[int] = []
        seen: set[str] = set()
        sizes: dict[float, int] = {}  # units per GPU amount, each amount checked the first time it comes
        project_index, children = tree.index, tree.children
        for job in self.jobs:
            if job.name in seen:
                raise ValueError(f"job {job.name!r} is listed twice")
            seen.add(job.name)
            q = project_index.get(job.project, -1)
            if q < 0:
                raise ValueError(f"job {job.name!r}: project {job.project!r} is not declared")
            if children[q]:
                raise ValueError(f"job {job.name!r}: project {job.project!r} has sub-projects; use a leaf")
            units = sizes.get(job.gpus, -1)
            if units < 0:
                units = sizes[job.gpus] = to_units(job.gpus, f"job {job.name!r} gpus")
                if units <= 0:
                    raise ValueError(f"job {job.name!r} asks for {job.gpus} GPUs: must be more than 0")
                if units >= UNITS_PER_GPU and units % UNITS_PER_GPU:
                    raise ValueError(f"job {job.name!r} asks for {job.gpus} GPUs: a fraction must be below 1")
            self.units.append(units)
            self.whole.append(units // UNITS_PER_GPU)
            self.leaf.append(q)
        self.preemptible = [policy.interactive_preemptible or not job.interactive for job in self.jobs]
        self._read_gangs()
        self.place: list[tuple[int, tuple[int, ...]] | None] = [None] * len(self.jobs)
        # The pending jobs in submission order, narrowed as jobs start; a released job waits in
        # _released until the next pending_jobs() merges it back (a full rescan per pass cost 0.15 s of
        # the 10,000-project step).
        self._pending_list: list[int] = list(range(len(self.jobs)))
        self._released: list[int] = []
        # Bumped whenever a job is placed or released: pending_jobs() hands back its last list while
        # nothing moved (most phases of a settled pass change nothing).
        self.moves = 0
        self._pending_moves = -1
        self.alloc = [0] * count
        # held by non-preemptible jobs, per project, up the tree (KAI checks every ancestor's quota)
        self.interactive_alloc = [0] * count
        self.leaf_running: list[set[int]] = [set() for _ in range(count)]
        self.stamp = [0] * count  # bumped whenever a leaf's holding changes: marks stale heap entries
        self.over_heaps: list[list[tuple[float, int, int]]] | None = None  # set while reclaim runs
        self.node_heaps: list[list[tuple[int, int, int]]] | None = None  # built by the first claim of a pass
        self.flat = all(parent < 0 for parent in tree.parent)
        # KAI's saturation test between sibling queues: it can refuse a claim only where some
        # ancestor of the claimant may go above its fair share, so only in a tree
        self.saturation_test = policy.saturation_test and not self.flat
        # CPU and memory beside the GPUs (KAI's capacity policy and reclaim strategies compare
        # every resource): kept only where a project declares a CPU or memory quota or limit.
        self.multi = tree.multi_resource
        if self.multi:
            self._read_resources()
        # Whether only fair share may keep preemptible work from starting: no limit on any project,
        # no cohort's quotas, no CPU or memory, no gangs (the common site: admission then skips
        # the other rules, a quarter of the first pass over 100,000 jobs).
        self.only_fair_share = (
            not self.gang_pods and not self.multi and self.cohort_cap == INF and all(b == INF for b in tree.limit)
        )
        # When each running job was (last) placed: Kueue takes the most recently admitted first.
        self.admitted = [0] * len(self.jobs)
        self.admissions = 0
        self.kueue_preempted: set[int] = set()
        # kueue: workloads admitted by quota whose pods wait for a node. They hold their quota (in
        # alloc and used) as Kueue counts them, run on no node, and go to a node when one has room.
        self.reserved: set[int] = set()
        self.reserves = policy.reserves_quota and self.flat
        self.leaf_reserved: list[set[int]] = [set() for _ in range(count)] if self.reserves else []

        # The placements given that the engine keeps as they were, by job: (its place, the placement
        # given), handed back as they are (building 80,000 new ones cost a tenth of the follow-up step).
        self.given: dict[int, tuple[tuple[int, tuple[int, ...]], Placement]] = {}
        self.was_running = self._restore_running(running, node_index)
        if self.reserves and waiting:
            # Admitted before this step and still waiting for a node: they hold their quota, in the
            # order Kueue admitted them.
            index = {job.name: j for j, job in enumerate(self.jobs)}
            for name in waiting:
                j = index.get(name, -1)
                if j >= 0 and self.place[j] is None and j not in self.reserved:
                    self.reserve(j)
        self.buckets: list[list[int]] = [[] for _ in range(max(self.node_size, default=0) + 1)]
        for n, free in enumerate(self.free):
            self.buckets[free].append(n)
        self.set_levels()

    def set_levels(self) -> None:
        """The levels the policy holds each project to, set once the input is read: the engine's
        (``model.engine``); the state alone holds none."""

    def _read_resources(self) -> None:
        """Per job its CPU and memory requests, and per project what its running jobs hold of them
        (non-preemptible apart)."""
        if not self.policy.cpu_and_memory:
            raise ValueError(
                f"cpu and memory quotas and limits are modelled for policy runai only, found {self.policy.name}"
            )
        if not self.flat:
            raise ValueError("cpu and memory quotas and limits are modelled for flat projects only, found a tree")
        self.res_req: list[tuple[int, int]] = []
        for job in self.jobs:
            for amount, resource in ((job.cpu, "cpu"), (job.memory, "memory")):
                if amount < 0:
                    raise ValueError(f"job {job.name!r} asks for {amount} {resource}: must not be negative")
            self.res_req.append((round(job.cpu * CPU_UNITS), round(job.memory * MEMORY_UNITS)))
        count = len(self.tree.projects)
        self.res_alloc = [[0] * count for _ in RESOURCES]
        self.res_fixed = [[0] * count for _ in RESOURCES]  # held by non-preemptible jobs

    def _read_gangs(self) -> None:
        """Index the gangs: per job its gang (-1: none) and whether it is one of the gang's first
        ``gang_min`` pods (its core); per gang those core pods, and what starting them adds."""
        self.gang = [-1] * len(self.jobs)
        self.in_core = [False] * len(self.jobs)
        self.gang_core: list[list[int]] = []
        self.gang_pods: list[list[int]] = []
        index: dict[str, int] = {}
        for j in [j for j, job in enumerate(self.jobs) if job.gang is not None]:
            job = self.jobs[j]
            gid = index.get(job.gang)
            if gid is None:
                gid = index[job.gang] = len(self.gang_pods)
                self.gang_pods.append([])
            first = self.jobs[self.gang_pods[gid][0]] if self.gang_pods[gid] else job
            if (job.project, job.gpus, job.interactive, job.gang_min, job.cpu, job.memory) != (
                first.project,
                first.gpus,
                first.interactive,
                first.gang_min,
                first.cpu,
                first.memory,
            ):
                raise ValueError(
                    f"job {job.name!r}: the pods of gang {job.gang!r} must share project, gpus, interactive, "
                    f"gang_min, cpu and memory; {first.name!r} has {first.project!r}, {first.gpus}, "
                    f"{first.interactive}, {first.gang_min}, {first.cpu}, {first.memory}"
                )
            if not self.whole[j]:
                raise ValueError(f"job {job.name!r}: the pods of gang {job.gang!r} must ask for whole GPUs")
            self.gang[j] = gid
            self.gang_pods[gid].append(j)
        for pods in self.gang_pods:
            first = self.jobs[pods[0]]
            if not 1 <= first.gang_min <= len(pods):
                raise ValueError(
                    f"gang {first.gang!r}: gang_min must be 1 to its {len(pods)} pods, got {first.gang_min}"
                )
            core = pods[: first.gang_min]
            for j in core:
                self.in_core[j] = True
            self.gang_core.append(core)
        # What starting each job adds to its project: its own units; for a core pod, those of its
        # gang's core pods not running (all of them now; _occupy and release keep it current).
        self.start_units = list(self.units)
        for core in self.gang_core:
            total = sum(self.units[m] for m in core)
            for m in core:
                self.start_units[m] = total

    def _recount_core(self, gid: int) -> None:
        core = self.gang_core[gid]
        total = sum(self.units[m] for m in core if self.place[m] is None)
        for m in core:
            self.start_units[m] = total

    def gang_blocked(self, j: int) -> bool:
        """Whether job ``j`` cannot be started on its own: a core pod other than the first one not
        running (the first starts the core), or a pod beyond the core while the core does not run."""
        gid = self.gang[j]
        if gid < 0:
            return False
        if self.place[j] is not None:
            return True
        core = self.gang_core[gid]
        if self.in_core[j]:
            return j != next(m for m in core if self.place[m] is None)
        return self.place[core[0]] is None

    def start_gang(self, j: int) -> bool:
        """Bin-pack the core pods of job ``j``'s gang that do not run, all or none."""
        placed = []
        for m in self.gang_core[self.gang[j]]:
            if self.place[m] is not None:
                continue
            if not self.try_place(m):
                for k in placed:
                    self.release(k)
                return False
            placed.append(m)
        return True

    def start(self, j: int) -> bool:
        return self.start_gang(j) if self.in_core[j] else self.try_place(j)

    def gang_mates(self, v: int) -> list[int]:
        """What goes when job ``v`` is evicted: a core pod takes its whole gang with it."""
        gid = self.gang[v]
        if gid < 0 or not self.in_core[v]:
            return [v]
        return [m for m in self.gang_pods[gid] if self.place[m] is not None]

    def evict(self, victims: Sequence[int]) -> None:
        for v in self.with_mates(victims):
            self.release(v)

    def with_mates(self, victims: Sequence[int]) -> list[int]:
        if not self.gang_pods:
            return list(victims)
        seen: dict[int, None] = {}
        for v in victims:
            for m in self.gang_mates(v):
                seen.setdefault(m)
        return list(seen)

    # placement primitives -------------------------------------------------------------------

    def _restore_running(self, running: Mapping[str, Placement], node_index: Mapping[str, int]) -> list[int]:
        """Put the running jobs back where ``running`` says, in job order; the jobs put back.

        Where no job is part of a gang, none asks CPU or memory and Kueue's admission order is not
        kept, each job goes back inline (``_seat_inline``): its project's hold is added up the tree
        once at the end, the room on shared GPUs sorted once at the end (_restore and _occupy called
        per job cost a quarter of the follow-up step of 80,000 running jobs). Any other job, and any
        placement that does not check out, goes through _restore, which says what is wrong.
        """
        inline = not self.gang_pods and not self.multi and not self.reserves
        place, units_of, leaf_of, preemptible, given = self.place, self.units, self.leaf, self.preemptible, self.given
        node_jobs, leaf_running, stamp = self.node_jobs, self.leaf_running, self.stamp
        leaf_units = [0] * len(self.alloc)  # held by the jobs put back inline, per leaf
        leaf_fixed = [0] * len(self.alloc)  # of which non-preemptible
        was_running: list[int] = []
        for j, job in enumerate(self.jobs):
            placement = running.get(job.name)
            if placement is None:
                continue
            n = node_index.get(placement.node, -1)
            if n < 0:
                raise ValueError(f"running job {job.name!r} is on node {placement.node!r}, which is not listed")
            was_running.append(j)
            whole, units = self.whole[j], units_of[j]
            spot = self._seat_inline(n, placement, whole, units) if inline else None
            if spot is not None:
                place[j] = spot
                node_jobs[n].add(j)
                q = leaf_of[j]
                leaf_running[q].add(j)
                leaf_units[q] += units
                if not preemptible[j]:
                    leaf_fixed[q] += units
                stamp[q] += 1
            else:
                if inline:
                    self._rebuild_room()  # what _restore expects to find
                self._restore(j, n, placement)
                spot = place[j]
                assert spot is not None  # _restore placed it, or raised
            if spot[1] == placement.gpus and placement.shared == (not whole):
                given[j] = (spot, placement)
        path, alloc, fixed = self.tree.path, self.alloc, self.interactive_alloc
        for q, units in enumerate(leaf_units):
            if units:
                self.used += units
                for a in path[q]:
                    alloc[a] += units
                    fixed[a] += leaf_fixed[q]
        self.free_whole = sum(self.free)
        if inline:
            self._rebuild_room()
        return was_running

    def _seat_inline(self, n: int, placement: Placement, whole: int, units: int) -> tuple[int, tuple[int, ...]] | None:
        """Take the GPUs ``placement`` names on node ``n`` for a job of ``whole`` GPUs (0: a fraction
        of ``units``), and return the job's place; None, the node left as it was, where they are not
        free or not what the job asks. Counts nothing else (``_restore_running`` does)."""
        gpus, free_n = placement.gpus, self.free_idx[n]
        if whole:
            if placement.shared or len(gpus) != whole:
                return None
            taken = 0
            for gpu in gpus:
                if gpu not in free_n:
                    free_n.extend(gpus[:taken])  # as it was, for _restore to find what is wrong
                    free_n.sort()
                    return None
                free_n.remove(gpu)
                taken += 1
            self.free[n] -= whole
            return (n, tuple(sorted(gpus)))
        if len(gpus) != 1:
            return None
        gpu = gpus[0]
        used = self.node_partial[n].get(gpu)
        if used is None:
            if gpu not in free_n:
                return None
            free_n.remove(gpu)
            self.free[n] -= 1
            used = 0
        elif used + units > UNITS_PER_GPU:
            return None
        self.node_partial[n][gpu] = used + units
        return (n, (gpu,))

    def _rebuild_room(self) -> None:
        """The room on shared GPUs from ``node_partial``: (units free, node, gpu) sorted, and its sum."""
        self.partial_room = sorted(
            (UNITS_PER_GPU - used, n, gpu)
            for n, partial in enumerate(self.node_partial)
            for gpu, used in partial.items()
            if used < UNITS_PER_GPU
        )
        self.room_total = sum(room for room, _, _ in self.partial_room)

    def _restore(self, j: int, n: int, placement: Placement) -> None:
        name = self.jobs[j].name
        units, whole = self.units[j], self.whole[j]
        if whole:
            if placement.shared or len(placement.gpus) != whole or len(set(placement.gpus)) != whole:
                raise ValueError(f"running job {name!r} needs {whole} whole GPUs, placement is {placement}")
            for gpu in placement.gpus:
                if gpu not in self.free_idx[n]:
                    raise ValueError(f"running job {name!r}: GPU {gpu} of {placement.node} is not free")
                self.free_idx[n].remove(gpu)
            self.free[n] -= whole
            self.free_whole -= whole
            self._occupy(j, n, tuple(sorted(placement.gpus)))
            return
        if len(placement.gpus) != 1:
            raise ValueError(f"running job {name!r} is a fraction: its placement names one GPU, got {placement}")
        gpu = placement.gpus[0]
        used = self.node_partial[n].get(gpu)
        if used is None:
            if gpu not in self.free_idx[n]:
                raise ValueError(f"running job {name!r}: GPU {gpu} of {placement.node} is not free")
            self.free_idx[n].remove(gpu)
            self.free[n] -= 1
            self.free_whole -= 1
            used = 0
        else:
            self._drop_room(n, gpu, used)
        if used + units > UNITS_PER_GPU:
            raise ValueError(f"running job {name!r}: GPU {gpu} of {placement.node} is over-shared")
        self._set_partial(n, gpu, used + units)
        self._occupy(j, n, (gpu,))

    def _occupy(self, j: int, n: int, gpus: tuple[int, ...]) -> None:
        self.place[j] = (n, gpus)
        self.moves += 1
        if self.in_core[j]:
            self._recount_core(self.gang[j])
        self.node_jobs[n].add(j)
        if self.reserves:  # only Kueue's preemption asks which was admitted last
            self.admissions += 1
            self.admitted[j] = self.admissions
        q = self.leaf[j]
        self.leaf_running[q].add(j)
        units = self.units[j]
        self.used += units
        for a in self.tree.path[q]:
            self.alloc[a] += units
        if not self.preemptible[j]:
            for a in self.tree.path[q]:
                self.interactive_alloc[a] += units
        if self.multi:
            self._count_resources(j, 1)
        self.stamp[q] += 1
        if self.over_heaps is not None:
            self.note_alloc(q, n)

    def release(self, j: int) -> None:
        placement = self.place[j]
        assert placement is not None
        n, gpus = placement
        self.place[j] = None
        self.moves += 1
        if self.in_core[j]:
            self._recount_core(self.gang[j])
        self._released.append(j)
        self.node_jobs[n].discard(j)
        q = self.leaf[j]
        self.leaf_running[q].discard(j)
        units = self.units[j]
        self.used -= units
        for a in self.tree.path[q]:
            self.alloc[a] -= units
        if not self.preemptible[j]:
            for a in self.tree.path[q]:
                self.interactive_alloc[a] -= units
        if self.multi:
            self._count_resources(j, -1)
        self.stamp[q] += 1
        if self.whole[j]:
            self._free_gpus(n, gpus)
        else:
            gpu = gpus[0]
            used = self.node_partial[n][gpu]
            self._drop_room(n, gpu, used)
            if used == units:
                del self.node_partial[n][gpu]
                self._free_gpus(n, (gpu,))
            else:
                self._set_partial(n, gpu, used - units)
        if self.over_heaps is not None:
            self.note_alloc(q, n, gone=j)

    def _count_resources(self, j: int, sign: int) -> None:
        q = self.leaf[j]
        for r, amount in enumerate(self.res_req[j]):
            for a in self.tree.path[q]:
                self.res_alloc[r][a] += sign * amount
            if not self.preemptible[j]:
                self.res_fixed[r][q] += sign * amount

    def reserve(self, j: int) -> None:
        """kueue: admit ``j`` by quota alone, its pods waiting for a node."""
        self.reserved.add(j)
        self.leaf_reserved[self.leaf[j]].add(j)
        self._hold_quota(j, self.units[j])
        self.admissions += 1
        self.admitted[j] = self.admissions

    def _unreserve(self, j: int) -> None:
        self.reserved.discard(j)
        self.leaf_reserved[self.leaf[j]].discard(j)
        self._hold_quota(j, -self.units[j])

    def _hold_quota(self, j: int, units: int) -> None:
        q = self.leaf[j]
        self.used += units
        for a in self.tree.path[q]:
            self.alloc[a] += units
        self.stamp[q] += 1

    def kueue_evict(self, j: int) -> None:
        """A victim: a running job released, or an admitted one that waits for a node unadmitted."""
        if j in self.reserved:
            self._unreserve(j)
            self._released.append(j)
        else:
            self.release(j)

    def place_reserved(self) -> bool:
        """kueue: the admitted workloads whose pods wait go to nodes that have room now, first admitted first."""
        changed = False
        for j in sorted(self.reserved, key=self.admitted.__getitem__):
            if self.whole[j] and self.node_for_whole(self.whole[j]) < 0:
                continue  # no node holds it yet: its quota stays held, its queue's heap entry current
            admitted = self.admitted[j]
            self._unreserve(j)  # placing counts the job's quota again
            if self.try_place(j):
                changed = True
            else:
                self.reserve(j)
                self.admitted[j] = admitted
        return changed

    def _free_gpus(self, n: int, gpus: tuple[int, ...]) -> None:
        lst = self.free_idx[n]
        lst.extend(gpus)
        lst.sort()
        self.free[n] += len(gpus)
        self.free_whole += len(gpus)
        heapq.heappush(self.buckets[self.free[n]], n)

    def _set_partial(self, n: int, gpu: int, used: int) -> None:
        self.node_partial[n][gpu] = used
        if used < UNITS_PER_GPU:
            bisect.insort(self.partial_room, (UNITS_PER_GPU - used, n, gpu))
            self.room_total += UNITS_PER_GPU - used

    def _drop_room(self, n: int, gpu: int, used: int) -> None:
        if used < UNITS_PER_GPU:
            key = (UNITS_PER_GPU - used, n, gpu)
            del self.partial_room[bisect.bisect_left(self.partial_room, key)]
            self.room_total -= UNITS_PER_GPU - used

    def node_for_whole(self, g: int) -> int:
        buckets, free = self.buckets, self.free
        for f in range(g, len(buckets)):
            bucket = buckets[f]
            while bucket:
                n = bucket[0]
                if free[n] == f:
                    return n
                heapq.heappop(bucket)
        return -1

    def take_whole(self, j: int, n: int, g: int) -> None:
        lst = self.free_idx[n]
        gpus = tuple(lst[:g])
        del lst[:g]
        self.free[n] -= g
        self.free_whole -= g
        heapq.heappush(self.buckets[self.free[n]], n)
        self._occupy(j, n, gpus)

    def try_place(self, j: int) -> bool:
        """Bin-pack job ``j`` into idle capacity; False when no node holds it."""
        g = self.whole[j]
        if g:
            n = self.node_for_whole(g)
            if n < 0:
                return False
            self.take_whole(j, n, g)
            return True
        units = self.units[j]
        room = self.partial_room
        k = bisect.bisect_left(room, (units, -1, -1))
        if k < len(room):
            _, n, gpu = room[k]
            used = self.node_partial[n][gpu]
            del room[k]
            self.room_total -= UNITS_PER_GPU - used
            self._set_partial(n, gpu, used + units)
            self._occupy(j, n, (gpu,))
            return True
        n = self.node_for_whole(1)
        if n < 0:
            return False
        self._take_fraction_from_whole(j, n)
        return True

    def _take_fraction_from_whole(self, j: int, n: int) -> None:
        lst = self.free_idx[n]
        gpu = lst.pop(0)
        self.free[n] -= 1
        self.free_whole -= 1
        heapq.heappush(self.buckets[self.free[n]], n)
        self._set_partial(n, gpu, self.units[j])
        self._occupy(j, n, (gpu,))

    def place_on(self, j: int, n: int) -> None:
        """Place job ``j`` on node ``n``, which reclaim has just made room on."""
        g = self.whole[j]
        if g:
            self.take_whole(j, n, g)
            return
        units = self.units[j]
        best = None
        for gpu, used in self.node_partial[n].items():
            room = UNITS_PER_GPU - used
            if room >= units and (best is None or (room, gpu) < best):
                best = (room, gpu)
        if best is None:
            self._take_fraction_from_whole(j, n)
            return
        gpu = best[1]
        used = self.node_partial[n][gpu]
        self._drop_room(n, gpu, used)
        self._set_partial(n, gpu, used + units)
        self._occupy(j, n, (gpu,))

    def pending_jobs(self) -> list[int]:
        """The jobs not placed, in submission order: a list never changed after it is handed out
        (callers place jobs while they walk it), the same one while no job moved."""
        if self.moves == self._pending_moves and not self._released:
            return self._pending_list
        place = self.place
        pending = [j for j in self._pending_list if place[j] is None]
        if self._released:
            pending = sorted(set(pending).union(j for j in self._released if place[j] is None))
            self._released = []
        self._pending_list = pending
        self._pending_moves = self.moves
        return pending

    def result(self) -> Prediction:
        tree = self.tree
        placements = {}
        pending = []
        given = self.given
        for j, job in enumerate(self.jobs):
            placement = self.place[j]
            if placement is None:
                pending.append(job.name)
                continue
            kept = given.get(j)
            if kept is not None and kept[0] is placement:  # the same place object: never moved
                placements[job.name] = kept[1]
                continue
            n, gpus = placement
            placements[job.name] = Placement(self.node_names[n], gpus, shared=not self.whole[j])
        preempted = tuple(self.jobs[j].name for j in self.was_running if self.place[j] is None)
        held = [0] * len(tree.projects)  # quota held by admitted workloads that wait for a node
        for j in self.reserved:
            for a in tree.path[self.leaf[j]]:
                held[a] += self.units[j]
        return Prediction(
            policy=self.policy.name,
            capacity=self.capacity / UNITS_PER_GPU,
            allocated={p.name: (self.alloc[i] - held[i]) / UNITS_PER_GPU for i, p in enumerate(tree.projects)},
            deserved={p.name: round(self.entitled[i] / UNITS_PER_GPU, 6) for i, p in enumerate(tree.projects)},
            placements=placements,
            pending=tuple(pending),
            preempted=preempted,
            parents={p.name: p.parent for p in tree.projects if p.parent is not None},
            waiting=tuple(self.jobs[j].name for j in sorted(self.reserved, key=self.admitted.__getitem__)),
        )
