"""What differs between the fair-share policies, as one value: ``Policy``.

A policy is its settings and the ordered list of its actions; the engine reads the settings and
runs the actions (``model.engine``), and compares no policy's name. The three policies the model
knows are values of ``model.policies``; a fourth is another value.

May import the standard library only. Touches nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Policy:
    """One policy: its name (``Prediction.policy``), its actions and its settings.

    ``actions`` run in order, each on the engine (``model.engine.Engine``), each saying whether it
    changed anything; the engine runs the list again until none does.

    Shares and admission:

    ``fair_share``: the level a project is held to is its fair share, the division of the capacity
    (``model.shares``), its quota part the second reclaim tier; else the quota alone (elastic ``min``).
    ``whole_gpus``: spare capacity is divided in whole GPUs as KAI does; else a water-fill in real numbers.
    ``cohort_quotas``: no more is admitted in all than the top-level projects' quotas (Kueue's cohort).
    ``reserves_quota``: in one cohort (flat projects), a workload admitted by quota holds it while its
    pods wait for a node (Kueue; ``Prediction.waiting``).
    ``interactive_first``: a queue admits its interactive (higher-priority) work first.
    ``lend_by_tree``: in a tree, ``queue_order`` picks a department first, then its queue (KAI's
    ``JobsOrderByQueues``); else it compares the leaf queues alone.
    ``queue_order``: for ``allocate.allocate_in_queue_order``, the engine's order between two queues
    with their next jobs, as a sort key ``(engine, project, units) -> key``: KAI's ``QueueOrderFn``
    (``allocate.kai_queue_order``) or Kueue's admission tournament (``allocate.kueue_admission_order``).
    ``cpu_and_memory``: CPU and memory quotas and limits are modelled beside the GPUs (else refused).

    Non-preemptible work:

    ``interactive_preemptible``: interactive jobs are preempted like the rest (Kueue has no
    non-preemptible work); else they start only within their quota and are never preempted.
    ``interactive_quota_up_the_tree``: they start only within the quota of every ancestor as well.

    Reclaim and victims:

    ``saturation_test``: in a tree, KAI's test between sibling queues (``Rules.saturation_ok``).
    ``preempts_for_quota``: a pending job its cohort's quotas still cover claims nothing (Kueue
    preempts for quota, not for room on the nodes).
    ``victim_keeps_level``: a victim's project stays at or above its level after the victim goes
    (elastic); else it is above it before (KAI's and Kueue's reclaimee).
    ``ties_to_last_declared``: between equally over-level projects, the one declared last loses
    first (KAI); else the one declared first.
    ``ties_to_newest_workload``: between leaf projects, the one whose running workload was admitted
    last loses first (Kueue).
    """

    name: str
    actions: tuple[Callable[[Any], bool], ...]
    fair_share: bool = False
    whole_gpus: bool = False
    cohort_quotas: bool = False
    reserves_quota: bool = False
    interactive_first: bool = False
    lend_by_tree: bool = False
    queue_order: Callable[[Any, int, int], Any] | None = None
    cpu_and_memory: bool = False
    interactive_preemptible: bool = False
    interactive_quota_up_the_tree: bool = False
    saturation_test: bool = False
    preempts_for_quota: bool = False
    victim_keeps_level: bool = False
    ties_to_last_declared: bool = False
    ties_to_newest_workload: bool = False
