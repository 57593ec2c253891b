"""Fair-share model: the stable allocation a quota scheduler reaches, for the validator to expect.

Pure logic, no Ansible and no Kubernetes: given the nodes, the projects (a flat list or a tree), the
workloads in submission order and where jobs run now, `predict` says which workloads run where,
which wait, and how many GPUs each project holds once the scheduler has settled. Two policies:

``"runai"`` (Run:AI, NVIDIA KAI scheduler; NetApp validation, SCENARIOS.md 4.8 - 4.10)
    Fair share, per level of the tree, as the pinned KAI divides it: each project first deserves
    ``min(quota, demand)`` (not scaled down when quotas exceed the capacity); spare capacity is
    divided in whole GPUs by over-quota weight (default: the quota), capped by the project's limit
    and its demand (``shares.kai_over_quota``). Jobs start within their fair share; capacity that fair
    shares leave idle (job granularity, node fragmentation) is lent in KAI's queue order
    (``allocate.kai_queue_order``). A project below its fair share reclaims from projects above theirs; failing
    that, a project below its quota reclaims from projects above their quota (KAI's two strategies).

``"elastic"`` (Alibaba Cloud ACK elastic quota tree, capacity scheduling; SCENARIOS.md second half)
    ``quota`` is a node's ``min`` and ``limit`` its ``max``. A job starts if it fits in idle capacity
    and every node on its path stays within ``max`` (idle capacity is borrowed up to ``max``). A job
    whose leaf stays within ``min`` reclaims from quota nodes above their ``min``: reclaim goes up to
    ``min`` only, never towards an over-quota split, which is why the two engines differ on one tree.

``"kueue"`` (Kueue with fair sharing: ClusterQueues in a cohort, weights = quotas, reclaim within the cohort)
    Admits no more in all than the cohort's quotas (the top-level projects') add up to, fair shares
    water-filled in real numbers. One cohort (a flat tree), as the pinned Kueue does it: a queue admits
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
  within its fair share, in submission order; then idle capacity, one job at a time, in KAI's queue
  order (``allocate.kai_queue_order``), each project's jobs in submission order. kueue admits in one
  pass, in its fair-sharing tournament's order (``allocate.kueue_admission_order``).
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

Where each part lives (``model/``), as the engines are built:

* ``data``: the values in and out (``Project``, ``Job``, ``Node``, ``Placement``, ``Prediction``)
  and the units; ``tree``: the projects by index; ``shares``: the division of shares (KAI's
  proportion plugin; a water-fill for Kueue);
* ``state``: placement state and bin packing; ``rules``: the limit rules (what may start, what fits
  once victims go); ``victims``: victim ranking; ``engine``: the three, with the policy's levels,
  running the policy's actions until nothing changes;
* the actions: ``allocate`` (admission, lending), ``consolidation``, ``reclaim`` (KAI's two tiers),
  ``preempt`` (inside a project), ``fair_sharing`` (Kueue's reclaim on one cohort);
* ``policy``: the ``Policy`` value, what differs between policies; ``policies``: runai, elastic and
  kueue as such values; ``scaling``: a scenario sized to a site.

This module is the model's front: ``predict`` and ``fair_shares``, and the public names of the
others. May import the standard library and ``model/``. Touches nothing outside its arguments but
Python's cyclic garbage collector, which ``predict`` pauses while it runs and restores after
(``_cycle_collector_paused``).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator, Mapping, Sequence

from ansible_collections.clusterproof.gpu.plugins.module_utils.model.consolidation import CONSOLIDATION_NODES
from ansible_collections.clusterproof.gpu.plugins.module_utils.model.data import (
    CPU_UNITS,
    MEMORY_UNITS,
    RESOURCES,
    UNITS_PER_GPU,
    Job,
    Node,
    Placement,
    Prediction,
    Project,
    as_nodes,
    replicas,
)
from ansible_collections.clusterproof.gpu.plugins.module_utils.model.engine import Engine
from ansible_collections.clusterproof.gpu.plugins.module_utils.model.fair_sharing import kueue_fair_targets
from ansible_collections.clusterproof.gpu.plugins.module_utils.model.policies import BY_NAME, POLICIES
from ansible_collections.clusterproof.gpu.plugins.module_utils.model.scaling import (
    ScaledScenario,
    scale_scenario,
    scaled_jobs_for,
)
from ansible_collections.clusterproof.gpu.plugins.module_utils.model.shares import divide
from ansible_collections.clusterproof.gpu.plugins.module_utils.model.tree import Tree

__all__ = [
    "CONSOLIDATION_NODES",
    "CPU_UNITS",
    "MEMORY_UNITS",
    "POLICIES",
    "RESOURCES",
    "UNITS_PER_GPU",
    "Job",
    "Node",
    "Placement",
    "Prediction",
    "Project",
    "ScaledScenario",
    "fair_shares",
    "kueue_fair_targets",
    "predict",
    "replicas",
    "scale_scenario",
    "scaled_jobs_for",
]


def fair_shares(
    projects: Sequence[Project], demand: Mapping[str, float], capacity: float, policy: str = "runai"
) -> dict[str, float]:
    """The fair share of every project (GPUs) for the demand of each leaf project (GPUs), as the
    policy divides it (runai: KAI's whole-GPU division; kueue: a water-fill in real numbers)."""
    tree = Tree(projects)
    leaf_demand = [0.0] * len(tree.projects)
    for name, amount in demand.items():
        leaf_demand[tree.index[name]] = amount * UNITS_PER_GPU
    whole_units = policy in POLICIES and BY_NAME[policy].whole_gpus  # runai: KAI's division
    shares = divide(tree, leaf_demand, capacity * UNITS_PER_GPU, whole_units=whole_units)
    return {p.name: shares[i] / UNITS_PER_GPU for i, p in enumerate(tree.projects)}


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
        engine = Engine(BY_NAME[policy], as_nodes(nodes), Tree(projects), jobs, running or {}, waiting)
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
