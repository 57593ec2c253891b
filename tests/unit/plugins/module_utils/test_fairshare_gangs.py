"""Gangs in the fair-share model: jobs of several pods with a minimum that starts together (KAI's
PodGroup ``minMember``). The expected outcomes are worked out by hand in each test's comment."""

from __future__ import annotations

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.model import fairshare as fs
from ansible_collections.clusterproof.gpu.plugins.module_utils.model.fairshare import Job, Project

NODES = [("n1", 8), ("n2", 8)]


def _stable(policy: str, projects: list[Project], jobs: list[Job], prediction: fs.Prediction) -> None:
    """Predicting again from the predicted state changes nothing."""
    again = fs.predict(policy, NODES, projects, jobs, prediction.placements)
    assert again.placements == prediction.placements
    assert again.pending == prediction.pending


def _two_steps(
    projects: list[Project], before: list[Job], arriving: list[Job]
) -> tuple[fs.Prediction, fs.Prediction, list[Job]]:
    """``before`` settles, then ``arriving`` comes: both states, and the second step's jobs."""
    step1 = fs.predict("runai", NODES, projects, before)
    jobs = [*before, *arriving]
    return step1, fs.predict("runai", NODES, projects, jobs, step1.placements), jobs


def test_a_gang_starts_only_when_all_its_pods_fit_or_none_of_them() -> None:
    # b's 6-GPU job takes n1 first. a's gang asks for three 4-GPU pods together: a's fair share is
    # 10 (its quota 8 and the 2 GPUs b does not ask for), so the gang may only borrow idle GPUs,
    # and the idle GPUs (2 on n1, 8 on n2) hold two pods, not three. No pod starts.
    projects = [Project("a", quota=8), Project("b", quota=8)]
    jobs = [Job("b-6g", "b", 6), *fs.replicas("a-gang", "a", 3, 4, min_members=3)]
    prediction = fs.predict("runai", NODES, projects, jobs)
    assert prediction.allocated == {"a": 0, "b": 6}
    assert prediction.pending == ("a-gang-0", "a-gang-1", "a-gang-2")
    _stable("runai", projects, jobs, prediction)


def test_independent_pods_start_where_a_gang_of_them_would_not() -> None:
    # The same pods without a gang start one by one: two of them run on n2.
    projects = [Project("a", quota=8), Project("b", quota=8)]
    jobs = [Job("b-6g", "b", 6), *fs.replicas("a-pods", "a", 3, 4)]
    prediction = fs.predict("runai", NODES, projects, jobs)
    assert prediction.allocated == {"a": 8, "b": 6}
    assert prediction.pending == ("a-pods-2",)


def test_a_gang_with_a_minimum_starts_its_core_and_runs_the_pods_beyond_it_one_by_one() -> None:
    # minMember 2 of 3: the first two pods (8 GPUs, within a's fair share of 10) start together on
    # n2; the third would need 4 idle GPUs on one node and finds 2.
    projects = [Project("a", quota=8), Project("b", quota=8)]
    jobs = [Job("b-6g", "b", 6), *fs.replicas("a-gang", "a", 3, 4, min_members=2)]
    prediction = fs.predict("runai", NODES, projects, jobs)
    assert prediction.allocated == {"a": 8, "b": 6}
    assert prediction.placements["a-gang-0"].node == prediction.placements["a-gang-1"].node == "n2"
    assert prediction.pending == ("a-gang-2",)
    _stable("runai", projects, jobs, prediction)


def test_a_gang_spans_nodes() -> None:
    projects = [Project("a", quota=16)]
    jobs = list(fs.replicas("a-gang", "a", 2, 8, min_members=2))
    prediction = fs.predict("runai", NODES, projects, jobs)
    assert {prediction.placements[name].node for name in ("a-gang-0", "a-gang-1")} == {"n1", "n2"}
    assert prediction.allocated == {"a": 16}


def test_a_gang_reclaims_as_many_victims_as_its_pods_need_together() -> None:
    # Step 1: b alone borrows all 16 GPUs with four 4-GPU jobs (n1: b-0, b-1; n2: b-2, b-3).
    # Step 2: a's gang of four 2-GPU pods is within a's fair share (8 of 8 + 8). Taking the newest
    # victim first, b-3 frees 4 GPUs on n2 (two pods), b-2 the other 4 (all four): both go, and
    # the gang runs on n2. b keeps its share, 8.
    projects = [Project("a", quota=8), Project("b", quota=8)]
    borrowed = [Job(f"b-{index}", "b", 4) for index in range(4)]
    step1, step2, jobs = _two_steps(projects, borrowed, list(fs.replicas("a-gang", "a", 4, 2, min_members=4)))
    assert step1.allocated == {"a": 0, "b": 16}
    assert step2.allocated == {"a": 8, "b": 8}
    assert set(step2.preempted) == {"b-2", "b-3"}
    assert {step2.placements[f"a-gang-{index}"].node for index in range(4)} == {"n2"}
    _stable("runai", projects, jobs, step2)


