"""Fair-share model: the stable allocation a quota scheduler reaches, for the validator to expect.

Pure logic, no Ansible and no Kubernetes: given the nodes, the projects (a flat list or a tree), the
workloads in submission order and where jobs run now, `predict` says which workloads run where,
which wait, and how many GPUs each project holds once the scheduler has settled. Two policies:

``"runai"`` (Run:AI, NVIDIA KAI scheduler; NetApp validation, SCENARIOS.md 4.8 - 4.10)
    Fair share, per level of the tree, as KAI v0.12.0 divides it: each project first deserves
    ``min(quota, demand)`` (not scaled down when quotas exceed the capacity); spare capacity is
    divided in whole GPUs by over-quota weight (default: the quota), capped by the project's limit
    and its demand (``_kai_over_quota``). Jobs start within their fair share; capacity that fair
    shares leave idle (job granularity, node fragmentation) is lent to the project furthest below
    its fair share. A project below its fair share reclaims from projects above theirs; failing
    that, a project below its quota reclaims from projects above their quota (KAI's two strategies).

``"elastic"`` (Alibaba Cloud ACK elastic quota tree, capacity scheduling; SCENARIOS.md second half)
    ``quota`` is a node's ``min`` and ``limit`` its ``max``. A job starts if it fits in idle capacity
    and every node on its path stays within ``max`` (idle capacity is borrowed up to ``max``). A job
    whose leaf stays within ``min`` reclaims from quota nodes above their ``min``: reclaim goes up to
    ``min`` only, never towards an over-quota split, which is why the two engines differ on one tree.

``"kueue"`` (Kueue with fair sharing: ClusterQueues in a cohort, weights = quotas, reclaim within the cohort)
    Admits no more in all than the cohort's quotas (the top-level projects') add up to, fair shares
    water-filled in real numbers. One cohort (a flat tree), as Kueue v0.16 does it: a queue admits
    its interactive work first; a workload is admitted by quota alone and, with no node free, holds
    its quota while it waits (``Prediction.waiting``; the room a preemption frees goes to the
    workloads waiting longest); a workload the quotas no longer cover preempts as Kueue's fair
    sharing does (``kueue_fair_targets``: dominant resource shares, other queues' work before the
    claimant's own lower-priority work, the most recently admitted first), at most once per
    workload per prediction. Nested cohorts: the runai lending and reclaim tiers with Kueue's
    choice of victims (a queue above its level *before* the victim goes, the most recently
    submitted first). Kueue has no non-preemptible work: interactive jobs borrow and are
    reclaimed like the rest (their higher priority only orders victims inside their own queue).

runai and elastic: interactive (non-preemptible) jobs start only within their project's quota
(``min``) and, once running, are never preempted; a project never exceeds its limit (``max``), nor
does any node on its path (all three policies).

Rules that make the prediction deterministic (the documents leave them to "fairness algorithms"):

* Submission order is the order of ``jobs``. Pending jobs are admitted earliest-submitted first,
  so jobs left pending by an earlier step start before those submitted after them (4.10: the
  b-4-gg and c-4-gg that 4.9 paused run, the new b-5-gg and c-6-gg wait). A job that cannot start
  does not block later, smaller jobs. runai admits in two passes: every job that keeps its project
  within its fair share, in submission order; then idle capacity, one job at a time, to the project
  furthest below its fair share (ties: declaration order), its jobs in submission order.
* Reclaim: pending jobs entitled to it claim in submission order. A victim is a running
  preemptible job of another project such that its project, and every ancestor it does not share
  with the claimant, is above the level (fair share or quota) before the preemption (runai, as
  KAI's reclaim strategies; kueue), or stays at or above ``min`` after it (elastic).
  Victims rank by the tree from the top down, the most over-level node first (ties: runai, the queue
  declared last, as KAI; else declaration order), and within a project the most recently submitted
  job first. The claimant tries the nodes of the victims in that rank; on a node it takes eligible
  victims there in rank order, preferring one whose removal lets it fit (4.9: c-4-gg rather than the
  newer 1-GPU c-5-g, which would not make room for a 2-GPU job), then releases those it turns out
  not to need. The first node where it fits wins. Admission and reclaim repeat until nothing
  changes, so predicting again from the result changes nothing (the state is stable; kueue: about
  1 % of random cases move again, docs/fairshare.md). runai runs
  each pass in KAI's order of actions: admission and lending, consolidation, reclaim, preemption
  inside a project.
* Placement is bin packing: a whole-GPU job goes to the node with the fewest free GPUs that still
  holds it (ties: node order), on its lowest free GPU indices; a fractional job (0 < gpus < 1)
  goes to the shared GPU with the least room that still holds it, else takes a whole GPU the same
  way. Fractions on one GPU sum to at most 1. Amounts are counted in thousandths of a GPU.

The model serves any single scalar resource (the Alibaba example counts CPU cores): ``Job.gpus``
is then the replica size and a node's "GPUs" its cores. Beside the GPUs, policy runai also counts
CPU and memory where flat projects declare CPU or memory quotas or limits, as KAI compares every
resource: limits and the non-preemptible quota per resource, fair shares per resource, a reclaimer
within its level in every resource, a reclaimee above its level in any (docs/fairshare.md, "CPU
and memory beside the GPUs"); a node's CPU and memory are not room the model packs.

Touches nothing outside its arguments but Python's cyclic garbage collector, which ``predict``
pauses while it runs and restores after (``_cycle_collector_paused``).
"""

from __future__ import annotations

import bisect
import contextlib
import copy
import gc
import heapq
import math
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

POLICIES = ("runai", "elastic", "kueue")
# The policies that split spare capacity by fair share (runai's water-filling), as opposed to elastic's min/max.
_FAIR_SHARE_POLICIES = ("runai", "kueue")
# How many nodes (those with the most idle GPUs) the runai consolidation tries to empty for one job.
CONSOLIDATION_NODES = 32
UNITS_PER_GPU = 1000  # amounts are counted in thousandths of a GPU: 0.6 + 0.4 is exactly one GPU
_EPS = 1e-6  # in units; fair shares are real numbers, allocations whole units
_INF = float("inf")
CPU_UNITS = 1000  # CPU is counted in millicores, as KAI counts it
MEMORY_UNITS = 1024  # memory in MiB
RESOURCES = ("cpu", "memory")  # beside the GPUs, in this order wherever the model keeps one per resource


@dataclass(frozen=True)
class _ResourceBounds:
    """One resource's quota and limit per project, in its units (_INF: none)."""

    quota: list[float]
    limit: list[float]


def _resource_units(value: float | None, per: int, what: str) -> float:
    """A CPU (cores) or memory (GiB) amount in the model's units; None (none declared) is _INF."""
    if value is None:
        return _INF
    if value < 0:
        raise ValueError(f"{what} is {value}: must not be negative")
    return round(value * per)


@dataclass(frozen=True)
class Project:
    """A Run:AI project / KAI queue, or a node of the elastic quota tree.

    ``quota`` is what the project is guaranteed (Run:AI quota, elastic ``min``), ``limit`` the most it
    may hold (Run:AI limit, elastic ``max``; None for no limit), ``weight`` its over-quota weight
    (runai only; None means equal to the quota), ``parent`` the enclosing node (None: top level).
    Jobs belong to projects without children. ``cpu_quota``/``cpu_limit`` (cores) and
    ``memory_quota``/``memory_limit`` (GiB) beside the GPUs: None for none (KAI's -1, unlimited);
    policy runai only, flat projects (a KAI queue's cpu and memory resources).
    """

    name: str
    quota: float = 0.0
    limit: float | None = None
    weight: float | None = None
    parent: str | None = None
    cpu_quota: float | None = None
    cpu_limit: float | None = None
    memory_quota: float | None = None
    memory_limit: float | None = None


@dataclass(frozen=True)
class Job:
    """A workload: ``gpus`` whole GPUs on one node, or a fraction (0 < gpus < 1) of one shared GPU.

    ``interactive`` marks a non-preemptible job (a build session, a notebook); training is preemptible.
    ``gang`` names the gang (KAI's PodGroup) the job is one pod of: its first ``gang_min`` pods, in
    submission order, start together or not at all and are evicted together; the pods beyond them
    start and are evicted one by one, only while those run (``replicas`` builds a gang's pods).
    ``cpu`` (cores) and ``memory`` (GiB) are what each pod requests beside its GPUs (policy runai).
    """

    name: str
    project: str
    gpus: float
    interactive: bool = False
    gang: str | None = None
    gang_min: int = 0
    cpu: float = 0.0
    memory: float = 0.0

    @property
    def preemptible(self) -> bool:
        return not self.interactive


