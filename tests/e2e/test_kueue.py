"""Kueue as the scheduler backend, on a sandbox of its own, driven from an inventory that says
``clusterproof_scheduler: kueue``: queues as declared, admission, quota, borrowing within lending
limits, reclaim, Kueue's maximum execution time, idempotence and bad input. Every observation
comes from the real Kueue and kube-scheduler."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config

from ansible_collections.clusterproof.gpu.plugins.module_utils import versions
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import build as sandbox_build
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import kueue
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import projects, workloads

from .conftest import (
    PlaybookRun,
    ad_hoc,
    dry_run_apply,
    dynamic_client,
    free_port_base,
    module_result,
    render_role_chart,
    run_playbook,
    sandbox_down,
    sandbox_vars,
    settled,
    wait_for,
)
from .listeners import off_loopback, sandbox_listeners

pytestmark = pytest.mark.sandbox
NODES = ("gpu-1", "gpu-2")
TEAMS = ("team-a", "team-b", "team-c")
# 8 GPUs. team-a may borrow 4; team-b lends at most 1 of its 2; team-c borrows nothing.
PROJECTS = """
    clusterproof_projects:
      - name: team-a
        gpu_quota: 4
        gpu_limit: 8
        interactive_time_limit_seconds: 15
        users: [alice]
      - name: team-b
        gpu_quota: 2
        gpu_limit: 6
        gpu_lending_limit: 1
        users: [bob]
      - name: team-c
        gpu_quota: 2
        gpu_limit: 2
"""


def write_inventory(directory: Path, declared: str = PROJECTS) -> Path:
    inventory = directory / "hosts.yml"
    inventory.write_text(
        "all:\n  children:\n    kube_control_plane:\n      hosts:\n        localhost:\n"
        "          ansible_connection: local\n          ansible_python_interpreter: '{{ ansible_playbook_python }}'\n"
        "    gpu_nodes:\n      hosts:\n"
        + "".join("        %s:\n          gpu_count: 4\n" % node for node in NODES)
        + "  vars:\n    clusterproof_site_name: kueue-sandbox\n    clusterproof_cluster_mode: sandbox\n"
        "    clusterproof_scheduler: kueue\n" + declared
    )
    return inventory


class Site:
    def __init__(self, inventory: Path, state_dir: Path, port_base: int, first: PlaybookRun) -> None:
        self.inventory, self.state_dir, self.port_base, self.first = inventory, state_dir, port_base, first

    def vars(self) -> list[str]:
        return sandbox_vars(self.state_dir, self.port_base)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """A sandbox of this module's own with Kueue and the inventory's projects; torn down after."""
    directory = tmp_path_factory.mktemp("kueue")
    inventory = write_inventory(directory)
    state_dir, port_base = directory / "state", free_port_base()
    try:
        up = run_playbook("playbooks/sandbox.yml", *sandbox_vars(state_dir, port_base), inventory=inventory)
        assert up.returncode == 0, up.tail(5000)
        first = run_playbook("playbooks/scheduler.yml", *sandbox_vars(state_dir, port_base), inventory=inventory)
        assert first.returncode == 0, first.tail(5000)
        yield Site(inventory, state_dir, port_base, first)
    finally:
        sandbox_down(state_dir, port_base, inventory)


@pytest.fixture
def api(site: Site) -> Iterator[client.ApiClient]:
    """The API, with every team's workloads removed after the test."""
    api_client = config.new_client_from_config(config_file=str(site.state_dir / "kubeconfig"))
    yield api_client
    batch, core = client.BatchV1Api(api_client), client.CoreV1Api(api_client)
    for team in TEAMS:
        batch.delete_collection_namespaced_job(team, propagation_policy="Background")
    assert wait_for(lambda: not any(core.list_namespaced_pod(team).items for team in TEAMS), 90)
    assert wait_for(lambda: not any(workloads_of(api_client, team) for team in TEAMS), 60)
    api_client.close()


def submit(api, project: str, kind: str, gpus: float, name: str | None = None) -> str:
    name = name or "%s-%s" % (project, uuid.uuid4().hex[:6])
    namespace = client.CoreV1Api(api).read_namespace(project)
    settings = workloads.ProjectSettings.from_namespace(api.sanitize_for_serialization(namespace))
    manifest = kueue.job_manifest(workloads.Workload(name, project, kind, gpus), settings)
    client.BatchV1Api(api).create_namespaced_job(project, manifest)
    return name


def custom(api) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def workloads_of(api, project: str) -> list[dict]:
    return custom(api).list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", project, "workloads")["items"]


def condition(obj: dict, kind: str) -> bool:
    return any(c["type"] == kind and c["status"] == "True" for c in (obj.get("status") or {}).get("conditions") or [])


