"""Kueue's own table of fair-sharing preemptions, held against the model's ``kueue_fair_targets``.

The cases are those of ``TestFairPreemptions`` in Kueue v0.17.1's
``pkg/scheduler/preemption/preemption_fair_test.go`` that the model can express: one cohort, one
resource, both of Kueue's default strategies, no borrowing or lending limits. Each keeps its name
there and its workloads (name, ClusterQueue, CPUs, priority; all admitted at the same time, so that
Kueue orders candidates by name, which its test sets as their UID). What the model is not given, the
test does as Kueue's ``findCandidates`` and ``CandidatesOrdering`` do: the candidates are the claimant
queue's own workloads of lower priority and every workload of the other queues that borrow, other
queues' first, then lower priority first, then by name.

The cases the model cannot express, with why, are in ``NOT_EXPRESSIBLE``.
"""

from __future__ import annotations

from typing import NamedTuple

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.model import fair_sharing


class Admitted(NamedTuple):
    name: str
    queue: str
    cpus: float
    priority: int = 0


# baseCQs: a, b and c with a nominal quota of 3 CPUs each, and "preemptible" with none; weight 1.
BASE_QUOTAS = {"a": 3.0, "b": 3.0, "c": 3.0, "preemptible": 0.0}


def kueue_targets(
    admitted: list[Admitted],
    queue: str,
    cpus: float,
    priority: int = 0,
    quotas: dict[str, float] = BASE_QUOTAS,
    weights: dict[str, float] | None = None,
) -> set[str]:
    """The workloads the model preempts for an incoming workload of ``cpus`` in ``queue`` (none:
    the empty set, as Kueue's table writes "no targets")."""
    names = list(quotas)
    index = {name: position for position, name in enumerate(names)}
    usage = [sum(w.cpus for w in admitted if w.queue == name) for name in names]
    nominal = [quotas[name] for name in names]
    weight = [(weights or {}).get(name, 1.0) for name in names]
    own = [w for w in admitted if w.queue == queue and w.priority < priority]
    borrowing = [w for w in admitted if w.queue != queue and usage[index[w.queue]] > nominal[index[w.queue]]]
    candidates = sorted(own + borrowing, key=lambda w: (w.queue == queue, w.priority, w.name))
    chosen = fair_sharing.kueue_fair_targets(
        index[queue], cpus, usage, nominal, weight, [(index[w.queue], w.cpus) for w in candidates], sum(nominal)
    )
    return set() if chosen is None else {candidates[i].name for i in chosen}


def units(queue: str, count: int, first: int = 1) -> list[Admitted]:
    """``count`` workloads of one CPU in ``queue``, named <queue><n> (Kueue's unitWl clones)."""
    return [Admitted("%s%d" % (queue, n), queue, 1.0) for n in range(first, first + count)]


CASES = {
    "reclaim nominal from user using the most": (
        units("a", 3) + units("b", 5) + units("c", 1),
        ("c", 1.0),
        {"b1"},
    ),
    "can reclaim from queue using less, if taking the latest workload from user using the most isn't enough": (
        [Admitted("a1", "a", 3), Admitted("a2", "a", 1), Admitted("b1", "b", 2), Admitted("b2", "b", 3)],
        ("c", 3.0),
        {"a1"},
    ),
    "reclaim borrowable quota from user using the most": (
        units("a", 3) + units("b", 5) + units("c", 1),
        ("a", 1.0),
        {"b1"},
    ),
    "preempt one from each CQ borrowing": (
        [
            Admitted("a1", "a", 0.5),
            Admitted("a2", "a", 0.5),
            Admitted("a3", "a", 3),
            Admitted("b1", "b", 0.5),
            Admitted("b2", "b", 0.5),
            Admitted("b3", "b", 3),
        ],
        ("c", 2.0),
        {"a1", "b1"},
    ),
    "can't preempt when everyone under nominal": (units("a", 3) + units("b", 3) + units("c", 3), ("c", 1.0), set()),
    "can't preempt when it would switch the imbalance": (units("a", 3) + units("b", 5), ("a", 2.0), set()),
    "can preempt lower priority workloads from same CQ": (
        [Admitted("a1_low", "a", 1, -1), Admitted("a2_low", "a", 1, -1), *units("a", 2, first=3), *units("b", 5)],
        ("a", 2.0),
        {"a1_low", "a2_low"},
    ),
    "can preempt a combination of same CQ and highest user": (
        [Admitted("a_low", "a", 1, -1), *units("a", 2, first=2), *units("b", 6)],
        ("a", 2.0),
        {"a_low", "b1"},
    ),
    "preempt huge workload if there is no other option, as long as the target CQ gets a lower share": (
        [Admitted("b1", "b", 9)],
        ("a", 2.0),
        {"b1"},
    ),
    "can't preempt huge workload if the incoming is also huge": (
        [Admitted("a1", "a", 2), Admitted("b1", "b", 7)],
        ("a", 5.0),
        set(),
    ),
    "can't preempt 2 smaller workloads if the incoming is huge": (
        [Admitted("b1", "b", 2), Admitted("b2", "b", 2), Admitted("b3", "b", 3)],
        ("a", 6.0),
        set(),
    ),
    "preempt from target and others even if over nominal": (
        [
            Admitted("a1_low", "a", 2, -1),
            Admitted("a2_low", "a", 1, -1),
            Admitted("b1", "b", 3),
            Admitted("b2", "b", 3),
        ],
        ("a", 4.0),
        {"a1_low", "b1"},
    ),
    "prefer to preempt workloads that don't make the target CQ have the biggest share": (
        [Admitted("b1", "b", 2), Admitted("b2", "b", 1), Admitted("b3", "b", 2), Admitted("c1", "c", 1)],
        ("a", 3.5),
        {"b2"},
    ),
    "preempt from different cluster queues if the end result has a smaller max share": (
        [Admitted("b1", "b", 2), Admitted("b2", "b", 2.5), Admitted("c1", "c", 2), Admitted("c2", "c", 2.5)],
        ("a", 3.5),
        {"b1", "c1"},
    ),
    "scenario above does not flap": (
        [Admitted("a1", "a", 3.5), Admitted("b2", "b", 2.5), Admitted("c2", "c", 2.5)],
        ("b", 2.0),
        set(),
    ),
    "cannot preempt if it would make the candidate CQ go under nominal after preempting one element": (
        [Admitted("b1", "b", 3), Admitted("b2", "b", 3), Admitted("c1", "c", 3)],
        ("a", 4.0),
        set(),
    ),
    "workloads under priority threshold not capriciously preempted": (
        units("a", 3) + units("b", 3) + [Admitted("preemptible%d" % n, "preemptible", 1, -3) for n in (1, 2, 3)],
        ("a", 2.0),
        set(),
    ),
}

