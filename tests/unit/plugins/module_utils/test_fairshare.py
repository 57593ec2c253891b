"""The fair-share model against the source documents' tables, and its invariants as properties.

The expected outcomes below are copied from SCENARIOS.md (NetApp 4.8 - 4.10, the Alibaba elastic
quota table), never computed by the model under test.
"""

from __future__ import annotations

import gc
from collections import defaultdict

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.clusterproof.gpu.plugins.module_utils.model import fairshare as fs
from ansible_collections.clusterproof.gpu.plugins.module_utils.model.fairshare import (
    Job,
    Placement,
    Prediction,
    Project,
    ScaledScenario,
)
from tests.conftest import REPO
from tests.unit.plugins.module_utils.helpers import fairshare_projects

PROPERTY = settings(max_examples=60, deadline=None)

# --- NetApp validation of Run:AI, SCENARIOS.md 4.8 - 4.10 ------------------------------------------

DGX = [("dgx1-1", 8), ("dgx1-2", 8)]
QUOTAS = {"team-a": 4, "team-b": 2, "team-c": 2, "team-d": 8}
TEAMS = [Project(name, quota=quota) for name, quota in QUOTAS.items()]

# The scenario's steps (scenarios/netapp-runai-4.8-4.10.yml, the document's tables): the jobs each
# submits, and those the last one deletes.
NETAPP_STEPS = yaml.safe_load((REPO / "scenarios" / "netapp-runai-4.8-4.10.yml").read_text())["steps"]
# 4.8: the node each job runs on in the document's figure
FIGURE_NODES_4_8 = {
    "dgx1-1": ["a-1-1-jupyter", "a-1-g", "a-2-gg", "b-3-g", "c-1-g05", "c-2-g03", "c-3-g02", "c-4-gg"],
    "dgx1-2": ["b-1-g06", "b-2-g04", "b-4-gg", "c-5-g", "d-1-gggg"],
}
EXPECTED_4_8 = {"team-a": 4, "team-b": 4, "team-c": 4, "team-d": 4}
SHARED_4_8 = [{"b-1-g06", "b-2-g04"}, {"c-1-g05", "c-2-g03", "c-3-g02"}]

# 4.9 (reconstructed submission): team-d claims its quota with two 2-GPU jobs
EXPECTED_4_9 = {"team-a": 4, "team-b": 2, "team-c": 2, "team-d": 8}
PENDING_4_9 = {"b-4-gg", "c-4-gg"}

# 4.10 (reconstructed): team-d's jobs end; a, b and c submit more
EXPECTED_4_10 = {"team-a": 8, "team-b": 4, "team-c": 4, "team-d": 0}
QUEUED_4_10 = {"team-a": 0, "team-b": 1, "team-c": 1, "team-d": 0}
PENDING_4_10 = {"b-5-gg", "c-6-gg"}


def as_jobs(submitted: list[dict]) -> list[Job]:
    return [
        Job(job["name"], job["project"], job["gpus"], interactive=job["kind"] == "interactive") for job in submitted
    ]


JOBS_4_8 = as_jobs(NETAPP_STEPS[0]["submit"])
JOBS_4_9 = JOBS_4_8 + as_jobs(NETAPP_STEPS[1]["submit"])
JOBS_4_10 = [job for job in JOBS_4_9 if job.name not in NETAPP_STEPS[2]["delete"]] + as_jobs(NETAPP_STEPS[2]["submit"])


def figure_placements() -> dict[str, Placement]:
    """The 4.8 figure's nodes, GPU indices handed out in table order; a project's fractions share a GPU."""
    next_gpu: dict[str, int] = defaultdict(int)
    shared_gpu: dict[tuple[str, str], int] = {}
    placements = {}
    node_of = {name: node for node, names in FIGURE_NODES_4_8.items() for name in names}
    for job in JOBS_4_8:
        name, project, gpus, node = job.name, job.project, job.gpus, node_of[job.name]
        if gpus < 1:
            if (node, project) not in shared_gpu:
                shared_gpu[node, project] = next_gpu[node]
                next_gpu[node] += 1
            placements[name] = Placement(node, (shared_gpu[node, project],), shared=True)
        else:
            placements[name] = Placement(node, tuple(range(next_gpu[node], next_gpu[node] + gpus)))
            next_gpu[node] += gpus
    return placements


def step_4_8() -> Prediction:
    return fs.predict("runai", DGX, TEAMS, JOBS_4_8)


def starts_of_4_9() -> dict[str, dict[str, Placement]]:
    return {"model's 4.8": step_4_8().placements, "figure's 4.8": figure_placements()}


def check_capacity(prediction: Prediction, nodes, jobs: list[Job]) -> None:
    """No GPU holds more than one whole job, or fractions above 1; indices exist; accounting adds up."""
    size = dict(nodes)
    by_name = {job.name: job for job in jobs}
    whole_owner: dict[tuple[str, int], str] = {}
    shared_use: dict[tuple[str, int], int] = defaultdict(int)
    for name, placement in prediction.placements.items():
        job = by_name[name]
        assert placement.node in size
        assert all(0 <= gpu < size[placement.node] for gpu in placement.gpus)
        if job.gpus < 1:
            assert placement.shared and len(placement.gpus) == 1
            shared_use[placement.node, placement.gpus[0]] += round(job.gpus * 1000)
        else:
            assert not placement.shared and len(set(placement.gpus)) == job.gpus
            for gpu in placement.gpus:
                assert (placement.node, gpu) not in whole_owner, f"GPU {gpu} of {placement.node} given twice"
                whole_owner[placement.node, gpu] = name
    assert not set(whole_owner) & set(shared_use)
    assert all(units <= 1000 for units in shared_use.values())
    for node, count in size.items():
        used = sum(1 for key in set(whole_owner) | set(shared_use) if key[0] == node)
        assert used <= count
    assert prediction.total_allocated <= prediction.capacity + 1e-9
    assert not set(prediction.placements) & set(prediction.pending)
    assert set(prediction.placements) | set(prediction.pending) == set(by_name)
    held: dict[str, float] = defaultdict(float)
    for name in prediction.placements:
        held[by_name[name].project] += by_name[name].gpus
    for project, amount in held.items():
        assert prediction.allocated[project] == pytest.approx(amount)


def test_4_8_all_thirteen_run_and_fill_the_cluster():
    result = step_4_8()
    assert len(result.placements) == 13 and result.pending == ()
    assert result.total_allocated == 16 and result.gpus_in_use == 16
    assert result.allocated == pytest.approx(EXPECTED_4_8)
    check_capacity(result, DGX, JOBS_4_8)


def test_4_8_fractions_share_one_gpu_per_group():
    result = step_4_8()
    gpus = [{(result.placements[name].node, result.placements[name].gpus) for name in group} for group in SHARED_4_8]
    assert all(len(gpu) == 1 for gpu in gpus)
    assert gpus[0] != gpus[1]
    assert all(result.placements[name].shared for group in SHARED_4_8 for name in group)


def test_4_8_teams_b_and_c_over_quota_while_d_is_under():
    result = step_4_8()
    assert result.allocated["team-b"] > QUOTAS["team-b"] and result.allocated["team-c"] > QUOTAS["team-c"]
    assert result.allocated["team-d"] < QUOTAS["team-d"]


@pytest.mark.parametrize("start", ["model's 4.8", "figure's 4.8"])
def test_4_9_team_d_reclaims_its_quota(start):
    result = fs.predict("runai", DGX, TEAMS, JOBS_4_9, starts_of_4_9()[start])
    assert result.allocated == pytest.approx(EXPECTED_4_9)
    assert result.total_allocated == 16
    assert set(result.pending) == PENDING_4_9
    assert set(result.preempted) == PENDING_4_9
    check_capacity(result, DGX, JOBS_4_9)


@pytest.mark.parametrize("start", ["model's 4.8", "figure's 4.8"])
def test_4_9_no_interactive_job_is_paused(start):
    result = fs.predict("runai", DGX, TEAMS, JOBS_4_9, starts_of_4_9()[start])
    assert all(result.state(job.name) == "running" for job in JOBS_4_9 if job.interactive)


@pytest.mark.parametrize("start", ["model's 4.8", "figure's 4.8"])
def test_4_10_over_quota_split_by_quota_ratio(start):
    after_4_9 = fs.predict("runai", DGX, TEAMS, JOBS_4_9, starts_of_4_9()[start])
    result = fs.predict("runai", DGX, TEAMS, JOBS_4_10, after_4_9.placements)
    assert result.allocated == pytest.approx(EXPECTED_4_10)
    assert set(result.pending) == PENDING_4_10
    queued = {team: sum(1 for name in result.pending if name[0] == team[-1]) for team in QUOTAS}
    assert queued == QUEUED_4_10
    assert result.preempted == ()
    check_capacity(result, DGX, JOBS_4_10)