def running_gpus(api, project: str) -> int:
    pods = client.CoreV1Api(api).list_namespaced_pod(project).items
    return int(
        sum(
            kueue.pod_gpus(pod)
            for pod in pods
            if pod.status.phase == "Running" and pod.spec.node_name and not pod.metadata.deletion_timestamp
        )
    )


def stable(api, seconds: float = 8.0, timeout: float = 120.0) -> dict[str, int]:
    """Poll until every team's running GPUs have not changed for ``seconds``; return them."""
    return settled(lambda: {team: running_gpus(api, team) for team in TEAMS}, seconds, timeout)


def test_projects_are_cluster_queues_and_local_queues_as_declared(site, api):
    queues = {
        q["metadata"]["name"]: q
        for q in custom(api).list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues")["items"]
    }
    expected = {
        "team-a": {"nominalQuota": "4", "borrowingLimit": "4"},
        "team-b": {"nominalQuota": "2", "borrowingLimit": "4", "lendingLimit": "1"},
        "team-c": {"nominalQuota": "2", "borrowingLimit": "0"},
    }
    for team, gpu in expected.items():
        spec = queues[team]["spec"]
        resources = {r["name"]: r for r in spec["resourceGroups"][0]["flavors"][0]["resources"]}
        assert {k: v for k, v in resources["nvidia.com/gpu"].items() if k != "name"} == gpu
        assert spec["cohortName"] == kueue.COHORT
        assert spec["fairSharing"]["weight"] == gpu["nominalQuota"]
        # The validator's adapter reads the server's object as declared.
        declared = next(p for p in site_projects(site) if p.name == team)
        assert kueue.queue_differences(declared, queues[team]) == []

        # Kueue itself found the queue usable: its flavor exists and its settings are valid. Kueue
        # writes that status on its own time after the playbook (v0.17.1 once left it unset at the
        # first read, right after scheduler.yml): read until it is there.
        def active(name: str = team) -> bool:
            queue = custom(api).get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", name)
            return condition(queue, "Active")

        assert wait_for(active, 30), queues[team].get("status")
        local = custom(api).get_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", team, "localqueues", team)
        assert local["spec"]["clusterQueue"] == team
    classes = custom(api).list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "workloadpriorityclasses")["items"]
    values = {c["metadata"]["name"]: c["value"] for c in classes}
    assert values[kueue.INTERACTIVE_PRIORITY] > values[kueue.TRAINING_PRIORITY]


def test_job_in_quota_is_admitted_and_runs_on_a_gpu_node(site, api):
    name = submit(api, "team-a", workloads.TRAINING, 2)
    pods = wait_for(
        lambda: [p for p in client.CoreV1Api(api).list_namespaced_pod("team-a").items if p.status.phase == "Running"],
        60,
    )
    assert len(pods) == 1 and pods[0].spec.node_name in NODES
    assert client.BatchV1Api(api).read_namespaced_job(name, "team-a").spec.suspend is False
    (workload,) = workloads_of(api, "team-a")
    assert condition(workload, "Admitted")
    assert workload["status"]["admission"]["clusterQueue"] == "team-a"


def test_job_over_quota_with_nothing_to_borrow_stays_suspended(site, api):
    over = submit(api, "team-c", workloads.TRAINING, 3)
    within = submit(api, "team-c", workloads.TRAINING, 2)
    assert wait_for(lambda: running_gpus(api, "team-c") == 2, 60)
    time.sleep(5)
    jobs = client.BatchV1Api(api)
    assert jobs.read_namespaced_job(over, "team-c").spec.suspend is True
    assert jobs.read_namespaced_job(within, "team-c").spec.suspend is False
    pending = [w for w in workloads_of(api, "team-c") if w["metadata"]["name"].startswith("job-%s-" % over)]
    assert pending and not condition(pending[0], "QuotaReserved")
    # 6 GPUs lie idle in the cohort, yet team-c may not borrow them.
    assert running_gpus(api, "team-c") == 2


def test_borrowing_stops_at_lending_limits_and_is_reclaimed(site, api):
    for _ in range(8):
        submit(api, "team-a", workloads.TRAINING, 1)
    # team-a's 4, all of team-c's 2, and only 1 of team-b's 2 (its lending limit).
    assert stable(api) == {"team-a": 7, "team-b": 0, "team-c": 0}
    for _ in range(2):
        submit(api, "team-b", workloads.TRAINING, 1)
    # team-b claims its quota: one GPU was idle, the other is reclaimed from team-a.
    assert stable(api) == {"team-a": 6, "team-b": 2, "team-c": 0}
    evicted = [w for w in workloads_of(api, "team-a") if condition(w, "Evicted") or condition(w, "Preempted")]
    assert evicted, "no team-a workload was preempted"


