"""Scenario files: the schema, the model's predictions for the shipped scenarios, the judging."""

from __future__ import annotations

import copy
import dataclasses
from fractions import Fraction

import pytest
import yaml

from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import scenarios
from tests.conftest import REPO

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
        (lambda d: d.update(policy="fifo"), "scenario: policy: expected one of runai, elastic, kueue, found 'fifo'"),
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
            "scenario: steps[0].submit[0].project: expected one of the scenario's projects without sub-projects (team-a, team-b, team-c, team-d), found 'team-z'",
        ),
        (
            lambda d: d["steps"][0]["submit"][1].update(name="a-1-1-jupyter"),
            "scenario: steps[0].submit[1].name: expected a workload name (a DNS label) not used before in the scenario, found 'a-1-1-jupyter'",
        ),
        (
            lambda d: d["steps"][2].update(delete=["x-1"]),
            "scenario: steps[2].delete: expected workloads submitted in an earlier step, found 'x-1'",
        ),
        (
            lambda d: d["steps"][0]["expect"].update(allocation={}),
            "scenario: steps[0].expect.allocation: expected one of allocated, total, running, pending, shared_gpus, replicas, found an unknown field",
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


# --- sizing a scenario to a site -----------------------------------------------------------------


NETAPP_SCENARIO = scenarios.load(NETAPP)
FRACTIONS = scenarios.load(yaml.safe_load((REPO / "scenarios" / "fractional-gpus.yml").read_text()))


def _site(count: int, gpus: int = 8) -> list[tuple[str, int]]:
    return [("n%d" % number, gpus) for number in range(1, count + 1)]


def test_the_written_site_runs_the_scenario_as_written():
    plan = scenarios.fit_to_site(NETAPP_SCENARIO, _site(2))
    assert isinstance(plan, scenarios.SitePlan)
    assert plan.exact and plan.scenario == NETAPP_SCENARIO and plan.describe() == "as written, on 16 GPUs on nodes of 8"


def test_a_double_site_doubles_quotas_jobs_and_tables_and_repeats_fractions():
    plan = scenarios.fit_to_site(NETAPP_SCENARIO, _site(4))
    assert isinstance(plan, scenarios.SitePlan) and not plan.exact
    assert plan.scale == 2 and plan.gpus == 32 and plan.unused_nodes == ()
    assert [project.quota for project in plan.scenario.projects] == [8, 4, 4, 16]
    first = {job.name: job.gpus for job in plan.scenario.steps[0].submit}
    assert first["d-1-gggg"] == 8 and first["b-1-g06"] == first["b-1-g06-x2"] == 0.6
    assert plan.scenario.steps[0].expect.allocated == {"team-a": 8, "team-b": 8, "team-c": 8, "team-d": 8}
    assert plan.scenario.steps[0].expect.total == 32
    assert plan.scenario.steps[1].expect.pending == ("b-4-gg", "c-4-gg")
    assert plan.scenario.steps[2].delete == ("d-1-gggg", "d-2-gg", "d-3-gg")
    model = scenarios.predictions(plan.scenario, list(plan.nodes))
    assert all(scenarios.written_holds(plan.scenario, index, predicted) for index, predicted in enumerate(model))


def test_a_larger_site_keeps_the_scenario_on_the_nodes_it_was_sized_to():
    plan = scenarios.fit_to_site(NETAPP_SCENARIO, _site(5))
    assert isinstance(plan, scenarios.SitePlan)
    assert [name for name, _ in plan.nodes] == ["n1", "n2", "n3", "n4"] and plan.unused_nodes == ("n5",)
    assert "kept off n5" in plan.describe() and "scaled 2×" in plan.describe()


def test_fraction_groups_repeat_with_the_fractions():
    plan = scenarios.fit_to_site(FRACTIONS, _site(4))
    assert isinstance(plan, scenarios.SitePlan)
    assert plan.scenario.steps[0].expect.shared_gpus == (
        ("b-half-1", "b-half-2"),
        ("b-half-1-x2", "b-half-2-x2"),
        ("c-g04", "c-g06"),
        ("c-g04-x2", "c-g06-x2"),
    )


def test_a_whole_multiple_is_preferred_so_fractions_keep_their_size():
    # 24 GPUs: 1.5x would resize the halves to 0.75; the written 16 GPUs keep them halves.
    plan = scenarios.fit_to_site(FRACTIONS, _site(3))
    assert isinstance(plan, scenarios.SitePlan)
    assert plan.scale == 1 and plan.unused_nodes == ("n3",)
    assert plan.scenario.steps[0].expect.shared_gpus == FRACTIONS.steps[0].expect.shared_gpus


def test_resized_fractions_leave_their_pairing_to_the_model():
    plan = scenarios.fit_to_site(FRACTIONS, _site(1))
    assert isinstance(plan, scenarios.SitePlan) and plan.scale == 0.5
    assert {job.gpus for job in plan.scenario.steps[0].submit} == {0.25, 0.3, 0.2}
    assert plan.scenario.steps[0].expect.shared_gpus is None
    assert plan.scenario.steps[0].expect.allocated == {"team-b": 0.5, "team-c": 0.5}


def test_other_node_sizes_are_not_exact_and_written_tables_hold_only_where_the_model_agrees():
    plan = scenarios.fit_to_site(NETAPP_SCENARIO, _site(4, gpus=4))
    assert isinstance(plan, scenarios.SitePlan) and plan.scale == 1 and not plan.exact
    assert "nodes of 4" in plan.describe()
    model = scenarios.predictions(plan.scenario, list(plan.nodes))
    assert scenarios.written_holds(plan.scenario, 0, model[0])
    wrong = scenarios.Expectation(allocated={"team-a": 5}, pending=())
    changed = dataclasses.replace(plan.scenario, steps=(dataclasses.replace(plan.scenario.steps[0], expect=wrong),))
    assert not scenarios.written_holds(changed, 0, model[0])


def test_mixed_node_sizes_use_the_size_that_holds_the_most():
    plan = scenarios.fit_to_site(NETAPP_SCENARIO, [("big-1", 8), ("small-1", 4), ("big-2", 8), ("none", 0)])
    assert isinstance(plan, scenarios.SitePlan)
    assert [name for name, _ in plan.nodes] == ["big-1", "big-2"] and plan.unused_nodes == ("small-1",)


@pytest.mark.parametrize(
    ("nodes", "words"),
    [
        (_site(1), "needs at least 16"),
        (_site(8, gpus=2), "largest job needs 4 GPUs on one node"),
        ([("cpu-only", 0)], "no GPU nodes"),
    ],
)
def test_a_site_too_small_says_why(nodes, words):
    reason = scenarios.fit_to_site(NETAPP_SCENARIO, nodes)
    assert isinstance(reason, str) and words in reason


# --- quota trees, Deployments, the engine's own policy ---------------------------------------------

TREE_FILE = yaml.safe_load((REPO / "scenarios" / "alibaba-elastic-quota-tree.yml").read_text())
TREE = scenarios.load(TREE_FILE)
POOL = [("pool", 40)]


def test_the_tree_scenario_reproduces_the_guide_under_its_own_policy():
    assert TREE.resource == "cpu" and TREE.parents == {"root", "root-a", "root-b"}
    model = scenarios.predictions(TREE, POOL)
    assert [scenarios.predicted_replicas(TREE, index, step) for index, step in enumerate(model)] == [
        {"namespace1": 4},
        {"namespace1": 4, "namespace2": 4},
        {"namespace1": 3, "namespace2": 3, "namespace3": 2},
        {"namespace1": 2, "namespace2": 2, "namespace3": 2, "namespace4": 2},
    ]
    assert all(scenarios.written_holds(TREE, index, step) for index, step in enumerate(model))


def test_an_engine_of_another_policy_is_warned_not_failed_and_the_report_says_where():
    runai = scenarios.predictions(TREE, POOL, "runai")
    assert scenarios.predicted_replicas(TREE, 2, runai[2]) == {"namespace1": 2, "namespace2": 2, "namespace3": 4}
    # What KAI does at step 3, as observed: Run:AI's fair share, not the guide's min.
    observed = scenarios.Observation(
        allocated=scenarios.roll_up({"root-a-1": 10, "root-a-2": 10, "root-b-1": 20, "root-b-2": 0}, PARENTS),
        running=("namespace1", "namespace2", "namespace3"),
        pending=("namespace1", "namespace2", "namespace3"),
        replicas={"namespace1": 2, "namespace2": 2, "namespace3": 4},
        parents=PARENTS,
    )
    assert observed.total == 40 and observed.allocated["root-b"] == 20 and observed.allocated["root"] == 40
    checks = scenarios.judge(TREE, 2, observed, runai[2], True, 1.0, engine_policy="runai")
    by_id = {check.id: check for check in checks}
    assert by_id["scenario/alibaba-elastic-quota-tree/3/replicas/namespace3"].status == "warn"
    assert "the document describes the elastic policy; the engine implements runai" in (
        by_id["scenario/alibaba-elastic-quota-tree/3/replicas/namespace3"].message
    )
    assert all(check.status == "pass" for check in checks if "/model/" in check.id)
    verdict = scenarios.reproduction(TREE, checks, "KAI scheduler", "runai")
    assert verdict.status == "warn" and verdict.observed.startswith("differs at 3")
    same = scenarios.judge(TREE, 2, observed, runai[2], True, 1.0, engine_policy="elastic")
    assert {check.status for check in same if "/model/" not in check.id} >= {"fail"}


PARENTS = {
    "root-a": "root",
    "root-b": "root",
    "root-a-1": "root-a",
    "root-a-2": "root-a",
    "root-b-1": "root-b",
    "root-b-2": "root-b",
}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: d["projects"][1].update(parent="root-z"),
            "projects[1].parent: expected a project declared before it",
        ),
        (
            lambda d: d["projects"][3].update(max=5),
            "projects[3].max: expected a number at least the quota (10), found 5",
        ),
        (
            lambda d: d["projects"][0].update(gpu_quota=4),
            "projects[0].gpu_quota: expected one of name, parent, min, max",
        ),
        (
            lambda d: d["steps"][0]["submit"][0].update(project="root-a"),
            "steps[0].submit[0].project: expected one of the scenario's projects without sub-projects",
        ),
        (
            lambda d: d["steps"][0]["submit"][0].update(replicas=0),
            "steps[0].submit[0].replicas: expected a positive whole number of pods",
        ),
        (
            lambda d: d["steps"][0]["submit"][0].update(cpus=2.5),
            "steps[0].submit[0].cpus: expected whole CPU cores, or a fraction of one core below 1, found 2.5",
        ),
        (lambda d: d.update(resource="tpu"), "resource: expected one of gpu, cpu, found 'tpu'"),
        (
            lambda d: d["capacity"].update(cpus=0),
            "capacity.cpus: expected a positive whole number of CPU cores, found 0",
        ),
        (
            lambda d: d["steps"][0]["expect"].update(replicas={"namespace1": -1}),
            "steps[0].expect.replicas: expected a mapping of Deployment name to running replicas",
        ),
    ],
)
def test_bad_tree_scenarios_name_the_field(change, message):
    data = copy.deepcopy(TREE_FILE)
    change(data)
    with pytest.raises(scenarios.ScenarioError) as error:
        scenarios.load(data)
    assert message in str(error.value)


