"""The fair-share model's data: projects, jobs, nodes, placements and the prediction, and the units
amounts are counted in.

What the caller hands ``fairshare.predict`` (``Project``, ``Job``, ``Node``, ``Placement`` of the jobs
that run) and what it gets back (``Prediction``), frozen values; ``replicas`` builds a Deployment's
pods or a gang. GPUs are counted in thousandths (``UNITS_PER_GPU``), CPU in millicores, memory in MiB.

May import the standard library only. Touches nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

UNITS_PER_GPU = 1000  # amounts are counted in thousandths of a GPU: 0.6 + 0.4 is exactly one GPU
EPS = 1e-6  # in units; fair shares are real numbers, allocations whole units
INF = float("inf")
CPU_UNITS = 1000  # CPU is counted in millicores, as KAI counts it
MEMORY_UNITS = 1024  # memory in MiB
RESOURCES = ("cpu", "memory")  # beside the GPUs, in this order wherever the model keeps one per resource


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


def to_units(value: float, what: str) -> int:
    scaled = value * UNITS_PER_GPU
    units = round(scaled)
    if abs(units - scaled) > 1e-6:
        raise ValueError(f"{what} is {value}: amounts must be multiples of {1 / UNITS_PER_GPU}")
    return units


def as_nodes(nodes: Sequence[Node | tuple[str, int]]) -> list[Node]:
    return [node if isinstance(node, Node) else Node(node[0], int(node[1])) for node in nodes]