def test_4_10_fair_shares_are_quota_plus_spare_by_quota():
    shares = fs.fair_shares(TEAMS, {"team-a": 8, "team-b": 6, "team-c": 6, "team-d": 0}, 16)
    assert shares == pytest.approx(EXPECTED_4_10)


def test_fair_shares_cap_by_limit_and_pass_the_rest_on():
    projects = [Project("x", quota=2, limit=3), Project("y", quota=2)]
    assert fs.fair_shares(projects, {"x": 10, "y": 10}, 10) == pytest.approx({"x": 3, "y": 7})


def test_kai_quotas_above_capacity_each_deserve_their_quota_unscaled():
    # KAI v0.12.0 (proportion/resource_division, setDeservedResource): each queue deserves
    # min(quota, demand) even when they add up to more than the cluster; nothing is scaled down.
    projects = [Project("x", quota=12), Project("y", quota=4)]
    assert fs.fair_shares(projects, {"x": 20, "y": 20}, 8) == pytest.approx({"x": 12, "y": 4})
    assert fs.fair_shares(projects, {"x": 3, "y": 20}, 8) == pytest.approx({"x": 3, "y": 5})
    # The water-fill in real numbers (kueue) splits an oversubscribed amount by quota.
    assert fs.fair_shares(projects, {"x": 20, "y": 20}, 8, policy="kueue") == pytest.approx({"x": 6, "y": 2})


def test_kai_divides_over_quota_gpus_in_whole_units_largest_remainder_first():
    # 5 spare GPUs over three queues of equal weight asking for plenty: 5/3 each, floored to 1
    # each, the 2 left to the largest lost fractions (all 2/3: the older queues, x then y).
    projects = [Project("x", quota=1, weight=1), Project("y", quota=1, weight=1), Project("z", quota=1, weight=1)]
    shares = fs.fair_shares(projects, {"x": 8, "y": 8, "z": 8}, 8)
    assert shares == pytest.approx({"x": 3, "y": 3, "z": 2})
    # A queue that asks for less than its share takes what it asks, and another round divides the
    # rest: round 1 gives x its 0.5, y and z 1 each (5/3 floored); round 2 gives y and z 1 each
    # (1.25 floored); the 0.5 left goes to the largest lost fraction (y and z tie at 0.25: y, older).
    shares = fs.fair_shares(projects, {"x": 1.5, "y": 8, "z": 8}, 8)
    assert shares == pytest.approx({"x": 1.5, "y": 3.5, "z": 3})


def test_zero_weight_gets_no_spare_in_fair_share_but_may_borrow_idle():
    projects = [Project("x", quota=2, weight=0), Project("y", quota=2)]
    assert fs.fair_shares(projects, {"x": 8, "y": 8}, 8) == pytest.approx({"x": 2, "y": 6})
    jobs = [Job(f"x{i}", "x", 1) for i in range(6)]
    result = fs.predict("runai", [("n", 8)], projects, jobs)
    assert result.allocated["x"] == 6  # idle GPUs are lent, and reclaimable


def test_interactive_work_starts_only_within_quota():
    jobs = [Job(f"i{i}", "x", 1, interactive=True) for i in range(4)]
    result = fs.predict("runai", [("n", 8)], [Project("x", quota=2)], jobs)
    assert result.allocated["x"] == 2 and result.pending == ("i2", "i3")


def test_non_preemptible_work_under_a_department_is_checked_against_the_quota_of_every_ancestor():
    # KAI v0.12.0 resultsWithNonPreemptibleOverQuota walks the queue's parents: d's quota of 2 holds
    # a's interactive 2 GPUs, so b's interactive GPU waits though b is within its own quota of 2.
    projects = [Project("d", quota=2), Project("a", quota=2, parent="d"), Project("b", quota=2, parent="d")]
    jobs = [Job("a-session", "a", 2, interactive=True), Job("b-session", "b", 1, interactive=True)]
    jobs.append(Job("b-train", "b", 1))
    result = fs.predict("runai", DGX, projects, jobs)
    assert result.pending == ("b-session",)
    assert result.allocated == {"d": 3, "a": 2, "b": 1}
    # with a's session gone, d holds none of it and b's session starts
    later = fs.predict("runai", DGX, projects, jobs[1:], result.placements)
    assert later.pending == () and later.allocated["b"] == 2


def test_kai_lends_idle_gpus_to_the_department_furthest_below_its_share_before_the_project_furthest_below():
    # KAI orders departments first, then their queues (JobsOrderByQueues; differential tree seed 27).
    # a is 1 below its share, but its department d1 is at its share of 0; d2 is 4 below its share
    # of 6, so its project b, at its share of 0, borrows the idle GPUs and a's job waits.
    projects = [Project("d1", quota=0), Project("a", quota=1, parent="d1"), Project("d2", quota=4)]
    projects += [Project("b", quota=0, parent="d2"), Project("c", quota=4, parent="d2")]
    jobs = [Job("c-1", "c", 2), Job("a-1", "a", 4), Job("b-1", "b", 4)]
    result = fs.predict("runai", [("n", 8)], projects, jobs)
    assert (result.deserved["d1"], result.deserved["a"], result.deserved["d2"], result.deserved["b"]) == (0, 1, 6, 0)
    assert result.allocated == {"d1": 0, "a": 0, "d2": 6, "b": 4, "c": 2}
    assert result.pending == ("a-1",)


def test_kai_lends_idle_gpus_to_the_queue_with_the_smaller_share_held_with_the_job_over_its_allocatable_share():
    # KAI v0.12.0 orders queues for its allocate action by the proportion plugin's QueueOrderFn
    # (queue_order.go, GetQueueOrderResult): q1 and q2 are both at their fair share (1 and 3) and
    # would pass their quota with the next job; then the smaller dominant resource share with the
    # job comes first (prioritizeSmallerResourceShare): q2 (3 + 2) / 3 = 1.67 before q1 (1 + 2) / 1
    # = 3, though both are as far below their share (0) and q1 was declared first.
    projects = [Project("q1", quota=1, weight=0), Project("q2", quota=3, weight=0), Project("q3", quota=2, weight=0)]
    jobs = [Job("a1", "q1", 1), Job("b1", "q2", 3), Job("c1", "q3", 2), Job("a2", "q1", 2), Job("b2", "q2", 2)]
    result = fs.predict("runai", [("n1", 8)], projects, jobs)
    assert result.deserved == {"q1": 1, "q2": 3, "q3": 2}
    assert result.allocated == {"q1": 1, "q2": 5, "q3": 2} and result.pending == ("a2",)


def test_kai_lends_idle_gpus_to_a_queue_with_an_allocatable_share_before_one_with_none():
    # KAI's penalizeZeroShareWithJob: q1 (quota 0, weight 0) has no allocatable share, q2 (quota 2)
    # has; both sit at their fair share and both 4-GPU jobs pass their quotas. q1's job came first
    # and q1 was declared first, yet q2 borrows the idle GPUs.
    projects = [Project("q1", quota=0), Project("q2", quota=2, weight=0)]
    jobs = [Job("j0", "q2", 2), Job("j2", "q1", 4), Job("j6", "q2", 4)]
    result = fs.predict("runai", [("n1", 8)], projects, jobs)
    assert result.allocated == {"q1": 0, "q2": 6} and result.pending == ("j2",)


def test_kai_lends_idle_gpus_to_the_department_first_in_queue_order_counted_with_its_first_queue_s_job():
    # KAI's JobsOrderByQueues compares departments by the same QueueOrderFn, each with the next job
    # of its own first queue (buildFuncOrderBetweenDepartmentsWithJobs), then takes that department's
    # first queue. q3's 2-GPU job alone would come first ((2 + 2) / 2 = 2 against q1's (1 + 2) / 1
    # = 3), but d1 with q1's job, (4 + 2) / 4 = 1.5, comes before d2, (2 + 2) / 2 = 2.
    projects = [Project("d2", quota=2, weight=0), Project("q3", quota=2, weight=0, parent="d2")]
    projects += [Project("d1", quota=4, weight=0), Project("q1", quota=1, weight=0, parent="d1")]
    projects += [Project("q2", quota=3, weight=0, parent="d1")]
    jobs = [Job("a1", "q1", 1), Job("b1", "q2", 3), Job("c1", "q3", 2), Job("a2", "q1", 2), Job("c2", "q3", 2)]
    result = fs.predict("runai", [("n1", 8)], projects, jobs)
    assert result.allocated == {"d2": 2, "q3": 2, "d1": 6, "q1": 3, "q2": 3}
    assert result.pending == ("c2",)


