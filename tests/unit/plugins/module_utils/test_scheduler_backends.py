"""The scheduler backends behind one interface: the registry, and one mapping per engine for each concern."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.clusterproof.gpu.plugins.module_utils.model import fairshare
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import registry
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import projects, quota_tree, workloads
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import scenario_runner, scenarios

SCENARIOS = Path(__file__).resolve().parents[4] / "scenarios"
BACKENDS = [registry.backend(name) for name in registry.names()]


def _scenario(name):
    return scenarios.load(yaml.safe_load((SCENARIOS / name).read_text()))


def test_the_registry_knows_each_engine_by_its_name():
    assert registry.names() == ("kai", "kueue")
    assert registry.DEFAULT in registry.names()
    assert registry.ARG_SPEC["scheduler"]["choices"] == list(registry.names())
    with pytest.raises(ValueError, match="unknown scheduler 'slurm': expected one of kai, kueue"):
        registry.backend("slurm")


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda backend: backend.name)
def test_every_backend_follows_a_policy_the_model_knows(backend):
    assert backend.policy in fairshare.POLICIES
    assert backend.hint == "is %s installed?" % backend.display_name


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda backend: backend.name)
def test_a_flat_scenario_is_the_engines_projects_under_a_group_of_its_own(backend):
    scenario = _scenario("netapp-runai-4.8-4.10.yml")
    objects = scenario_runner.project_objects(scenario, "scn-", 16, backend)
    assert objects[0]["metadata"]["name"] == "scn-scenarios"
    namespaces = [o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"]
    assert namespaces == ["scn-" + project.name for project in scenario.projects]
    project = scenario.projects[0]
    declared = projects.Project("scn-" + project.name, project.quota, project.quota, project.limit)
    assert backend.project_objects(declared, "scn-scenarios")[0] in objects


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda backend: backend.name)
def test_a_tree_scenario_is_the_engines_quota_tree(backend):
    scenario = _scenario("alibaba-elastic-quota-tree.yml")
    objects = scenario_runner.project_objects(scenario, "scn-", 16, backend)
    leaves = [p.name for p in scenario.projects if p.name not in scenario.parents]
    labelled = {
        o["metadata"]["name"]: o["metadata"]["labels"][quota_tree.LEAF_LABEL]
        for o in objects
        if o["kind"] == "Namespace"
    }
    assert labelled == {"scn-" + leaf: "scn-" + leaf for leaf in leaves}
    # The same mapping as the inventory's tree: with no weights, each node weighs its min.
    nodes = [
        quota_tree.TreeNode(
            "scn-" + p.name,
            None if p.parent is None else "scn-" + p.parent,
            {"cpu": p.quota},
            {} if p.limit is None else {"cpu": p.limit},
            () if p.name in scenario.parents else ("scn-" + p.name,),
        )
        for p in scenario.projects
    ]
    differences = backend.tree_differences(nodes, [o for o in objects if o["kind"] != "Namespace"])
    assert differences == {node.name: None for node in nodes}


def test_on_kueue_a_gpu_tree_leaves_cpu_and_memory_unlimited():
    nodes, _ = quota_tree.check_tree([{"name": "g", "min": {"gpu": 4}, "max": {"gpu": 8}}])
    (queue,) = registry.backend("kueue").tree_objects(nodes)
    assert queue["spec"]["resourceGroups"][0]["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu"]


def test_project_rules_are_written_once():
    values = {"gpu_quota": 4, "gpu_limit": 2, "gpu_lending_limit": 5, "interactive_time_limit_seconds": 0}
    assert projects.problem_messages("team-a", values) == [
        "project team-a: gpu_limit: expected a number not below gpu_quota (4), found 2",
        "project team-a: gpu_lending_limit: expected a number of GPUs from 0 to gpu_quota (4), found 5",
        "project team-a: interactive_time_limit_seconds: expected a positive number of seconds, found 0",
    ]
    assert [p.field for p in projects.problems({"gpu_lending_limit": 1}, registry.lenders())] == ["gpu_lending_limit"]


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda backend: backend.name)
def test_a_workload_is_its_job_or_the_engines_replicas(backend):
    workload = workloads.Workload("app", "team-a", workloads.TRAINING, 2)
    settings = workloads.ProjectSettings("team-a")
    assert backend.workload_manifests(workload, settings, None, "gpu") == [backend.job_manifest(workload, settings)]
    replicas = backend.workload_manifests(workload, settings, 3, "cpu")
    assert replicas == backend.replica_manifests(workload, settings, 3, "cpu")
    pods = sum(obj["spec"].get("replicas", 1) for obj in replicas)
    assert pods == 3 and {obj["metadata"]["namespace"] for obj in replicas} == {"team-a"}


def test_a_gang_on_kai_is_a_pod_group_and_ownerless_pods_that_name_it():
    backend = registry.backend("kai")
    workload = workloads.Workload("ddp", "team-a", workloads.TRAINING, 2)
    settings = workloads.ProjectSettings("team-a")
    group, *pods = backend.workload_manifests(workload, settings, 3, "gpu", min_replicas=2)
    assert (group["kind"], group["metadata"]["name"], group["metadata"]["namespace"]) == ("PodGroup", "ddp", "team-a")
    assert group["spec"] == {"minMember": 2, "queue": "team-a", "priorityClassName": "train"}
    assert [pod["metadata"]["name"] for pod in pods] == ["ddp-0", "ddp-1", "ddp-2"]
    for pod in pods:
        assert pod["kind"] == "Pod" and "ownerReferences" not in pod["metadata"]
        assert pod["metadata"]["annotations"]["pod-group-name"] == "ddp"
        assert pod["metadata"]["labels"][workloads.WORKLOAD_NAME_LABEL] == "ddp"
        assert pod["spec"]["schedulerName"] == "kai-scheduler"
        assert pod["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "2"}}


@pytest.mark.parametrize(
    ("name", "gpus", "replicas", "min_replicas", "resource", "message"),
    [
        ("kueue", 2, 3, 2, "gpu", "workload ddp: min_replicas: Kueue is not given gangs by clusterproof"),
        ("kai", 0.5, 3, 2, "gpu", "workload ddp: gpus: a gang's pods take whole GPUs, found 0.5"),
        ("kai", 2, 3, 4, "gpu", r"workload ddp: min_replicas: expected 1 to replicas \(3\), found 4"),
        ("kai", 2, 3, 2, "cpu", "workload ddp: min_replicas: a gang's pods ask for GPUs, not cpu"),
    ],
)
def test_a_gang_an_engine_cannot_run_is_refused_with_the_field_named(
    name, gpus, replicas, min_replicas, resource, message
):
    workload = workloads.Workload("ddp", "team-a", workloads.TRAINING, gpus)
    with pytest.raises(workloads.WorkloadError, match="^" + message):
        registry.backend(name).workload_manifests(
            workload, workloads.ProjectSettings("team-a"), replicas, resource, min_replicas=min_replicas
        )
