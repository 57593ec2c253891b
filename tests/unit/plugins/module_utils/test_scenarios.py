"""Scenario files: the schema, the model's predictions for the shipped scenarios, the judging."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.clusterproof.gpu.plugins.module_utils import scenarios

REPO = Path(__file__).resolve().parents[4]
NETAPP = yaml.safe_load((REPO / "scenarios" / "netapp-runai-4.8-4.10.yml").read_text())
NODES = [("dgx1-1", 8), ("dgx1-2", 8)]


def test_shipped_scenarios_load():
    for path in sorted((REPO / "scenarios").glob("*.yml")):
        scenario = scenarios.load(yaml.safe_load(path.read_text()), where=path.name)
        assert scenario.steps and scenario.projects


def test_netapp_written_expectations_match_the_model():
    scenario = scenarios.load(NETAPP)
    for step, prediction in zip(scenario.steps, scenarios.predictions(scenario, NODES), strict=True):
        assert {k: v for k, v in prediction.allocated.items()} == pytest.approx(step.expect.allocated)
        if step.expect.pending is not None:
            assert sorted(prediction.pending) == sorted(step.expect.pending)


def test_jobs_after_follows_submits_and_deletes():
    scenario = scenarios.load(NETAPP)
    names = [job.name for job in scenario.jobs_after(2)]
    assert "d-1-gggg" not in names and names[-1] == "c-6-gg" and len(names) == 13 + 2 - 3 + 4


def observation(allocated, running=(), pending=(), shared=()):
    return scenarios.Observation(allocated, tuple(running), tuple(pending), tuple(shared))


def test_judge_passes_the_documented_state_and_names_the_workloads_of_a_difference():
    scenario = scenarios.load(NETAPP)
    model = scenarios.predictions(scenario, NODES)
    names = [job.name for job in scenario.jobs_after(1)]
    good = observation(
        {"team-a": 4, "team-b": 2, "team-c": 2, "team-d": 8},
        [n for n in names if n not in ("b-4-gg", "c-4-gg")],
        ["b-4-gg", "c-4-gg"],
    )
    checks = scenarios.judge(scenario, 1, good, model[1], True, 1.0)
    assert checks and all(check.status == "pass" for check in checks)
    bad = observation(
        {"team-a": 4, "team-b": 4, "team-c": 2, "team-d": 6},
        [n for n in names if n not in ("d-3-gg", "c-4-gg")],
        ["c-4-gg", "d-3-gg"],
    )
    failed = {
        check.id: check for check in scenarios.judge(scenario, 1, bad, model[1], True, 1.0) if check.status == "fail"
    }
    team_d = failed["scenario/netapp-runai-4.8-4.10/2/allocated/team-d"]
    assert (team_d.expected, team_d.observed) == ("8", "6")
    assert "pending: d-3-gg" in team_d.message
    assert "scenario/netapp-runai-4.8-4.10/2/model/team-b" in failed
    assert "scenario/netapp-runai-4.8-4.10/2/pending" in failed


def test_written_expectations_can_be_left_out_at_another_capacity():
    scenario = scenarios.load(NETAPP)
    model = scenarios.predictions(scenario, NODES)
    checks = scenarios.judge(
        scenario, 0, observation({"team-a": 4, "team-b": 4, "team-c": 4, "team-d": 4}), model[0], False, 1.0
    )
    assert checks and all("/model/" in check.id for check in checks)


def test_step_table_rows():
    scenario = scenarios.load(NETAPP)
    model = scenarios.predictions(scenario, NODES)
    table = scenarios.step_table(
        scenario, 2, observation({"team-a": 8, "team-b": 4, "team-c": 4, "team-d": 0}), model[2], True
    )
    assert table["rows"][0] == ["team-a", "4", "8", "8", "8"]
    assert table["row_status"] == ["pass"] * 4


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(policy="fifo"), "scenario: policy: expected one of runai, elastic, found 'fifo'"),
        (
            lambda d: d["capacity"].update(gpus=0),
            "scenario: capacity.gpus: expected a positive whole number of GPUs, found 0",
        ),
        (
            lambda d: d["steps"][0]["submit"][0].update(gpus=1.5),
            "scenario: steps[0].submit[0].gpus: expected whole GPUs, or a fraction of one GPU below 1, found 1.5",
        ),
        (
            lambda d: d["steps"][0]["submit"][0].update(project="team-z"),
            "scenario: steps[0].submit[0].project: expected one of the scenario's projects (team-a, team-b, team-c, team-d), found 'team-z'",
        ),
        (
            lambda d: d["steps"][0]["submit"][1].update(name="a-1-1-jupyter"),
            "scenario: steps[0].submit[1].name: expected a workload name not used before in the scenario, found 'a-1-1-jupyter'",
        ),
        (
            lambda d: d["steps"][2].update(delete=["x-1"]),
            "scenario: steps[2].delete: expected workloads submitted in an earlier step, found 'x-1'",
        ),
        (
            lambda d: d["steps"][0]["expect"].update(allocation={}),
            "scenario: steps[0].expect.allocation: expected one of allocated, total, running, pending, shared_gpus, found an unknown field",
        ),
        (
            lambda d: d["steps"][0]["submit"][0].update(kind="batch"),
            "scenario: steps[0].submit[0].kind: expected one of train, interactive, found 'batch'",
        ),
    ],
)
def test_bad_scenarios_name_the_field(change, message):
    data = yaml.safe_load((REPO / "scenarios" / "netapp-runai-4.8-4.10.yml").read_text())
    change(data)
    with pytest.raises(scenarios.ScenarioError) as error:
        scenarios.load(data)
    assert message in str(error.value)