def test_kai_keeps_a_department_that_would_pass_its_fair_share_from_reclaiming_of_a_less_saturated_sibling():
    # KAI v0.12.0 reclaimingQueuesRemainWithinBoundaries (differential tree seed 125): a's 8-GPU job
    # is within a's share of 8, but da would hold 8 of its share of 6 (saturation 1.33), more than db
    # at 8 of 10 once b's job went (0.8): no reclaim. A 4-GPU job keeps da within its share and reclaims.
    projects = [Project("da", quota=6, weight=1), Project("a", quota=12, parent="da")]
    projects += [Project("db", quota=8), Project("b", quota=2, parent="db")]
    nodes = [("n1", 8), ("n2", 8)]
    running = fs.predict("runai", nodes, projects, [Job("b-1", "b", 8), Job("b-2", "b", 8)]).placements
    big = fs.predict("runai", nodes, projects, [Job("b-1", "b", 8), Job("b-2", "b", 8), Job("a-1", "a", 8)], running)
    assert (big.deserved["da"], big.deserved["a"], big.deserved["db"]) == (6, 8, 10)
    assert big.preempted == () and big.pending == ("a-1",) and big.allocated["b"] == 16
    small = fs.predict("runai", nodes, projects, [Job("b-1", "b", 8), Job("b-2", "b", 8), Job("a-1", "a", 4)], running)
    assert small.preempted == ("b-2",) and small.allocated["a"] == 4


def test_kai_sums_a_department_s_request_from_its_children_s_whole_requests_past_their_limits():
    # KAI v0.12.0 adds every pod's request to each queue up the tree; only a queue's own limit caps
    # what it asks (differential seed 8 of --trees --gangs). q3 asks 21 but may take 6, and its
    # department d2 still asks 21: d2's quota of 14 and the spare go to d2, and d1 (quota 0) gets none.
    projects = [Project("d1", quota=0, weight=4), Project("d2", quota=14)]
    projects += [Project("q1", quota=2, parent="d1", weight=2), Project("q2", quota=0, parent="d1", weight=1)]
    projects.append(Project("q3", quota=2, parent="d2", limit=6))
    shares = fs.fair_shares(projects, {"q1": 11, "q2": 7, "q3": 21}, 16)
    assert (shares["d1"], shares["d2"], shares["q3"]) == (0, 16, 6)
    # under kueue (nested cohorts) a parent asks what its children may take: d2 asks 6, d1 gets the rest
    water = fs.fair_shares(projects, {"q1": 11, "q2": 7, "q3": 21}, 16, policy="kueue")
    assert water["d2"] == pytest.approx(6) and water["d1"] == pytest.approx(10)


def test_whole_jobs_fit_on_one_node():
    result = fs.predict("runai", [("n1", 4), ("n2", 4)], [Project("x", quota=8)], [Job("big", "x", 6)])
    assert result.pending == ("big",)


# --- Alibaba elastic quota tree, SCENARIOS.md second half ------------------------------------------

TREE = [
    Project("root", quota=40, limit=40),
    Project("root.a", quota=20, limit=40, parent="root"),
    Project("root.b", quota=20, limit=40, parent="root"),
    Project("root.a.1", quota=10, limit=20, parent="root.a"),
    Project("root.a.2", quota=10, limit=20, parent="root.a"),
    Project("root.b.1", quota=10, limit=20, parent="root.b"),
    Project("root.b.2", quota=10, limit=20, parent="root.b"),
]
NAMESPACE_LEAF = {
    "namespace1": "root.a.1",
    "namespace2": "root.a.2",
    "namespace3": "root.b.1",
    "namespace4": "root.b.2",
}
CORES = [("cpu-pool", 40)]
# step, namespace deployed (5 replicas x 5 cores), running replicas afterwards in ns1..ns4 (None: "–")
ALIBABA_TABLE = [
    (1, "namespace1", (4, None, None, None)),
    (2, "namespace2", (4, 4, None, None)),
    (3, "namespace3", (3, 3, 2, None)),
    (4, "namespace4", (2, 2, 2, 2)),
]


def run_tree_steps(policy: str):
    jobs: list[Job] = []
    placements: dict[str, Placement] = {}
    for _, namespace, _ in ALIBABA_TABLE:
        jobs += fs.replicas(namespace, NAMESPACE_LEAF[namespace], count=5, size=5)
        result = fs.predict(policy, CORES, TREE, jobs, placements)
        placements = result.placements
        deployed = {job.name.rsplit("-", 1)[0] for job in jobs}
        yield (
            result,
            tuple(
                sum(1 for name in placements if name.startswith(f"namespace{k}-"))
                if f"namespace{k}" in deployed
                else None
                for k in range(1, 5)
            ),
        )


def test_elastic_tree_reproduces_the_guide_table():
    observed = [running for _, running in run_tree_steps("elastic")]
    assert observed == [expected for _, _, expected in ALIBABA_TABLE]


def test_elastic_preempts_one_replica_each_from_the_over_min_siblings():
    results = [result for result, _ in run_tree_steps("elastic")]
    for step in (2, 3):  # steps 3 and 4 of the table
        victims = {name.split("-")[0] for name in results[step].preempted}
        assert len(results[step].preempted) == 2 and victims == {"namespace1", "namespace2"}


def test_elastic_never_exceeds_max_on_the_path():
    for result, _ in run_tree_steps("elastic"):
        for project in TREE:
            assert result.allocated[project.name] <= project.limit


def test_runai_on_the_same_tree_reclaims_to_fair_share_not_to_min():
    # the engines agree while nobody competes, differ at step 3 (Run:AI splits root.b's 20 to b.1), agree at 4
    observed = [running for _, running in run_tree_steps("runai")]
    assert observed == [(4, None, None, None), (4, 4, None, None), (2, 2, 4, None), (2, 2, 2, 2)]


def test_on_the_netapp_quotas_runai_reclaims_the_over_quota_split_and_elastic_only_min():
    # team-a floods the idle cluster; then b and c want 6 GPUs each. Worked by hand in docs/fairshare.md.
    flood = [Job(f"a{k}", "team-a", 2) for k in range(8)]
    later = flood + [Job(f"{team}{k}", f"team-{team}", 2) for team in "bc" for k in range(3)]
    expected = {"runai": (8, 4, 4, 0), "elastic": (12, 2, 2, 0)}
    for policy, split in expected.items():
        first = fs.predict(policy, DGX, TEAMS, flood)
        assert first.allocated["team-a"] == 16
        result = fs.predict(policy, DGX, TEAMS, later, first.placements)
        assert tuple(result.allocated[team] for team in QUOTAS) == split, policy


# --- scaling a scenario to a site ------------------------------------------------------------------


def test_scale_to_the_reference_site_is_identity():
    scaled = fs.scale_scenario(TEAMS, JOBS_4_8, 16, 16, 8)
    assert isinstance(scaled, ScaledScenario)
    assert (scaled.factor, scaled.gpus, scaled.nodes, scaled.unused_gpus) == (1, 16, 2, 0)
    assert list(scaled.jobs) == JOBS_4_8 and [p.quota for p in scaled.projects] == [4, 2, 2, 8]


def test_scale_doubles_quotas_and_jobs_and_repeats_fractions():
    scaled = fs.scale_scenario(TEAMS, JOBS_4_8, 16, 32, 8)
    assert isinstance(scaled, ScaledScenario)
    assert (scaled.factor, scaled.gpus, scaled.nodes) == (2, 32, 4)
    assert [p.quota for p in scaled.projects] == [8, 4, 4, 16]
    sizes = {job.name: job.gpus for job in scaled.jobs}
    assert sizes["d-1-gggg"] == 8 and sizes["a-2-gg"] == 4 and sizes["b-1-g06-x2"] == 0.6
    result = fs.predict("runai", [(f"n{i}", 8) for i in range(scaled.nodes)], scaled.projects, scaled.jobs)
    assert result.pending == () and result.allocated == pytest.approx({k: 2 * v for k, v in EXPECTED_4_8.items()})


def test_scale_uses_whole_nodes_and_reports_the_rest():
    scaled = fs.scale_scenario(TEAMS, JOBS_4_8, 16, 24, 8)
    assert isinstance(scaled, ScaledScenario)
    assert (scaled.gpus, scaled.nodes, scaled.unused_gpus) == (16, 2, 8)


@pytest.mark.parametrize(
    ("site_gpus", "node_gpus", "words"),
    [(8, 8, "needs at least 16"), (16, 2, "largest job needs 4 GPUs on one node"), (20, 6, "no multiple")],
)
def test_scale_says_why_a_site_is_too_small(site_gpus, node_gpus, words):
    reason = fs.scale_scenario(TEAMS, JOBS_4_8, 16, site_gpus, node_gpus)
    assert isinstance(reason, str) and words in reason


def test_scale_the_elastic_tree_to_a_smaller_pool():
    jobs = list(fs.replicas("namespace1", "root.a.1", 5, 5))
    scaled = fs.scale_scenario(TREE, jobs, 40, 16, 8)
    assert isinstance(scaled, ScaledScenario)
    assert [(p.quota, p.limit) for p in scaled.projects][::3] == [(16, 16), (4, 8), (4, 8)]
    assert {job.gpus for job in scaled.jobs} == {2}
    result = fs.predict("elastic", [("a", 8), ("b", 8)], scaled.projects, scaled.jobs)
    assert len(result.placements) == 4  # step 1 of the table, at 2/5 scale