# Cases whose ClusterQueues differ from baseCQs: quotas and fair-sharing weights of their own.
THREE = {"a": 3.0, "b": 3.0, "c": 3.0}
WEIGHTED_CASES = {
    "CQ with higher weight can preempt more": (
        THREE,
        {"a": 2.0},
        units("a", 3) + units("b", 6),
        ("a", 2.0),
        {"b1", "b2"},
    ),
    "can preempt anything borrowing from CQ with 0 weight": (
        THREE,
        {"b": 0.0},
        units("a", 3) + units("b", 6),
        ("a", 3.0),
        {"b1", "b2", "b3"},
    ),
    "can't preempt nominal from CQ with 0 weight": (
        {"a": 3.0, "b": 3.0},
        {"b": 0.0},
        units("a", 3) + units("b", 3),
        ("a", 1.0),
        set(),
    ),
    "cq with zero weight can reclaim nominal quota": (
        {"a": 1.0, "b": 0.0},
        {"a": 0.0},
        units("b", 1),
        ("a", 1.0),
        {"b1"},
    ),
}

# Kueue's cases the model cannot express as it is built (one cohort, one resource, both strategies,
# no borrowing or lending limit but the claimant's own), by name, with why.
NOT_EXPRESSIBLE = {
    "preempt lower priority first, even if big": "one strategy only (LessThanInitialShare)",
    "preempt workload that doesn't transfer the imbalance, even if high priority": (
        "one strategy only (LessThanOrEqualToFinalShare)"
    ),
    "can't preempt nominal from Cohort with 0 weight": "a weight on a Cohort: nested cohorts",
    "can preempt within cluster queue when no cohort": "a ClusterQueue outside any cohort",
    "hierarchical preemption": "nested cohorts",
    "borrowing cq in non-borrowing cohort is protected": "nested cohorts",
    "forced to preempt within clusterqueue because borrowing workload too important": "nested cohorts",
    "deep preemption": "nested cohorts",
    "cohort with zero weight can reclaim nominal quota": "a weight on a Cohort: nested cohorts",
    "nominal first: workload fitting within nominal can preempt despite high aggregate DRS": (
        "two flavors: the model has one resource"
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_kueue_s_fair_preemption_case(name):
    admitted, (queue, cpus), wanted = CASES[name]
    assert kueue_targets(admitted, queue, cpus) == wanted


@pytest.mark.parametrize("name", sorted(WEIGHTED_CASES))
def test_kueue_s_fair_preemption_case_with_weights(name):
    quotas, weights, admitted, (queue, cpus), wanted = WEIGHTED_CASES[name]
    assert kueue_targets(admitted, queue, cpus, quotas=quotas, weights=weights) == wanted


def test_every_case_of_kueue_s_table_is_translated_or_said_why_not():
    """The 31 cases of TestFairPreemptions in Kueue v0.17.1, each here once."""
    cases = set(CASES) | set(WEIGHTED_CASES) | set(NOT_EXPRESSIBLE)
    assert len(cases) == len(CASES) + len(WEIGHTED_CASES) + len(NOT_EXPRESSIBLE) == 31
