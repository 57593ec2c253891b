"""CPU and memory quotas beside the GPUs (KAI's queues, the model's policy runai): scenario files,
the inventory, the KAI queue and its read-back, the workloads' requests, the scenario runner."""

from __future__ import annotations

import copy
import dataclasses
from fractions import Fraction

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.inventory.schema import validate_site
from ansible_collections.clusterproof.gpu.plugins.module_utils.model import fairshare
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import kai, kueue, registry
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import projects, workloads
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import scenario_runner, scenarios

# --- Scenario files ---------------------------------------------------------------------------

SCENARIO = {
    "name": "cpu-beside-gpus",
    "policy": "runai",
    "capacity": {"gpus": 16, "node_gpus": 8},
    "projects": [
        {"name": "team-a", "gpu_quota": 8, "cpu_quota": 16, "cpu_limit": 32.5, "memory_quota": 64},
        {"name": "team-b", "gpu_quota": 8, "memory_limit": 0.5},
    ],
    "steps": [
        {
            "name": "submit",
            "submit": [
                {"name": "a-1", "project": "team-a", "kind": "train", "gpus": 2, "cpu": 1.5, "memory": 16},
                {"name": "b-1", "project": "team-b", "kind": "train", "gpus": 0.5, "memory": 0.25},
                {"name": "b-web", "project": "team-b", "kind": "train", "gpus": 1, "replicas": 2, "cpu": 0.25},
            ],
        }
    ],
}


def scenario_with(project=None, job=None, **top):
    """SCENARIO with the first project and the first workload updated, and top-level fields."""
    data = copy.deepcopy(SCENARIO)
    data["projects"][0].update(project or {})
    data["steps"][0]["submit"][0].update(job or {})
    data.update(top)
    return data


def test_scenario_takes_cpu_and_memory_beside_the_gpus():
    scenario = scenarios.load(SCENARIO)
    team_a, team_b = scenario.projects
    assert (team_a.cpu_quota, team_a.cpu_limit, team_a.memory_quota, team_a.memory_limit) == (16, 32.5, 64, None)
    assert (team_b.cpu_quota, team_b.cpu_limit, team_b.memory_quota, team_b.memory_limit) == (None, None, None, 0.5)
    assert scenario.cpu_memory_quotas
    a_1, b_1, web = scenario.steps[0].submit
    assert (a_1.cpu, a_1.memory, b_1.cpu, b_1.memory, web.cpu, web.memory) == (1.5, 16, 0, 0.25, 0.25, 0)
    assert a_1.model_job() == fairshare.Job("a-1", "team-a", 2.0, cpu=1.5, memory=16.0)
    assert [(job.name, job.cpu, job.memory) for job in web.model_jobs()] == [
        ("b-web-0", 0.25, 0.0),
        ("b-web-1", 0.25, 0.0),
    ]


def test_scenario_without_the_fields_is_as_before():
    data = copy.deepcopy(SCENARIO)
    for project in data["projects"]:
        for field in scenarios.PROJECT_RESOURCE_FIELDS:
            project.pop(field, None)
    for job in data["steps"][0]["submit"]:
        job.pop("cpu", None)
        job.pop("memory", None)
    scenario = scenarios.load(data)
    assert not scenario.cpu_memory_quotas
    assert scenario.projects[0] == fairshare.Project("team-a", 8.0, None, None, None)
    assert scenario.steps[0].submit[0].model_job() == fairshare.Job("a-1", "team-a", 2.0)