def test_interactive_work_ends_at_kueues_maximum_execution_time(site, api):
    name = submit(api, "team-a", workloads.INTERACTIVE, 1)
    assert wait_for(lambda: running_gpus(api, "team-a") == 1, 60)
    started = time.monotonic()
    # team-a's interactive limit is 15 s; Kueue then deactivates the workload and stops its pods.
    assert wait_for(lambda: running_gpus(api, "team-a") == 0, 90)
    assert time.monotonic() - started >= 5
    (workload,) = [w for w in workloads_of(api, "team-a") if w["metadata"]["name"].startswith("job-%s-" % name)]
    assert workload["spec"].get("active") is False
    assert client.BatchV1Api(api).read_namespaced_job(name, "team-a").spec.suspend is True


def test_second_run_changes_nothing(site):
    assert "kueue" in site.first.output
    run = run_playbook("playbooks/scheduler.yml", *site.vars(), inventory=site.inventory)
    assert run.returncode == 0, run.tail(4000)
    assert run.recap()["changed"] == 0, run.changed_tasks()
    checked = run_playbook("playbooks/scheduler.yml", "--check", *site.vars(), inventory=site.inventory)
    assert checked.returncode == 0, checked.tail(4000)
    assert checked.recap()["changed"] == 0, checked.changed_tasks()


def test_lending_limit_above_the_quota_stops_before_anything_runs(tmp_path):
    declared = "    clusterproof_projects:\n      - name: team-a\n        gpu_quota: 4\n        gpu_lending_limit: 5\n"
    inventory = write_inventory(tmp_path, declared)
    state_dir = tmp_path / "state"
    run = run_playbook("playbooks/scheduler.yml", *sandbox_vars(state_dir, 20000), inventory=inventory)
    assert run.returncode != 0
    assert "project team-a: gpu_lending_limit: expected a number of GPUs from 0 to gpu_quota (4), found 5" in run.output
    assert not state_dir.exists()


def test_every_listening_socket_is_on_loopback(site):
    listeners = sandbox_listeners(site.state_dir)
    assert listeners.get("kueue") and off_loopback(listeners) == {}, listeners


def test_kueue_converts_the_versions_its_chart_has_it_convert_and_the_api_server_the_rest(site, api):
    """Each Kueue CRD's conversion as the pinned chart has it; a read at the other version works for
    both kinds, and Kueue logs no failed conversion (v0.16.2 on the sandbox, asked to convert
    ResourceFlavors, logged one about four times a second)."""
    chart_crds = sandbox_build.plan().share_dir / "kueue" / "chart" / "templates" / "crd"
    converted = kueue.webhook_converted_crds(path.read_text() for path in chart_crds.glob("*.yaml"))
    assert {"clusterqueues.kueue.x-k8s.io", "workloads.kueue.x-k8s.io"} <= converted, converted
    extensions = client.ApiextensionsV1Api(api)
    for crd in extensions.list_custom_resource_definition().items:
        if crd.spec.group == "kueue.x-k8s.io" and len(crd.spec.versions) > 1:
            expected = "Webhook" if crd.metadata.name in converted else "None"
            assert crd.spec.conversion.strategy == expected, crd.metadata.name
    custom = client.CustomObjectsApi(api)
    for plural in ("clusterqueues", "resourceflavors"):
        assert custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta1", plural)["items"], plural
    log = (site.state_dir / "logs" / "kueue.log").read_text()
    assert "not convertible" not in log, [line for line in log.splitlines() if "not convertible" in line][:3]