# --- input errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("projects", "jobs", "running", "words"),
    [
        (TEAMS, [Job("x", "team-z", 1)], {}, "not declared"),
        (TEAMS, [Job("x", "team-a", 1.5)], {}, "fraction must be below 1"),
        (TEAMS, [Job("x", "team-a", 0)], {}, "more than 0"),
        (TEAMS, [Job("x", "team-a", 1), Job("x", "team-a", 1)], {}, "twice"),
        (
            TEAMS,
            [Job("x", "team-a", 1), Job("y", "team-a", 1)],
            {"x": Placement("dgx1-1", (0,)), "y": Placement("dgx1-1", (0,))},
            "not free",
        ),
        (
            TEAMS,
            [Job("x", "team-a", 0.6), Job("y", "team-a", 0.6)],
            {"x": Placement("dgx1-1", (0,), True), "y": Placement("dgx1-1", (0,), True)},
            "over-shared",
        ),
        (
            # the second of its GPUs is the busy one: the error names that one, not the first
            TEAMS,
            [Job("x", "team-a", 1), Job("y", "team-a", 2)],
            {"x": Placement("dgx1-1", (0,)), "y": Placement("dgx1-1", (1, 0))},
            "GPU 0 of dgx1-1 is not free",
        ),
        (TEAMS, [Job("y", "team-a", 2)], {"y": Placement("dgx1-1", (1, 1))}, "needs 2 whole GPUs"),
        (TEAMS, [Job("y", "team-a", 2)], {"y": Placement("dgx1-1", (1,))}, "needs 2 whole GPUs"),
        (TEAMS, [Job("y", "team-a", 1)], {"y": Placement("dgx1-1", (1,), True)}, "needs 1 whole GPUs"),
        (TEAMS, [Job("x", "team-a", 1)], {"x": Placement("nowhere", (0,))}, "not listed"),
        ([Project("p", parent="q")], [], {}, "not declared"),
        (TREE, [Job("x", "root.a", 1)], {}, "sub-projects"),
    ],
)
def test_inconsistent_input_is_refused(projects, jobs, running, words):
    with pytest.raises(ValueError, match=words):
        fs.predict("runai", DGX, projects, jobs, running)


def test_unknown_policy_is_refused():
    with pytest.raises(ValueError, match="policy"):
        fs.predict("fifo", DGX, TEAMS, [])


@pytest.mark.parametrize("enabled", [True, False])
def test_a_prediction_leaves_the_garbage_collector_as_it_found_it(enabled):
    # predict pauses the cyclic collector while it runs (bench/fairshare_bench.py: a quarter of the step)
    was = gc.isenabled()
    try:
        if not enabled:
            gc.disable()
        fs.predict("runai", DGX, TEAMS, [Job("x", "team-a", 1)])
        assert gc.isenabled() is enabled
        with pytest.raises(ValueError, match="not declared"):
            fs.predict("runai", DGX, TEAMS, [Job("x", "team-z", 1)])
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_a_running_job_kept_in_place_comes_back_as_given_and_a_fraction_comes_back_shared():
    kept = Placement("dgx1-2", (3, 4))
    running = {"x": kept, "y": Placement("dgx1-1", (0,), shared=False)}
    prediction = fs.predict("runai", DGX, TEAMS, [Job("x", "team-a", 2), Job("y", "team-b", 0.5)], running)
    assert prediction.placements["x"] is kept
    assert prediction.placements["y"] == Placement("dgx1-1", (0,), shared=True)


def test_fractions_put_back_leave_their_gpu_the_room_that_is_left():
    # x (0.5) and y (0.25) share GPU 1 of n2: its last quarter takes z (0.25); a half does not fit there
    nodes, teams = [("n1", 2), ("n2", 2)], [Project("a", quota=4)]
    running = {"w": Placement("n1", (0,)), "x": Placement("n2", (1,), True), "y": Placement("n2", (1,), True)}
    kept = [Job("w", "a", 1), Job("x", "a", 0.5), Job("y", "a", 0.25)]
    quarter = fs.predict("runai", nodes, teams, [*kept, Job("z", "a", 0.25)], running)
    assert quarter.placements["z"] == Placement("n2", (1,), True)
    half = fs.predict("runai", nodes, teams, [*kept, Job("z", "a", 0.5)], running)
    assert half.placements["z"] != Placement("n2", (1,), True)
    assert {name: half.placements[name] for name in running} == running


# --- properties --------------------------------------------------------------------------------------

SIZES = (0.2, 0.25, 0.3, 0.5, 0.6, 1, 1, 2, 3, 4, 8)


@st.composite
def sites(draw, sizes=SIZES, max_nodes=4):
    nodes = [(f"n{i}", draw(st.integers(1, 8))) for i in range(draw(st.integers(1, max_nodes)))]
    projects = draw(fairshare_projects())
    jobs = [
        Job(f"j{k}", f"p{draw(st.integers(0, len(projects) - 1))}", draw(st.sampled_from(sizes)), draw(st.booleans()))
        for k in range(draw(st.integers(0, 24)))
    ]
    return nodes, projects, jobs


@st.composite
def two_steps(draw, sizes=SIZES):
    """A site, its first step's jobs, and a second step: some jobs ended, new ones submitted."""
    nodes, projects, jobs = draw(sites(sizes))
    kept = [job for job in jobs if draw(st.booleans()) or job.interactive]
    more = [
        Job(f"k{k}", f"p{draw(st.integers(0, len(projects) - 1))}", draw(st.sampled_from(sizes)), draw(st.booleans()))
        for k in range(draw(st.integers(0, 12)))
    ]
    return nodes, projects, jobs, kept + more


@PROPERTY
@given(case=two_steps(), policy=st.sampled_from(fs.POLICIES))
def test_never_more_than_capacity_per_node_and_in_total(case, policy):
    nodes, projects, first_jobs, second_jobs = case
    first = fs.predict(policy, nodes, projects, first_jobs)
    check_capacity(first, nodes, first_jobs)
    second = fs.predict(policy, nodes, projects, second_jobs, first.placements)
    check_capacity(second, nodes, second_jobs)
    for result in (first, second):
        for project in projects:
            if project.limit is not None:
                assert result.allocated[project.name] <= project.limit + 1e-9


@PROPERTY
@given(case=two_steps(), policy=st.sampled_from(("runai", "elastic")))  # Kueue has no non-preemptible work
def test_interactive_work_stays_within_quota(case, policy):
    nodes, projects, first_jobs, second_jobs = case
    first = fs.predict(policy, nodes, projects, first_jobs)
    second = fs.predict(policy, nodes, projects, second_jobs, first.placements)
    by_name = {job.name: job for job in second_jobs}
    interactive: dict[str, float] = defaultdict(float)
    for name in second.placements:
        if by_name[name].interactive:
            interactive[by_name[name].project] += by_name[name].gpus
    for project in projects:
        assert interactive[project.name] <= project.quota + 1e-9


@PROPERTY
@given(case=two_steps(), policy=st.sampled_from(("runai", "elastic")))
def test_a_stable_state_is_a_fixed_point(case, policy):
    nodes, projects, first_jobs, second_jobs = case
    # Steps chain as the scenario runner chains them: where jobs run, and (kueue) which admitted
    # workloads wait for a node.
    first = fs.predict(policy, nodes, projects, first_jobs)
    second = fs.predict(policy, nodes, projects, second_jobs, first.placements, first.waiting)
    again = fs.predict(policy, nodes, projects, second_jobs, second.placements, second.waiting)
    assert again.placements == second.placements and again.pending == second.pending and again.preempted == ()
    assert again.waiting == second.waiting


# Under kueue a stable state is not always a fixed point: in about 1 % of these random two-step
# cases (39 of 3,000 at stop 27) predicting again moves a job. Most (34) come from the model's guard
# that preempts a workload at most once per prediction (docs/fairshare.md, policy kueue); the rest
# from the order of admission, which a prediction does not carry to the next. What always holds:


@PROPERTY
@given(case=two_steps())
def test_kueue_holds_no_more_than_the_cohort_s_quotas_and_no_job_both_runs_and_waits(case):
    nodes, projects, first_jobs, second_jobs = case
    first = fs.predict("kueue", nodes, projects, first_jobs)
    second = fs.predict("kueue", nodes, projects, second_jobs, first.placements, first.waiting)
    for result, jobs in ((first, first_jobs), (second, second_jobs)):
        by_name = {job.name: job for job in jobs}
        assert not set(result.waiting) & set(result.placements)
        assert set(result.waiting) <= set(result.pending)
        held: dict[str, float] = defaultdict(float)  # running and admitted-waiting, by queue
        for name in [*result.placements, *result.waiting]:
            held[by_name[name].project] += by_name[name].gpus
        assert sum(held.values()) <= sum(project.quota for project in projects) + 1e-9
        for project in projects:
            if project.limit is not None:
                assert held[project.name] <= project.limit + 1e-9