def test_the_tree_scales_to_the_sandbox_cores():
    plan = scenarios.fit_to_site(TREE, [("dgx1-1", 8), ("dgx1-2", 8)])
    assert isinstance(plan, scenarios.SitePlan) and plan.scale == Fraction(2, 5)
    assert {job.gpus for step in plan.scenario.steps for job in step.submit} == {2}
    assert plan.scenario.steps[3].expect.replicas == {
        "namespace1": 2,
        "namespace2": 2,
        "namespace3": 2,
        "namespace4": 2,
    }
    assert "16 CPU cores" in plan.describe()


# --- disruption -----------------------------------------------------------------------------------


def _states(predictions):
    return [scenarios.Observation(dict(p.allocated), tuple(p.running), tuple(p.pending)) for p in predictions]


def test_disruption_of_the_netapp_chain_is_the_document_s_two_reclaimed_jobs():
    scenario = scenarios.load(NETAPP)
    model = scenarios.predictions(scenario, NODES)
    table = scenarios.disruption_table(scenario, _states(model), model)
    assert [row[1:5] for row in table["rows"]] == [
        ["16", "0", "0", "none"],  # 4.8: everything starts on an empty cluster
        ["4", "4", "1", "b-4-gg (2), c-4-gg (2)"],  # 4.9: team-d's 4 GPUs are reclaimed from b and c
        ["8", "0", "0", "none"],  # 4.10: team-d's deleted jobs are not evictions
    ]
    assert table["rows"][1][5] == "b-4-gg, c-4-gg"  # the model predicts the same victims
    assert table["row_status"] == ["pass", "pass", "pass"]


