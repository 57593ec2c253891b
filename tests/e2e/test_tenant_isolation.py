"""Issue 30 on the sandbox's real API server and KAI: a member of team-a cannot charge team-b's
quota, bypass the quota scheduler, run a privileged pod or create anything in team-b's namespace;
the validator tries each escape as that member and reports it, passing with the policies installed
and failing with the reason when one is removed."""

from __future__ import annotations

import copy
import uuid

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import registry
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import (
    admission,
    isolation,
    projects,
    resource_quota,
    threats,
)

from .conftest import REPO, ansible_module, module_result, run_playbook, wait_for

pytestmark = pytest.mark.sandbox
PROJECTS = yaml.safe_load((REPO / "inventories/sandbox/group_vars/all/projects.yml").read_text())[
    "clusterproof_projects"
]


@pytest.fixture
def as_alice(sandbox, kai_site):
    """An API client that acts as alice, team-a's member (impersonated, as ``kubectl --as alice``)."""
    api = config.new_client_from_config(config_file=str(sandbox.kubeconfig))
    api.set_default_header("Impersonate-User", "alice")
    yield api
    api.close()


def gpu_pod(namespace: str, queue: str | None, scheduler: str = "kai-scheduler", gpus: int = 1, **spec) -> dict:
    labels = {} if queue is None else {"kai.scheduler/queue": queue}
    container = {"name": "c", "image": "registry.k8s.io/pause:3.10"}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "escape-" + uuid.uuid4().hex[:6], "namespace": namespace, "labels": labels},
        "spec": {"schedulerName": scheduler, "containers": [container], **spec},
    }


def refusal(api, manifest: dict) -> str:
    """Create ``manifest`` for real (no dry run) and return the API server's refusal message."""
    with pytest.raises(ApiException) as refused:
        client.CoreV1Api(api).create_namespaced_pod(manifest["metadata"]["namespace"], manifest)
    assert refused.value.status == 403, refused.value.body
    return str(yaml.safe_load(refused.value.body)["message"])


def test_a_member_of_team_a_cannot_escape_team_a_s_quota_or_namespace(as_alice, api_client):
    # team-b's queue, from team-a: KAI would charge team-b (the first hole).
    message = refusal(as_alice, gpu_pod("team-a", "team-b"))
    assert "ValidatingAdmissionPolicy '%s'" % admission.POLICY_NAME in message
    assert "project team-a: a workload may be charged only to its own project's queue" in message
    assert "found team-b" in message
    # 4 GPUs on the default scheduler: outside every quota (the second hole).
    message = refusal(as_alice, gpu_pod("team-a", None, scheduler="default-scheduler", gpus=4))
    assert "must be scheduled by KAI scheduler" in message and message.endswith("found default-scheduler")
    # A privileged host-network pod: Pod Security baseline refuses it (the third hole).
    message = refusal(
        as_alice,
        gpu_pod(
            "team-a",
            "team-a",
            gpus=0,
            hostNetwork=True,
            containers=[{"name": "c", "image": "x", "securityContext": {"privileged": True}}],
        ),
    )
    assert 'violates PodSecurity "baseline:latest"' in message and "privileged" in message
    # team-b's namespace: RBAC.
    assert 'cannot create resource "pods"' in refusal(as_alice, gpu_pod("team-b", "team-b"))
    # Storage past team-a's ceiling (10Ti by default): Kubernetes' ResourceQuota, for real.
    claim = {
        "metadata": {"name": "escape-claim"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "11Ti"}}},
    }
    with pytest.raises(ApiException) as refused:
        client.CoreV1Api(as_alice).create_namespaced_persistent_volume_claim("team-a", claim)
    assert refused.value.status == 403, refused.value.body
    assert "exceeded quota: %s" % resource_quota.NAME in refused.value.body
    # What team-a may do it still can: a GPU pod in its own queue through KAI.
    own = gpu_pod("team-a", "team-a")
    client.CoreV1Api(as_alice).create_namespaced_pod("team-a", own)
    client.CoreV1Api(api_client).delete_namespaced_pod(own["metadata"]["name"], "team-a", grace_period_seconds=0)


def gpu_nodes(api_client) -> list[str]:
    nodes = client.CoreV1Api(api_client).list_node().items
    return sorted(node.metadata.name for node in nodes if int((node.status.allocatable or {}).get("nvidia.com/gpu", 0)))