def guarantee(project: Project, jobs: list[Job]) -> float:
    """min(quota, demand), interactive demand counted only up to the quota (it may not start beyond)."""
    train = sum(job.gpus for job in jobs if job.project == project.name and not job.interactive)
    interactive = sum(job.gpus for job in jobs if job.project == project.name and job.interactive)
    return min(project.quota, train + min(interactive, project.quota))


@st.composite
def one_gpu_sites(draw):
    """Whole 1-GPU jobs (so every job fits wherever a GPU is idle) and quotas that the site can honour."""
    nodes, projects, first_jobs, second_jobs = draw(two_steps(sizes=(1,)))
    capacity = sum(size for _, size in nodes)
    quotas = [project.quota for project in projects]
    while sum(quotas) > capacity:
        quotas[quotas.index(max(quotas))] -= 1
    projects = [Project(p.name, quota=q, weight=p.weight) for p, q in zip(projects, quotas, strict=True)]
    return nodes, projects, first_jobs, second_jobs


@PROPERTY
@given(case=one_gpu_sites(), policy=st.sampled_from(fs.POLICIES))
def test_quota_is_honoured_when_demanded(case, policy):
    nodes, projects, first_jobs, second_jobs = case
    first = fs.predict(policy, nodes, projects, first_jobs)
    second = fs.predict(policy, nodes, projects, second_jobs, first.placements)
    for result, jobs in ((first, first_jobs), (second, second_jobs)):
        for project in projects:
            assert result.allocated[project.name] >= guarantee(project, jobs) - 1e-9, project.name


def _demand(project: Project, jobs: list[Job]) -> float:
    return sum(job.gpus for job in jobs if job.project == project.name)


@PROPERTY
@given(
    case=one_gpu_sites(),
    extra=st.lists(st.tuples(st.integers(0, 3), st.booleans()), max_size=16),
    policy=st.sampled_from(fs.POLICIES),
)
def test_more_demand_never_lowers_a_project_below_its_guarantee(case, extra, policy):
    nodes, projects, first_jobs, _ = case
    before = fs.predict(policy, nodes, projects, first_jobs)
    more = [Job(f"m{k}", projects[p % len(projects)].name, 1, i) for k, (p, i) in enumerate(extra)]
    after = fs.predict(policy, nodes, projects, first_jobs + more, before.placements)
    for project in projects:
        floor = min(before.allocated[project.name], guarantee(project, first_jobs))
        assert after.allocated[project.name] >= floor - 1e-9