@pytest.mark.parametrize(
    ("project", "job", "message"),
    [
        (
            {"cpu_quota": -1},
            None,
            "projects[0].cpu_quota: expected a non-negative number of CPU cores, found -1",
        ),
        (
            {"cpu_quota": 0.0005},
            None,
            "projects[0].cpu_quota: expected a non-negative number of CPU cores, at most 1000000, "
            "in thousandths (0.5, not 0.0005), found 0.0005",
        ),
        (
            {"memory_quota": "16Gi"},
            None,
            "projects[0].memory_quota: expected a non-negative number of GiB, found '16Gi'",
        ),
        (
            {"memory_quota": 0.0001},
            None,
            "projects[0].memory_quota: expected a non-negative number of GiB, at most 10000000, in MiB "
            "(multiples of 1/1024 GiB: 0.5, not 0.0001), found 0.0001",
        ),
        (
            {"cpu_limit": 8},
            None,
            "projects[0].cpu_limit: expected a number at least cpu_quota (16), found 8.0",
        ),
        (
            {"memory_quota": 64, "memory_limit": 32},
            None,
            "projects[0].memory_limit: expected a number at least memory_quota (64), found 32.0",
        ),
        (
            None,
            {"cpu": -0.5},
            "steps[0].submit[0].cpu: expected a non-negative number of CPU cores, found -0.5",
        ),
        (
            None,
            {"memory": True},
            "steps[0].submit[0].memory: expected a non-negative number of GiB, found True",
        ),
    ],
)
def test_bad_cpu_and_memory_amounts_name_the_field(project, job, message):
    with pytest.raises(scenarios.ScenarioError) as error:
        scenarios.load(scenario_with(project, job))
    assert "scenario: " + message in str(error.value)


def test_cpu_and_memory_only_for_flat_projects():
    data = copy.deepcopy(SCENARIO)
    data["projects"].append({"name": "team-c", "parent": "team-b", "gpu_quota": 4})
    with pytest.raises(scenarios.ScenarioError) as error:
        scenarios.load(data)
    message = str(error.value)
    rule = "CPU and memory beside the GPUs take flat projects, not a quota tree (a project with parent)"
    assert "projects[0].cpu_quota: expected no cpu_quota: %s, found 16" % rule in message
    assert "projects[1].memory_limit: expected no memory_limit: %s, found 0.5" % rule in message
    assert "steps[0].submit[0].cpu: expected no cpu: %s, found 1.5" % rule in message


def test_cpu_and_memory_only_with_resource_gpu():
    data = {
        "name": "cores",
        "resource": "cpu",
        "capacity": {"cpus": 8, "node_cpus": 4},
        "projects": [{"name": "team-a", "min": 4, "cpu_quota": 2}],
        "steps": [{"submit": [{"name": "a-1", "project": "team-a", "kind": "train", "cpus": 1, "memory": 2}]}],
    }
    with pytest.raises(scenarios.ScenarioError) as error:
        scenarios.load(data)
    message = str(error.value)
    assert "projects[0].cpu_quota: expected no cpu_quota: CPU and memory beside the GPUs take resource gpu, " in message
    assert "steps[0].submit[0].memory: expected no memory: CPU and memory beside the GPUs take resource gpu" in message
    assert "unknown field" not in message


def test_cpu_and_memory_only_with_policy_runai():
    with pytest.raises(scenarios.ScenarioError) as error:
        scenarios.load(scenario_with(policy="elastic"))
    assert "projects[0].cpu_quota: expected no cpu_quota: CPU and memory beside the GPUs take policy runai, " in str(
        error.value
    )


def test_a_site_twice_the_size_scales_cpu_and_memory_as_the_gpus():
    scenario = scenarios.load(SCENARIO)
    plan = scenarios.fit_to_site(scenario, [("n-%d" % i, 8) for i in range(4)])
    assert isinstance(plan, scenarios.SitePlan) and plan.scale == Fraction(2)
    team_a, team_b = plan.scenario.projects
    assert (team_a.quota, team_a.cpu_quota, team_a.cpu_limit, team_a.memory_quota) == (16, 32, 65, 128)
    assert (team_b.memory_limit, team_b.cpu_quota) == (1.0, None)
    jobs = {job.name: job for job in plan.scenario.steps[0].submit}
    # A whole-GPU job doubles, its CPU and memory with it; a repeated fraction keeps its own.
    assert (jobs["a-1"].gpus, jobs["a-1"].cpu, jobs["a-1"].memory) == (4, 3, 32)
    assert (jobs["b-1"].memory, jobs["b-1-x2"].memory) == (0.25, 0.25)


