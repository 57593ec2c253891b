"""Issue 30: tenants cannot escape their quota, reach each other, or see GPUs they were not given.

The admission policy's CEL is evaluated here by a CEL interpreter (cel-python) the way the API
server evaluates a ValidatingAdmissionPolicy: its variables in order, then each validation, with
``object``, ``namespaceObject`` and ``request`` bound. The same policy runs on the sandbox's real
API server in tests/e2e/test_tenant_isolation.py.
"""

from __future__ import annotations

import copy

import celpy
import pytest
from celpy import celtypes

from ansible_collections.clusterproof.gpu.plugins.module_utils.inventory import schema
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import registry
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import admission, isolation, projects
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import isolation as checks

KAI = registry.backend("kai")
KUEUE = registry.backend("kueue")
ENV = celpy.Environment()


def admit(backend, obj, queue="team-a", username="alice") -> list[str]:
    """The messages of the policy's validations that deny ``obj`` in namespace ``queue`` (none: admitted)."""
    policy = admission.policy_manifests(backend.admission_rules)[0]["spec"]
    activation = {
        "object": celpy.json_to_cel(obj),
        "namespaceObject": celpy.json_to_cel({"metadata": {"labels": {isolation.QUEUE_NAMESPACE_LABEL: queue}}}),
        "request": celpy.json_to_cel({"userInfo": {"username": username}, "operation": "CREATE"}),
    }
    variables: dict = {}
    for variable in policy["variables"]:
        activation["variables"] = celtypes.MapType(variables)
        value = ENV.program(ENV.compile(variable["expression"])).evaluate(activation)
        assert not isinstance(value, celpy.CELEvalError), (variable["name"], value)
        variables[celtypes.StringType(variable["name"])] = value
    activation["variables"] = celtypes.MapType(variables)
    denied = []
    for validation in policy["validations"]:
        verdict = ENV.program(ENV.compile(validation["expression"])).evaluate(activation)
        assert isinstance(verdict, celtypes.BoolType), (validation["expression"], verdict)
        if not verdict:
            denied.append(str(ENV.program(ENV.compile(validation["messageExpression"])).evaluate(activation)))
    return denied


