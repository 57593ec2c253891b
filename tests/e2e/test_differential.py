"""A fixed sample of the differential bench (bench/differential_bench.py) on the session's KAI
sandbox: random scenarios the real engine settles as the fair-share model of its policy predicts.
The bench runs hundreds; these seeds are a few it drew, kept here so that a change to the model or
to the engine's installation that breaks agreement shows in the tests."""

from __future__ import annotations

import pytest

from bench.differential_bench import run_one
from bench.scenario_generator import Site, generate

pytestmark = pytest.mark.sandbox


def _jobs(scenario: dict) -> list[dict]:
    return [job for step in scenario["steps"] for job in step["submit"]]


# Seeds of the bench's default site (2 nodes of 8 GPUs), each kept for the case it draws: four the
# model got wrong before it learnt the case (docs/fairshare.md), and one of plain borrowing.
SAMPLE = {
    # an interactive job that preempts its own project's training job (KAI's preempt action)
    3: lambda scenario: any(job["kind"] == "interactive" and job["project"] == "q1" for job in _jobs(scenario)),
    # queues without quota or weight, lent a node by arrival order
    6: lambda scenario: sum(1 for project in scenario["projects"] if project["gpu_quota"] == 0) == 3,
    # quotas above capacity, a fraction, and a node consolidated for an 8-GPU job
    9: lambda scenario: (
        sum(project["gpu_quota"] for project in scenario["projects"]) > 16
        and any(job["gpus"] == 8 for job in _jobs(scenario))
        and any(job["gpus"] < 1 for job in _jobs(scenario))
    ),
    # plain over-quota borrowing and reclaim
    1: lambda scenario: len(scenario["steps"]) >= 2,
    # two queues equally above their share: KAI takes from the one created last (q4, not q1)
    261: lambda scenario: [project["gpu_quota"] for project in scenario["projects"]] == [5, 2, 5, 3],
}


@pytest.mark.parametrize("seed", sorted(SAMPLE))
def test_kai_settles_random_scenarios_as_the_model_predicts(seed, sandbox, kai_site, tmp_path):
    scenario = generate(seed)
    assert SAMPLE[seed](scenario), f"seed {seed} no longer draws the case it was kept for"
    outcome = run_one(seed, Site(), "kai", sandbox.kubeconfig, sandbox.state_dir, tmp_path, ["dgx1-1", "dgx1-2"])
    assert outcome["verdict"] == "agrees", outcome["differences"]
    assert list(tmp_path.iterdir()) == []  # nothing written: no disagreement to replay