@dataclass(frozen=True)
class Node:
    """A GPU node; ``cpu`` (cores) and ``memory`` (GiB) what it offers pods (None: not known).

    CPU and memory enter the prediction only as the capacity their fair shares divide (policy
    runai); a node is taken to hold any job its GPUs hold (docs/fairshare.md says so)."""

    name: str
    gpus: int
    cpu: float | None = None
    memory: float | None = None


@dataclass(frozen=True, slots=True)  # slots: a prediction of 100,000 jobs builds most of them anew
class Placement:
    """Where a running job sits: its node and GPU indices (for a fraction, the one shared GPU)."""

    node: str
    gpus: tuple[int, ...]
    shared: bool = False


@dataclass(frozen=True)
class Prediction:
    """The stable state: per project GPUs held and deserved, per job where it runs or that it waits.

    ``deserved`` is the runai fair share, or the elastic ``min``. ``preempted`` lists the jobs that
    ran before this step (``running``) and wait now. ``parents`` maps each sub-project to its parent.
    ``waiting`` (policy kueue) lists the pending jobs admitted by quota whose pods wait for a node, in
    the order admitted: they hold their quota, though ``allocated`` counts only what runs.
    """

    policy: str
    capacity: float
    allocated: dict[str, float]
    deserved: dict[str, float]
    placements: dict[str, Placement]
    pending: tuple[str, ...]
    preempted: tuple[str, ...] = ()
    parents: dict[str, str] = field(default_factory=dict)
    waiting: tuple[str, ...] = ()

    @property
    def total_allocated(self) -> float:
        """GPUs held by jobs, fractions counted as fractions (leaf projects only, no double count)."""
        inner = set(self.parents.values())
        return round(sum(amount for name, amount in self.allocated.items() if name not in inner), 3)

    @property
    def gpus_in_use(self) -> int:
        """Devices with any job on them: a GPU shared by fractions counts once."""
        return len({(placement.node, gpu) for placement in self.placements.values() for gpu in placement.gpus})

    @property
    def running(self) -> tuple[str, ...]:
        return tuple(self.placements)

    def state(self, job: str) -> str:
        if job in self.placements:
            return "running"
        if job in self.pending:
            return "pending"
        raise KeyError(job)


def replicas(
    name: str,
    project: str,
    count: int,
    size: float,
    interactive: bool = False,
    min_members: int | None = None,
    cpu: float = 0.0,
    memory: float = 0.0,
) -> tuple[Job, ...]:
    """The pods of a Deployment (or the workers of a job) as jobs: ``name-0`` … ``name-<count-1>``,
    each asking ``cpu`` cores and ``memory`` GiB beside its ``size``.

    With ``min_members``, the pods are a gang named ``name`` of which that many start together."""
    gang, least = (None, 0) if min_members is None else (name, min_members)
    return tuple(Job(f"{name}-{index}", project, size, interactive, gang, least, cpu, memory) for index in range(count))


def _units(value: float, what: str) -> int:
    scaled = value * UNITS_PER_GPU
    units = round(scaled)
    if abs(units - scaled) > 1e-6:
        raise ValueError(f"{what} is {value}: amounts must be multiples of {1 / UNITS_PER_GPU}")
    return units


def _water_fill(amount: float, caps: Sequence[float], weights: Sequence[float]) -> list[float]:
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