def escape_pod(node: str, gpus: int = 8) -> dict:
    """What a member of team-a did before the node-name rule: bind its own non-preemptible pod."""
    return gpu_pod("team-a", "team-a", gpus=gpus, nodeName=node, priorityClassName="build")


def test_a_member_cannot_hold_gpus_past_its_quota_that_kai_cannot_take_back(as_alice, api_client):
    """Issue 45's escape, as alice (team-a, quota 4 of 16): pods that name their node, or a priority
    KAI does not give, are refused by the policy naming the field; non-preemptible work through KAI
    stops at the quota (KAI's own rule), and what KAI placed is taken back no further."""
    for node in gpu_nodes(api_client)[:2]:
        message = refusal(as_alice, escape_pod(node))
        assert "project team-a: where a pod runs is the quota scheduler's decision" in message
        assert message.endswith("spec.nodeName must not be set, found %s" % node)
    message = refusal(as_alice, gpu_pod("team-a", "team-a", priorityClassName="system-node-critical"))
    assert "spec.priorityClassName must be one of the site's" in message
    message = refusal(
        as_alice,
        gpu_pod(
            "team-a",
            None,
            gpus=0,
            containers=[{"name": "c", "image": "x", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}],
        ),
    )
    assert "a container must not set NVIDIA_VISIBLE_DEVICES" in message
    # team-a's interactive sessions end after 8 hours: a build pod that would not end is refused.
    limit = next(data for data in PROJECTS if data["name"] == "team-a")["interactive_time_limit_seconds"]
    for deadline in ({}, {"activeDeadlineSeconds": limit + 1}):
        message = refusal(as_alice, gpu_pod("team-a", "team-a", priorityClassName="build", **deadline))
        assert "interactive GPU work ends within its time limit of %d s" % limit in message, message

    core = client.CoreV1Api(api_client)
    made = [gpu_pod("team-a", "team-a", priorityClassName="build", activeDeadlineSeconds=limit) for _ in range(6)]
    try:
        for manifest in made:
            client.CoreV1Api(as_alice).create_namespaced_pod("team-a", manifest)

        def bound() -> list[str]:
            pods = [core.read_namespaced_pod(m["metadata"]["name"], "team-a") for m in made]
            return [pod.metadata.name for pod in pods if pod.spec.node_name]

        assert wait_for(lambda: len(bound()) >= 4, 60), "KAI placed %s of team-a's in-quota build pods" % bound()
        # KAI's cycle is about a second: ten seconds on, the pods past the quota still wait.
        assert not wait_for(lambda: len(bound()) > 4, 10), (
            "KAI placed non-preemptible pods past the quota: %s" % bound()
        )
    finally:
        for manifest in made:
            core.delete_namespaced_pod(manifest["metadata"]["name"], "team-a", grace_period_seconds=0)