def test_a_step_that_evicts_more_than_it_asks_for_is_marked():
    scenario = scenarios.load(NETAPP)
    model = scenarios.predictions(scenario, NODES)
    states = _states(model)
    # 4.9 as an engine that evicted all of team-a's running work as well as b-4-gg and c-4-gg
    taken = {"a-1-1-jupyter", "a-1-g", "a-2-gg", "b-4-gg", "c-4-gg"}
    states[1] = dataclasses.replace(states[1], running=tuple(n for n in states[0].running if n not in taken))
    seen = scenarios.disruption(scenario, 1, states[0], states[1])
    assert (seen.requested, seen.evicted_gpus, seen.per_requested) == (4, 8, 2)
    table = scenarios.disruption_table(scenario, states, [None, None, None])
    assert table["row_status"][1] == "warn" and table["rows"][1][5] == "—"


def test_a_deployment_that_loses_some_of_its_pods_counts_those_pods():
    data = {
        "name": "deploy", "title": "t", "source": "s", "policy": "runai", "capacity": {"gpus": 8, "node_gpus": 8},
        "projects": [{"name": "a", "gpu_quota": 4}, {"name": "b", "gpu_quota": 4}],
        "steps": [
            {"name": "one", "submit": [{"name": "web", "project": "a", "kind": "train", "gpus": 1, "replicas": 6}]},
            {"name": "two", "submit": [{"name": "big", "project": "b", "kind": "train", "gpus": 4}]},
        ],
    }  # fmt: skip
    scenario = scenarios.load(data)
    before = scenarios.Observation({"a": 6}, ("web",), (), replicas={"web": 6})
    after = scenarios.Observation({"a": 4, "b": 4}, ("web", "big"), (), replicas={"web": 4})
    seen = scenarios.disruption(scenario, 1, before, after)
    assert seen.evicted == (("web", 2.0),) and seen.per_requested == 0.5
    assert scenarios.disruption(scenario, 0, None, before).evicted == ()


