"""KAI scheduler on the sandbox, driven from the inventory: projects, quotas, reclaim, fractions,
node affinity, time limits and access. Every observation comes from the real scheduler."""

from __future__ import annotations

import shutil
import time
import uuid
from collections import Counter

import pytest
import yaml
from kubernetes import client

from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import kai
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import workloads

from .conftest import REPO, ansible_module, module_result, run_playbook, settled, wait_for

pytestmark = pytest.mark.sandbox
TEAMS = ("team-a", "team-b", "team-c", "team-d")


@pytest.fixture
def cluster(kai_site, api_client):
    """The API, with every team's workloads removed after the test."""
    yield api_client
    batch, core = client.BatchV1Api(api_client), client.CoreV1Api(api_client)
    for team in TEAMS:
        batch.delete_collection_namespaced_job(team, propagation_policy="Background")
        core.delete_collection_namespaced_pod(team)
    assert wait_for(lambda: not any(core.list_namespaced_pod(team).items for team in TEAMS), 60)
    # The scheduler frees the GPUs of deleted pods in its next cycle.
    time.sleep(2)


def submit(api, name: str, project: str, kind: str, gpus: float) -> None:
    namespace = client.CoreV1Api(api).read_namespace(project)
    settings = workloads.ProjectSettings.from_namespace(api.sanitize_for_serialization(namespace))
    manifest = kai.job_manifest(workloads.Workload(name, project, kind, gpus), settings)
    client.BatchV1Api(api).create_namespaced_job(project, manifest)


def pods_of(api, project: str) -> list:
    return [p for p in client.CoreV1Api(api).list_namespaced_pod(project).items if not p.metadata.deletion_timestamp]


def allocation(api) -> dict[str, float]:
    return {
        team: sum(kai.pod_gpus(p) for p in pods_of(api, team) if p.status.phase == "Running" and p.spec.node_name)
        for team in TEAMS
    }


def running(api, project: str) -> set[str]:
    return {
        p.metadata.labels[workloads.WORKLOAD_NAME_LABEL]
        for p in pods_of(api, project)
        if p.status.phase == "Running" and p.spec.node_name
    }


def stable(api, seconds: float = 6.0, timeout: float = 90.0) -> dict[str, float]:
    """Poll until the allocation has not changed for ``seconds``; return it."""
    return settled(lambda: allocation(api), seconds, timeout)


def test_projects_exist_with_their_quota_and_weight(kai_site, api_client, sandbox):
    queues = client.CustomObjectsApi(api_client).list_cluster_custom_object(*kai.QUEUE_API)["items"]
    by_name = {q["metadata"]["name"]: q["spec"] for q in queues}
    for team, quota in (("team-a", 4), ("team-b", 2), ("team-c", 2), ("team-d", 8)):
        gpu = by_name[team]["resources"]["gpu"]
        assert (gpu["quota"], gpu["overQuotaWeight"]) == (quota, quota)
        assert by_name[team]["parentQueue"] == kai.DEPARTMENT_QUEUE
    # no project declares CPU or memory: KAI's queues leave them unlimited
    assert by_name["team-a"]["resources"]["cpu"] == {"quota": -1, "overQuotaWeight": 1, "limit": -1}
    again = run_playbook("playbooks/scheduler.yml", *sandbox.vars())
    assert again.returncode == 0 and again.recap()["changed"] == 0, again.tail(3000)


def projects_changed(run) -> list[str]:
    """The projects whose item of the gpu_projects role's loop changed something."""
    return [
        data["res"][data["res"]["ansible_loop_var"]]["name"]
        for data in (event.get("event_data") or {} for event in run.events if event.get("event") == "runner_item_on_ok")
        if data["res"].get("changed") and data["res"].get("ansible_loop_var") == "gpu_project"
    ]