def pod(gpus=1, queue="team-a", scheduler="kai-scheduler", label=None, annotations=None):
    container = {"name": "c", "image": "x"}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    labels = {} if queue is None else {label or KAI.admission_rules.queue_labels[0]: queue}
    spec = {"containers": [container]}
    if scheduler:
        spec["schedulerName"] = scheduler
    metadata = {"name": "p", "namespace": "team-a", "labels": labels, "annotations": annotations or {}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def wrapped(kind, inner, labels=None):
    """A workload of ``kind`` whose pod template is ``inner`` (a pod)."""
    template = {"metadata": inner["metadata"], "spec": inner["spec"]}
    metadata = {"name": "w", "namespace": "team-a", "labels": labels or {}}
    if kind == "CronJob":
        spec = {"jobTemplate": {"metadata": {"labels": labels or {}}, "spec": {"template": template}}}
        return {"apiVersion": "batch/v1", "kind": kind, "metadata": metadata, "spec": spec}
    group = "batch/v1" if kind == "Job" else "apps/v1"
    return {"apiVersion": group, "kind": kind, "metadata": metadata, "spec": {"template": template}}


# --- The policy on KAI -------------------------------------------------------------------------


def test_kai_admits_a_gpu_pod_in_its_own_queue_through_kai_and_one_naming_no_queue():
    assert admit(KAI, pod()) == []
    # No label: KAI takes the queue from the namespace's label, the project's own.
    assert admit(KAI, pod(queue=None)) == []


@pytest.mark.parametrize("label", ["kai.scheduler/queue", "runai/queue"])
def test_kai_refuses_a_pod_charged_to_another_project_s_queue_naming_the_project_and_the_queue(label):
    denied = admit(KAI, pod(queue="team-b", label=label))
    assert len(denied) == 1
    assert denied[0].startswith("project team-a: a workload may be charged only to its own project's queue")
    assert "found team-b" in denied[0]


def test_kai_refuses_another_queue_on_a_cpu_pod_too():
    # CPU and memory quotas are charged the same way: the label is checked whatever the pod asks for.
    assert admit(KAI, pod(gpus=0, queue="team-b"))


@pytest.mark.parametrize("kind", ["Job", "Deployment", "StatefulSet", "ReplicaSet"])
def test_kai_refuses_another_queue_in_a_workload_s_template_or_on_the_workload(kind):
    assert admit(KAI, wrapped(kind, pod(queue="team-b")))
    # On the workload itself (KAI's pod grouper reads its top owner's labels).
    assert admit(KAI, wrapped(kind, pod(), labels={"kai.scheduler/queue": "team-b"}))
    assert admit(KAI, wrapped(kind, pod())) == []


def test_kai_refuses_another_queue_on_a_cron_job_s_job_template():
    assert admit(KAI, wrapped("CronJob", pod(), labels={"kai.scheduler/queue": "team-b"}))
    assert admit(KAI, wrapped("CronJob", pod())) == []


@pytest.mark.parametrize("scheduler", ["default-scheduler", None, "my-scheduler"])
def test_kai_refuses_gpus_outside_the_quota_scheduler(scheduler):
    denied = admit(KAI, pod(scheduler=scheduler))
    assert len(denied) == 1
    assert "must be scheduled by KAI scheduler" in denied[0]
    assert denied[0].endswith(scheduler or "default-scheduler")
    assert admit(KAI, wrapped("Job", pod(scheduler=scheduler)))


def test_kai_lets_a_cpu_pod_use_the_default_scheduler_but_not_a_gpu_fraction():
    assert admit(KAI, pod(gpus=0, scheduler="default-scheduler")) == []
    assert admit(KAI, pod(gpus=0, scheduler="default-scheduler", annotations={"gpu-fraction": "0.5"}))


def test_kai_counts_gpus_asked_for_by_an_init_container_or_as_a_request():
    sneaky = pod(gpus=0, scheduler="default-scheduler")
    sneaky["spec"]["initContainers"] = [{"name": "i", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]
    assert admit(KAI, sneaky)
    requested = pod(gpus=0, scheduler="default-scheduler")
    requested["spec"]["containers"][0]["resources"] = {"requests": {"nvidia.com/gpu": "1"}}
    assert admit(KAI, requested)


# --- The policy on Kueue -----------------------------------------------------------------------

QUEUE_NAME = "kueue.x-k8s.io/queue-name"


def kueue_job(queue="team-a", gpus=1):
    inner = pod(gpus=gpus, queue=None, scheduler=None)
    return wrapped("Job", inner, labels={} if queue is None else {QUEUE_NAME: queue})


def test_kueue_admits_a_gpu_job_in_its_own_local_queue_and_a_cpu_job_without_one():
    assert admit(KUEUE, kueue_job()) == []
    assert admit(KUEUE, kueue_job(queue=None, gpus=0)) == []


def test_kueue_refuses_a_gpu_job_naming_no_queue_or_another_project_s():
    denied = admit(KUEUE, kueue_job(queue=None))
    assert denied == [
        "project team-a: a workload that asks for GPUs must name its project's queue for Kueue "
        "(label kueue.x-k8s.io/queue-name: team-a)"
    ]
    assert "found team-b" in admit(KUEUE, kueue_job(queue="team-b"))[0]


def test_kueue_refuses_gpus_in_a_kind_it_does_not_manage_here():
    denied = admit(KUEUE, wrapped("Deployment", pod(queue=None, scheduler=None), labels={QUEUE_NAME: "team-a"}))
    assert denied == [
        "project team-a: GPUs are given through Kueue, which manages Pod, Job, CronJob here; "
        "a workload that asks for GPUs cannot be a Deployment"
    ]


def test_kueue_admits_a_gpu_pod_only_from_the_cluster_s_controllers():
    bare = pod(queue=None, scheduler=None)
    assert any("not be created directly" in message for message in admit(KUEUE, bare))
    assert admit(KUEUE, bare, username="system:serviceaccount:kube-system:job-controller") == []


# --- Namespaces and NetworkPolicies ------------------------------------------------------------


def test_a_project_namespace_carries_its_queue_and_pod_security_labels():
    namespace = KAI.project_manifests(projects.Project("team-a", 4, 4, pod_security="restricted"))[0]
    labels = namespace["metadata"]["labels"]
    assert labels[isolation.QUEUE_NAMESPACE_LABEL] == "team-a"
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert labels["pod-security.kubernetes.io/warn"] == "restricted"
    assert labels["pod-security.kubernetes.io/enforce-version"] == "latest"


def test_a_project_s_network_policy_lets_in_its_namespace_kube_system_the_engine_and_the_site_s_namespaces():
    project = projects.Project("team-a", 4, 4, ingress_namespaces=("monitoring",))
    policy = [m for m in KUEUE.project_manifests(project) if m["kind"] == "NetworkPolicy"]
    assert len(policy) == 1
    spec = policy[0]["spec"]
    assert spec["podSelector"] == {} and spec["policyTypes"] == ["Ingress"]
    peers = spec["ingress"][0]["from"]
    assert peers[0] == {"podSelector": {}}
    assert peers[1]["namespaceSelector"]["matchExpressions"][0]["values"] == [
        "kube-system",
        "kueue-system",
        "monitoring",
    ]
    assert len(peers) == 2


def test_a_shared_project_is_reached_by_every_project_and_an_unisolated_one_gets_no_policy():
    shared = projects.network_policy_manifest(projects.Project("data", 0, 0, ingress_from_all_projects=True))
    assert {"namespaceSelector": {"matchExpressions": [{"key": projects.PROJECT_LABEL, "operator": "Exists"}]}} in (
        shared["spec"]["ingress"][0]["from"]
    )
    assert projects.network_manifests(projects.Project("team-a", 4, 4, network_isolation=False)) == []


def test_a_quota_tree_leaf_namespace_carries_its_queue_label():
    from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import quota_tree

    namespace = quota_tree.namespace_manifest("ns-1", "leaf-1")
    assert namespace["metadata"]["labels"][isolation.QUEUE_NAMESPACE_LABEL] == "leaf-1"


# --- The inventory ------------------------------------------------------------------------------


SITE = {
    "clusterproof_site_name": "tenancy",
    "clusterproof_projects": [
        {"name": name, "gpu_quota": 4, "users": [name + "-user"]} for name in ("team-a", "team-b")
    ],
}


def declare(tenancy=None, project_extra=None):
    site = copy.deepcopy(SITE)
    if tenancy is not None:
        site["clusterproof_tenancy"] = tenancy
    site["clusterproof_projects"][0].update(project_extra or {})
    hostvars = {"localhost": site, "dgx1-1": {**site, "gpu_count": 8}}
    groups = {"all": list(hostvars), "kube_control_plane": ["localhost"], "gpu_nodes": ["dgx1-1"]}
    return schema.validate_site(groups, hostvars)


def messages(tenancy=None, project_extra=None) -> list[str]:
    return [str(error) for error in declare(tenancy, project_extra)[1]]


def test_the_site_s_tenancy_defaults_to_baseline_and_isolated_namespaces():
    site, errors = declare()
    assert errors == []
    assert {p.pod_security for p in site.projects} == {"baseline"}
    assert all(p.network_isolation and not p.ingress_from_all_projects for p in site.projects)


def test_exceptions_resolve_to_the_named_projects_only():
    first, second = "team-a", "team-b"
    tenancy = {
        "pod_security": "restricted",
        "ingress_namespaces": ["monitoring"],
        "exceptions": [
            {"project": first, "allow": "privileged", "reason": "profiles the nodes"},
            {"project": second, "allow": "shared", "reason": "serves the datasets"},
        ],
    }
    site, errors = declare(tenancy)
    assert errors == []
    by_name = {p.name: p for p in site.projects}
    assert by_name[first].pod_security == "privileged"
    assert by_name[second].pod_security == "restricted" and by_name[second].ingress_from_all_projects
    assert all(p.ingress_namespaces == ["monitoring"] for p in site.projects)
    assert site.tenancy.allows(first, "privileged").reason == "profiles the nodes"


@pytest.mark.parametrize(
    "tenancy, expected",
    [
        (
            {"exceptions": [{"project": "nobody", "allow": "privileged", "reason": "x"}]},
            "clusterproof_tenancy.exceptions[0]: project: expected a declared project (",
        ),
        (
            {"exceptions": [{"project": "team-a", "allow": "root", "reason": "x"}]},
            "clusterproof_tenancy.exceptions[0]: allow: expected one of privileged, shared, found 'root'",
        ),
        (
            {"exceptions": [{"project": "team-a", "allow": "shared"}]},
            "clusterproof_tenancy.exceptions[0]: reason: expected why the site allows it (a sentence), found nothing",
        ),
        (
            {"pod_security": "privileged"},
            "group all: clusterproof_tenancy.pod_security: expected one of restricted, baseline (privileged only as "
            "a declared exception), found 'privileged'",
        ),
        (
            {"network_isolation": "maybe"},
            "clusterproof_tenancy.network_isolation: expected true or false, found 'maybe'",
        ),
        ({"ingress_namespaces": ["Not A Name"]}, "clusterproof_tenancy.ingress_namespaces: expected a list of"),
        ({"egress": True}, "clusterproof_tenancy.egress: expected one of pod_security"),
        ("baseline", "group all: clusterproof_tenancy: expected a mapping of pod_security"),
    ],
)
def test_bad_tenancy_is_refused_naming_the_field(tenancy, expected):
    found = messages(tenancy)
    assert any(expected in message for message in found), found


def test_a_project_cannot_declare_itself_privileged():
    found = messages(project_extra={"pod_security": "privileged"})
    assert any("pod_security: expected one of restricted, baseline" in message for message in found), found
    site, errors = declare(project_extra={"pod_security": "restricted"})
    assert errors == [] and site.projects[0].pod_security == "restricted"


# --- Judging the attempts -----------------------------------------------------------------------

SETTINGS = isolation.TenancySettings()
ALICE = checks.Member("alice")


def by_key(attempts):
    return {attempt.key: attempt for attempt in attempts}


def test_the_attempts_follow_the_engine():
    # Every engine's: the control, a queue not one's own, the pod boundary, another namespace.
    common = {"own-queue", "other-queue", "privileged-pod", "host-network-pod", "other-namespace"}
    kai = by_key(checks.attempts("team-a", "team-b", KAI.admission_rules, SETTINGS))
    assert set(kai) == common | {"bypass-scheduler"}
    kueue = by_key(checks.attempts("team-a", "team-b", KUEUE.admission_rules, SETTINGS))
    assert set(kueue) == common | {"no-queue", "bare-gpu-pod"}
    assert kueue["own-queue"].manifest["kind"] == "Job" and kai["own-queue"].manifest["kind"] == "Pod"
    assert kai["other-namespace"].namespace == "team-b"
    # With one project there is no other namespace to try.
    assert "other-namespace" not in by_key(checks.attempts("team-a", None, KAI.admission_rules, SETTINGS))


def test_each_attempt_s_own_policy_verdict_is_what_the_attempt_expects():
    """The attempts the validator sends, through the policy's CEL: the control is admitted, each
    escape the policy guards is refused (the others are refused by Pod Security or RBAC)."""
    for backend in (KAI, KUEUE):
        for attempt in checks.attempts("team-a", "team-b", backend.admission_rules, SETTINGS):
            denied = admit(backend, attempt.manifest, queue=attempt.namespace)
            assert bool(denied) == (attempt.refused_by == checks.BY_POLICY), (backend.name, attempt.key, denied)


def test_an_escape_that_is_admitted_fails_as_a_security_check_with_what_to_do():
    attempt = by_key(checks.attempts("team-a", "team-b", KAI.admission_rules, SETTINGS))["other-queue"]
    check = checks.judge(attempt, ALICE, checks.Outcome(True))
    assert check.status == "fail" and check.category == "security"
    assert check.id == "isolation/team-a/other-queue"
    assert "clusterproof-project-quota" in check.action
    assert check.message.startswith("as alice: the API server admitted it")


def test_an_escape_refused_by_another_guard_than_the_one_tested_fails():
    attempt = by_key(checks.attempts("team-a", "team-b", KAI.admission_rules, SETTINGS))["bypass-scheduler"]
    refused_by_rbac = checks.Outcome(False, 403, 'pods is forbidden: User "alice" cannot create resource "pods"')
    assert checks.judge(attempt, ALICE, refused_by_rbac).status == "fail"
    by_policy = checks.Outcome(False, 403, "ValidatingAdmissionPolicy 'clusterproof-project-quota' with binding denied")
    assert checks.judge(attempt, ALICE, by_policy).status == "pass"


def test_the_project_s_own_work_refused_fails_as_configuration():
    attempt = by_key(checks.attempts("team-a", "team-b", KAI.admission_rules, SETTINGS))["own-queue"]
    check = checks.judge(attempt, ALICE, checks.Outcome(False, 403, "cannot create resource"))
    assert check.status == "fail" and check.category == "configuration"
    assert checks.judge(attempt, ALICE, checks.Outcome(True)).status == "pass"


def test_a_declared_privileged_exception_expects_admission_and_says_why():
    settings = isolation.TenancySettings(
        exceptions=(isolation.IsolationException("team-a", "privileged", "profiling"),)
    )
    attempt = by_key(checks.attempts("team-a", "team-b", KAI.admission_rules, settings))["privileged-pod"]
    assert not attempt.expect_refused
    check = checks.judge(attempt, ALICE, checks.Outcome(True))
    assert check.status == "pass" and "declared exception privileged: profiling" in check.message
    table = checks.section([check], settings)["tables"][0]
    assert table["rows"] == [["team-a", isolation.EXCEPTIONS["privileged"], "profiling"]]


def test_a_member_is_a_user_or_a_stand_in_in_a_group():
    assert checks.member_of({"name": "a", "users": ["alice"], "groups": ["g"]}) == checks.Member("alice")
    assert checks.member_of({"name": "d", "users": [], "groups": ["team-d"]}).groups == ("team-d",)
    assert checks.member_of({"name": "e"}) is None


def test_the_policy_and_network_policy_checks_fail_when_missing_or_changed():
    wanted = admission.policy_manifests(KAI.admission_rules)
    assert checks.policy_check(wanted, [copy.deepcopy(m) for m in wanted]).status == "pass"
    assert checks.policy_check(wanted, [None, wanted[1]]).observed == "ValidatingAdmissionPolicy missing"
    loosened = copy.deepcopy(wanted[1])
    loosened["spec"]["validationActions"] = ["Audit"]
    assert checks.policy_check(wanted, [wanted[0], loosened]).status == "fail"
    network = projects.network_policy_manifest(projects.Project("team-a", 1, 1), "kai-scheduler")
    assert checks.network_policy_check("team-a", network, None).status == "fail"
    opened = copy.deepcopy(network)
    opened["spec"]["ingress"] = [{}]
    failed = checks.network_policy_check("team-a", network, opened)
    assert failed.status == "fail" and failed.category == "security"
    assert checks.network_policy_check("team-a", network, network).status == "pass"


# --- a connection between projects, with real pods ------------------------------------------------


def test_the_reach_probe_s_pods_pass_restricted_pod_security_and_stay_on_real_ready_nodes():
    server, service = checks.reach_server("team-b", "busybox:1.36", ["w-1", "w-2"])
    client = checks.reach_client("team-a", "team-b", "busybox:1.36", ["w-1"])
    for pod in (server, client):
        spec = pod["spec"]
        assert spec["securityContext"] == checks.RESTRICTED_POD_SECURITY
        assert spec["containers"][0]["securityContext"] == checks.RESTRICTED_CONTAINER_SECURITY
        assert "hostNetwork" not in spec and "schedulerName" not in spec
        (term,) = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ]
        assert {"key": "clusterproof.io/sandbox-node", "operator": "DoesNotExist"} in term["matchExpressions"]
        assert pod["metadata"]["labels"][checks.REACH_LABEL] == checks.REACH_LABEL_VALUE
    assert server["spec"]["containers"][0]["command"][:3] == ["/bin/busybox", "httpd", "-f"]
    assert service["spec"]["selector"] == {"app.kubernetes.io/name": checks.REACH_SERVER}
    assert server["metadata"]["labels"]["app.kubernetes.io/name"] == checks.REACH_SERVER
    assert client["metadata"]["namespace"] == "team-a"
    script = client["spec"]["containers"][0]["command"][-1]
    # By the Service's DNS name, so that DNS is tried too; a few tries, each with a connect timeout.
    assert "nc -w 3 clusterproof-reach.team-b.svc 8080" in script and "for try in 1 2 3 4" in script


def _client(phase: str, message: str = "", waiting: str = "") -> dict:
    state = {"terminated": {"message": message, "reason": "Error"}} if phase in ("Succeeded", "Failed") else {}
    if waiting:
        state = {"waiting": {"reason": waiting}}
    return {"status": {"phase": phase, "containerStatuses": [{"state": state}]}}


def test_a_client_pod_read_back_says_connected_refused_or_why_it_is_unknown():
    assert checks.connection_of(_client("Succeeded")).connected is True
    refused = checks.connection_of(_client("Failed", "nc: timed out\n"))
    assert refused == checks.Connection(False, "nc: timed out")
    assert checks.connection_of(_client("Pending", waiting="ErrImagePull")) == checks.Connection(
        None, "still Pending (ErrImagePull)"
    )
    assert checks.connection_of(None).connected is None


def test_reach_check_passes_only_when_the_project_s_own_pod_connects_and_the_other_s_is_refused():
    connected, refused = checks.Connection(True), checks.Connection(False, "nc: timed out")
    passed = checks.reach_check("team-b", True, checks.Reach(connected, "team-a", refused))
    assert passed.status == "pass" and passed.category == "security"
    assert passed.observed == {"from team-b (its own)": "connected", "from team-a": "refused (nc: timed out)"}
    # Reached: the policy is there but nothing holds it.
    walked = checks.reach_check("team-b", True, checks.Reach(connected, "team-a", connected))
    assert walked.status == "warn" and "a pod of team-a opened a connection to team-b's Service" in walked.message
    assert "enforcer" in walked.action
    # The control failed: a refusal from team-a proves nothing.
    broken = checks.reach_check(
        "team-b", True, checks.Reach(checks.Connection(False, "nc: bad address"), "team-a", refused)
    )
    assert broken.status == "fail" and "team-b's own pod could not reach its Service" in broken.message
    assert "nc: bad address" in broken.message and "DNS" in broken.action
    unknown = checks.reach_check(
        "team-b", True, checks.Reach(connected, "team-a", checks.Connection(None, "still Pending"))
    )
    assert unknown.status == "fail" and "did not finish: still Pending" in unknown.message
    assert checks.reach_check("team-b", False).status == "skip"
    assert checks.reach_check("team-b", True).status == "skip"