def test_a_steps_workloads_are_predicted_one_arrival_at_a_time():
    # Differential seed 6, step 1: queues with no quota and no weight have no fair share. The first
    # workload to arrive (q4's 8 GPUs) is lent a whole idle node before the others are known; KAI
    # did so. Read all at once, the model lent the GPUs to the first queue declared (q1) instead.
    data = {
        "name": "arrivals", "policy": "runai", "capacity": {"gpus": 16, "node_gpus": 8},
        "projects": [
            {"name": "q1", "gpu_quota": 0}, {"name": "q3", "gpu_quota": 8, "over_quota_weight": 1},
            {"name": "q4", "gpu_quota": 0},
        ],
        "steps": [{"name": "one", "submit": [
            {"name": "j1-8g", "project": "q4", "kind": "train", "gpus": 8},
            {"name": "j3-8g", "project": "q3", "kind": "interactive", "gpus": 8},
            {"name": "j5-4g", "project": "q1", "kind": "train", "gpus": 4},
        ]}],
    }  # fmt: skip
    (step,) = scenarios.predictions(scenarios.load(data), [("n1", 8), ("n2", 8)])
    assert step.allocated == {"q1": 0, "q3": 8, "q4": 8}
    assert step.pending == ("j5-4g",)


# --- gangs ----------------------------------------------------------------------------------------

GANGS = yaml.safe_load((REPO / "scenarios" / "gang-scheduling.yml").read_text())


def test_the_gang_scenario_s_written_tables_are_the_model_s():
    scenario = scenarios.load(GANGS)
    model = scenarios.predictions(scenario, NODES)
    assert [scenarios.written_holds(scenario, index, step) for index, step in enumerate(model)] == [True] * 3
    assert [scenarios.predicted_replicas(scenario, index, step) for index, step in enumerate(model)] == [
        {"a-gang": 4},
        {"a-gang": 0},
        {"a-gang": 4},
    ]
    # The gang's pods come back over both nodes once team-b's 8-GPU job ends.
    assert {model[2].placements["a-gang-%d" % pod].node for pod in range(4)} == {"dgx1-1", "dgx1-2"}


def test_independent_replicas_would_keep_half_of_what_the_gang_loses():
    data = copy.deepcopy(GANGS)
    del data["steps"][0]["submit"][0]["min_replicas"]
    scenario = scenarios.load(data)
    assert scenarios.predicted_replicas(scenario, 1, scenarios.predictions(scenario, NODES)[1]) == {"a-gang": 2}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda job: job.pop("replicas"),
            "steps[0].submit[0].min_replicas: expected a positive whole number of pods that start together, "
            "at most replicas (not given), found 4",
        ),
        (
            lambda job: job.update(min_replicas=5),
            "steps[0].submit[0].min_replicas: expected a positive whole number of pods that start together, "
            "at most replicas (4), found 5",
        ),
        (
            lambda job: job.update(min_replicas=True),
            "steps[0].submit[0].min_replicas: expected a positive whole number of pods that start together",
        ),
        (
            lambda job: job.update(gpus=0.5),
            "steps[0].submit[0].gpus: expected whole GPUs for each pod of a gang (min_replicas), found 0.5",
        ),
    ],
)
def test_a_bad_gang_names_the_field(change, message):
    data = copy.deepcopy(GANGS)
    change(data["steps"][0]["submit"][0])
    with pytest.raises(scenarios.ScenarioError) as error:
        scenarios.load(data)
    assert message in str(error.value)


def test_a_gang_evicted_whole_is_named_once_in_the_disruption_table():
    scenario = scenarios.load(GANGS)
    model = scenarios.predictions(scenario, NODES)
    states = [
        scenarios.Observation(
            dict(p.allocated),
            tuple(sorted({name.rsplit("-", 1)[0] if name.startswith("a-gang-") else name for name in p.running})),
            (),
            replicas={"a-gang": sum(1 for name in p.running if name.startswith("a-gang-"))},
        )
        for p in model
    ]
    table = scenarios.disruption_table(scenario, states, model)
    assert table["rows"][1][4:] == ["a-gang (8)", "a-gang"]
