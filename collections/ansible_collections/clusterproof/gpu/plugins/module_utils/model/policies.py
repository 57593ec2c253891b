"""The three policies the model knows, as ``Policy`` values (``model.policy``): their settings and the
actions their engines run, in the engines' order.

``RUNAI`` (Run:AI, NVIDIA KAI scheduler at its pin, ``versions.KAI_SCHEDULER``): KAI's actions,
allocate (admission, then lending what fair shares leave idle in KAI's queue order), consolidation,
reclaim, preempt (inside a project); fair shares in whole GPUs; non-preemptible work within every
ancestor's quota; the saturation test in a tree.

``ELASTIC`` (Alibaba Cloud ACK elastic quota tree): admission within ``max``, reclaim up to ``min``.

``KUEUE`` (Kueue at its pin, ``versions.KUEUE``, with fair sharing, one cohort): waiting workloads
placed first, admission in Kueue's fair-sharing order (interactive work first within a queue), and
Kueue's fair-sharing reclaim (``model.fair_sharing``); the cohort's quotas cap what is admitted,
workloads admitted by quota wait for a node.

A fourth policy is another value here, and its name in ``BY_NAME``.

May import the standard library, ``model.policy`` and the action modules (``model.allocate``,
``consolidation``, ``reclaim``, ``preempt``, ``fair_sharing``). Touches nothing.
"""

from __future__ import annotations

from ansible_collections.clusterproof.gpu.plugins.module_utils.model import (
    allocate,
    consolidation,
    fair_sharing,
    preempt,
    reclaim,
)
from ansible_collections.clusterproof.gpu.plugins.module_utils.model.policy import Policy

RUNAI = Policy(
    name="runai",
    actions=(
        allocate.admit,
        allocate.allocate_in_queue_order,
        consolidation.consolidate,
        reclaim.reclaim,
        preempt.preempt_within_projects,
    ),
    fair_share=True,
    whole_gpus=True,
    lend_by_tree=True,
    queue_order=allocate.kai_queue_order,
    cpu_and_memory=True,
    interactive_quota_up_the_tree=True,
    saturation_test=True,
    ties_to_last_declared=True,
)

ELASTIC = Policy(
    name="elastic",
    actions=(allocate.admit, reclaim.reclaim),
    victim_keeps_level=True,
)

KUEUE = Policy(
    name="kueue",
    actions=(allocate.place_waiting, allocate.allocate_in_queue_order, fair_sharing.reclaim),
    fair_share=True,
    cohort_quotas=True,
    reserves_quota=True,
    queue_order=allocate.kueue_admission_order,
    interactive_first=True,
    interactive_preemptible=True,
    preempts_for_quota=True,
    ties_to_newest_workload=True,
)

BY_NAME = {policy.name: policy for policy in (RUNAI, ELASTIC, KUEUE)}
POLICIES = tuple(BY_NAME)  # ("runai", "elastic", "kueue")
