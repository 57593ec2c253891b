"""KAI objects, projects and workloads as clusterproof writes them (pure)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from kubernetes import client

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import control_plane as sandbox
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import gpu_agent as sandbox_gpu_agent
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import kai
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import projects, workloads
from tests import conftest

TEAM_A = projects.Project(**conftest.TEAM_A, interactive_nodes=("dgx1-2",), groups=("team-a-researchers",))
SETTINGS = workloads.ProjectSettings.from_namespace(projects.namespace_manifest(TEAM_A))


def test_queue_carries_quota_weight_limit_under_the_department():
    queue = kai.project_queue_manifest(TEAM_A)
    assert queue["spec"]["parentQueue"] == kai.DEPARTMENT_QUEUE
    assert queue["spec"]["resources"]["gpu"] == {"quota": 4, "overQuotaWeight": 4, "limit": 8}
    assert queue["spec"]["resources"]["cpu"]["quota"] == -1


def test_fractional_quota_and_no_limit():
    queue = kai.queue_manifest("q", 0.5, 0.5, None, kai.DEPARTMENT_QUEUE)
    assert queue["spec"]["resources"]["gpu"] == {"quota": 0.5, "overQuotaWeight": 0.5, "limit": -1}


def test_project_settings_round_trip_through_the_namespace():
    assert SETTINGS == workloads.ProjectSettings("team-a", ("dgx1-1",), ("dgx1-2",), 3600)
    bare = workloads.ProjectSettings.from_namespace(projects.namespace_manifest(projects.Project("team-b", 2, 2)))
    assert bare == workloads.ProjectSettings("team-b")


def test_members_are_bound_in_their_namespace_only():
    role, binding = projects.rbac_manifests(TEAM_A)
    assert role["kind"] == "Role" and role["metadata"]["namespace"] == "team-a"
    assert binding["kind"] == "RoleBinding" and binding["metadata"]["namespace"] == "team-a"
    assert {(s["kind"], s["name"]) for s in binding["subjects"]} == {("User", "alice"), ("Group", "team-a-researchers")}
    jobs = [rule for rule in role["rules"] if "jobs" in rule["resources"]]
    assert jobs and "create" in jobs[0]["verbs"]


def test_training_job_is_preemptible_whole_gpus_with_training_affinity():
    job = kai.job_manifest(workloads.Workload("a-2-gg", "team-a", workloads.TRAINING, 2), SETTINGS)
    pod = job["spec"]["template"]
    assert pod["spec"]["schedulerName"] == "kai-scheduler"
    assert pod["spec"]["priorityClassName"] == "train"
    assert pod["metadata"]["labels"][kai.QUEUE_LABEL] == "team-a"
    assert pod["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "2"}}
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert terms[0]["matchExpressions"][0]["values"] == ["dgx1-1"]
    assert "activeDeadlineSeconds" not in job["spec"]


def test_interactive_fraction_has_the_time_limit_and_no_gpu_resource():
    job = kai.job_manifest(workloads.Workload("a-1-g05", "team-a", workloads.INTERACTIVE, 0.5), SETTINGS)
    pod = job["spec"]["template"]
    assert pod["spec"]["priorityClassName"] == "build"
    assert pod["metadata"]["annotations"][kai.GPU_FRACTION_ANNOTATION] == "0.5"
    assert pod["metadata"]["annotations"][kai.SHARED_GPU_CONFIGMAP_ANNOTATION] == "a-1-g05-shared-gpu"
    assert pod["spec"]["containers"][0]["resources"] == {}
    assert job["spec"]["activeDeadlineSeconds"] == 3600
    values = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert values["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["dgx1-2"]


@pytest.mark.parametrize(
    ("gpus", "message"),
    [
        (0, "workload w: gpus: expected a positive number of GPUs, found 0"),
        (-1, "workload w: gpus: expected a positive number of GPUs, found -1"),
        ("two", "workload w: gpus: expected a number of GPUs, found 'two'"),
        (0.125, "workload w: gpus: expected a fraction in hundredths (KAI's gpu-fraction), found 0.125"),
        (1.5, "workload w: gpus: expected whole GPUs, or a fraction of one GPU below 1, found 1.5"),
        (True, "workload w: gpus: expected a number of GPUs, found True"),
    ],
)
def test_bad_gpu_amounts_are_refused(gpus, message):
    with pytest.raises(workloads.WorkloadError) as error:
        kai.job_manifest(workloads.Workload("w", "team-a", workloads.TRAINING, gpus), SETTINGS)
    assert str(error.value) == message


def test_unknown_kind_and_wrong_project_are_refused():
    with pytest.raises(workloads.WorkloadError, match="kind: expected one of train, interactive, found 'batch'"):
        kai.job_manifest(workloads.Workload("w", "team-a", "batch", 1), SETTINGS)
    with pytest.raises(workloads.WorkloadError, match="settings are for team-a, not team-b"):
        kai.job_manifest(workloads.Workload("w", "team-b", workloads.TRAINING, 1), SETTINGS)


def test_active_workloads_are_pending_or_running_pods():
    pods = [
        {"metadata": {"name": "a"}, "status": {"phase": "Running"}},
        {"metadata": {"name": "b"}, "status": {"phase": "Succeeded"}},
        {"metadata": {"name": "c"}, "status": {"phase": "Pending"}},
        {"metadata": {"name": "d", "deletionTimestamp": "now"}, "status": {"phase": "Running"}},
    ]
    assert projects.active_workloads(pods) == ["a", "c"]


def test_project_names_are_dns_labels():
    assert projects.valid_name("team-a")
    assert not projects.valid_name("Team_A") and not projects.valid_name("-a") and not projects.valid_name("a" * 64)


def _reservation(name, node, uuid=None, created="2026-01-01T00:00:00Z"):
    metadata = {"name": name, "creationTimestamp": created, "annotations": {}}
    if uuid:
        metadata["annotations"][sandbox_gpu_agent.RESERVED_GPU_ANNOTATION] = uuid
    return {"metadata": metadata, "spec": {"nodeName": node}}


def test_gpu_agent_gives_the_lowest_free_gpu_of_the_node():
    pods = [
        _reservation("held", "dgx1-1", sandbox_gpu_agent.gpu_uuid("dgx1-1", 0)),
        _reservation("new-1", "dgx1-1", created="2026-01-01T00:00:01Z"),
        _reservation("new-2", "dgx1-2", created="2026-01-01T00:00:02Z"),
        _reservation("new-3", "dgx1-1", created="2026-01-01T00:00:03Z"),
    ]
    answers = sandbox_gpu_agent.assign(pods, {"dgx1-1": 8, "dgx1-2": 8})
    assert answers == {
        "new-1": "GPU-sandbox-dgx1-1-1",
        "new-2": "GPU-sandbox-dgx1-2-0",
        "new-3": "GPU-sandbox-dgx1-1-2",
    }


def test_gpu_agent_gives_nothing_when_the_node_is_full_or_unknown():
    pods = [
        _reservation("held", "n", sandbox_gpu_agent.gpu_uuid("n", 0)),
        _reservation("new", "n"),
        _reservation("x", "ghost"),
    ]
    assert sandbox_gpu_agent.assign(pods, {"n": 1}) == {}


def test_kai_components_listen_on_loopback_and_skip_the_webhooks():
    layout = sandbox.Layout(Path("/state"))
    components = kai.components(
        layout, Path("/bin"), kai.KaiPorts(20000), Path("/state/kai.yaml"), ("python3", "-m", "agent")
    )
    names = [component.name for component in components]
    assert names == ["kai-queuecontroller", "kai-podgrouper", "kai-binder", "kai-scheduler", "sandbox-gpu-agent"]
    for component in components:
        argv = " ".join(component.argv)
        assert "0.0.0.0" not in argv and ":8080" not in argv
        assert dict(component.env)["KUBECONFIG"] == "/state/kubeconfig"
        if component.ready_url:
            assert component.ready_url.startswith("http://127.0.0.1:200")
    assert "--enable-webhook=false" in components[0].argv
    assert "--fake-gpu-nodes" in components[2].argv


def test_scheduler_config_has_reclaim_and_gpu_packing():
    config = kai.scheduler_config()
    assert "reclaim" in config["actions"] and "preempt" in config["actions"]
    names = [plugin["name"] for plugin in config["tiers"][0]["plugins"]]
    assert "proportion" in names and "gpupack" in names and "gpusharingorder" in names


@pytest.mark.parametrize(
    ("wanted", "actual", "expected"),
    [
        ({"a": 1}, {"a": 1.0, "b": 2}, True),
        ({"a": {"b": [1, 2]}}, {"a": {"b": [1, 2], "c": 3}}, True),
        ({"a": {"b": [1, 2]}}, {"a": {"b": [1]}}, False),
        ({"a": "1"}, {"a": 1}, False),
        ({"a": True}, {"a": 1}, False),
        ({"a": None}, {}, True),
    ],
)
def test_is_subset(wanted, actual, expected):
    assert kube.is_subset(wanted, actual) is expected


# --- Deployments and CPU queues (the elastic quota tree's example) ------------------------------


def test_a_cpu_deployment_requests_its_cores_per_replica_under_kai():
    settings = workloads.ProjectSettings("scn-root-a-1")
    workload = workloads.Workload("namespace1", "scn-root-a-1", workloads.TRAINING, 2)
    manifest = kai.deployment_manifest(workload, settings, 5, "cpu")
    assert manifest["kind"] == "Deployment" and manifest["spec"]["replicas"] == 5
    pod = manifest["spec"]["template"]
    assert pod["metadata"]["labels"][workloads.WORKLOAD_NAME_LABEL] == "namespace1"
    assert manifest["spec"]["selector"]["matchLabels"] == {workloads.WORKLOAD_NAME_LABEL: "namespace1"}
    assert pod["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}
    assert pod["spec"]["schedulerName"] == kai.SCHEDULER_NAME and "restartPolicy" not in pod["spec"]
    half = kai.deployment_manifest(dataclasses.replace(workload, gpus=0.5), settings, 1, "cpu")
    assert half["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "500m"}


def test_a_gpu_deployment_takes_whole_gpus():
    settings = workloads.ProjectSettings("team-a")
    workload = workloads.Workload("serve", "team-a", workloads.INTERACTIVE, 0.5)
    with pytest.raises(workloads.WorkloadError, match="a Deployment's pods take whole GPUs, found 0.5"):
        kai.deployment_manifest(workload, settings, 2)


def test_cpu_queue_counts_millicpus_and_leaves_gpus_unlimited():
    queue = kai.cpu_queue_manifest("root-a", 20, 20, 40, "root")
    assert queue["spec"]["parentQueue"] == "root"
    assert queue["spec"]["resources"]["cpu"] == {"quota": 20000, "overQuotaWeight": 20, "limit": 40000}
    assert queue["spec"]["resources"]["gpu"]["quota"] == -1


def test_pod_cpus_reads_cores_and_millicores():
    def pod(*amounts):
        containers = [
            client.V1Container(name="c%d" % i, resources=client.V1ResourceRequirements(requests={"cpu": amount}))
            for i, amount in enumerate(amounts)
        ]
        return client.V1Pod(metadata=client.V1ObjectMeta(name="p"), spec=client.V1PodSpec(containers=containers))

    assert kai.pod_cpus(pod("2", "500m")) == 2.5