def test_cpu_and_memory_quotas_from_the_inventory_reach_the_queue_and_bound_the_project(
    kai_site, api_client, sandbox, tmp_path
):
    # An inventory of the test's own: the sandbox's, with one more project that declares CPU
    # (cores) and memory (GiB) beside its GPUs. The sandbox inventory declares none (the lab
    # switches its projects to Kueue, which refuses them); the role leaves the shared teams as they are.
    name = "e2e-cpu-" + uuid.uuid4().hex[:6]
    declared = {
        "name": name,
        "gpu_quota": 0,
        "over_quota_weight": 3,
        "cpu_quota": 6,
        "cpu_limit": 12.5,
        "memory_quota": 64,
    }
    inventory = tmp_path / "inventory"
    shutil.copytree(REPO / "inventories" / "sandbox", inventory)
    projects_file = inventory / "group_vars" / "all" / "projects.yml"
    site_projects = yaml.safe_load(projects_file.read_text())
    site_projects["clusterproof_projects"].append(declared)
    projects_file.write_text(yaml.safe_dump(site_projects))
    custom = client.CustomObjectsApi(api_client)
    queues_before = {
        q["metadata"]["name"]: q["spec"] for q in custom.list_cluster_custom_object(*kai.QUEUE_API)["items"]
    }
    try:
        first = run_playbook("playbooks/scheduler.yml", *sandbox.vars(), inventory=inventory)
        assert first.returncode == 0, first.tail(3000)
        assert projects_changed(first) == [name], first.tail(3000)
        again = run_playbook("playbooks/scheduler.yml", *sandbox.vars(), inventory=inventory)
        assert again.returncode == 0 and again.recap()["changed"] == 0, again.tail(3000)

        # KAI's units: millicpus and megabytes (10^6 bytes; 64 GiB = 68,719.476736 MB), the GPUs'
        # over-quota weight, -1 for the memory limit that is not declared.
        spec = custom.get_cluster_custom_object(*kai.QUEUE_API, name)["spec"]
        assert spec["parentQueue"] == kai.DEPARTMENT_QUEUE
        assert spec["resources"]["gpu"] == {"quota": 0, "overQuotaWeight": 3, "limit": -1}
        assert spec["resources"]["cpu"] == {"quota": 6000, "overQuotaWeight": 3, "limit": 12500}
        assert spec["resources"]["memory"] == {"quota": 68719.476736, "overQuotaWeight": 3, "limit": -1}

        # The validator reads them back in cores and GiB, and passes them.
        done = ansible_module("clusterproof.gpu.validate_projects", {"projects": [declared]}, sandbox)
        result = module_result(done)
        assert done.returncode == 0 and result["failed_checks"] == 0, result.get("msg") or result["section"]["checks"]
        observed = {check["id"]: check["observed"] for check in result["section"]["checks"]}
        resource_checks = {
            key: observed.get("projects/%s/%s" % (name, key))
            for key in ("cpu-quota", "cpu-limit", "memory-quota", "memory-limit")
        }
        assert resource_checks == {"cpu-quota": "6", "cpu-limit": "12.5", "memory-quota": "64", "memory-limit": "none"}

        # KAI bounds the project at its CPU limit: three 5-core training pods, room for two of them
        # (10 of 12.5 cores, over the quota of 6 on idle nodes), the third waits.
        settings = workloads.ProjectSettings.from_namespace(
            api_client.sanitize_for_serialization(client.CoreV1Api(api_client).read_namespace(name))
        )
        deployment = kai.deployment_manifest(
            workloads.Workload("cpu-5", name, workloads.TRAINING, 5), settings, 3, "cpu"
        )
        client.AppsV1Api(api_client).create_namespaced_deployment(name, deployment)

        def placed() -> int:
            return sum(1 for pod in pods_of(api_client, name) if pod.status.phase == "Running" and pod.spec.node_name)

        assert wait_for(lambda: placed() == 2, 60), [pod.status.phase for pod in pods_of(api_client, name)]
        assert wait_for(lambda: placed() > 2, 8) is False, "the project's CPU limit of 12.5 cores was not enforced"
        assert len(pods_of(api_client, name)) == 3
    finally:
        removed = ansible_module(
            "clusterproof.gpu.gpu_project", {"name": name, "state": "absent", "force": True}, sandbox
        )
        assert removed.returncode == 0, removed.stdout + removed.stderr
    core = client.CoreV1Api(api_client)
    assert wait_for(lambda: name not in {ns.metadata.name for ns in core.list_namespace().items}, 90)
    queues_after = {
        q["metadata"]["name"]: q["spec"] for q in custom.list_cluster_custom_object(*kai.QUEUE_API)["items"]
    }
    assert queues_after == queues_before


def test_borrow_over_quota_then_reclaim_but_never_interactive(cluster):
    # team-b (quota 2) borrows idle GPUs: one interactive session and six 2-GPU training jobs.
    submit(cluster, "b-build", "team-b", workloads.INTERACTIVE, 1)
    for index in range(6):
        submit(cluster, "b-train-%d" % index, "team-b", workloads.TRAINING, 2)
    borrowed = stable(cluster)
    assert borrowed["team-b"] == 13, borrowed
    # team-d claims its quota of 8: the scheduler reclaims team-b's borrowed training GPUs.
    for index in range(4):
        submit(cluster, "d-train-%d" % index, "team-d", workloads.TRAINING, 2)
    reclaimed = stable(cluster)
    assert reclaimed["team-d"] == 8, reclaimed
    assert reclaimed["team-b"] <= 8, reclaimed
    assert sum(reclaimed.values()) <= 16
    assert "b-build" in running(cluster, "team-b"), "the interactive session was preempted"
    pending = [p for p in pods_of(cluster, "team-b") if p.status.phase == "Pending"]
    assert pending, "no team-b training job went back to pending"


def test_a_job_within_quota_runs(cluster):
    submit(cluster, "a-train", "team-a", workloads.TRAINING, 4)
    assert wait_for(lambda: "a-train" in running(cluster, "team-a"))


def _gpu_groups(api, project: str) -> dict[str, set[str]]:
    groups: dict[str, set[str]] = {}
    for pod in pods_of(api, project):
        if pod.status.phase == "Running":
            group = (pod.metadata.labels or {}).get(kai.GPU_GROUP_LABEL) or (pod.metadata.annotations or {}).get(
                kai.GPU_GROUP_LABEL
            )
            groups.setdefault(group, set()).add(pod.metadata.labels[workloads.WORKLOAD_NAME_LABEL])
    return groups