def validate(sandbox, scheduler: str = "kai") -> dict:
    done = ansible_module(
        "clusterproof.gpu.validate_isolation", {"projects": PROJECTS, "scheduler": scheduler}, sandbox
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return {check["id"]: check for check in module_result(done)["section"]["checks"]}


def test_the_validator_passes_with_the_policies_and_names_what_fails_when_one_is_gone(
    sandbox, kai_site, api_client, as_alice
):
    checks = validate(sandbox)
    statuses = {check_id: check["status"] for check_id, check in checks.items()}
    # Every project has a member (team-d through its group): each escape is tried for each.
    for project in ("team-a", "team-b", "team-c", "team-d"):
        for attempt in ("own-queue", "other-queue", "bypass-scheduler", "privileged-pod", "host-network-pod"):
            assert statuses["isolation/%s/%s" % (project, attempt)] == "pass", checks[
                "isolation/%s/%s" % (project, attempt)
            ]
        # Every row of the threat model that has an attempt, tried as the member: none gets through.
        tried = {key: check for key, check in checks.items() if key.startswith("isolation/%s/" % project)}
        assert not {key: check["message"] for key, check in tried.items() if check["status"] == "fail"}
        declared = next(data for data in PROJECTS if data["name"] == project)
        interactive_nodes = (declared.get("node_affinity") or {}).get("interactive")
        time_limit = declared.get("interactive_time_limit_seconds")
        ceilings = projects.Project.from_dict(declared).resource_quota
        for row in threats.applicable(registry.backend("kai").admission_rules):
            if row.probe is None or (row.probe.interactive and not interactive_nodes):
                continue
            if (row.probe.time_limited and not time_limit) or row.probe.past_ceiling not in (None, *ceilings):
                continue
            assert any(key.startswith("isolation/%s/%s" % (project, row.key)) for key in tried), row.key
        # The node-affinity attempt where the project declares nodes for its interactive work, the
        # time-limit one where it declares an interactive time limit (team-a).
        assert ("isolation/%s/node-affinity" % project in tried) == bool(interactive_nodes)
        assert ("isolation/%s/time-limit" % project in tried) == bool(time_limit)
        assert statuses["isolation/%s/held-past-quota" % project] == "pass"
        assert statuses["isolation/%s/other-namespace" % project] == "pass"
        assert statuses["isolation/%s/network-policy" % project] == "pass"
        assert statuses["isolation/%s/network-reach" % project] == "skip"
        # Its ResourceQuota, the defaults: a claim past its storage is refused by Kubernetes' quota.
        assert statuses["isolation/%s/resource-quota" % project] == "pass"
        assert "exceeded quota: %s" % resource_quota.NAME in checks["isolation/%s/storage" % project]["observed"]
    assert statuses["isolation/admission-policy"] == "pass"
    assert statuses["isolation/gpu-visibility"] == "needs-hardware"
    assert "(group team-d-researchers)" in checks["isolation/team-d/own-queue"]["message"]

    registration = client.AdmissionregistrationV1Api(api_client)
    core = client.CoreV1Api(api_client)
    namespace = core.read_namespace("team-a")
    quota = core.read_namespaced_resource_quota(resource_quota.NAME, "team-a")
    assert quota.spec.hard == resource_quota.DEFAULT_HARD
    escapes: list[str] = []
    try:
        # The policy's binding gone, and team-a's namespace without Pod Security: the escapes get in.
        registration.delete_validating_admission_policy_binding(admission.POLICY_NAME)
        labels = {key: None for key in namespace.metadata.labels if key.startswith(isolation.POD_SECURITY_PREFIX)}
        core.patch_namespace("team-a", {"metadata": {"labels": labels}})
        core.delete_namespaced_resource_quota(resource_quota.NAME, "team-a")
        # Without the binding the escape gets in: alice's own pods on two nodes, all 16 GPUs.
        for node in gpu_nodes(api_client)[:2]:
            escaped = escape_pod(node)

            def admitted(manifest: dict = escaped) -> bool:
                # The API server drops the binding from its policy cache a moment after the delete.
                try:
                    client.CoreV1Api(as_alice).create_namespaced_pod("team-a", manifest)
                except ApiException as refused:
                    assert refused.status == 403, refused.body
                    return False
                return True

            assert wait_for(admitted, 30), "the escape was still refused 30 s after the binding was deleted"
            escapes.append(escaped["metadata"]["name"])
        broken = validate(sandbox)
        held = broken["isolation/team-a/held-past-quota"]
        assert held["status"] == "fail" and held["category"] == "security", held
        assert held["observed"] == "16 GPUs in 2 non-preemptible pods"
        assert "holds 16 GPUs that KAI scheduler will never take back, past its quota of 4" in held["message"]
        assert broken["isolation/team-a/node-name"]["status"] == "fail"
        policy = broken["isolation/admission-policy"]
        assert policy["status"] == "fail"
        assert policy["observed"] == "ValidatingAdmissionPolicyBinding/%s missing" % admission.POLICY_NAME
        for attempt in ("other-queue", "bypass-scheduler"):
            check = broken["isolation/team-b/%s" % attempt]
            assert check["status"] == "fail" and check["category"] == "security", check
            assert check["message"] == "as bob: the API server admitted it (dry run): a tenant can do this"
            assert admission.POLICY_NAME in check["action"]
        privileged = broken["isolation/team-a/privileged-pod"]
        assert privileged["status"] == "fail" and "Pod Security" in privileged["action"]
        # Pod Security still holds team-b: only team-a's namespace lost its labels.
        assert broken["isolation/team-b/privileged-pod"]["status"] == "pass"
        assert broken["isolation/team-a/own-queue"]["status"] == "pass"
        # team-a's ResourceQuota gone: the check says so, and alice's 10 TiB claim would be admitted.
        gone = broken["isolation/team-a/resource-quota"]
        assert gone["status"] == "fail" and gone["observed"] == "ResourceQuota/%s missing" % resource_quota.NAME
        assert broken["isolation/team-a/storage"]["status"] == "fail"
        assert broken["isolation/team-b/storage"]["status"] == "pass"
    finally:
        for name in escapes:
            core.delete_namespaced_pod(name, "team-a", grace_period_seconds=0)
        restored = ansible_module("clusterproof.gpu.tenant_admission", {}, sandbox)
        core.patch_namespace("team-a", {"metadata": {"labels": namespace.metadata.labels}})
        if not core.list_namespaced_resource_quota("team-a").items:
            body = {
                "metadata": {"name": quota.metadata.name, "labels": quota.metadata.labels},
                "spec": {"hard": quota.spec.hard},
            }
            core.create_namespaced_resource_quota("team-a", body)
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert module_result(restored)["changed_objects"] == ["ValidatingAdmissionPolicyBinding/%s" % admission.POLICY_NAME]
    again = ansible_module("clusterproof.gpu.tenant_admission", {}, sandbox)
    assert module_result(again)["changed"] is False
    assert all(check["status"] != "fail" for check in validate(sandbox).values())


def test_a_declared_exception_is_admitted_and_shown_as_one(sandbox, kai_site, api_client):
    core = client.CoreV1Api(api_client)
    namespace = core.read_namespace("team-c")
    projects = copy.deepcopy(PROJECTS)
    tenancy = {"exceptions": [{"project": "team-c", "allow": "privileged", "reason": "profiles the GPUs"}]}
    try:
        core.patch_namespace("team-c", {"metadata": {"labels": isolation.namespace_security_labels("privileged")}})
        done = ansible_module(
            "clusterproof.gpu.validate_isolation", {"projects": projects, "tenancy": tenancy}, sandbox
        )
        assert done.returncode == 0, done.stdout + done.stderr
        section = module_result(done)["section"]
    finally:
        core.patch_namespace("team-c", {"metadata": {"labels": namespace.metadata.labels}})
    checks = {check["id"]: check for check in section["checks"]}
    privileged = checks["isolation/team-c/privileged-pod"]
    assert privileged["status"] == "pass" and privileged["expected"] == "admitted"
    assert "declared exception privileged: profiles the GPUs" in privileged["message"]
    assert checks["isolation/team-a/privileged-pod"]["expected"].startswith("refused")
    tables = {table["id"]: table for table in section["tables"]}
    assert tables["isolation/exceptions"]["rows"] == [
        ["team-c", isolation.EXCEPTIONS["privileged"], "profiles the GPUs"]
    ]


def test_a_rerun_changes_nothing_and_removing_a_project_removes_its_boundary(sandbox, kai_site, api_client):
    again = run_playbook("playbooks/scheduler.yml", *sandbox.vars())
    assert again.returncode == 0 and again.recap()["changed"] == 0, again.changed_tasks()
    name = "e2e-" + uuid.uuid4().hex[:6]
    made = ansible_module("clusterproof.gpu.gpu_project", {"name": name, "gpu_quota": 1, "users": ["xavier"]}, sandbox)
    assert made.returncode == 0, made.stdout + made.stderr
    assert "NetworkPolicy/%s" % isolation.NETWORK_POLICY_NAME in module_result(made)["changed_objects"]
    networking = client.NetworkingV1Api(api_client)
    assert networking.read_namespaced_network_policy(isolation.NETWORK_POLICY_NAME, name)
    labels = client.CoreV1Api(api_client).read_namespace(name).metadata.labels
    assert labels[isolation.QUEUE_NAMESPACE_LABEL] == name
    assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
    removed = ansible_module("clusterproof.gpu.gpu_project", {"name": name, "state": "absent"}, sandbox)
    assert removed.returncode == 0, removed.stdout + removed.stderr

    def policy_gone() -> bool:
        return not networking.list_namespaced_network_policy(name).items

    assert wait_for(policy_gone, 60), "the removed project's NetworkPolicy is still there"
