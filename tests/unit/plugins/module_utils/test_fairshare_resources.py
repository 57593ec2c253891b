"""The fair-share model with CPU and memory beside the GPUs (policy runai, as KAI v0.12.0 does it):
the capacity policy (a queue's limit and its non-preemptible quota, per resource) and the reclaim
strategies compared over every resource (proportion/capacity_policy, proportion/reclaimable)."""

from __future__ import annotations

from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.clusterproof.gpu.plugins.module_utils.model import fairshare as fs
from ansible_collections.clusterproof.gpu.plugins.module_utils.model.fairshare import Job, Node, Project
from tests.unit.plugins.module_utils.helpers import fairshare_projects

PROPERTY = settings(max_examples=60, deadline=None)
NODE = [Node("n1", 8, cpu=64, memory=512)]


def test_runai_a_job_beyond_its_queue_s_cpu_limit_stays_pending():
    projects = [Project("a", 4, cpu_limit=8), Project("b", 4)]
    jobs = [Job("a1", "a", 1, cpu=6), Job("a2", "a", 1, cpu=4), Job("a3", "a", 1, cpu=2), Job("b1", "b", 1, cpu=4)]
    result = fs.predict("runai", NODE, projects, jobs)
    # a2 would take a to 10 cores; a3, submitted after it, fits the 2 left (a smaller job is not blocked)
    assert result.pending == ("a2",)
    assert result.allocated == {"a": 2.0, "b": 1.0}


def test_runai_a_job_beyond_its_queue_s_memory_limit_stays_pending():
    projects = [Project("a", 4, memory_limit=64)]
    jobs = [Job("a1", "a", 1, memory=48), Job("a2", "a", 1, memory=32)]
    assert fs.predict("runai", NODE, projects, jobs).pending == ("a2",)


def test_runai_interactive_work_starts_only_within_its_queue_s_cpu_quota():
    projects = [Project("a", 4, cpu_quota=4), Project("b", 4)]
    jobs = [Job("i1", "a", 1, True, cpu=3), Job("i2", "a", 1, True, cpu=3), Job("t1", "a", 1, cpu=3)]
    result = fs.predict("runai", NODE, projects, jobs)
    # within its 4 GPUs of quota, but i2 would take a's non-preemptible CPU to 6 of 4 cores;
    # training work may go beyond the CPU quota
    assert result.pending == ("i2",)
    assert result.allocated["a"] == 2.0


def _over_cpu_quota_case(b_cpu_quota: float | None) -> fs.Prediction:
    """Quotas 4 + 4 on 6 GPUs: b holds its 4 GPUs (its quota and fair share) with 16 cores, a holds
    2 and asks for a third."""
    nodes = [Node("n1", 6, cpu=64, memory=512)]
    projects = [Project("a", 4), Project("b", 4, cpu_quota=b_cpu_quota)]
    jobs = [Job(f"b{i}", "b", 1, cpu=4) for i in range(4)] + [Job("a1", "a", 1), Job("a2", "a", 1)]
    first = fs.predict("runai", nodes, projects, jobs)
    assert first.pending == () and first.allocated == {"a": 2.0, "b": 4.0}
    return fs.predict("runai", nodes, projects, [*jobs, Job("a3", "a", 1)], first.placements)


def test_runai_a_queue_above_its_cpu_quota_loses_work_to_a_queue_below_its_quota():
    # KAI's second strategy: the reclaimee is over its quota in at least one resource (b: 16 of 2
    # cores), the reclaimer within its quota in all
    result = _over_cpu_quota_case(2)
    assert result.allocated == {"a": 3.0, "b": 3.0}
    assert result.preempted == ("b3",)


def test_runai_a_queue_within_every_quota_keeps_its_work():
    result = _over_cpu_quota_case(None)
    assert result.pending == ("a3",)
    assert result.preempted == ()


def _cpu_fair_share_case(claim_cpu: float) -> fs.Prediction:
    """b borrows the whole node (8 GPUs, 8 of its 16 cores); a, quota 4 GPUs and 2 cores, asks for
    one GPU with ``claim_cpu`` cores. a's CPU fair share: its quota (2), then of the 6 cores left by
    weight (a's alone asks): 2 + min(6, claim_cpu - 2)."""
    nodes = [Node("n1", 8, cpu=16, memory=512)]
    projects = [Project("a", 4, cpu_quota=2), Project("b", 4)]
    jobs = [Job(f"b{i}", "b", 1, cpu=1) for i in range(8)]
    first = fs.predict("runai", nodes, projects, jobs)
    assert first.allocated == {"a": 0.0, "b": 8.0}
    return fs.predict("runai", nodes, projects, [*jobs, Job("a1", "a", 1, cpu=claim_cpu)], first.placements)


def test_runai_a_claim_within_its_queue_s_cpu_fair_share_reclaims():
    result = _cpu_fair_share_case(6)
    assert result.allocated == {"a": 1.0, "b": 7.0}
    assert result.preempted == ("b7",)


def test_runai_a_claim_beyond_its_queue_s_cpu_fair_share_does_not_reclaim():
    # KAI reclaims only for a queue that stays within its fair share in every resource: 10 cores
    # against a fair share of 8
    result = _cpu_fair_share_case(10)
    assert result.pending == ("a1",)
    assert result.preempted == ()