def test_predictions_take_nodes_with_cpu_and_memory():
    # The model (model/fairshare.py) divides CPU and memory fair shares over what the nodes offer.
    scenario = scenarios.load(SCENARIO)
    nodes = [fairshare.Node("dgx1-1", 8, 80, 512), fairshare.Node("dgx1-2", 8, 80, 512)]
    (prediction,) = scenarios.predictions(scenario, nodes)
    assert set(prediction.running) == {"a-1", "b-1", "b-web-0", "b-web-1"}


def test_a_cpu_limit_keeps_the_second_job_waiting():
    # Through the model: 1.5 + 1.5 cores is above team-a's cpu_limit of 2, though GPUs are idle.
    data = {
        "name": "cpu-limit",
        "capacity": {"gpus": 16, "node_gpus": 8},
        "projects": [{"name": "team-a", "gpu_quota": 8, "cpu_limit": 2}, {"name": "team-b", "gpu_quota": 8}],
        "steps": [
            {
                "submit": [
                    {"name": "a-1", "project": "team-a", "kind": "train", "gpus": 1, "cpu": 1.5},
                    {"name": "a-2", "project": "team-a", "kind": "train", "gpus": 1, "cpu": 1.5},
                ]
            }
        ],
    }
    nodes = [fairshare.Node("dgx1-1", 8, 80, 512), fairshare.Node("dgx1-2", 8, 80, 512)]
    (prediction,) = scenarios.predictions(scenarios.load(data), nodes)
    assert (prediction.running, prediction.pending) == (("a-1",), ("a-2",))


# --- Inventory --------------------------------------------------------------------------------

SITE = {"clusterproof_site_name": "site", "clusterproof_cluster_mode": "sandbox"}
NODE = {"gpu_count": 8}


def validate(projects_list, scheduler=None):
    site = {**SITE, "clusterproof_projects": projects_list}
    if scheduler is not None:
        site["clusterproof_scheduler"] = scheduler
    hostvars = {"localhost": dict(site), "dgx1-1": {**site, **NODE}}
    groups = {"all": list(hostvars), "kube_control_plane": ["localhost"], "gpu_nodes": ["dgx1-1"]}
    declaration, errors = validate_site(groups, hostvars)
    return declaration, [str(error) for error in errors]


def test_inventory_takes_cpu_and_memory_quotas_on_kai():
    declaration, errors = validate(
        [{"name": "team-a", "gpu_quota": 4, "cpu_quota": 16, "cpu_limit": 32.5, "memory_quota": 64.5}]
    )
    assert errors == []
    project = declaration.projects[0]
    assert (project.cpu_quota, project.cpu_limit, project.memory_quota, project.memory_limit) == (16, 32.5, 64.5, None)
    as_dict = declaration.to_dict()["projects"][0]
    read = projects.Project.from_dict(as_dict)
    assert (read.cpu_quota, read.cpu_limit, read.memory_quota, read.memory_limit) == (16, 32.5, 64.5, None)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"cpu_quota": -2}, "project team-a: cpu_quota: expected a non-negative number of CPU cores, found -2"),
        ({"cpu_quota": "4"}, "project team-a: cpu_quota: expected a non-negative number of CPU cores, found '4'"),
        (
            {"cpu_quota": 8, "cpu_limit": 4},
            "project team-a: cpu_limit: expected a non-negative number of CPU cores not below cpu_quota (8), found 4",
        ),
        (
            {"memory_quota": 64, "memory_limit": 32},
            "project team-a: memory_limit: expected a non-negative number of GiB of memory not below "
            "memory_quota (64), found 32",
        ),
        (
            {"cpu_quota": 0.0001},
            "project team-a: cpu_quota: expected a number of CPU cores of at most 409600000, in thousandths "
            "(millicpus), found 0.0001",
        ),
        (
            {"memory_limit": 1.0001},
            "project team-a: memory_limit: expected a number of GiB of at most 6553600000, in MiB "
            "(multiples of 1/1024), found 1.0001",
        ),
    ],
)
def test_inventory_rejects_bad_cpu_and_memory_quotas(fields, message):
    declaration, errors = validate([{"name": "team-a", "gpu_quota": 4, **fields}])
    assert declaration is None
    assert errors == [message]