def _kai_over_quota(
    amount: float, requests: Sequence[float], weights: Sequence[float], grain: int = UNITS_PER_GPU
) -> list[float]:
    """KAI's division of what is left once every queue has its quota (KAI v0.12.0,
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
    while left > _EPS:
        members = [i for i in range(len(asking)) if asking[i] > _EPS and weights[i] > 0]
        weight_sum = sum(weights[i] for i in members)
        if not weight_sum:
            break
        round_amount = left
        another = False
        for i in members:
            if left <= _EPS:
                break
            share = round_amount * weights[i] / weight_sum
            if asking[i] <= share + _EPS:
                give = asking[i]
                lost.pop(i, None)
                another = True
            else:
                give = math.floor(share / grain + 1e-9) * grain
                if share - give > _EPS:
                    lost[i] = share - give
            if give <= 0:
                continue
            extra[i] += give
            asking[i] -= give
            left -= give
        if not another:
            break
    for i in sorted(lost, key=lambda i: (-lost[i], i)):
        if left <= _EPS:
            break
        give = min(float(grain), left)
        extra[i] += give
        left -= give
    return extra


class _Tree:
    """Projects by index: declaration order, parents, paths to the top, children."""

    def __init__(self, projects: Sequence[Project]) -> None:
        self.projects = list(projects)
        self.index: dict[str, int] = {}
        for i, project in enumerate(self.projects):
            if project.name in self.index:
                raise ValueError(f"project {project.name!r} is declared twice")
            if project.quota < 0 or (project.limit is not None and project.limit < 0):
                raise ValueError(f"project {project.name!r}: quota and limit must not be negative")
            if project.weight is not None and project.weight < 0:
                raise ValueError(f"project {project.name!r}: weight must not be negative")
            self.index[project.name] = i
        count = len(self.projects)
        self.parent = [-1] * count
        self.children: list[list[int]] = [[] for _ in range(count)]
        self.top: list[int] = []
        for i, project in enumerate(self.projects):
            if project.parent is None:
                self.top.append(i)
                continue
            if project.parent not in self.index:
                raise ValueError(f"project {project.name!r}: parent {project.parent!r} is not declared")
            self.parent[i] = self.index[project.parent]
            self.children[self.parent[i]].append(i)
        self.path: list[tuple[int, ...]] = []
        for i in range(count):
            chain = [i]
            while self.parent[chain[-1]] >= 0:
                chain.append(self.parent[chain[-1]])
                if len(chain) > count:
                    raise ValueError(f"project {self.projects[i].name!r} is its own ancestor")
            self.path.append(tuple(chain))
        self.quota = [p.quota * UNITS_PER_GPU for p in self.projects]
        self.limit = [_INF if p.limit is None else p.limit * UNITS_PER_GPU for p in self.projects]
        self.weight = [p.quota if p.weight is None else p.weight for p in self.projects]
        self.grain = UNITS_PER_GPU
        # CPU (millicores) and memory (MiB) quotas and limits, _INF where none is declared.
        self.resources = [
            _ResourceBounds(
                *(
                    [_resource_units(getattr(p, field), per, f"project {p.name!r}: {field}") for p in projects]
                    for field in (f"{resource}_quota", f"{resource}_limit")
                )
            )
            for resource, per in zip(RESOURCES, (CPU_UNITS, MEMORY_UNITS), strict=True)
        ]
        self.multi_resource = any(bound < _INF for bounds in self.resources for bound in bounds.quota + bounds.limit)

    def for_resource(self, r: int) -> _Tree:
        """This tree with CPU's (``r`` 0) or memory's (1) quotas and limits in place of the GPUs',
        for dividing that resource's fair shares (weights stay: the KAI adapter writes a queue's
        GPU over-quota weight for its CPU and memory too)."""
        other = copy.copy(self)
        other.quota = self.resources[r].quota
        other.limit = self.resources[r].limit
        other.grain = 1
        return other

    def fair_shares(self, leaf_demand: Sequence[float], capacity: float, whole_units: bool = False) -> list[float]:
        """Hierarchical fair share in units: at each level quota first, then spare by weight.
        ``whole_units``: KAI's division (runai), else a water-fill in real numbers (kueue).

        A project asks for its demand up to its limit. KAI sums a parent's request from its
        children's whole requests, their limits aside (v0.12.0 ``updateQueuesResourceUsageFor*``
        adds every pod to each queue up the tree; only a queue's own limit caps what it may ask):
        a department whose child is limited to 6 but asks 21 asks 21. Elsewhere a parent asks what
        its children may take."""
        count = len(self.projects)
        demand = list(leaf_demand)
        asked = list(leaf_demand)  # KAI: uncapped, summed up the tree
        for i in self._bottom_up():
            if self.children[i]:
                asked[i] = sum(asked[c] for c in self.children[i])
                demand[i] = asked[i] if whole_units else sum(demand[c] for c in self.children[i])
            demand[i] = min(demand[i], self.limit[i])
        share = [0.0] * count
        self._split(capacity, self.top, demand, share, whole_units)
        stack = list(self.top)
        while stack:
            i = stack.pop()
            if self.children[i]:
                self._split(share[i], self.children[i], demand, share, whole_units)
                stack.extend(self.children[i])
        return share

    def _bottom_up(self) -> list[int]:
        order: list[int] = []
        stack = list(self.top)
        while stack:
            i = stack.pop()
            order.append(i)
            stack.extend(self.children[i])
        return order[::-1]

    def _split(
        self, amount: float, members: list[int], demand: list[float], share: list[float], whole_units: bool
    ) -> None:
        base = [min(self.quota[i], demand[i]) for i in members]
        if whole_units:
            # KAI: each queue deserves min(quota, demand) even when they add up to more than the
            # amount (quotas above capacity are not scaled down); the rest is divided in whole GPUs.
            extra = [0.0] * len(members)
            if sum(base) < amount:
                requests = [demand[i] - b for i, b in zip(members, base, strict=True)]
                extra = _kai_over_quota(amount - sum(base), requests, [self.weight[i] for i in members], self.grain)
            for i, b, e in zip(members, base, extra, strict=True):
                share[i] = b + e
            return
        if sum(base) >= amount:
            parts = _water_fill(amount, base, [self.quota[i] for i in members])
        else:
            extra = _water_fill(
                amount - sum(base),
                [demand[i] - b for i, b in zip(members, base, strict=True)],
                [self.weight[i] for i in members],
            )
            parts = [b + e for b, e in zip(base, extra, strict=True)]
        for i, part in zip(members, parts, strict=True):
            share[i] = part


def fair_shares(
    projects: Sequence[Project], demand: Mapping[str, float], capacity: float, policy: str = "runai"
) -> dict[str, float]:
    """The fair share of every project (GPUs) for the demand of each leaf project (GPUs), as the
    policy divides it (runai: KAI's whole-GPU division; kueue: a water-fill in real numbers)."""
    tree = _Tree(projects)
    leaf_demand = [0.0] * len(tree.projects)
    for name, amount in demand.items():
        leaf_demand[tree.index[name]] = amount * UNITS_PER_GPU
    shares = tree.fair_shares(leaf_demand, capacity * UNITS_PER_GPU, whole_units=policy == "runai")
    return {p.name: shares[i] / UNITS_PER_GPU for i, p in enumerate(tree.projects)}


class _Engine:
    """Mutable cluster state for one prediction; indices everywhere, names only at the edges."""

    def __init__(
        self,
        policy: str,
        nodes: Sequence[Node],
        tree: _Tree,
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
        # CPU and memory the nodes offer, in all (_INF when some node does not say)
        self.res_capacity = [
            _INF if None in cpus else sum(round(c * CPU_UNITS) for c in cpus),  # type: ignore[operator]
            _INF if None in memory else sum(round(m * MEMORY_UNITS) for m in memory),  # type: ignore[operator]
        ]
        self.capacity = sum(self.node_size) * UNITS_PER_GPU
        # What the engine admits in all, besides the nodes' room: for Kueue its cohort's quotas.
        self.cohort_cap = sum(tree.quota[t] for t in tree.top) if policy == "kueue" else _INF
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
                units = sizes[job.gpus] = _units(job.gpus, f"job {job.name!r} gpus")
                if units <= 0:
                    raise ValueError(f"job {job.name!r} asks for {job.gpus} GPUs: must be more than 0")
                if units >= UNITS_PER_GPU and units % UNITS_PER_GPU:
                    raise ValueError(f"job {job.name!r} asks for {job.gpus} GPUs: a fraction must be below 1")
            self.units.append(units)
            self.whole.append(units // UNITS_PER_GPU)
            self.leaf.append(q)
        self.preemptible = [policy == "kueue" or not job.interactive for job in self.jobs]
        self._read_gangs()
        self.place: list[tuple[int, tuple[int, ...]] | None] = [None] * len(self.jobs)
        # The pending jobs in submission order, narrowed as jobs start; a released job waits in
        # _released until the next _pending() merges it back (a full rescan per pass cost 0.15 s of
        # the 10,000-project step).
        self._pending_list: list[int] = list(range(len(self.jobs)))
        self._released: list[int] = []
        # Bumped whenever a job is placed or released: _pending() hands back its last list while
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
        self.saturation_test = policy == "runai" and not self.flat
        # CPU and memory beside the GPUs (KAI's capacity policy and reclaim strategies compare
        # every resource): kept only where a project declares a CPU or memory quota or limit.
        self.multi = tree.multi_resource
        if self.multi:
            self._read_resources()
        # Whether only fair share may keep preemptible work from starting: no limit on any project,
        # no cohort's quotas, no CPU or memory, no gangs (the common site: admission then skips
        # the other rules, a quarter of the first pass over 100,000 jobs).
        self.only_fair_share = (
            not self.gang_pods and not self.multi and self.cohort_cap == _INF and all(b == _INF for b in tree.limit)
        )
        # When each running job was (last) placed: Kueue takes the most recently admitted first.
        self.admitted = [0] * len(self.jobs)
        self.admissions = 0
        self.kueue_preempted: set[int] = set()
        # kueue: workloads admitted by quota whose pods wait for a node. They hold their quota (in
        # alloc and used) as Kueue counts them, run on no node, and go to a node when one has room.
        self.reserved: set[int] = set()
        self.reserves = policy == "kueue" and self.flat
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
                    self._reserve(j)
        self.buckets: list[list[int]] = [[] for _ in range(max(self.node_size, default=0) + 1)]
        for n, free in enumerate(self.free):
            self.buckets[free].append(n)

        demand = [0.0] * count
        interactive_demand = [0.0] * count
        for job, q, units in zip(self.jobs, self.leaf, self.units, strict=True):
            if job.interactive:
                interactive_demand[q] += units
            else:
                demand[q] += units
        if policy in _FAIR_SHARE_POLICIES:
            # interactive work beyond the quota never starts, so it claims no share
            for q in range(count):
                demand[q] += min(interactive_demand[q], tree.quota[q])
            # Kueue admits against its cohort's nominal quotas, not the cluster: what the cohort can
            # admit in all is their sum (the differential bench: a cohort of quotas 3, 2, 2 on 16
            # GPUs admits 7).
            shared = min(self.capacity, self.cohort_cap)
            self.entitled = tree.fair_shares(demand, shared, whole_units=policy == "runai")
            # the quota part of the fair share: what KAI's second reclaim strategy protects
            self.guaranteed = [min(quota, share) for quota, share in zip(tree.quota, self.entitled, strict=True)]
            self.tiers = [self.entitled, self.guaranteed]
            if self.multi:
                self._resource_levels()
        else:
            self.entitled = list(tree.quota)
            self.guaranteed = self.entitled
            self.tiers = [self.entitled]

    def _read_resources(self) -> None:
        """Per job its CPU and memory requests, and per project what its running jobs hold of them
        (non-preemptible apart)."""
        if self.policy != "runai":
            raise ValueError(
                f"cpu and memory quotas and limits are modelled for policy runai only, found {self.policy}"
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

    def _resource_levels(self) -> None:
        """Per resource, the fair share (tier 0) and the quota part of it (tier 1), as for the GPUs:
        KAI lets a queue reclaim only while every resource stays within its fair share (and, by the
        second strategy, its quota), and takes from a queue above either in any resource."""
        count = len(self.tree.projects)
        self.res_levels: list[list[list[float]]] = []
        for r in range(len(RESOURCES)):
            demand = [0.0] * count
            for j, request in enumerate(self.res_req):
                demand[self.leaf[j]] += request[r]
            sub = self.tree.for_resource(r)
            fair = sub.fair_shares(demand, self.res_capacity[r], whole_units=True)
            self.res_levels.append([fair, [min(quota, share) for quota, share in zip(sub.quota, fair, strict=True)]])

    def _tier(self, level: list[float] | None) -> int:
        """The reclaim tier of a GPU level (None: the fair share), to find the CPU and memory levels beside it."""
        return 0 if level is None or level is self.entitled else 1

    def _start_res(self, j: int, r: int) -> int:
        """What starting job ``j`` adds of resource ``r``: its pods to start (a gang's core pods share a size)."""
        return self.res_req[j][r] * (self.start_units[j] // self.units[j])

    def _res_over(self, q: int, level: list[float], removed: Mapping[Any, int] | None = None) -> bool:
        """Whether project ``q`` (less what ``removed`` takes) is above the tier's CPU or memory level."""
        t = self._tier(level)
        for r in range(len(RESOURCES)):
            gone = removed.get((r, q), 0) if removed else 0
            if self.res_alloc[r][q] - gone > self.res_levels[r][t][q] + _EPS:
                return True
        return False

    def _res_within_limits(self, q: int, need: Sequence[int], removed: Mapping[Any, int] | None = None) -> bool:
        for r, bounds in enumerate(self.tree.resources):
            alloc = self.res_alloc[r]
            for a in self.tree.path[q]:
                gone = removed.get((r, a), 0) if removed else 0
                if alloc[a] - gone + need[r] > bounds.limit[a] + _EPS:
                    return False
        return True

    def _above(self, q: int, level: list[float]) -> bool:
        """Whether project ``q`` is above ``level``: in GPUs, or (multi-resource) in CPU or memory."""
        return self.alloc[q] > level[q] + _EPS or (self.multi and self._res_over(q, level))

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
        # gang's core pods not running (all of them now; _occupy and _release keep it current).
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

    def _gang_blocked(self, j: int) -> bool:
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

    def _start_gang(self, j: int) -> bool:
        """Bin-pack the core pods of job ``j``'s gang that do not run, all or none."""
        placed = []
        for m in self.gang_core[self.gang[j]]:
            if self.place[m] is not None:
                continue
            if not self._try_place(m):
                for k in placed:
                    self._release(k)
                return False
            placed.append(m)
        return True

    def _start(self, j: int) -> bool:
        return self._start_gang(j) if self.in_core[j] else self._try_place(j)

    def _gang_mates(self, v: int) -> list[int]:
        """What goes when job ``v`` is evicted: a core pod takes its whole gang with it."""
        gid = self.gang[v]
        if gid < 0 or not self.in_core[v]:
            return [v]
        return [m for m in self.gang_pods[gid] if self.place[m] is not None]

    def _evict(self, victims: Sequence[int]) -> None:
        for v in self._with_mates(victims):
            self._release(v)

    def _with_mates(self, victims: Sequence[int]) -> list[int]:
        if not self.gang_pods:
            return list(victims)
        seen: dict[int, None] = {}
        for v in victims:
            for m in self._gang_mates(v):
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
            self._note_alloc(q, n)

    def _release(self, j: int) -> None:
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
            self._note_alloc(q, n, gone=j)

    def _count_resources(self, j: int, sign: int) -> None:
        q = self.leaf[j]
        for r, amount in enumerate(self.res_req[j]):
            for a in self.tree.path[q]:
                self.res_alloc[r][a] += sign * amount
            if not self.preemptible[j]:
                self.res_fixed[r][q] += sign * amount

    def _reserve(self, j: int) -> None:
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

    def _kueue_evict(self, j: int) -> None:
        """A victim: a running job released, or an admitted one that waits for a node unadmitted."""
        if j in self.reserved:
            self._unreserve(j)
            self._released.append(j)
        else:
            self._release(j)

    def _place_reserved(self) -> bool:
        """kueue: the admitted workloads whose pods wait go to nodes that have room now, first admitted first."""
        changed = False
        for j in sorted(self.reserved, key=self.admitted.__getitem__):
            if self.whole[j] and self._node_for_whole(self.whole[j]) < 0:
                continue  # no node holds it yet: its quota stays held, its queue's heap entry current
            admitted = self.admitted[j]
            self._unreserve(j)  # placing counts the job's quota again
            if self._try_place(j):
                changed = True
            else:
                self._reserve(j)
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

    def _node_for_whole(self, g: int) -> int:
        buckets, free = self.buckets, self.free
        for f in range(g, len(buckets)):
            bucket = buckets[f]
            while bucket:
                n = bucket[0]
                if free[n] == f:
                    return n
                heapq.heappop(bucket)
        return -1

    def _take_whole(self, j: int, n: int, g: int) -> None:
        lst = self.free_idx[n]
        gpus = tuple(lst[:g])
        del lst[:g]
        self.free[n] -= g
        self.free_whole -= g
        heapq.heappush(self.buckets[self.free[n]], n)
        self._occupy(j, n, gpus)

    def _try_place(self, j: int) -> bool:
        """Bin-pack job ``j`` into idle capacity; False when no node holds it."""
        g = self.whole[j]
        if g:
            n = self._node_for_whole(g)
            if n < 0:
                return False
            self._take_whole(j, n, g)
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
        n = self._node_for_whole(1)
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

    def _place_on(self, j: int, n: int) -> None:
        """Place job ``j`` on node ``n``, which reclaim has just made room on."""
        g = self.whole[j]
        if g:
            self._take_whole(j, n, g)
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

    # policy ---------------------------------------------------------------------------------

    def _within_limits(self, j: int) -> bool:
        units, tree, alloc = self.start_units[j], self.tree, self.alloc
        if self.used + units > self.cohort_cap + _EPS:
            return False
        for a in tree.path[self.leaf[j]]:
            if alloc[a] + units > tree.limit[a] + _EPS:
                return False
        if self.multi:
            return self._res_within_limits(self.leaf[j], [self._start_res(j, r) for r in range(len(RESOURCES))])
        return True

    def _interactive_ok(self, j: int) -> bool:
        """Non-preemptible work starts only within the project's quota (KAI; Koordinator's non-preemptible);
        on KAI within the quota of every ancestor too, each holding its children's non-preemptible
        work (v0.12.0, ``resultsWithNonPreemptibleOverQuota`` walks the queue's parents)."""
        if self.preemptible[j]:
            return True
        q = self.leaf[j]
        quota, fixed, units = self.tree.quota, self.interactive_alloc, self.start_units[j]
        for a in self.tree.path[q] if self.policy == "runai" else (q,):
            if fixed[a] + units > quota[a] + _EPS:
                return False
        if self.multi:  # KAI's capacity policy: every resource within its quota
            for r, bounds in enumerate(self.tree.resources):
                if self.res_fixed[r][q] + self._start_res(j, r) > bounds.quota[q] + _EPS:
                    return False
        return True

    def _may_start(self, j: int) -> bool:
        """Rules other than fair share: the limits on the path, the interactive rule, and a gang's
        pods starting with their gang."""
        if self.only_fair_share and self.preemptible[j]:
            return True
        if self.gang_pods and self._gang_blocked(j):
            return False
        return self._interactive_ok(j) and self._within_limits(j)

    def _entitled(self, j: int, level: list[float] | None = None) -> bool:
        """Whether job ``j`` keeps its project within ``level`` (default: fair share, or elastic min).

        Limits are not checked here: reclaim may free room under a full parent, and `_fits` checks them.
        """
        q = self.leaf[j]
        bound = (self.entitled if level is None else level)[q]
        if self.gang_pods and self._gang_blocked(j):
            return False
        if self.alloc[q] + self.start_units[j] > bound + _EPS or not self._interactive_ok(j):
            return False
        if self.multi:  # KAI's reclaimer: within the level in every resource
            t = self._tier(level)
            for r in range(len(RESOURCES)):
                if self.res_alloc[r][q] + self._start_res(j, r) > self.res_levels[r][t][q] + _EPS:
                    return False
        return True

    def settle(self) -> None:
        while True:
            changed = self._place_reserved() if self.reserved else False
            changed = self._admit_in_order() or changed
            if self.policy in _FAIR_SHARE_POLICIES:
                changed = self._lend_idle() or changed
            if self.policy == "runai":
                changed = self._consolidate() or changed
            changed = self._reclaim() or changed
            if self.policy == "runai":
                changed = self._preempt_within_projects() or changed
            if not changed:
                return

    def _consolidate(self) -> bool:
        """runai: KAI's consolidation action. A pending whole-GPU job within its fair share that
        finds enough idle GPUs in the cluster, but not on one node, gets a node emptied for it: the
        node needing the fewest GPUs moved (ties: node order), whose training jobs, fewest first,
        move to other nodes where they fit (largest first, each to the node with the fewest free
        GPUs that holds it, a fraction taking a whole GPU's room). Nothing is evicted for good."""
        changed = False
        failed_size = _INF  # a node could not be emptied for this many GPUs: nor for more, until something moves
        for j in self._pending():
            g = self.whole[j]
            q = self.leaf[j]
            if not g or g >= failed_size or self.free_whole < g or self.gang[j] >= 0:
                continue  # a gang's pods are not consolidated for (nor moved): not modelled
            if self.alloc[q] + self.units[j] > self.entitled[q] + _EPS or not self._may_start(j):
                continue
            if self._node_for_whole(g) >= 0:
                continue
            plan = self._consolidation_plan(g)
            if plan is None:
                failed_size = g
                continue
            n, moves = plan
            for v, _ in moves:
                self._release(v)
            self._take_whole(j, n, g)
            for v, m in moves:
                if self.whole[v]:
                    self._take_whole(v, m, self.whole[v])
                else:
                    self._place_on(v, m)
            changed = True
            failed_size = _INF
        return changed

    def _consolidation_plan(self, g: int) -> tuple[int, list[tuple[int, int]]] | None:
        """The node to empty for a job of ``g`` whole GPUs and where each moved job goes: the
        first that works of the ``CONSOLIDATION_NODES`` nodes with the most idle GPUs (KAI's
        solver also tries a bounded number of scenarios; a site whose idle GPUs are spread over
        more nodes than that is left fragmented here, as it may be there)."""
        slots = sorted((free, m) for m, free in enumerate(self.free) if free > 0)
        order = heapq.nsmallest(CONSOLIDATION_NODES, range(len(self.node_size)), key=lambda n: (-self.free[n], n))
        for n in order:
            if self.node_size[n] < g:
                continue
            movable = sorted(
                (v for v in self.node_jobs[n] if self.preemptible[v] and self.gang[v] < 0),
                key=lambda v: (max(self.whole[v], 1), -v),
            )
            freed, movers = self.free[n], []
            on_shared: dict[int, int] = {}
            for v in movable:
                if freed >= g:
                    break
                movers.append(v)
                if self.whole[v]:
                    freed += self.whole[v]
                else:
                    gpu = self.place[v][1][0]  # type: ignore[index]
                    on_shared[gpu] = on_shared.get(gpu, 0) + self.units[v]
                    if on_shared[gpu] == self.node_partial[n][gpu]:
                        freed += 1
            if freed < g:
                continue
            room = [slot for slot in slots if slot[1] != n]
            moves = []
            for v in sorted(movers, key=lambda v: (-max(self.whole[v], 1), v)):
                need = max(self.whole[v], 1)
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

    def _preempt_within_projects(self) -> bool:
        """runai: a pending interactive job within its project's quota that finds no room preempts
        its own project's training jobs (KAI's preempt action: a build or inference job outranks
        training in its queue). On each node it takes the project's training jobs there, the most
        recently submitted first, until it fits there and within its project's limits counted
        without them (KAI checks the preemptor's queue with its victims gone: a project at its
        limit makes room from its own work, differential seed 2 with --resources), then puts back
        those it did not need; the node where that evicts the least wins (ties: node order). The
        project holds no more than before (or its fair share)."""
        changed = False
        for j in self._pending():
            if self.preemptible[j] or self.gang[j] >= 0 or not self._interactive_ok(j):
                continue  # an interactive gang preempting its own project: not modelled
            q = self.leaf[j]
            own = sorted((v for v in self.leaf_running[q] if self.preemptible[v] and self.gang[v] < 0), reverse=True)
            if not own:
                continue
            by_node: dict[int, list[int]] = {}
            for v in own:
                by_node.setdefault(self.place[v][0], []).append(v)  # type: ignore[index]
            best: tuple[int, int, list[int]] | None = None  # (units freed, node, victims)
            # Within its limits already, the job needs only GPUs (victims lower what the project holds).
            within = self._within_limits(j)
            for n, candidates in sorted(by_node.items()):

                def fits(trial: list[int], j: int = j, n: int = n, within: bool = within) -> bool:
                    if within:
                        return self._gpus_fit(j, n, trial)
                    return self._fits(j, n, trial, self._removed_in(trial))

                chosen: list[int] = []
                for v in candidates:
                    if fits(chosen):
                        break
                    chosen.append(v)
                if not chosen or not fits(chosen):
                    continue
                chosen = _without_unneeded(chosen, fits)
                freed = sum(self.units[v] for v in chosen)
                if best is None or freed < best[0]:
                    best = (freed, n, chosen)
            if best is None:
                continue
            freed, n, chosen = best
            if self.alloc[q] - freed + self.units[j] > max(self.alloc[q], self.entitled[q]) + _EPS:
                continue
            for v in chosen:
                self._release(v)
            self._place_on(j, n)
            changed = True
        return changed

    def _pending(self) -> list[int]:
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

    def _admission_order(self) -> list[int]:
        """The pending jobs in the order they are admitted: submission order; kueue: a queue's
        higher-priority work (interactive) first, as a ClusterQueue orders its workloads."""
        pending = self._pending()
        if self.policy != "kueue":
            return pending
        pending = [j for j in pending if j not in self.reserved]
        interactive = [j for j in pending if self.jobs[j].interactive]
        return interactive + [j for j in pending if not self.jobs[j].interactive]

    def _admit_in_order(self) -> bool:
        """Start pending jobs in submission order (runai: within fair share; elastic: within max)."""
        changed = False
        fair = self.policy in _FAIR_SHARE_POLICIES
        alloc, entitled, start_units = self.alloc, self.entitled, self.start_units
        gangs = bool(self.gang_pods)
        whole_fails = _INF  # idle capacity only shrinks in this pass: remember the smallest misfit
        fraction_fails = _INF
        reserves = self.reserves
        for j in self._admission_order():
            if not reserves and not self.free_whole and not self.partial_room:
                break
            g = self.whole[j]
            if (g and g >= whole_fails) or (not g and self.units[j] >= fraction_fails):
                continue
            if fair and alloc[self.leaf[j]] + start_units[j] > entitled[self.leaf[j]] + _EPS:
                continue
            if not self._may_start(j):
                continue
            if gangs and self.in_core[j]:
                changed = self._start_gang(j) or changed  # a gang that does not fit says nothing of one pod
            elif self._try_place(j):
                changed = True
            elif self.reserves:
                self._reserve(j)  # Kueue admits by quota: its pods wait for a node
                changed = True
            elif g:
                whole_fails = g
            else:
                fraction_fails = self.units[j]
        return changed

    def _lend_idle(self) -> bool:
        """runai: lend what fair shares leave idle, to the project furthest below its fair share;
        in a tree, as KAI orders its queues (``JobsOrderByQueues``), first the department furthest
        below its fair share, then its project furthest below (the key is the gap at each level
        from the top down). Keys only grow as jobs start, so a popped entry whose key is stale goes
        back with its key as it is now (lazily: a department's start moves its children's keys)."""
        queues: dict[int, list[int]] = {}
        for j in self._admission_order():
            queues.setdefault(self.leaf[j], []).append(j)
        if not queues:
            return False
        alloc, entitled = self.alloc, self.entitled
        tree_order = self.policy == "runai" and not self.flat
        if tree_order:
            top_down = {q: self.tree.path[q][::-1] for q in queues}

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
        whole_fails = _INF
        fraction_fails = _INF
        reserves = self.reserves
        while heap:
            if not reserves and not self.free_whole and not self.partial_room:
                break
            key, q, position = heapq.heappop(heap)
            if tree_order and (now := gap(q)) != key:  # flat, only q's own start moves q's key
                heapq.heappush(heap, (now, q, position))
                continue
            jobs = queues[q]
            j = jobs[position]
            g = self.whole[j]
            placed = False
            if not ((g and g >= whole_fails) or (not g and self.units[j] >= fraction_fails)) and self._may_start(j):
                placed = self._start(j)
                if not placed and self.reserves:
                    self._reserve(j)
                    placed = True
                elif not placed and not self.in_core[j]:
                    if g:
                        whole_fails = g
                    else:
                        fraction_fails = self.units[j]
            changed = changed or placed
            if position + 1 < len(jobs):
                heapq.heappush(heap, (gap(q), q, position + 1))
        return changed

    def _reclaim(self) -> bool:
        """Entitled pending jobs, in submission order, preempt from projects above their level.

        runai has two tiers, as KAI: first a project below its fair share takes from projects above
        theirs; failing that, a project below its quota takes from projects above their quota.
        Either way no victim's project (nor an ancestor it does not share with the claimant) drops
        below the tier's level, so every reclaim shrinks what is owed and the loop ends.
        """
        if self.policy == "kueue" and self.flat:
            return self._kueue_reclaim()
        changed = False
        self.over_heaps = [self._over_heap(level) for level in self.tiers]
        # Within one pass victims only get scarcer for a given claimant project, so a claim that failed
        # fails again for as big a job of that project, unless preemption left idle room behind, or a
        # claim of an earlier tier lifted some project above a later tier's level (its quota).
        failed: dict[tuple[int, int, bool], tuple[int, tuple[int, int], int]] = {}
        successes = [0] * len(self.tiers)
        alloc, start_units = self.alloc, self.start_units
        try:
            for j in self._pending():
                if not any(self.over_heaps):
                    break
                if self.gang_pods and self._gang_blocked(j):
                    continue
                if self.policy == "kueue" and self.used + self.start_units[j] <= self.cohort_cap + _EPS:
                    # Kueue preempts for quota, not for room on the nodes: a workload its cohort's
                    # quotas still cover is admitted and waits for the scheduler to find it a node.
                    continue
                q = self.leaf[j]
                for tier, level in enumerate(self.tiers):
                    if alloc[q] + start_units[j] > level[q] + _EPS:
                        continue  # above the level once started (_entitled's first test, inline: most fail it)
                    if not self.over_heaps[tier] or not self._entitled(j, level):
                        continue
                    if self.in_core[j]:
                        if self._claim_gang(j, level):
                            successes[tier] += 1
                            changed = True
                            break
                        continue
                    key = (tier, self.leaf[j], bool(self.whole[j]))
                    room = (self.free_whole, self.room_total)
                    lifted = sum(successes[:tier])
                    # multi-resource: a job as big in GPUs may ask less CPU or memory, no memo
                    known = None if self.multi else failed.get(key)
                    still = known is not None and _within(room, known[1]) and lifted == known[2]
                    if still and self.units[j] >= known[0]:  # type: ignore[index]
                        continue
                    if self._claim(j, tier, level):
                        successes[tier] += 1
                        changed = True
                        break
                    if not still or self.units[j] < known[0]:  # type: ignore[index]
                        failed[key] = (self.units[j], room, lifted)
        finally:
            self.over_heaps = None
            self.node_heaps = None
        return changed

    def _kueue_reclaim(self) -> bool:
        """kueue, one cohort of ClusterQueues: each pending workload the cohort's quotas no longer
        cover, in submission order, preempts as Kueue's fair sharing does (``kueue_fair_targets``):
        from its own queue, work of lower priority; from other queues, work of those that borrow.
        Preemption is for quota: the claimant is admitted and waits its turn for a node."""
        changed = False
        tree, alloc, quota, weight, stamp = self.tree, self.alloc, self.tree.quota, self.tree.weight, self.stamp
        lendable = self.cohort_cap
        failed: set[tuple[int, int, bool]] = set()  # claims that found nothing since the last change
        # A workload is preempted at most once per prediction: claims across queues of different
        # priorities can otherwise chase each other for ever (the engine would not settle either).
        preempted = self.kueue_preempted
        # The queues that borrow and hold work that may still be preempted, the highest share first:
        # (-flag, -share, queue, stamp), an entry whose stamp is no longer its queue's being stale.
        # Most claims find no queue above them: the top of the heap says so without a scan.
        targets: list[tuple[int, float, int, int]] = []
        pushed = [-1] * len(tree.projects)  # the stamp of each queue's live entry

        def push(q: int) -> None:
            if pushed[q] == stamp[q] or alloc[q] <= quota[q] + _EPS:
                return
            if all(v in preempted for v in self.leaf_running[q]) and all(v in preempted for v in self.leaf_reserved[q]):
                return
            flag, value = _kueue_share(alloc[q] - quota[q], lendable, weight[q])
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
        for j in self._pending():
            if j in self.reserved or self.place[j] is not None:
                continue  # admitted, or placed since the pass began (a waiting workload given the room)
            p, units, priority = self.leaf[j], self.units[j], self.jobs[j].interactive
            if self._within_limits(j):
                continue  # admitted: it waits for a node, preempting nothing (Kueue preempts for quota)
            if (p, units, priority) in failed:
                continue  # as the claim that just found nothing
            # The claimant's own candidates: work of lower priority (none below training).
            own = (
                [
                    v
                    for queued in (self.leaf_running[p], self.leaf_reserved[p])
                    for v in queued
                    if self.jobs[v].interactive < priority and v not in preempted
                ]
                if priority
                else []
            )
            least = alloc[p] + units - sum(self.units[v] for v in own)  # the queue's use, its own candidates gone
            if least > min(tree.limit[p], self.cohort_cap) + _EPS:
                failed.add((p, units, priority))
                continue  # more than the queue may hold even so
            # A queue whose share is below the claimant's, even once the claimant has given up all
            # its own candidates, never loses work to it (neither strategy): leave it out.
            lowest = _kueue_share(least - quota[p], lendable, weight[p])
            others = queues_at_least(lowest, p)
            theirs = [
                v
                for q in others
                for queued in (self.leaf_running[q], self.leaf_reserved[q])
                for v in queued
                if v not in preempted
            ]
            if not theirs and not own:
                failed.add((p, units, priority))
                continue
            # Kueue's order of candidates: other queues' before the claimant's own, lower priority
            # first, the most recently admitted first.
            newest_first = self.admitted.__getitem__
            running = (
                sorted((v for v in theirs if not self.jobs[v].interactive), key=newest_first, reverse=True)
                + sorted((v for v in theirs if self.jobs[v].interactive), key=newest_first, reverse=True)
                + sorted(own, key=newest_first, reverse=True)
            )
            candidates = [(self.leaf[v], self.units[v]) for v in running]
            chosen = kueue_fair_targets(p, units, alloc, quota, weight, candidates, lendable, tree.limit[p])
            if chosen is None:
                failed.add((p, units, priority))
                continue
            victims = [running[i] for i in chosen]
            for v in victims:
                self._kueue_evict(v)
            preempted.update(victims)
            # Kueue preempts for quota, whatever the nodes: the claimant is admitted, and its pods
            # join those admitted earlier that wait for a node; the room the victims leave goes to
            # the pods waiting longest (seeds 224, 226: a workload admitted before the claimant
            # takes the freed node, and the claimant waits).
            self._reserve(j)
            self._place_reserved()
            push(p)  # the victims' queues only fall: their entries are put right when they come up
            changed = True
            failed.clear()
        return changed

    def _over_heap(self, level: list[float]) -> list[tuple[float, int, int]]:
        """Leaf projects above ``level``, most above first: (-(excess), index, stamp), checked lazily."""
        alloc, children, stamp = self.alloc, self.tree.children, self.stamp
        above = self._above if self.multi else lambda q, level: alloc[q] > level[q] + _EPS
        heap = [(level[q] - alloc[q], self._heap_id(q), stamp[q]) for q in range(len(alloc)) if above(q, level)]
        heap = [entry for entry in heap if not children[_heap_q(entry[1])]]
        heapq.heapify(heap)
        return heap

    def _heap_id(self, q: int) -> int:
        """Project ``q`` as the over-level heaps hold it, so that ties go as ``_leaf_rank`` breaks them:
        runai, the project declared last first (``~q``: -1, -2, ...); else declaration order (``q``)."""
        return ~q if self.policy == "runai" else q

    def _note_alloc(self, q: int, n: int, gone: int = -1) -> None:
        """Keep the reclaim indexes current: leaf ``q``'s holding changed on node ``n`` (job ``gone`` left)."""
        alloc, whole = self.alloc, self.whole
        for heap, level in zip(self.over_heaps, self.tiers, strict=True):  # type: ignore[arg-type]
            if self._above(q, level):
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

    def _start_node_bounds(self) -> None:
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
        # _node_bound for every node, inline (36,000 calls a pass on the 10,000-project site)
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
        over = self.multi and self._res_over(q, level)
        if over or self.policy != "elastic":
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
        (``_eligible``) and the pruning bounds share. elastic keeps the project at its level after
        the job goes; KAI (runai) and Kueue only ask that it be above it before (KAI v0.12.0,
        reclaimable/strategies: the reclaimee's allocation, less the victims already chosen, above
        its fair share or quota), so a whole job may go that leaves its queue below its share."""
        if self.policy != "elastic":
            return self.alloc[q] - removed >= level[q] + _EPS
        return self.alloc[q] - removed - units >= level[q] - _EPS

    def _node_bound(self, tier: int, n: int) -> int:
        # any shared GPU might be emptied: counting them all keeps this an upper bound
        return self.free[n] + self.eligible_whole[tier][n] + len(self.node_partial[n])

    def _push_node_bound(self, n: int) -> None:
        self.node_stamp[n] += 1
        for t, heap in enumerate(self.node_heaps):
            heapq.heappush(heap, (-self._node_bound(t, n), n, self.node_stamp[n]))

    def _best_node_bound(self, tier: int) -> int:
        heap = self.node_heaps[tier]
        while heap:
            bound, n, stamp = heap[0]
            if stamp == self.node_stamp[n]:
                return -bound
            heapq.heappop(heap)
        return 0

    def _victim_leaves(self, tier: int, claimant_path: set[int], level: list[float]) -> Generator[int, None, None]:
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
                    if not self._above(q, level):
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
        over = [q for q in range(len(alloc)) if not children[q] and self._above(q, level)]
        over = [q for q in over if q not in claimant_path]
        over.sort(key=lambda q: self._leaf_rank(q, {}, claimant_path, level))
        yield from over

    def _claim(self, j: int, tier: int, level: list[float]) -> bool:
        """Find victims for job ``j``: the nodes of the best-ranked victims first; the first that works."""
        if self.node_heaps is None:
            self._start_node_bounds()
        if self.whole[j] and self._best_node_bound(tier) < self.whole[j]:
            return False  # no node could free enough whole GPUs even if every eligible job went
        claimant_path = set(self.tree.path[self.leaf[j]])
        leaves = self._victim_leaves(tier, claimant_path, level)
        try:
            return self._claim_from(j, leaves, claimant_path, level, tier)
        finally:
            leaves.close()  # puts back what the lazy heap walk took out

    def _claim_from(
        self, j: int, leaves: Iterator[int], claimant_path: set[int], level: list[float], tier: int
    ) -> bool:
        visited: set[int] = set()
        g = self.whole[j]
        for q in leaves:
            for v in sorted(self.leaf_running[q], reverse=True):
                if not self.preemptible[v]:
                    continue
                n = self.place[v][0]  # type: ignore[index]
                if n in visited:
                    continue
                if g and self._node_bound(tier, n) < g:
                    visited.add(n)  # the bound does not move while this claim looks
                    continue
                if not self._eligible(v, {}, claimant_path, level):
                    continue
                visited.add(n)
                candidates = [
                    w
                    for w in sorted(self.node_jobs[n])
                    if self.preemptible[w]
                    and self.leaf[w] not in claimant_path
                    and self._eligible(w, {}, claimant_path, level)
                ]
                # A quick necessary test: could job j fit on node n if every candidate went?
                if not self._gpus_fit(j, n, candidates):
                    continue
                victims = self._victims_on(j, n, candidates, claimant_path, level)
                if victims is None:
                    continue
                self._evict(victims)
                self._place_on(j, n)
                return True
        return False

    def _claim_gang(self, j: int, level: list[float]) -> bool:
        """Find victims for the core pods of job ``j``'s gang, on any nodes: eligible jobs of the
        projects above ``level`` are taken in victim rank until every core pod fits (bin-packed as
        admission packs them), then those not needed are put back (KAI's solver adds victims until
        the whole job fits; a gang is one job there)."""
        core = [m for m in self.gang_core[self.gang[j]] if self.place[m] is None]
        claimant_path = set(self.tree.path[self.leaf[j]])
        over = [
            q
            for q in range(len(self.alloc))
            if not self.tree.children[q] and self._above(q, level) and q not in claimant_path
        ]
        left = [v for q in over for v in self.leaf_running[q] if self.preemptible[v]]
        chosen: list[int] = []
        removed: dict[int, int] = {}
        while not self._gang_fits(core, chosen, removed):
            usable = [v for v in left if self._eligible(v, removed, claimant_path, level)]
            if not usable:
                return False
            pick = min(usable, key=lambda v: self._rank(v, removed, claimant_path, level))
            chosen.append(pick)
            going = set(self._gang_mates(pick))
            left = [v for v in left if v not in going]
            removed = self._removed_in(chosen)
        chosen = _without_unneeded(chosen, lambda trial: self._gang_fits(core, trial, self._removed_in(trial)))
        self._evict(chosen)
        started = self._start_gang(j)
        assert started, "the gang's victims were chosen so that its core pods fit"
        return True

    def _gang_fits(self, core: list[int], victims: list[int], removed: dict[int, int]) -> bool:
        """Whether the ``core`` pods (of one gang, whole GPUs each) fit once ``victims`` and their
        gang mates are gone: the limits on the path, and a node for each pod as ``_try_place`` picks
        it (the fewest free GPUs that hold it, ties: node order)."""
        need = sum(self.units[m] for m in core)
        gone = self._with_mates(victims)
        if self.cohort_cap < _INF and self.used - sum(self.units[v] for v in gone) + need > self.cohort_cap + _EPS:
            return False
        if self.saturation_test and not self._saturation_ok(core[0], need, removed):
            return False
        tree, alloc = self.tree, self.alloc
        for a in tree.path[self.leaf[core[0]]]:
            if alloc[a] - removed.get(a, 0) + need > tree.limit[a] + _EPS:
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

    def _gpus_fit(self, j: int, n: int, victims: list[int]) -> bool:
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

    def _removed_in(self, victims: list[int]) -> dict[Any, int]:
        """Per project on the victims' paths, the GPU units they free; multi-resource, also per
        (resource, project) the CPU or memory they free."""
        removed: dict[Any, int] = {}
        for v in self._with_mates(victims):
            for a in self.tree.path[self.leaf[v]]:
                removed[a] = removed.get(a, 0) + self.units[v]
                if self.multi:
                    for r, amount in enumerate(self.res_req[v]):
                        removed[(r, a)] = removed.get((r, a), 0) + amount
        return removed

    def _eligible(self, v: int, removed: dict[int, int], claimant_path: set[int], level: list[float]) -> bool:
        """Whether job ``v`` may be a victim: every project on its path that the claimant does not
        share may lose it (``_losable``)."""
        units = self.units[v] if not self.gang_pods else sum(self.units[m] for m in self._gang_mates(v))
        for a in self.tree.path[self.leaf[v]]:
            if a in claimant_path:
                break
            if not self._losable(a, units, level, removed.get(a, 0)):
                if self.multi and self._res_over(a, level, removed):
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
            tie = -a if self.policy == "runai" else a  # see the docstring
            if self.policy == "kueue" and a == q:
                # Kueue breaks a tie between queues by their candidates: the most recently admitted first.
                tie = -max(self.leaf_running[q], default=-1)
            levels.append((-(self.alloc[a] - removed.get(a, 0) - level[a]), tie))
        return tuple(levels)

    def _rank(self, v: int, removed: dict[int, int], claimant_path: set[int], level: list[float]) -> tuple:
        """Victim order: its project's rank, then the most recently submitted job first."""
        return (self._leaf_rank(self.leaf[v], removed, claimant_path, level), -v)

    def _fits(self, j: int, n: int, victims: list[int], removed: dict[int, int]) -> bool:
        units, tree, alloc = self.units[j], self.tree, self.alloc
        if not self.gang_pods:  # the common case, kept to the victims given (all on node n)
            gone = victims
        else:  # a gang's pods go with it; those on node n make room there
            gone = self._with_mates(victims)
            victims = [v for v in gone if self.place[v][0] == n]  # type: ignore[index]
        if self.cohort_cap < _INF and self.used - sum(self.units[v] for v in gone) + units > self.cohort_cap + _EPS:
            return False
        for a in tree.path[self.leaf[j]]:
            if alloc[a] - removed.get(a, 0) + units > tree.limit[a] + _EPS:
                return False
        if self.multi and not self._res_within_limits(self.leaf[j], self.res_req[j], removed):
            return False
        if self.saturation_test and not self._saturation_ok(j, units, removed):
            return False
        return self._gpus_fit(j, n, victims)

    def _saturation_ok(self, j: int, units: int, removed: Mapping[Any, int]) -> bool:
        """runai in a tree: whether KAI lets job ``j`` (``units`` to start) take ``removed``. At each
        level of the claimant's path, a queue that would go above its fair share must stay less
        saturated (held over fair share) than every sibling that loses work, the victims gone (v0.12.0,
        ``reclaimingQueuesRemainWithinBoundaries``, multiplier 1): a department whose share is 6
        does not take 8 GPUs from a sibling at 7 of its 10, though the claimant's own queue is
        within its share (differential tree seed 125)."""
        alloc, fair, tree = self.alloc, self.entitled, self.tree
        for a in tree.path[self.leaf[j]]:
            held = alloc[a] - removed.get(a, 0) + units
            if held <= fair[a] + _EPS:
                continue  # at or below its fair share: a ratio of 1 at most never refuses
            ratio = held / fair[a] if fair[a] > _EPS else _INF
            parent = tree.parent[a]
            for s in tree.children[parent] if parent >= 0 else tree.top:
                if s == a or s not in removed or fair[s] <= _EPS:
                    continue
                if ratio >= (alloc[s] - removed[s]) / fair[s]:
                    return False
        return True

    def _victims_on(
        self, j: int, n: int, candidates: list[int], claimant_path: set[int], level: list[float]
    ) -> list[int] | None:
        chosen: list[int] = []
        removed: dict[int, int] = {}
        left = list(candidates)
        while not self._fits(j, n, chosen, removed):
            usable = [v for v in left if self._eligible(v, removed, claimant_path, level)]
            if not usable:
                return None
            completing = [v for v in usable if self._fits(j, n, chosen + [v], self._removed_in(chosen + [v]))]
            pick = min(completing or usable, key=lambda v: self._rank(v, removed, claimant_path, level))
            chosen.append(pick)
            left.remove(pick)
            removed = self._removed_in(chosen)
        return _without_unneeded(chosen, lambda trial: self._fits(j, n, trial, self._removed_in(trial)))

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
            policy=self.policy,
            capacity=self.capacity / UNITS_PER_GPU,
            allocated={p.name: (self.alloc[i] - held[i]) / UNITS_PER_GPU for i, p in enumerate(tree.projects)},
            deserved={p.name: round(self.entitled[i] / UNITS_PER_GPU, 6) for i, p in enumerate(tree.projects)},
            placements=placements,
            pending=tuple(pending),
            preempted=preempted,
            parents={p.name: p.parent for p in tree.projects if p.parent is not None},
            waiting=tuple(self.jobs[j].name for j in sorted(self.reserved, key=self.admitted.__getitem__)),
        )


def _heap_q(heap_id: int) -> int:
    """The project index of an over-level heap entry's id (``_Engine._heap_id``)."""
    return ~heap_id if heap_id < 0 else heap_id


def _kueue_share(borrowed: float, lendable: float, weight: float) -> tuple[int, float]:
    """A ClusterQueue's dominant resource share, as Kueue compares them (CompareDRS): queues of
    weight 0 that borrow above all others (among themselves by unweighted share), the rest by
    borrowed / lendable x 1000 / weight; 0 for a queue that does not borrow."""
    if borrowed <= 0 or lendable <= 0:
        return (0, 0.0)
    ratio = float(borrowed) * 1000.0 / float(lendable)
    return (1, ratio) if weight == 0 else (0, ratio / weight)


def kueue_fair_targets(
    claimant: int,
    request: float,
    usage: Sequence[float],
    nominal: Sequence[float],
    weight: Sequence[float],
    candidates: Sequence[tuple[int, float]],
    cohort_quota: float,
    claimant_limit: float = _INF,
) -> list[int] | None:
    """Which ``candidates`` (queue, amount; in Kueue's candidate order) Kueue v0.16 preempts so that
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
        return _kueue_share(usage[q] + delta.get(q, 0) - nominal[q], cohort_quota, weight[q])

    def move(q: int, amount: float) -> None:
        delta[q] = delta.get(q, 0) + amount
        total[0] += amount

    def fits() -> bool:
        # The cohort's quotas, and the claimant's own limit (its nominal quota + borrowing limit).
        return total[0] <= cohort_quota + _EPS and usage[claimant] + delta[claimant] <= claimant_limit + _EPS

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


def _without_unneeded(chosen: list[int], fits: Callable[[list[int]], bool]) -> list[int]:
    """The victims ``chosen`` (in the order taken), less those the claimant turns out not to need:
    each, the last taken first, is put back when the claimant still ``fits`` without it."""
    for v in list(reversed(chosen)):
        trial = [w for w in chosen if w != v]
        if fits(trial):
            chosen = trial
    return chosen


def _within(room: tuple[int, int], known: tuple[int, int]) -> bool:
    return room[0] <= known[0] and room[1] <= known[1]


def _nodes(nodes: Sequence[Node | tuple[str, int]]) -> list[Node]:
    return [node if isinstance(node, Node) else Node(node[0], int(node[1])) for node in nodes]


def predict(
    policy: str,
    nodes: Sequence[Node | tuple[str, int]],
    projects: Sequence[Project],
    jobs: Sequence[Job],
    running: Mapping[str, Placement] | None = None,
    waiting: Sequence[str] = (),
) -> Prediction:
    """The stable state the scheduler of ``policy`` reaches.

    ``jobs`` are every workload that exists now, in submission order (a job that has ended is left
    out); ``running`` is where jobs ran before this step (``Prediction.placements`` of the previous
    step), so steps chain; ``waiting``, the workloads admitted then whose pods wait for a node
    (``Prediction.waiting``: Kueue admits by quota alone, and such a workload keeps its quota
    from one step to the next). Raises ValueError on an inconsistent input (unknown project, a job that
    is not a whole number of GPUs nor a fraction, a running placement that overcommits a GPU).
    """
    if policy not in POLICIES:
        raise ValueError(f"policy {policy!r} is not one of {', '.join(POLICIES)}")
    with _cycle_collector_paused():
        engine = _Engine(policy, _nodes(nodes), _Tree(projects), jobs, running or {}, waiting)
        engine.settle()
        return engine.result()


@contextlib.contextmanager
def _cycle_collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused for one prediction, as it was after. The engine
    makes hundreds of thousands of small tuples, lists and sets and no reference cycles it relies
    on freeing (reference counting frees them), while each of the collector's full passes walks
    every object alive, the caller's too: a quarter of the CPU time of a 100,000-job step
    (bench/fairshare_bench.py, measured with and without)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# scaling a scenario to a site ------------------------------------------------------------------


@dataclass(frozen=True)
class ScaledScenario:
    """A scenario sized for a site: ``factor`` times the scenario's base capacity, on whole nodes."""

    factor: int
    gpus: int
    nodes: int
    unused_gpus: int
    projects: tuple[Project, ...]
    jobs: tuple[Job, ...]


def _share(value: float) -> Fraction:
    return Fraction(value).limit_denominator(10**6)


def scale_scenario(
    projects: Sequence[Project],
    jobs: Sequence[Job],
    reference_gpus: int,
    site_gpus: int,
    node_gpus: int,
) -> ScaledScenario | str:
    """Size a scenario written for ``reference_gpus`` to a site of ``site_gpus`` on ``node_gpus``-GPU nodes.

    The scenario is read as shares of capacity: a quota (or limit) of 4 on 16 GPUs is a quarter of
    the site, a 2-GPU job an eighth. Quotas, limits and whole-GPU jobs scale by ``gpus /
    reference_gpus``. A fractional job (a notebook on part of a GPU) is repeated that many times
    when the scale is whole (``name``, then ``name-x2`` …), otherwise its size scales (it must stay
    a fraction of a thousandth-multiple). ``gpus`` is the largest multiple of the scenario's base
    capacity (the fewest GPUs on which every share is a whole number) that fills whole nodes of the
    site and holds the largest job on one node; the rest of the site is ``unused_gpus`` (keep the
    scenario off it, or predict with it). Returns the reason, as a sentence, when nothing fits.
    """
    if site_gpus <= 0 or node_gpus <= 0 or reference_gpus <= 0:
        return (
            f"site of {site_gpus} GPUs on {node_gpus}-GPU nodes, scenario written for {reference_gpus} GPUs: "
            f"all three must be positive"
        )
    shares = [_share(p.quota) / reference_gpus for p in projects]
    shares += [_share(p.limit) / reference_gpus for p in projects if p.limit is not None]
    whole = [_share(job.gpus) / reference_gpus for job in jobs if job.gpus >= 1]
    base = math.lcm(1, *(share.denominator for share in shares + whole))
    largest = max(whole, default=Fraction(0))
    fitting = []
    for factor in range(site_gpus // base, 0, -1):
        gpus = factor * base
        if gpus % node_gpus or largest * gpus > node_gpus:
            continue
        scaled_jobs = scaled_jobs_for(jobs, Fraction(gpus, reference_gpus))
        if scaled_jobs is not None:
            fitting.append((factor, gpus, scaled_jobs))
    # A whole multiple of the written capacity keeps every fraction as written (repeated rather
    # than resized), so fractions still pair up on shared GPUs as the document shows: preferred.
    fitting.sort(key=lambda fit: (fit[1] % reference_gpus == 0, fit[1]), reverse=True)
    for factor, gpus, scaled_jobs in fitting[:1]:
        return ScaledScenario(
            factor=factor,
            gpus=gpus,
            nodes=gpus // node_gpus,
            unused_gpus=site_gpus - gpus,
            projects=tuple(
                Project(
                    p.name,
                    quota=float(_share(p.quota) * gpus / reference_gpus),
                    limit=None if p.limit is None else float(_share(p.limit) * gpus / reference_gpus),
                    weight=p.weight,
                    parent=p.parent,
                )
                for p in projects
            ),
            jobs=tuple(scaled_jobs),
        )
    if site_gpus < base:
        return (
            f"site has {site_gpus} GPUs; the scenario needs at least {base} "
            f"(its quotas and whole-GPU jobs are whole numbers of GPUs only on multiples of {base})"
        )
    if largest * base > node_gpus:
        return (
            f"nodes have {node_gpus} GPUs; the scenario's largest job needs {largest * base} GPUs on one node "
            f"even at its smallest size ({base} GPUs in all)"
        )
    return (
        f"no multiple of the scenario's {base} GPUs up to the site's {site_gpus} fills whole {node_gpus}-GPU "
        f"nodes with its largest job on one node and its fractional jobs still fractions"
    )


def scaled_jobs_for(jobs: Sequence[Job], scale: Fraction) -> list[Job] | None:
    """``jobs`` at ``scale``: whole-GPU jobs resized, fractions repeated (whole scale) or resized;
    None when a resized fraction would not stay a fraction in thousandths of a GPU."""
    out: list[Job] = []
    for job in jobs:
        size = _share(job.gpus)
        if size >= 1:
            out.append(Job(job.name, job.project, float(size * scale), job.interactive))
        elif scale.denominator == 1:
            for copy in range(scale.numerator):
                name = job.name if copy == 0 else f"{job.name}-x{copy + 1}"
                out.append(Job(name, job.project, job.gpus, job.interactive))
        else:
            scaled = size * scale
            if scaled >= 1 or (scaled * UNITS_PER_GPU).denominator != 1:
                return None
            out.append(Job(job.name, job.project, float(scaled), job.interactive))
    return out