def test_chart_renders_with_the_role_values_and_the_api_server_accepts_it(site, api):
    """Real clusters get Kueue from its chart: a wrong value fails here, not at a site."""
    chart = sandbox_build.plan().share_dir / "kueue" / "chart"
    objects = render_role_chart("kueue_scheduler", chart, "kueue", kueue.SYSTEM_NAMESPACE)
    manager = next(o for o in objects if o["kind"] == "Deployment" and "controller-manager" in o["metadata"]["name"])
    image = manager["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image.endswith(":" + versions.KUEUE.version), image
    config_map = next(o for o in objects if o["kind"] == "ConfigMap" and "manager-config" in o["metadata"]["name"])
    configuration = yaml.safe_load(config_map["data"]["controller_manager_config.yaml"])
    assert configuration["manageJobsWithoutQueueName"] is False
    assert configuration["fairSharing"]["preemptionStrategies"]
    assert configuration["integrations"]["frameworks"] == ["batch/job"]

    # The chart's CRDs are the ones the sandbox applied (with a URL for their conversion instead of
    # the chart's service, which a dry run over them would merge into an invalid pair).
    crds = {o["metadata"]["name"] for o in objects if o["kind"] == "CustomResourceDefinition"}
    applied = resources_named(api, "apiextensions.k8s.io/v1", "CustomResourceDefinition")
    assert crds and crds <= applied, crds - applied
    checked = []
    for obj in objects:
        if obj["kind"] == "CustomResourceDefinition":
            continue
        if obj["kind"].endswith("WebhookConfiguration"):
            # The sandbox's registrations of the same name call Kueue by URL: check the chart's apart.
            obj = {**obj, "metadata": {**obj["metadata"], "name": obj["metadata"]["name"] + "-chart-check"}}
        checked.append(obj)
    dry_run_apply(api, checked, kueue.SYSTEM_NAMESPACE, force_conflicts=True)


def site_projects(site: Site) -> list[projects.Project]:
    declared = yaml.safe_load(site.inventory.read_text())["all"]["vars"]["clusterproof_projects"]
    return [projects.Project.from_dict(project) for project in declared]


def resources_named(api, api_version: str, kind: str) -> set[str]:
    resource = dynamic_client(api).resources.get(api_version=api_version, kind=kind)
    return {item.metadata.name for item in resource.get().items}


def test_a_member_cannot_escape_kueue_s_quota_and_the_validator_tries_each_escape(site: Site, api) -> None:
    """Issue 30 on Kueue: as alice and bob, each escape is refused by the guard it tests (the
    admission policy for another queue, no queue and a bare GPU pod; Pod Security; RBAC), their own
    GPU Job admitted; team-c declares no member. A CPU Job naming no queue in a project namespace is
    Kueue's to admit (manageJobsWithoutQueueName): it waits, suspended."""
    declared = yaml.safe_load(PROJECTS)["clusterproof_projects"]
    done = ad_hoc(
        "clusterproof.gpu.validate_isolation",
        {"kubeconfig": str(site.state_dir / "kubeconfig"), "projects": declared, "scheduler": "kueue"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    checks = {check["id"]: check for check in module_result(done)["section"]["checks"]}
    attempts = ("own-queue", "other-queue", "no-queue", "bare-gpu-pod", "privileged-pod", "host-network-pod")
    for project in ("team-a", "team-b"):
        for attempt in (*attempts, "other-namespace", "network-policy"):
            check = checks["isolation/%s/%s" % (project, attempt)]
            assert check["status"] == "pass", check
    # Every row of the threat model that applies to Kueue, tried as the member: none gets through.
    for project in ("team-a", "team-b"):
        tried = {key: check for key, check in checks.items() if key.startswith("isolation/%s/" % project)}
        assert not {key: check["message"] for key, check in tried.items() if check["status"] == "fail"}
        rows = ("node-name", "priority-class", "priority-label", "gpu-deployment", "device-env", "device-object")
        rows += ("resume-held-job",)
        assert {"isolation/%s/%s" % (project, row) for row in rows} <= set(tried)
        assert tried["isolation/%s/engine-objects-workloads" % project]["status"] == "pass"
        # The default ResourceQuota, and a claim past it refused by Kubernetes' quota.
        for row in ("resource-quota", "storage"):
            assert tried["isolation/%s/%s" % (project, row)]["status"] == "pass", tried
    # team-a's interactive work ends within 15 s: an interactive Job without Kueue's limit is refused.
    limited = checks["isolation/team-a/time-limit"]
    assert limited["status"] == "pass" and "time limit of 15 s" in limited["observed"], limited
    assert "isolation/team-b/time-limit" not in checks
    # Kueue has no scheduler of its own to bypass: that attempt is KAI's alone.
    assert not [key for key in checks if key.endswith("/bypass-scheduler")]
    assert checks["isolation/team-c/member"]["status"] == "skip"
    assert checks["isolation/admission-policy"]["status"] == "pass"
    assert "ValidatingAdmissionPolicy" in checks["isolation/team-a/no-queue"]["observed"]

    name = "no-queue-" + uuid.uuid4().hex[:6]
    container = {"name": "c", "image": "registry.k8s.io/pause:3.10"}
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [container]}}},
    }
    batch = client.BatchV1Api(api)
    batch.create_namespaced_job("team-a", job)
    assert wait_for(lambda: batch.read_namespaced_job(name, "team-a").spec.suspend, 30), "Kueue did not take the Job"
    time.sleep(3)
    assert batch.read_namespaced_job(name, "team-a").spec.suspend is True
    assert not [pod for pod in client.CoreV1Api(api).list_namespaced_pod("team-a").items if name in pod.metadata.name]