@pytest.mark.parametrize("scheduler", ["kueue", "none"])
def test_inventory_rejects_cpu_and_memory_quotas_with_another_scheduler(scheduler):
    declaration, errors = validate([{"name": "team-a", "gpu_quota": 4, "memory_limit": 128}], scheduler)
    assert declaration is None
    assert errors == [
        "project team-a: memory_limit: expected no memory_limit with clusterproof_scheduler %s: CPU and memory "
        "quotas are for kai only, found 128.0" % scheduler
    ]


def test_only_kai_takes_cpu_and_memory_quotas():
    assert [name for name in registry.names() if registry.backend(name).cpu_memory_quotas] == ["kai"]
    project = projects.Project("team-a", 4, 4, cpu_quota=8)
    assert kai.BACKEND.check_project(project) == []
    assert kueue.BACKEND.check_project(project) == [
        "project team-a: cpu_quota: expected none (Kueue takes no CPU or memory quotas; KAI scheduler does), found 8"
    ]
    with pytest.raises(kueue.KueueError):
        kueue.cluster_queue_manifest(project)


# --- The KAI queue ----------------------------------------------------------------------------


def test_queue_writes_millicpus_and_megabytes_with_the_gpu_weight():
    project = projects.Project("team-a", 4, 3, gpu_limit=8, cpu_quota=1.5, cpu_limit=4, memory_quota=16)
    resources = kai.project_queue_manifest(project)["spec"]["resources"]
    assert resources["gpu"] == {"quota": 4, "overQuotaWeight": 3, "limit": 8}
    assert resources["cpu"] == {"quota": 1500, "overQuotaWeight": 3, "limit": 4000}
    # 16 GiB is 17,179,869,184 bytes: 17179.869184 megabytes (10^6 bytes), KAI's unit.
    assert resources["memory"] == {"quota": 17179.869184, "overQuotaWeight": 3, "limit": -1}


def test_queue_leaves_undeclared_cpu_and_memory_unlimited():
    resources = kai.project_queue_manifest(projects.Project("team-a", 4, 4, memory_limit=0.5))["spec"]["resources"]
    assert resources["cpu"] == {"quota": -1, "overQuotaWeight": 1, "limit": -1}
    # A limit alone: no quota (-1), and one MiB is 1.048576 megabytes, written exactly.
    assert resources["memory"] == {"quota": -1, "overQuotaWeight": 4, "limit": 536.870912}
    bare = kai.queue_manifest("q", 2, 2, None, kai.DEPARTMENT_QUEUE)["spec"]["resources"]
    assert bare["cpu"] == bare["memory"] == {"quota": -1, "overQuotaWeight": 1, "limit": -1}


def test_scenario_project_queues_carry_cpu_and_memory():
    plan = scenarios.fit_to_site(scenarios.load(SCENARIO), [("dgx1-1", 8), ("dgx1-2", 8)])
    objects = scenario_runner.project_objects(plan.scenario, "scn-", 16, kai.BACKEND)
    queues = {item["metadata"]["name"]: item for item in objects if item["kind"] == "Queue"}
    assert queues["scn-team-a"]["spec"]["resources"]["cpu"] == {"quota": 16000, "overQuotaWeight": 8, "limit": 32500}
    assert queues["scn-team-a"]["spec"]["resources"]["memory"]["quota"] == 68719.476736
    assert queues["scn-team-b"]["spec"]["resources"]["cpu"]["quota"] == -1
    assert queues["scn-team-b"]["spec"]["resources"]["memory"]["limit"] == 536.870912