def test_evicting_one_pod_of_a_gang_core_evicts_the_whole_gang() -> None:
    # Step 1: b's gang of two 4-GPU pods borrows n1 (b's quota is 4); a's 8-GPU job takes n2.
    # Step 2: a's 4-GPU job is within a's fair share (12) and reclaims from b, above its share of 4.
    # The victim is one pod of b's gang, and with it goes the other: b holds nothing, where two
    # independent pods would leave it one (4 GPUs).
    projects = [Project("a", quota=12), Project("b", quota=4)]
    gang = list(fs.replicas("b-gang", "b", 2, 4, min_members=2))
    step1, step2, jobs = _two_steps(projects, [*gang, Job("a-8g", "a", 8)], [Job("a-4g", "a", 4)])
    assert step1.allocated == {"a": 8, "b": 8}
    assert step2.allocated == {"a": 12, "b": 0}
    assert set(step2.preempted) == {"b-gang-0", "b-gang-1"}
    _stable("runai", projects, jobs, step2)

    independent = list(fs.replicas("b-pods", "b", 2, 4))
    _, step2, _ = _two_steps(projects, [*independent, Job("a-8g", "a", 8)], [Job("a-4g", "a", 4)])
    assert step2.allocated == {"a": 12, "b": 4}


def test_a_pod_beyond_the_core_is_evicted_alone() -> None:
    # b's gang of three 4-GPU pods, minMember 2: core on n1, the third pod on n2 beside a's 4-GPU
    # job. a's second 4-GPU job reclaims (a's share 8, b's 4): the newest of b's pods, the one
    # beyond the core, goes alone, and b keeps its core (8).
    projects = [Project("a", quota=8), Project("b", quota=4)]
    gang = list(fs.replicas("b-gang", "b", 3, 4, min_members=2))
    step1, step2, _ = _two_steps(projects, [*gang, Job("a-4g", "a", 4)], [Job("a-4g-2", "a", 4)])
    assert step1.allocated == {"a": 4, "b": 12}
    assert step2.preempted == ("b-gang-2",)
    assert step2.allocated == {"a": 8, "b": 8}


@pytest.mark.parametrize(
    ("jobs", "message"),
    [
        (
            [Job("g-0", "a", 2, gang="g", gang_min=2), Job("g-1", "a", 4, gang="g", gang_min=2)],
            "job 'g-1': the pods of gang 'g' must share project, gpus, interactive, gang_min, cpu and memory; 'g-0' has 'a', 2",
        ),
        ([*fs.replicas("g", "a", 2, 1, min_members=3)], "gang 'g': gang_min must be 1 to its 2 pods, got 3"),
        ([*fs.replicas("g", "a", 2, 1, min_members=0)], "gang 'g': gang_min must be 1 to its 2 pods, got 0"),
        ([*fs.replicas("g", "a", 2, 0.5, min_members=2)], "job 'g-0': the pods of gang 'g' must ask for whole GPUs"),
    ],
)
def test_a_malformed_gang_is_refused_with_the_field_named(jobs: list[Job], message: str) -> None:
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(")):
        fs.predict("runai", NODES, [Project("a", quota=8)], jobs)


def test_on_random_scenarios_a_gang_s_core_runs_whole_or_not_at_all_and_the_state_is_stable() -> None:
    """The differential bench's gang scenarios (bench/scenario_generator.py, ``Site(gangs=True)``),
    every step: predicting again from the prediction changes nothing, no pod of a gang runs while
    part of its core waits, and no pod beyond the core runs without it."""
    from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import scenarios
    from bench.scenario_generator import Site, generate

    nodes = [("dgx1-1", 8), ("dgx1-2", 8)]
    gang_steps = 0
    for seed in range(1, 151):
        scenario = scenarios.load(generate(seed, Site(gangs=True)))
        for index, prediction in enumerate(scenarios.predictions(scenario, nodes)):
            jobs = [model for job in scenario.jobs_after(index) for model in job.model_jobs()]
            again = fs.predict("runai", nodes, scenario.projects, jobs, prediction.placements)
            assert again.placements == prediction.placements, f"seed {seed}, step {index + 1}"
            for job in scenario.jobs_after(index):
                if job.min_replicas is None:
                    continue
                gang_steps += 1
                running = [f"{job.name}-{pod}" in prediction.placements for pod in range(job.replicas or 0)]
                core = running[: job.min_replicas]
                assert all(core) or not any(running), f"seed {seed}, step {index + 1}, {job.name}: {running}"
    assert gang_steps > 300