@PROPERTY
@given(
    size=st.sampled_from((1, 2)),
    node_slots=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    shape=st.lists(st.tuples(st.integers(0, 4), st.integers(1, 5)), min_size=1, max_size=4),
)
def test_spare_capacity_splits_by_over_quota_weight(size, node_slots, shape):
    nodes = [(f"n{i}", slots * size) for i, slots in enumerate(node_slots)]
    capacity = sum(gpus for _, gpus in nodes)
    quotas = [quota for quota, _ in shape]
    while sum(quotas) > capacity:
        quotas[quotas.index(max(quotas))] -= 1
    projects = [Project(f"p{i}", quota=q, weight=w) for i, (q, (_, w)) in enumerate(zip(quotas, shape, strict=True))]
    # every project wants the whole site: all spare capacity is contested
    jobs = [Job(f"p{i}-{k}", p.name, size) for i, p in enumerate(projects) for k in range(capacity // size + 1)]
    result = fs.predict("runai", nodes, projects, jobs)
    spare = capacity - sum(quotas)
    total_weight = sum(p.weight for p in projects)
    assert result.total_allocated == capacity
    for p in projects:
        expected = p.quota + spare * p.weight / total_weight
        # the split, in whole GPUs (KAI's rounding moves a share by less than one GPU)
        assert abs(result.deserved[p.name] - expected) < 1 + 1e-9, p.name
        # each project holds its share to within one job; the GPUs jobs leave idle are lent in KAI's
        # queue order, which may favour a queue of a larger share (prioritizeSmallerResourceShare:
        # weights 1, 1, 3 on 6 GPUs in jobs of 2, the idle 2 go to the third, (4 + 2) / 4 < 2 / 1)
        assert result.allocated[p.name] > result.deserved[p.name] - size - 1e-9, p.name


@st.composite
def elastic_trees(draw):
    """Two-level trees whose mins nest (children within the parent, parents within the site)."""
    capacity = draw(st.integers(2, 16))
    nodes = [("pool", capacity)]
    projects, leaves, left = [], [], capacity
    for g in range(draw(st.integers(1, 3))):
        group_min = draw(st.integers(0, left))
        left -= group_min
        projects.append(Project(f"g{g}", quota=group_min))
        room = group_min
        for c in range(draw(st.integers(1, 3))):
            leaf_min = draw(st.integers(0, room))
            room -= leaf_min
            leaf_max = draw(st.one_of(st.none(), st.integers(max(leaf_min, 1), capacity)))
            projects.append(Project(f"g{g}.{c}", quota=leaf_min, limit=leaf_max, parent=f"g{g}"))
            leaves.append(f"g{g}.{c}")
    first = [Job(f"j{k}", draw(st.sampled_from(leaves)), 1) for k in range(draw(st.integers(0, 20)))]
    more = [Job(f"k{k}", draw(st.sampled_from(leaves)), 1) for k in range(draw(st.integers(0, 12)))]
    return nodes, projects, first, first + more


@PROPERTY
@given(case=elastic_trees())
def test_elastic_min_is_guaranteed_and_max_holds(case):
    nodes, projects, first_jobs, second_jobs = case
    first = fs.predict("elastic", nodes, projects, first_jobs)
    second = fs.predict("elastic", nodes, projects, second_jobs, first.placements)
    for result, jobs in ((first, first_jobs), (second, second_jobs)):
        for project in projects:
            if project.parent is not None:
                assert result.allocated[project.name] >= min(project.quota, _demand(project, jobs)) - 1e-9
            if project.limit is not None:
                assert result.allocated[project.name] <= project.limit + 1e-9


def test_a_whole_job_is_reclaimed_from_a_queue_over_its_share_before_the_eviction():
    # NetApp 4.9 without the fractions Kueue cannot run: team-b (quota 2) holds 1 + 2, team-c (quota 2)
    # 2 + 1; team-d claims its quota. Both engines take a victim from a queue that is above its share
    # *before* the eviction, even when the victim leaves it below (KAI v0.12.0, reclaimable/
    # strategies; Kueue, as observed): team-b's most recent job, 2 GPUs, goes (1 and 3).
    jobs = [
        Job("a-1", "team-a", 1, interactive=True), Job("a-2", "team-a", 1), Job("a-3", "team-a", 2),
        Job("b-3", "team-b", 1), Job("b-4", "team-b", 2), Job("c-4", "team-c", 2), Job("c-5", "team-c", 1),
        Job("d-1", "team-d", 4),
    ]  # fmt: skip
    later = jobs + [Job("d-2", "team-d", 2), Job("d-3", "team-d", 2)]
    for policy in ("runai", "kueue"):
        first = fs.predict(policy, DGX, TEAMS, jobs)
        result = fs.predict(policy, DGX, TEAMS, later, first.placements)
        assert tuple(result.allocated[team] for team in QUOTAS) == (4, 1, 3, 8), policy
        assert result.preempted == ("b-4",), policy


@pytest.mark.parametrize("policy", ["runai", "kueue"])
def test_a_claim_preempts_a_borrowing_queue_whose_one_workload_is_bigger_than_its_excess(policy):
    # Issue 14's smallest case: one node of 6; queues a and b, quota 3 and weight 1 each; b runs one
    # 6-unit workload; a submits 2. b is above its share (6 > 4) before the preemption, which is
    # all either engine asks: b's workload is preempted and a's starts. (The Kueue model used to
    # refuse it: its pruning bound applied the old keep-the-share-after rule.) Under elastic the
    # victim's quota keeps its min after, so a's workload waits.
    projects = [Project("a", quota=3, weight=1), Project("b", quota=3, weight=1)]
    first = fs.predict(policy, [("n1", 6)], projects, [Job("b-6", "b", 6)])
    jobs = [Job("b-6", "b", 6), Job("a-2", "a", 2)]
    result = fs.predict(policy, [("n1", 6)], projects, jobs, first.placements)
    assert result.preempted == ("b-6",)
    assert result.allocated == {"a": 2, "b": 0}
    assert result.pending == ("b-6",)


def test_elastic_keeps_the_victims_quota_at_its_min_after_the_preemption():
    # The same case under elastic: b's 6-unit workload would leave b at 0, below its min of 3, so
    # nothing is preempted and a's workload waits.
    projects = [Project("a", quota=3, limit=6), Project("b", quota=3, limit=6)]
    first = fs.predict("elastic", [("n1", 6)], projects, [Job("b-6", "b", 6)])
    result = fs.predict("elastic", [("n1", 6)], projects, [Job("b-6", "b", 6), Job("a-2", "a", 2)], first.placements)
    assert result.preempted == () and result.pending == ("a-2",)


def test_kai_interactive_work_preempts_its_own_projects_training_jobs():
    # Differential seed 3, step 1: q1 (quota 2) runs 8 + 1 + 2 GPUs of training; its 1-GPU
    # interactive job, within the quota, finds no room and KAI's preempt action takes q1's newest
    # training job on the node where that frees least (the 2-GPU one, not the 8-GPU one).
    projects = [Project("q1", quota=2), Project("q4", quota=5), Project("q5", quota=6, weight=2)]
    running_jobs = [
        Job("j1-8g", "q1", 8), Job("j2-4g", "q5", 4), Job("j3-1g", "q1", 1), Job("j4-1g", "q4", 1),
        Job("j5-2g", "q1", 2),
    ]  # fmt: skip
    first = fs.predict("runai", [("n1", 8), ("n2", 8)], projects, running_jobs)
    assert first.pending == () and first.allocated["q1"] == 11
    result = fs.predict(
        "runai", [("n1", 8), ("n2", 8)], projects, running_jobs + [Job("j6-1g", "q1", 1, interactive=True)],
        first.placements,
    )  # fmt: skip
    assert result.preempted == ("j5-2g",)
    assert result.allocated["q1"] == 10
    # Kueue admits 13 (the cohort's quotas): q1's 8-GPU job, not its 1- and 2-GPU ones. Its
    # interactive job, of higher priority, preempts in its own queue too (withinClusterQueue
    # LowerPriority), but by quota, not by node: q1's only lower-priority workload running is the
    # 8-GPU one, and it goes; the 1- and 2-GPU jobs then fit the cohort's quotas and start.
    kueue_first = fs.predict("kueue", [("n1", 8), ("n2", 8)], projects, running_jobs)
    assert kueue_first.allocated == {"q1": 8, "q4": 1, "q5": 4}
    kueue = fs.predict(
        "kueue", [("n1", 8), ("n2", 8)], projects, running_jobs + [Job("j6-1g", "q1", 1, interactive=True)],
        kueue_first.placements,
    )  # fmt: skip
    assert kueue.preempted == ("j1-8g",) and kueue.pending == ("j1-8g",)
    assert kueue.allocated == {"q1": 4, "q4": 1, "q5": 4}


def test_kai_consolidates_a_node_for_a_job_that_fits_only_in_idle_gpus_spread_over_nodes():
    # Differential seed 9, step 3: 8 GPUs idle, 5 on n1 and 3 on n2; q2's 8-GPU job is within its
    # fair share. KAI's consolidation moves n1's training jobs (a 2-GPU job and a half GPU) to n2
    # and the 8-GPU job runs on n1.
    projects = [Project("q1", quota=2), Project("q2", quota=1), Project("q4", quota=10, limit=26, weight=1)]
    running = {
        "j2-05g": fs.Placement("n1", (4,), shared=True),
        "j5-2g": fs.Placement("n1", (6, 7)),
        "j4-4g": fs.Placement("n2", (0, 1, 2, 3)),
        "j6-1g": fs.Placement("n2", (4,)),
    }
    jobs = [
        Job("j2-05g", "q2", 0.5), Job("j4-4g", "q4", 4, interactive=True), Job("j5-2g", "q1", 2),
        Job("j6-1g", "q4", 1), Job("j7-8g", "q2", 8),
    ]  # fmt: skip
    result = fs.predict("runai", [("n1", 8), ("n2", 8)], projects, jobs, running)
    assert result.pending == () and result.preempted == ()
    assert result.placements["j7-8g"].node == "n1"
    assert result.placements["j5-2g"].node == result.placements["j2-05g"].node == "n2"
    assert result.allocated == {"q1": 2, "q2": 8.5, "q4": 5}
    # With the training jobs made interactive, nothing can move: the 8-GPU job waits.
    pinned = [Job(j.name, j.project, j.gpus, interactive=j.name != "j7-8g") for j in jobs]
    assert fs.predict("runai", [("n1", 8), ("n2", 8)], projects, pinned, running).pending == ("j7-8g",)


def test_kueue_admits_no_more_than_its_cohorts_quotas():
    # Differential seed 1 on Kueue: ClusterQueues of nominal quota 3, 2 and 2 in one cohort on 16
    # GPUs. Kueue admits 7 GPUs in all (the cohort's quotas), whatever the nodes hold: q3's
    # interactive 4-GPU workload waits, where a cluster-wide model admitted it.
    projects = [Project("q1", quota=3), Project("q2", quota=2), Project("q3", quota=2, limit=11)]
    jobs = [
        Job("j1-4g", "q3", 4, interactive=True), Job("j2-4g", "q1", 4), Job("j3-1g", "q3", 1), Job("j4-1g", "q1", 1),
    ]  # fmt: skip
    kueue = fs.predict("kueue", [("n1", 8), ("n2", 8)], projects, jobs)
    assert kueue.allocated == {"q1": 5, "q2": 0, "q3": 1}
    assert kueue.pending == ("j1-4g",)
    # A training workload past the cohort's 7 waits under Kueue; KAI divides the cluster, and its
    # queues borrow the GPUs nobody's quota covers.
    more = jobs + [Job("j5-4g", "q2", 4)]
    assert fs.predict("kueue", [("n1", 8), ("n2", 8)], projects, more).pending == ("j1-4g", "j5-4g")
    assert fs.predict("runai", [("n1", 8), ("n2", 8)], projects, more).allocated["q2"] == 4


def test_kai_interactive_work_at_its_project_s_limit_preempts_its_own_training_jobs():
    # Differential seed 2 with --resources, step 3: q1 (quota 11, limit 15) runs 8 + 1 GPUs of
    # training; its 8-GPU interactive job would take it to 17, but KAI's preempt action checks the
    # limit with the victims gone: the 8-GPU training job goes and the interactive job starts.
    projects = [Project("a", quota=10, limit=10), Project("b", quota=6)]
    jobs = [Job("t1", "a", 8), Job("t2", "a", 1), Job("b1", "b", 6)]
    first = fs.predict("runai", [("n1", 16)], projects, jobs)
    assert first.pending == () and first.allocated == {"a": 9.0, "b": 6.0}
    result = fs.predict("runai", [("n1", 16)], projects, [*jobs, Job("i1", "a", 8, interactive=True)], first.placements)
    assert result.preempted == ("t1",)
    assert result.allocated == {"a": 9.0, "b": 6.0}


def test_kueue_preempts_for_quota_not_for_room_on_the_nodes():
    # Differential seed 12 on Kueue: quotas add up to 25 on 16 GPUs. q4's 4-GPU workload is within
    # q4's quota and the cohort's: Kueue admits it and it waits for a node; nothing is preempted,
    # though q3 borrows 1 (8 of 7). The runai model reclaims q3's job for it: q3 is above its share
    # before the eviction, which is what KAI's reclaim strategies ask.
    projects = [
        Project("q1", quota=2, limit=10, weight=2), Project("q2", quota=5, limit=11, weight=1),
        Project("q3", quota=7, limit=10), Project("q4", quota=8), Project("q5", quota=3),
    ]  # fmt: skip
    nodes = [("n1", 8), ("n2", 8)]
    earlier = [Job("j1-2g", "q5", 2, True), Job("j2-8g", "q3", 8), Job("j3-2g", "q4", 2, True), Job("j4-1g", "q2", 1)]
    results = {}
    for policy in ("kueue", "runai"):
        first = fs.predict(policy, nodes, projects, earlier)
        assert first.allocated["q3"] == 8, policy
        results[policy] = fs.predict(policy, nodes, projects, earlier + [Job("j5-4g", "q4", 4, True)], first.placements)
    assert results["kueue"].preempted == () and results["kueue"].pending == ("j5-4g",)
    assert results["runai"].preempted == ("j2-8g",) and results["runai"].allocated["q4"] == 6


def test_kai_reclaims_from_a_queue_over_its_share_before_preempting_the_project_s_own_training_work():
    # Differential seed 147, step 1, on KAI (2 nodes of 8; quotas q2 1, q4 11, q5 0). q5 borrows 4,
    # q4 runs an 8-GPU training job and q2 4, every GPU in use; q4's 4-GPU interactive job arrives.
    # KAI's actions run allocate, consolidation, reclaim, then preempt: reclaim takes q5's job (q5 is
    # above its share of 0) and q4 holds 12; preempting q4's own training job is not needed.
    projects = [Project("q2", quota=1), Project("q4", quota=11), Project("q5", quota=0)]
    running = {
        "j1-4g": Placement("n1", (0, 1, 2, 3)),
        "j2-8g": Placement("n2", (0, 1, 2, 3, 4, 5, 6, 7)),
        "j4-4g": Placement("n1", (4, 5, 6, 7)),
    }
    jobs = [Job("j1-4g", "q5", 4), Job("j2-8g", "q4", 8), Job("j4-4g", "q2", 4), Job("j5-4g", "q4", 4, True)]
    result = fs.predict("runai", [("n1", 8), ("n2", 8)], projects, jobs, running)
    assert result.preempted == ("j1-4g",)
    assert result.allocated == {"q2": 4, "q4": 12, "q5": 0}


def test_kai_reclaims_from_the_queue_declared_last_of_two_equally_over_their_share():
    # Differential seeds 165 and 261 on KAI: two queues hold the same amount above their fair share
    # and one of them must lose a job. KAI orders victim queues by its queue order reversed, whose
    # last resort is the older queue first: the queue created last (declared last) loses, here q2,
    # though q2's job is the older one.
    projects = [Project("q1", quota=0, weight=1), Project("q2", quota=0, weight=1), Project("q3", quota=4)]
    nodes = [("n1", 8), ("n2", 8)]
    earlier = [Job("q2-8g", "q2", 8), Job("q1-8g", "q1", 8)]
    first = fs.predict("runai", nodes, projects, earlier)
    assert first.allocated == {"q1": 8, "q2": 8, "q3": 0}
    result = fs.predict("runai", nodes, projects, earlier + [Job("q3-4g", "q3", 4)], first.placements)
    assert result.deserved["q1"] == result.deserved["q2"] == 6  # each 2 above its share
    assert result.preempted == ("q2-8g",)
    assert result.allocated == {"q1": 8, "q2": 0, "q3": 4}


def test_kueue_fair_preemption_reclaims_for_a_queue_within_its_quota():
    # Issue 14's smallest case at the quota level: a (nominal 3) asks 2 while b (nominal 3) holds 6.
    # a's share after admission is 0, b's after losing its workload is 0: 0 <= 0
    # (LessThanOrEqualToFinalShare), so b's workload goes.
    assert fs.kueue_fair_targets(0, 2, [0, 6], [3, 3], [3, 3], [(1, 6)], 6) == [0]


def test_kueue_fair_preemption_takes_the_claimants_own_lower_priority_work_before_a_smaller_borrower():
    # Differential seed 8, step 2, on Kueue: q1 (nominal 5, weight 5) holds 2 + 4, borrowing 1; q2
    # (nominal 11, weight 11) holds 4 and asks 8 more for an interactive workload. With it q2 would
    # borrow 1 of 16: share 1000/16/11 = 5.7, q1's 1000/16/5 = 12.5. Strategy 1 refuses both of q1's
    # workloads (q1 would not borrow after either: share 0 < 5.7) and keeps them for strategy 2;
    # q1 then has no candidate left, so q2, the claimant, is the queue with the highest share and its
    # own training workload (lower priority) goes: 6 + 8 fit the cohort's 16.
    candidates = [(0, 4), (0, 2), (1, 4)]  # q1's newest, q1's older, q2's own
    assert fs.kueue_fair_targets(1, 8, [6, 4], [5, 11], [5, 11], candidates, 16) == [2]
    # Without work of its own to give, strategy 2 takes one of q1's: q2's share after (5.7) is below
    # q1's before (12.5).
    assert fs.kueue_fair_targets(1, 8, [6, 4], [5, 11], [5, 11], candidates[:2], 16) == [0]
    # q1 asking 8 more, borrowing 9 (share 112.5), finds nobody: q2 does not borrow.
    assert fs.kueue_fair_targets(0, 8, [6, 8], [5, 11], [5, 11], [], 16) is None


def test_kueue_fair_preemption_puts_back_the_targets_the_claimant_does_not_need():
    # b (nominal 2) borrows 4 with a 1- and a 3-unit workload (newest first); a (nominal 6) asks 4
    # with 2 free. Strategy 1 takes the 1-unit one first (b stays above a's share of 0), then the
    # 3-unit one; 1 + 3 free 4 and with 2 idle only the 3-unit one is needed: the 1 goes back.
    assert fs.kueue_fair_targets(0, 4, [0, 6], [6, 2], [6, 2], [(1, 1), (1, 3)], 8) == [1]


def test_kueue_fair_preemption_ranks_a_borrowing_queue_of_weight_zero_above_all():
    # a (nominal 4) holds 1 and asks 1 more, the cohort's 6 all in use; c (nominal 0, weight 0)
    # borrows 1, b (nominal 2, weight 2) borrows 2: any borrowing at weight 0 is the highest share,
    # so c is targeted first, and its one workload is enough.
    candidates = [(1, 2), (2, 1)]
    assert fs.kueue_fair_targets(0, 1, [1, 4, 1], [4, 2, 0], [4, 2, 0], candidates, 6) == [1]
    # At weight 1 c's share (1000/6) ties with b's (2000/6/2): the queue whose first candidate comes
    # first in Kueue's order wins, b; at weight 4 (c: 42) b is first anyway.
    assert fs.kueue_fair_targets(0, 1, [1, 4, 1], [4, 2, 0], [4, 2, 1], candidates, 6) == [0]
    assert fs.kueue_fair_targets(0, 1, [1, 4, 1], [4, 2, 0], [4, 2, 4], candidates, 6) == [0]


def test_kueue_fair_preemption_takes_victims_one_at_a_time_from_the_queue_with_the_highest_share_re_ranked_after_each():
    # Kueue v0.16 runFirstFsStrategy: one candidate goes from the queue with the highest share, then
    # the queues are ranked again (TargetClusterQueueOrdering.nextTarget), and fillBackWorkloads puts
    # back what is not needed. a (nominal 6) asks 4 with 1 of the cohort's 8 free; b borrows 3 (a 2-
    # then a 1-unit workload, newest first), c borrows 2. b's 2-unit one goes; b now borrows 1, below
    # c, so c's goes next: 4 free. Taking b's two would have been enough too, but c is ranked first.
    assert fs.kueue_fair_targets(0, 4, [0, 4, 3], [6, 1, 1], [6, 1, 1], [(1, 2), (1, 1), (2, 2)], 8) == [0, 2]
    # With b's 1-unit one first: b then ties with c at 2 borrowed, and the tie goes to the queue whose
    # next candidate comes first in Kueue's order, b's 2-unit one; 4 are free. Filling back b's
    # 1-unit one would leave 3: both of b's go, c keeps its work.
    assert fs.kueue_fair_targets(0, 4, [0, 4, 3], [6, 1, 1], [6, 1, 1], [(1, 1), (1, 2), (2, 2)], 8) == [0, 1]


def test_kueue_orders_borrowing_queues_of_weight_zero_by_their_unweighted_share_then_by_submission():
    # Kueue v0.16 (fair_sharing_iterator.go, entryComparer.less; CompareDRS): q1 (quota 3) and q3
    # (quota 0) both have fair-sharing weight 0 and would each borrow 1 of the cohort's 8 with their
    # next workload: the same unweighted share, so FIFO decides and q3's older 1-GPU workload is
    # admitted. q1's quota puts it no further ahead (the model once lent to the queue furthest below
    # its fair share, q1), and neither may then preempt the other (equal shares).
    projects = [Project("q1", quota=3, weight=0), Project("q2", quota=5, weight=1), Project("q3", quota=0)]
    jobs = [Job("j0", "q2", 4), Job("j1", "q3", 1), Job("j2", "q1", 4)]
    result = fs.predict("kueue", [("n1", 8)], projects, jobs)
    assert result.allocated == {"q1": 0, "q2": 4, "q3": 1} and result.pending == ("j2",)


def test_kueue_admits_a_borrowing_workload_past_an_equal_split_when_its_dominant_resource_share_comes_first():
    # Kueue admits what its cohort's quotas cover, its queues' heads in the fair-sharing tournament's
    # order; it holds no queue to a split of the cohort. q1 (quota 3, weight 3) and q2 (quota 3,
    # weight 0) split 3 : 3 by water-fill. q1's 1-GPU workloads fit its quota; its 4-GPU one, next in
    # FIFO, would borrow 1 at a share of 1000 / 6 / 3 = 56; q2's 4-GPU one would borrow 1 at weight
    # 0, after every weighted queue: q1's is admitted, 6 of the cohort's 6, and q2 cannot preempt it.
    projects = [Project("q1", quota=3), Project("q2", quota=3, weight=0)]
    jobs = [Job("j0", "q1", 1), Job("j3", "q1", 1), Job("j4", "q1", 4), Job("j5", "q1", 1), Job("j7", "q2", 4)]
    result = fs.predict("kueue", [("n1", 8)], projects, jobs)
    assert result.deserved == {"q1": 3, "q2": 3}
    assert result.allocated == {"q1": 6, "q2": 0} and result.pending == ("j5", "j7")


def test_kueue_model_follows_differential_seed_8():
    # Seed 8 of the bench on Kueue (2 nodes of 8; q1 quota 5, q2 quota 11, weights = quotas). Step 2:
    # q2's interactive 8-GPU workload first takes q2's own training workload, which then preempts q1's
    # newest borrowing workload (strategy 2): q1 keeps 2, q2 holds 12; q1's 8-GPU job waits.
    projects = [Project("q1", quota=5), Project("q2", quota=11)]
    nodes = [("n1", 8), ("n2", 8)]
    step1 = [Job("j1-2g", "q1", 2), Job("j2-4g", "q1", 4), Job("j3-4g", "q2", 4), Job("j4-4g", "q1", 4)]
    step1.append(Job("j5-4g", "q2", 4))
    first = fs.predict("kueue", nodes, projects, step1)
    assert first.allocated == {"q1": 6, "q2": 8} and first.pending == ("j4-4g",)
    left = {name: place for name, place in first.placements.items() if name != "j3-4g"}
    step2 = [job for job in step1 if job.name not in ("j3-4g", "j4-4g")]
    step2 += [Job("j6-8g", "q2", 8, interactive=True), Job("j7-8g", "q1", 8)]
    second = fs.predict("kueue", nodes, projects, step2, left)
    assert second.allocated == {"q1": 2, "q2": 12}
    assert second.preempted == ("j2-4g",) and second.pending == ("j2-4g", "j7-8g")


def test_kueue_higher_priority_work_of_a_queue_at_its_limit_takes_the_queue_s_own_lower_priority_work():
    # Differential seed 76 on Kueue: the cohort's quotas add up to 2 (q1 0, q2 2). q1's 2-GPU
    # training workload runs (borrowing q2's 2); q1's 1-GPU interactive workload arrives. With its
    # own lower-priority work gone q1 would hold 1: the training workload is preempted
    # (withinClusterQueue LowerPriority) and does not come back (2 + 1 > 2).
    projects = [Project("q1", quota=0), Project("q2", quota=2)]
    nodes = [("n1", 8), ("n2", 8)]
    first = fs.predict("kueue", nodes, projects, [Job("j1-2g", "q1", 2)])
    assert first.allocated["q1"] == 2
    later = fs.predict(
        "kueue", nodes, projects, [Job("j1-2g", "q1", 2), Job("j3-1g", "q1", 1, interactive=True)], first.placements
    )
    assert later.preempted == ("j1-2g",) and later.pending == ("j1-2g",)
    assert later.allocated["q1"] == 1


def test_kueue_admits_a_queue_s_higher_priority_work_first():
    # Two workloads of q1 wait for the one GPU the cohort's quota allows: the interactive one (higher
    # priority) is admitted although the training one came first, as a ClusterQueue orders them.
    projects = [Project("q1", quota=1)]
    result = fs.predict(
        "kueue", [("n1", 8)], projects, [Job("j1-1g", "q1", 1), Job("j2-1g", "q1", 1, interactive=True)]
    )
    assert result.pending == ("j1-1g",)


def test_kueue_preempts_by_quota_and_the_admitted_workload_holds_it_while_it_waits_for_a_node():
    # Differential seed 52 on Kueue: the cohort's quotas add up to 13 (q1 3, q2 10). q1 runs 4
    # (borrowing 1) on n2 beside q2's 4, q2 runs 1 on n1. q2's 8-GPU workload needs 5 + 8 = 13:
    # q1's workload is preempted for quota, although no node then has 8 GPUs free (n1: 7, n2: 4).
    # The 8-GPU workload is admitted and waits for a node, holding its 8 of the cohort's quota:
    # nothing else of q1's is admitted, and nothing of q2's runs in its place.
    projects = [Project("q1", quota=3, weight=3), Project("q2", quota=10, weight=10)]
    nodes = [("n1", 8), ("n2", 8)]
    running = {
        "j3-1g": Placement("n1", (5,)),
        "j4-4g": Placement("n2", (0, 1, 2, 3)),
        "j5-4g": Placement("n2", (4, 5, 6, 7)),
    }
    jobs = [Job("j3-1g", "q2", 1), Job("j4-4g", "q2", 4), Job("j5-4g", "q1", 4), Job("j6-8g", "q2", 8)]
    result = fs.predict("kueue", nodes, projects, jobs, running)
    assert result.preempted == ("j5-4g",)
    assert set(result.pending) == {"j5-4g", "j6-8g"}
    assert result.allocated == {"q1": 0, "q2": 5}
    # Where the nodes have the room, the admitted workload runs.
    roomy = fs.predict("kueue", [("n1", 8), ("n2", 8), ("n3", 8)], projects, jobs, running)
    assert roomy.preempted == ("j5-4g",) and roomy.allocated == {"q1": 0, "q2": 13}


def test_kueue_a_queue_at_its_limit_makes_room_from_its_own_lower_priority_work_though_the_cohort_has_room():
    # Differential seed 90, step 2, on Kueue: q3 (quota 1, limit 2) runs a 2-GPU training workload;
    # its 1-GPU interactive workload fits the cohort's quotas but not q3's limit: the training
    # workload is preempted (withinClusterQueue LowerPriority) and q3 holds 1.
    projects = [Project("q3", quota=1, limit=2, weight=4), Project("q4", quota=5)]
    running = {"j6-2g": Placement("n1", (0, 1))}
    jobs = [Job("j6-2g", "q3", 2), Job("j8-1g", "q3", 1, interactive=True)]
    result = fs.predict("kueue", [("n1", 8), ("n2", 8)], projects, jobs, running)
    assert result.preempted == ("j6-2g",)
    assert result.allocated == {"q3": 1, "q4": 0}
    # The cohort's quotas alone are no reason: as training work it waits.
    waiting = fs.predict("kueue", [("n1", 8), ("n2", 8)], projects, [jobs[0], Job("j8-1g", "q3", 1)], running)
    assert waiting.preempted == () and waiting.pending == ("j8-1g",)


def test_kueue_a_workload_admitted_while_it_waits_for_a_node_keeps_its_quota_into_the_next_step():
    # Differential seed 152 on Kueue (2 nodes of 8; q1 quota 14, q2 quota 4: the cohort admits 18).
    # q1's second 8-GPU interactive workload is admitted by quota (q1 16 of 18) with no node free,
    # so q1's 4-GPU training workload is not. In the next step that admitted workload still holds
    # its 8 GPUs of quota: q1's new 1- and 2-GPU work finds the cohort full and waits.
    projects = [Project("q1", quota=14), Project("q2", quota=4)]
    nodes = [("n1", 8), ("n2", 8)]
    step_1 = [
        Job("j1-8g", "q1", 8, True),
        Job("j2-4g", "q1", 4),
        Job("j3-1g", "q2", 1),
        Job("j4-1g", "q2", 1),
        Job("j5-8g", "q1", 8, True),
    ]
    first = fs.predict("kueue", nodes, projects, step_1)
    assert first.waiting == ("j5-8g",)
    assert first.allocated == {"q1": 8, "q2": 2}
    assert "j2-4g" in first.pending
    step_2 = step_1 + [Job("j6-1g", "q1", 1), Job("j7-2g", "q1", 2, True)]
    second = fs.predict("kueue", nodes, projects, step_2, first.placements, first.waiting)
    assert second.waiting == ("j5-8g",)
    assert second.allocated == {"q1": 8, "q2": 2}
    # Without the carried admission, Kueue's order admits it again first (q1's highest-priority
    # head, within the cohort's quotas), before q1's new work.
    forgetful = fs.predict("kueue", nodes, projects, step_2, first.placements)
    assert forgetful.waiting == ("j5-8g",) and forgetful.allocated == {"q1": 8, "q2": 2}


def test_kueue_the_room_a_preemption_frees_goes_to_the_workload_admitted_first():
    # Differential seed 224, step 3, on Kueue (2 nodes of 8; the cohort's quotas add up to 23).
    # q4 borrows 7 (a 4- and an 8-GPU workload). q1's 8-GPU workload is admitted by quota and waits,
    # no node free; q3's 8-GPU workload then needs quota and preempts q4's 8-GPU one. The node it
    # frees goes to q1's workload, admitted first, whose pod was waiting; q3's waits in its turn.
    projects = [
        Project("q1", quota=8, limit=10, weight=4),
        Project("q2", quota=5),
        Project("q3", quota=5),
        Project("q4", quota=5, weight=1),
        Project("q5", quota=0, limit=9),
    ]
    nodes = [("n1", 8), ("n2", 8)]
    running = {"j3-4g": Placement("n1", (0, 1, 2, 3)), "j4-8g": Placement("n2", (0, 1, 2, 3, 4, 5, 6, 7))}
    held = [Job("j3-4g", "q4", 4), Job("j4-8g", "q4", 8)]
    first = fs.predict("kueue", nodes, projects, held + [Job("j5-8g", "q1", 8)], running)
    assert first.waiting == ("j5-8g",) and first.allocated["q4"] == 12
    jobs = held + [Job("j5-8g", "q1", 8), Job("j6-8g", "q3", 8)]
    second = fs.predict("kueue", nodes, projects, jobs, first.placements, first.waiting)
    assert second.preempted == ("j4-8g",)
    assert second.placements["j5-8g"].node == "n2"
    assert second.waiting == ("j6-8g",)
    assert second.allocated == {"q1": 8, "q2": 0, "q3": 0, "q4": 4, "q5": 0}