def readback_checks(project, queue):
    return {check.field: check for check in kai.project_readback(project, queue).checks}


def test_readback_passes_a_queue_as_declared():
    project = projects.Project("team-a", 4, 4, cpu_quota=8, memory_limit=64)
    checks = readback_checks(project, kai.project_queue_manifest(project))
    assert {"cpu-quota", "cpu-limit", "memory-quota", "memory-limit"} <= set(checks)
    assert all(check.ok for check in checks.values())
    assert (checks["cpu-quota"].expected, checks["cpu-quota"].observed) == ("8", "8")
    assert (checks["memory-quota"].expected, checks["memory-quota"].observed) == ("none", "none")
    assert (checks["memory-limit"].expected, checks["memory-limit"].observed) == ("64", "64")


def test_readback_flags_a_queue_whose_cpu_quota_differs():
    project = projects.Project("team-a", 4, 4, cpu_quota=8)
    queue = kai.project_queue_manifest(project)
    queue["spec"]["resources"]["cpu"]["quota"] = 4000
    checks = readback_checks(project, queue)
    assert not checks["cpu-quota"].ok
    assert (checks["cpu-quota"].expected, checks["cpu-quota"].observed) == ("8", "4")
    assert checks["cpu-quota"].title == "team-a: queue cpu quota is 8 cores"
    assert "re-run playbooks/scheduler.yml" in checks["cpu-quota"].fix
    assert checks["cpu-limit"].ok and "memory-quota" not in checks


def test_readback_flags_cpu_left_unlimited_and_ignores_undeclared_resources():
    project = projects.Project("team-a", 4, 4, memory_quota=32)
    queue = kai.project_queue_manifest(projects.Project("team-a", 4, 4))
    checks = readback_checks(project, queue)
    assert not checks["memory-quota"].ok and checks["memory-quota"].observed == "none"
    assert "cpu-quota" not in checks
    assert all(check.ok for check in readback_checks(projects.Project("team-a", 4, 4), queue).values())


# --- Workloads --------------------------------------------------------------------------------

SETTINGS = workloads.ProjectSettings("team-a")


def container(manifest):
    spec = manifest["spec"]["template"]["spec"] if "template" in manifest["spec"] else manifest["spec"]
    return spec["containers"][0]


def test_job_carries_cpu_and_memory_requests_and_limits():
    job = kai.job_manifest(workloads.Workload("a-1", "team-a", "train", 2, cpu=1.5, memory=16), SETTINGS)
    assert container(job)["resources"] == {
        "requests": {"cpu": "1500m", "memory": "16384Mi"},
        "limits": {"nvidia.com/gpu": "2", "cpu": "1500m", "memory": "16384Mi"},
    }


def test_fraction_with_memory_only_and_nothing_added_when_zero():
    fraction = kai.job_manifest(workloads.Workload("b-1", "team-a", "train", 0.5, memory=0.25), SETTINGS)
    assert container(fraction)["resources"] == {"requests": {"memory": "256Mi"}, "limits": {"memory": "256Mi"}}
    plain = kai.job_manifest(workloads.Workload("a-2", "team-a", "train", 1), SETTINGS)
    assert container(plain)["resources"] == {"limits": {"nvidia.com/gpu": "1"}}