def test_fractions_pack_onto_shared_gpus(cluster):
    for name, gpus in (("c-g06", 0.6), ("c-g04", 0.4)):
        submit(cluster, name, "team-c", workloads.INTERACTIVE, gpus)
    assert wait_for(lambda: running(cluster, "team-c") == {"c-g06", "c-g04"}, 90), _gpu_groups(cluster, "team-c")
    for name, gpus in (("c-g05", 0.5), ("c-g03", 0.3), ("c-g02", 0.2)):
        submit(cluster, name, "team-c", workloads.INTERACTIVE, gpus)
    assert wait_for(lambda: len(running(cluster, "team-c")) == 5, 120), _gpu_groups(cluster, "team-c")
    groups = sorted(sorted(members) for group, members in _gpu_groups(cluster, "team-c").items() if group)
    assert groups == [["c-g02", "c-g03", "c-g05"], ["c-g04", "c-g06"]], groups
    # team-c's interactive work lands only on its node (node affinity from the inventory).
    assert {p.spec.node_name for p in pods_of(cluster, "team-c")} == {"dgx1-1"}


def test_two_halves_share_one_gpu(cluster):
    submit(cluster, "b-half-1", "team-b", workloads.INTERACTIVE, 0.5)
    submit(cluster, "b-half-2", "team-b", workloads.INTERACTIVE, 0.5)
    assert wait_for(lambda: len(running(cluster, "team-b")) == 2, 120), _gpu_groups(cluster, "team-b")
    groups = [members for group, members in _gpu_groups(cluster, "team-b").items() if group]
    assert groups == [{"b-half-1", "b-half-2"}]
    assert {p.spec.node_name for p in pods_of(cluster, "team-b")} == {"dgx1-2"}


def test_member_can_submit_only_in_their_own_project(kai_site, api_client):
    authorization = client.AuthorizationV1Api(api_client)

    def allowed(user: str, namespace: str) -> bool:
        review = {
            "spec": {
                "user": user,
                "resourceAttributes": {"namespace": namespace, "verb": "create", "group": "batch", "resource": "jobs"},
            }
        }
        return authorization.create_subject_access_review(review).status.allowed

    assert allowed("alice", "team-a")
    assert not allowed("alice", "team-b")
    assert not allowed("bob", "team-a")


def test_interactive_time_limit_and_guarded_removal(kai_site, api_client, sandbox):
    name = "e2e-" + uuid.uuid4().hex[:6]
    made = ansible_module(
        "clusterproof.gpu.gpu_project",
        {"name": name, "gpu_quota": 1, "interactive_time_limit_seconds": 3, "node_affinity": {"training": ["dgx1-2"]}},
        sandbox,
    )
    assert made.returncode == 0, made.stdout + made.stderr
    submit(api_client, "build", name, workloads.INTERACTIVE, 1)
    submit(api_client, "train", name, workloads.TRAINING, 1)
    batch = client.BatchV1Api(api_client)

    def deadline_exceeded():
        conditions = batch.read_namespaced_job("build", name).status.conditions or []
        return any(c.type == "Failed" and c.reason == "DeadlineExceeded" for c in conditions)

    assert wait_for(deadline_exceeded, 60), "the interactive job outlived its 3 s limit"
    assert wait_for(lambda: "train" in running(api_client, name), 60)
    assert {p.spec.node_name for p in pods_of(api_client, name) if p.status.phase == "Running"} == {"dgx1-2"}

    refused = ansible_module("clusterproof.gpu.gpu_project", {"name": name, "state": "absent"}, sandbox)
    assert refused.returncode != 0
    assert "still has 1 pending or running workload pod(s)" in refused.stdout
    assert client.CoreV1Api(api_client).read_namespace(name)
    forced = ansible_module("clusterproof.gpu.gpu_project", {"name": name, "state": "absent", "force": True}, sandbox)
    assert forced.returncode == 0, forced.stdout
    assert "CHANGED" in forced.stdout


def test_bad_project_input_changes_nothing(kai_site, api_client, sandbox):
    bad = ansible_module("clusterproof.gpu.gpu_project", {"name": "team-z", "gpu_quota": 2, "gpu_limit": 1}, sandbox)
    assert bad.returncode != 0
    assert "project team-z: gpu_limit: expected a number not below gpu_quota (2), found 1" in bad.stdout
    names = {ns.metadata.name for ns in client.CoreV1Api(api_client).list_namespace().items}
    assert "team-z" not in names


def test_allocation_counts_whole_and_fractional_gpus(cluster):
    submit(cluster, "d-2", "team-d", workloads.TRAINING, 2)
    submit(cluster, "c-half", "team-c", workloads.INTERACTIVE, 0.5)
    assert wait_for(lambda: allocation(cluster)["team-d"] == 2 and allocation(cluster)["team-c"] == 0.5, 90)
    assert Counter(p.status.phase for p in pods_of(cluster, "team-d")) == Counter({"Running": 1})