def test_cpu_and_memory_requests_change_nothing_without_cpu_or_memory_quotas():
    projects = [Project("a", 2), Project("b", 2)]
    plain = [Job("a1", "a", 4), Job("b1", "b", 2), Job("b2", "b", 4), Job("a2", "a", 1, True)]
    asking = [Job(job.name, job.project, job.gpus, job.interactive, cpu=50, memory=400) for job in plain]
    assert fs.predict("runai", NODE, projects, asking) == fs.predict("runai", NODE, projects, plain)


@pytest.mark.parametrize(
    ("policy", "projects", "jobs", "words"),
    [
        ("kueue", [Project("a", 4, cpu_quota=4)], [], "modelled for policy runai only, found kueue"),
        ("elastic", [Project("a", 4, memory_limit=4)], [], "modelled for policy runai only, found elastic"),
        ("runai", [Project("r", 4), Project("a", 4, cpu_quota=4, parent="r")], [], "flat projects only"),
        ("runai", [Project("a", 4, cpu_quota=-1)], [], "project 'a': cpu_quota is -1: must not be negative"),
        ("runai", [Project("a", 4, cpu_limit=4)], [Job("x", "a", 1, cpu=-2)], "job 'x' asks for -2 cpu"),
        (
            "runai",
            [Project("a", 4, cpu_limit=8)],
            [Job("g-0", "a", 1, gang="g", gang_min=2, cpu=1), Job("g-1", "a", 1, gang="g", gang_min=2, cpu=2)],
            "must share project, gpus, interactive, gang_min, cpu and memory",
        ),
    ],
)
def test_inconsistent_cpu_or_memory_input_is_refused(policy, projects, jobs, words):
    with pytest.raises(ValueError, match=words):
        fs.predict(policy, NODE, projects, jobs)


def test_a_gang_starts_only_if_all_its_core_pods_fit_its_queue_s_cpu_limit():
    projects = [Project("a", 8, cpu_limit=6)]
    gang = fs.replicas("g", "a", 3, 1, min_members=3, cpu=2)
    too_big = fs.replicas("h", "a", 4, 1, min_members=4, cpu=2)
    assert fs.predict("runai", NODE, projects, too_big).pending == ("h-0", "h-1", "h-2", "h-3")
    assert fs.predict("runai", NODE, projects, gang).pending == ()


# --- properties --------------------------------------------------------------------------------------


@st.composite
def resource_sites(draw):
    """A site of 1 to 3 nodes, flat queues with CPU and memory quotas and limits (or none), and jobs
    that ask for CPU and memory beside whole GPUs or fractions; a second step."""
    nodes = [Node(f"n{i}", draw(st.integers(1, 8)), cpu=64, memory=256) for i in range(draw(st.integers(1, 3)))]
    bound = st.one_of(st.none(), st.integers(0, 24))
    projects = draw(fairshare_projects(cpu_quota=bound, cpu_limit=bound, memory_quota=bound, memory_limit=bound))

    def jobs(prefix: str, count: int) -> list[Job]:
        return [
            Job(
                f"{prefix}{k}",
                f"p{draw(st.integers(0, len(projects) - 1))}",
                draw(st.sampled_from((0.25, 0.5, 1, 1, 2, 4))),
                draw(st.booleans()),
                cpu=draw(st.sampled_from((0, 1, 2, 4, 8))),
                memory=draw(st.sampled_from((0, 4, 16))),
            )
            for k in range(count)
        ]

    first = jobs("j", draw(st.integers(0, 16)))
    second = [job for job in first if draw(st.booleans())] + jobs("k", draw(st.integers(0, 8)))
    return nodes, projects, first, second


def _held(result: fs.Prediction, jobs: list[Job], interactive_only: bool) -> dict[tuple[str, str], float]:
    held: dict[tuple[str, str], float] = defaultdict(float)
    by_name = {job.name: job for job in jobs}
    for name in result.placements:
        job = by_name[name]
        if interactive_only and not job.interactive:
            continue
        held[(job.project, "cpu")] += job.cpu
        held[(job.project, "memory")] += job.memory
    return held


def _two_steps(case) -> tuple[fs.Prediction, fs.Prediction]:
    """The first step's prediction and the second's, chained as the scenario runner chains them."""
    nodes, projects, first_jobs, second_jobs = case
    first = fs.predict("runai", nodes, projects, first_jobs)
    return first, fs.predict("runai", nodes, projects, second_jobs, first.placements)


@PROPERTY
@given(case=resource_sites())
def test_runai_keeps_every_queue_within_its_cpu_and_memory_limits_and_interactive_work_within_its_quotas(case):
    _, projects, first_jobs, second_jobs = case
    first, second = _two_steps(case)
    for result, jobs in ((first, first_jobs), (second, second_jobs)):
        held, fixed = _held(result, jobs, False), _held(result, jobs, True)
        for project in projects:
            for resource, quota, limit in (
                ("cpu", project.cpu_quota, project.cpu_limit),
                ("memory", project.memory_quota, project.memory_limit),
            ):
                if limit is not None:
                    assert held[(project.name, resource)] <= limit + 1e-9
                if quota is not None:
                    assert fixed[(project.name, resource)] <= quota + 1e-9


@PROPERTY
@given(case=resource_sites())
def test_runai_with_cpu_and_memory_a_stable_state_is_a_fixed_point(case):
    nodes, projects, _, second_jobs = case
    _, second = _two_steps(case)
    again = fs.predict("runai", nodes, projects, second_jobs, second.placements)
    assert again.placements == second.placements and again.pending == second.pending and again.preempted == ()