def test_deployment_and_gang_pods_carry_the_requests():
    workload = workloads.Workload("web", "team-a", "train", 2, cpu=0.25, memory=1)
    wanted = {
        "requests": {"cpu": "250m", "memory": "1024Mi"},
        "limits": {"nvidia.com/gpu": "2", "cpu": "250m", "memory": "1024Mi"},
    }
    (deployment,) = kai.BACKEND.workload_manifests(workload, SETTINGS, 3, "gpu")
    assert deployment["kind"] == "Deployment" and container(deployment)["resources"] == wanted
    group, *pods = kai.gang_manifests(workload, SETTINGS, 2, 2)
    assert group["kind"] == "PodGroup" and [container(pod)["resources"] for pod in pods] == [wanted, wanted]


def test_kueue_jobs_carry_the_requests_too():
    workload = workloads.Workload("web", "team-a", "train", 1, cpu=2)
    job = kueue.job_manifest(workload, SETTINGS)
    assert container(job)["resources"]["requests"] == {"cpu": "2000m"}
    replicas = kueue.replica_jobs(workload, SETTINGS, 2, "gpu")
    assert [container(job)["resources"]["limits"] for job in replicas] == [{"nvidia.com/gpu": "1", "cpu": "2000m"}] * 2


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"cpu": -1}, "workload w: cpu: expected a non-negative number of CPU cores in thousandths (millicores)"),
        ({"cpu": 0.0005}, "workload w: cpu: expected a number of CPU cores in thousandths (millicores), found 0.0005"),
        ({"memory": "1Gi"}, "workload w: memory: expected a non-negative number of GiB in MiB, found '1Gi'"),
        ({"memory": 0.0001}, "workload w: memory: expected a number of GiB in MiB, found 0.0001"),
    ],
)
def test_bad_requests_name_the_workload_and_the_field(fields, message):
    with pytest.raises(workloads.WorkloadError) as error:
        workloads.base_job(workloads.Workload("w", "team-a", "train", 1, **fields), SETTINGS)
    assert str(error.value).startswith(message)


def test_pods_sized_in_cores_take_no_cpu_beside():
    workload = workloads.Workload("w", "team-a", "train", 2, memory=1)
    with pytest.raises(workloads.WorkloadError, match="workload w: cpu and memory: pods sized in CPU cores"):
        kai.deployment_manifest(workload, SETTINGS, 2, "cpu")


# --- The scenario runner ----------------------------------------------------------------------


def node(name, cpu, memory):
    allocatable = {"nvidia.com/gpu": "8"}
    if cpu is not None:
        allocatable["cpu"] = cpu
    if memory is not None:
        allocatable["memory"] = memory
    return {"metadata": {"name": name}, "status": {"allocatable": allocatable}}


def test_model_nodes_read_the_live_nodes_allocatable_cpu_and_memory():
    live = [node("dgx1-1", "80", "512Gi"), node("dgx1-2", "79500m", "1048576Mi"), node("dgx1-3", None, "lots")]
    plan = [("dgx1-1", 8), ("dgx1-2", 8), ("dgx1-3", 8), ("gone", 8)]
    assert scenario_runner.model_nodes(plan, live) == [
        fairshare.Node("dgx1-1", 8, 80.0, 512.0),
        fairshare.Node("dgx1-2", 8, 79.5, 1024.0),
        fairshare.Node("dgx1-3", 8, None, None),
        fairshare.Node("gone", 8, None, None),
    ]


def test_runner_submits_workloads_with_their_cpu_and_memory():
    scenario = scenarios.load(SCENARIO)
    job = scenario.steps[0].submit[0]
    submitted = {}

    class Backend:
        def workload_manifests(self, workload, settings, replicas, resource, min_replicas):
            submitted["workload"] = workload
            raise RuntimeError("stop here")

    run = object.__new__(scenario_runner._Run)
    run.prefix, run.backend, run.scenario = "scn-", Backend(), scenario
    with pytest.raises(RuntimeError):
        run._submit(job, workloads.ProjectSettings("scn-team-a"))
    assert dataclasses.astuple(submitted["workload"])[:4] == ("a-1", "scn-team-a", "train", 2.0)
    assert (submitted["workload"].cpu, submitted["workload"].memory) == (1.5, 16.0)
