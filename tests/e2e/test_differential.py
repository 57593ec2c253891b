"""A fixed sample of the differential bench (bench/differential_bench.py) on the session's KAI
sandbox and on a Kueue sandbox of this module's own: random scenarios the real engine settles as the
fair-share model of its policy predicts. The bench runs hundreds; these seeds are a few it drew,
kept here so that a change to the model or to the engine's installation that breaks agreement shows
in the tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.differential_bench import run_one
from bench.sandbox_bench import generated_inventory
from bench.scenario_generator import Site, generate

from .conftest import Sandbox, own_sandbox

pytestmark = pytest.mark.sandbox


def _jobs(scenario: dict) -> list[dict]:
    return [job for step in scenario["steps"] for job in step["submit"]]


def _kai_agrees(seed: int, site: Site, sample: dict, sandbox: Sandbox, out: Path) -> None:
    """Seed ``seed`` of ``site`` still draws the case ``sample`` keeps it for, and the session's KAI
    settles it as the model predicts, writing no disagreement to replay into ``out``."""
    assert sample[seed](generate(seed, site)), f"seed {seed} no longer draws the case it was kept for"
    outcome = run_one(seed, site, "kai", sandbox.kubeconfig, sandbox.state_dir, out, ["dgx1-1", "dgx1-2"])
    assert outcome["verdict"] == "agrees", outcome["differences"]
    assert list(out.iterdir()) == []  # nothing written: no disagreement to replay


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
    _kai_agrees(seed, Site(), SAMPLE, sandbox, tmp_path)


# Seeds of the bench's site with CPU and memory beside the GPUs (--resources; the session's nodes
# offer 80 cores and 512 GiB, as the bench's do), each a rule of docs/fairshare.md, "CPU and memory
# beside the GPUs".
RESOURCE_SAMPLE = {
    # q5's CPU limit of 6 cores keeps its 8-GPU job pending though the GPUs are free
    8: lambda scenario: scenario["projects"][4].get("cpu_limit") == 6,
    # q1 above its CPU quota only (20 of 16 cores) loses its 8-GPU job to q2's interactive claim
    297: lambda scenario: [project.get("cpu_quota") for project in scenario["projects"]] == [16, 32, 8],
    # q5 at its GPU limit: its interactive job preempts q5's own 8-GPU training job
    36: lambda scenario: [project["gpu_quota"] for project in scenario["projects"]] == [3, 7, 5, 1, 8],
}


@pytest.mark.parametrize("seed", sorted(RESOURCE_SAMPLE))
def test_kai_settles_random_scenarios_with_cpu_and_memory_quotas_as_the_model_predicts(
    seed, sandbox, kai_site, tmp_path
):
    _kai_agrees(seed, Site(resources=True), RESOURCE_SAMPLE, sandbox, tmp_path)


# Seeds of the bench's site with departments (--trees: the queues are leaves of KAI parent queues),
# each a rule of docs/fairshare.md that KAI's queue hierarchy needs.
TREE_SAMPLE = {
    # q2's 0.25-GPU interactive job is within q2's quota of 1, not within its department d2's of 0: it waits
    6: lambda scenario: (
        [project["gpu_quota"] for project in scenario["projects"]] == [3, 0, 1, 1]
        and any(job["kind"] == "interactive" and job["project"] == "q2" for job in _jobs(scenario))
    ),
    # idle GPUs go to the department furthest below its share (d2, to q4), not to q2 under a d1 at its share
    27: lambda scenario: [project["gpu_quota"] for project in scenario["projects"]] == [0, 1, 6, 4, 1, 2, 0],
}


@pytest.mark.parametrize("seed", sorted(TREE_SAMPLE))
def test_kai_settles_random_scenarios_with_departments_as_the_model_predicts(seed, sandbox, kai_site, tmp_path):
    _kai_agrees(seed, Site(trees=True), TREE_SAMPLE, sandbox, tmp_path)


# Kueue's seeds (whole GPUs, as the bench draws them for Kueue), each a rule of the kueue policy
# (docs/fairshare.md) that the model once lacked.
KUEUE_SAMPLE = {
    # fair-sharing preemption: q2's interactive workload takes q2's own training workload first
    8: lambda scenario: [project["gpu_quota"] for project in scenario["projects"]] == [5, 11],
    # a workload admitted with no node free keeps its quota into the next step
    152: lambda scenario: [project["gpu_quota"] for project in scenario["projects"]] == [14, 4],
    # the room a preemption frees goes to the workload admitted first; the claimant waits
    224: lambda scenario: [project["gpu_quota"] for project in scenario["projects"]] == [8, 5, 5, 5, 0],
}


@pytest.fixture(scope="module")
def kueue_sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    """Kueue on a sandbox of the bench's default site: 2 nodes of 8 GPUs, gpu-0000 and gpu-0001."""
    directory = tmp_path_factory.mktemp("kueue-differential")
    inventory = generated_inventory(directory / "hosts.yml", 2, scheduler="kueue", site_name="kueue-differential")
    with own_sandbox(inventory, directory / "state") as sandbox:
        yield sandbox


@pytest.mark.parametrize("seed", sorted(KUEUE_SAMPLE))
def test_kueue_settles_random_scenarios_as_the_model_predicts(seed, kueue_sandbox, tmp_path):
    site = Site(fractions=False)
    scenario = generate(seed, site)
    assert KUEUE_SAMPLE[seed](scenario), f"seed {seed} no longer draws the case it was kept for"
    outcome = run_one(seed, site, "kueue", kueue_sandbox.kubeconfig, kueue_sandbox.state_dir, tmp_path)
    assert outcome["verdict"] == "agrees", outcome["differences"]
    assert list(tmp_path.iterdir()) == []
