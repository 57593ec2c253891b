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
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import registry
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import admission, isolation, projects, threats
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import isolation as checks

KAI = registry.backend("kai")
KUEUE = registry.backend("kueue")
ENV = celpy.Environment()


WORKLOAD_KINDS = {"Pod", "Job", "CronJob", "Deployment", "StatefulSet", "ReplicaSet"}


def admit(
    backend, obj, queue="team-a", username="alice", groups=(), operation="CREATE", old=None, annotations=None
) -> list[str]:
    """The messages of the validations that deny ``obj`` in namespace ``queue`` (none: admitted), of
    the policy that matches its kind (the workloads' or the other objects')."""
    manifests = admission.policy_manifests(backend.admission_rules)
    policy = manifests[0 if obj["kind"] in WORKLOAD_KINDS else 2]["spec"]
    activation = {
        "object": celpy.json_to_cel(obj),
        "namespaceObject": celpy.json_to_cel(
            {"metadata": {"labels": {isolation.QUEUE_NAMESPACE_LABEL: queue}, "annotations": annotations or {}}}
        ),
        "request": celpy.json_to_cel(
            {"userInfo": {"username": username, "groups": list(groups)}, "operation": operation}
        ),
        "oldObject": celpy.json_to_cel(old),
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
    common = {"own-queue", "other-queue", "privileged-pod", "host-network-pod", "other-namespace", "node-name"}
    kai = by_key(checks.attempts("team-a", "team-b", KAI.admission_rules, SETTINGS))
    assert common | {"bypass-scheduler", "fraction-annotation", "engine-objects-podgroups"} <= set(kai)
    assert not {"no-queue", "bare-gpu-pod", "gpu-deployment"} & set(kai)
    kueue = by_key(checks.attempts("team-a", "team-b", KUEUE.admission_rules, SETTINGS))
    assert common | {"no-queue", "bare-gpu-pod", "gpu-deployment", "engine-objects-workloads"} <= set(kueue)
    assert not {"bypass-scheduler", "fraction-annotation"} & set(kueue)
    assert kueue["own-queue"].manifest["kind"] == "Job" and kai["own-queue"].manifest["kind"] == "Pod"
    assert kai["other-namespace"].namespace == "team-b"
    # With one project there is no other namespace to try.
    assert "other-namespace" not in by_key(checks.attempts("team-a", None, KAI.admission_rules, SETTINGS))


def test_each_attempt_s_own_policy_verdict_is_what_the_attempt_expects():
    """The attempts the validator sends, through the policies' CEL: the control is admitted, each
    escape a policy guards is refused by that policy (the others are refused by Pod Security or RBAC,
    so the policies must let them through for the right guard to answer)."""
    declared = {projects.INTERACTIVE_NODES_ANNOTATION: "dgx1-2"}
    for backend in (KAI, KUEUE):
        for attempt in checks.attempts("team-a", "team-b", backend.admission_rules, SETTINGS, ("dgx1-2",)):
            if attempt.manifest["kind"] == "SubjectAccessReview":
                assert attempt.refused_by == checks.BY_ACCESS
                continue
            if attempt.resume:
                # The validator makes the held Job; the member's change is what the policy judges.
                assert admit(backend, attempt.manifest, username="clusterproof-admin", groups=["system:masters"]) == []
                denied = admit(backend, resumed(attempt.manifest), operation="UPDATE", old=attempt.manifest)
                assert len(denied) == 1 and "spec.suspend may be set false by Kueue alone" in denied[0], denied
                continue
            denied = admit(backend, attempt.manifest, queue=attempt.namespace, annotations=declared)
            by_a_policy = attempt.refused_by in (checks.BY_POLICY, checks.BY_OBJECTS_POLICY)
            assert bool(denied) == by_a_policy, (backend.name, attempt.key, denied)
            assert all(message.startswith("project %s: " % attempt.namespace) for message in denied)


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
    table = checks.section([check], settings, KAI.admission_rules)["tables"][1]
    assert table["rows"] == [["team-a", isolation.EXCEPTIONS["privileged"], "profiling"]]


def test_a_member_is_a_user_or_a_stand_in_in_a_group():
    assert checks.member_of({"name": "a", "users": ["alice"], "groups": ["g"]}) == checks.Member("alice")
    assert checks.member_of({"name": "d", "users": [], "groups": ["team-d"]}).groups == ("team-d",)
    assert checks.member_of({"name": "e"}) is None


def test_the_policy_and_network_policy_checks_fail_when_missing_or_changed():
    wanted = admission.policy_manifests(KAI.admission_rules)
    assert checks.policy_check(wanted, [copy.deepcopy(m) for m in wanted]).status == "pass"
    missing = checks.policy_check(wanted, [None, *wanted[1:]])
    assert missing.observed == "ValidatingAdmissionPolicy/%s missing" % admission.POLICY_NAME
    loosened = copy.deepcopy(wanted[3])
    loosened["spec"]["validationActions"] = ["Audit"]
    changed = checks.policy_check(wanted, [*wanted[:3], loosened, *wanted[4:]])
    assert changed.status == "fail"
    assert changed.observed == "ValidatingAdmissionPolicyBinding/%s changed" % admission.OBJECTS_POLICY_NAME
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


# --- The threat model (issue 45): every row has its guard, and every refusable row its attempt ---


def test_every_row_of_the_threat_model_is_complete_and_each_refusable_one_is_tried_on_each_engine():
    keys = [threat.key for threat in threats.THREATS]
    assert len(keys) == len(set(keys))
    for threat in threats.THREATS:
        assert threat.harm in threats.HARMS and threat.guard in threats.GUARDS, threat.key
        assert threat.surface and threat.could and threat.rule, threat.key
        # A guard that refuses is tried by a probe, unless a check tries it; a row nobody refuses has none.
        assert (threat.probe is not None) == (threat.guard in threats.PROBED and not threat.tried_by), threat.key
        assert threat.probe is not None or threat.tried_by or threat.guard not in threats.PROBED, threat.key
    ceilings = {"requests.cpu": "64", "requests.storage": "10Ti"}
    for backend in (KAI, KUEUE):
        tried = checks.attempts("team-a", "team-b", backend.admission_rules, SETTINGS, ("dgx1-2",), 3600, ceilings)
        # Each is a kind the validator can send as the member.
        assert {attempt.manifest["kind"] for attempt in tried} <= {*kube.CREATABLE_AS, "SubjectAccessReview"}
        tried = {attempt.key for attempt in tried}
        for threat in threats.applicable(backend.admission_rules):
            if threat.probe is not None:
                assert any(key == threat.key or key.startswith(threat.key + "-") for key in tried), threat.key


def test_the_threat_model_in_docs_tenancy_md_is_the_table_the_validator_tries():
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[4] / "docs/tenancy.md").read_text()
    assert threats.markdown({"KAI": KAI.admission_rules, "Kueue": KUEUE.admission_rules}) in docs


def test_the_report_shows_every_row_with_how_it_was_tried():
    table = checks.section([], SETTINGS, KAI.admission_rules)["tables"][0]
    assert table["id"] == "isolation/threat-model"
    rows = {row[0]: row for row in table["rows"]}
    assert rows["node-name"][4] == "attempt isolation/<project>/node-name"
    assert rows["image-env"][4] == "attempt isolation/<project>/image-env"
    assert rows["runtime-visibility"][4] == "needs hardware: isolation/gpu-visibility"
    assert rows["network-reach"][4] == "check isolation/<project>/network-reach"
    assert rows["non-preemptible"][4] == "check isolation/<project>/held-past-quota"
    assert rows["pod-count"][4] == "check isolation/<project>/resource-quota"
    assert rows["storage"][4] == (
        "attempt isolation/<project>/storage (where the project's ResourceQuota holds requests.storage)"
    )
    assert rows["time-limit"][4].endswith("(where the project declares an interactive time limit)")
    assert [status for status in table["row_status"] if status] == ["warn"] * sum(
        1 for threat in threats.applicable(KAI.admission_rules) if threat.guard == threats.OPEN
    )
    assert "no-queue" not in rows  # Kueue's row


@pytest.mark.parametrize("backend", [KAI, KUEUE], ids=["kai", "kueue"])
def test_a_pod_that_names_its_own_node_is_refused_but_a_bound_pod_may_be_updated(backend):
    bound = pod(scheduler=backend.admission_rules.scheduler_name or "default-scheduler", gpus=0)
    bound["spec"]["nodeName"] = "node-1"
    denied = admit(backend, bound)
    assert len(denied) == 1 and "spec.nodeName must not be set, found node-1" in denied[0]
    # A scheduler binds through pods/binding; later updates (KAI's pod grouper labels it) carry the node.
    assert admit(backend, bound, operation="UPDATE") == []
    assert admit(backend, wrapped("Job", bound), operation="UPDATE")


def test_kai_admits_its_own_priority_classes_only():
    for name in ("train", "build-preemptible", "build", "inference"):
        classed = pod()
        classed["spec"]["priorityClassName"] = name
        assert admit(KAI, classed) == [], name
        assert admit(KAI, pod(label="priorityClassName", queue=name)) == [], name
    critical = pod()
    critical["spec"]["priorityClassName"] = "system-node-critical"
    denied = admit(KAI, critical)
    assert len(denied) == 1 and denied[0].endswith(
        "one of the site's (train, build-preemptible, build, inference), found system-node-critical"
    )
    labelled = pod()
    labelled["metadata"]["labels"]["priorityClassName"] = "system-cluster-critical"
    assert "found priorityClassName=system-cluster-critical" in admit(KAI, labelled)[0]


def test_kueue_pods_name_no_priority_class_and_only_the_site_s_workload_priorities():
    job = kueue_job()
    job["spec"]["template"]["spec"]["priorityClassName"] = "train"
    assert "found train" in admit(KUEUE, job)[0]
    for value in ("clusterproof-training", "clusterproof-interactive"):
        assert (
            admit(
                KUEUE,
                wrapped(
                    "Job",
                    pod(queue=None, scheduler=None),
                    labels={QUEUE_NAME: "team-a", "kueue.x-k8s.io/priority-class": value},
                ),
            )
            == []
        )
    high = wrapped(
        "Job", pod(queue=None, scheduler=None), labels={QUEUE_NAME: "team-a", "kueue.x-k8s.io/priority-class": "urgent"}
    )
    assert "found kueue.x-k8s.io/priority-class=urgent" in admit(KUEUE, high)[0]


def test_kai_charges_the_project_label_like_a_queue_label():
    # KAI's pod grouper takes the queue from a "project" label when the pod has no queue label.
    assert "found team-b" in admit(KAI, pod(queue="team-b", label="project"))[0]
    assert admit(KAI, pod(queue="team-a", label="project")) == []


@pytest.mark.parametrize("resource", ["nvidia.com/mig-1g.10gb", "nvidia.com/gpu.shared"])
def test_every_nvidia_resource_is_gpu_work(resource):
    sliced = pod(gpus=0, scheduler="default-scheduler")
    sliced["spec"]["containers"][0]["resources"] = {"limits": {resource: "1"}}
    assert "must be scheduled by KAI scheduler" in admit(KAI, sliced)[0]
    assert any("not be created directly" in message for message in admit(KUEUE, copy.deepcopy(sliced)))


def test_a_gpu_memory_annotation_is_a_fraction_and_dra_claims_are_refused():
    assert (
        "must be scheduled by KAI"
        in admit(KAI, pod(gpus=0, scheduler="default-scheduler", annotations={"gpu-memory": "1024"}))[0]
    )
    claimed = pod()
    claimed["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "any"}]
    assert "spec.resourceClaims" in admit(KAI, claimed)[0]
    assert "spec.resourceClaims" in admit(KUEUE, wrapped("Job", claimed, labels={QUEUE_NAME: "team-a"}))[0]


def with_env(target, *, env=None, env_from=None, init=False):
    container = {"name": "c", "image": "x"}
    if env is not None:
        container["env"] = env
    if env_from is not None:
        container["envFrom"] = env_from
    target["spec"]["initContainers" if init else "containers"] = [container]
    return target


@pytest.mark.parametrize(
    "env",
    [
        [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}],
        [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "0,1"}],
        [
            {
                "name": "NVIDIA_VISIBLE_DEVICES",
                "valueFrom": {"configMapKeyRef": {"name": "mine", "key": "NVIDIA_VISIBLE_DEVICES"}},
            }
        ],
        [{"name": "NVIDIA_VISIBLE_DEVICES", "valueFrom": {"secretKeyRef": {"name": "mine", "key": "x"}}}],
        [{"name": "NVIDIA_VISIBLE_DEVICES", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['d']"}}}],
        [{"name": "NVIDIA_MIG_CONFIG_DEVICES", "value": "all"}],
    ],
)
def test_a_container_that_names_devices_itself_is_refused_on_both_engines(env):
    for backend in (KAI, KUEUE):
        denied = admit(backend, with_env(pod(gpus=0), env=env))
        assert len(denied) == 1 and "a container must not set NVIDIA_VISIBLE_DEVICES" in denied[0], denied
        assert admit(backend, with_env(pod(gpus=0), env=env, init=True))


def test_hiding_devices_an_env_from_without_prefix_and_other_variables_are_admitted():
    for value in ("void", "none"):
        assert admit(KAI, with_env(pod(gpus=0), env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": value}])) == []
    assert admit(KAI, with_env(pod(gpus=0), env=[{"name": "CUDA_VISIBLE_DEVICES", "value": "0"}])) == []
    assert admit(KAI, with_env(pod(gpus=0), env_from=[{"configMapRef": {"name": "settings"}}])) == []
    assert admit(KAI, with_env(pod(gpus=0), env_from=[{"prefix": "APP_", "configMapRef": {"name": "settings"}}])) == []


@pytest.mark.parametrize("prefix", ["NVIDIA_", "N", "NVIDIA_VISIBLE_", "NVIDIA_MIG_"])
def test_an_env_from_prefix_that_could_spell_a_device_variable_is_refused(prefix):
    denied = admit(KAI, with_env(pod(gpus=0), env_from=[{"prefix": prefix, "secretRef": {"name": "s"}}]))
    assert len(denied) == 1 and "envFrom prefix" in denied[0]


def kai_fraction_pod(configmap="train-abc1234-shared-gpu"):
    """A fractional pod as KAI's admission webhook leaves it (gpusharing.Mutate at the pin): the
    device variable from the GPU-sharing ConfigMap its annotation names, and the -evar envFrom."""
    fraction = pod(gpus=0, annotations={"gpu-fraction": "0.5", "runai/shared-gpu-configmap": configmap})
    env = [
        {"name": name, "valueFrom": {"configMapKeyRef": {"name": configmap + "-0", "key": name}}}
        for name in ("NVIDIA_VISIBLE_DEVICES", "RUNAI_NUM_OF_GPUS", "GPU_PORTION")
    ]
    return with_env(fraction, env=env, env_from=[{"configMapRef": {"name": configmap + "-0-evar", "optional": False}}])


def test_kai_s_own_fraction_pods_get_their_gpu_from_its_configmap_and_nobody_else_does():
    assert admit(KAI, kai_fraction_pod()) == []
    # The same env in a pod that asks for no fraction: a sibling's GPU, seen without asking.
    borrowed = kai_fraction_pod()
    del borrowed["metadata"]["annotations"]["gpu-fraction"]
    assert "must not set NVIDIA_VISIBLE_DEVICES" in admit(KAI, borrowed)[0]
    # A fraction pod that reads its variable from a ConfigMap of its own choosing.
    elsewhere = kai_fraction_pod()
    elsewhere["spec"]["containers"][0]["env"][0]["valueFrom"]["configMapKeyRef"]["name"] = "mine"
    assert "must not set NVIDIA_VISIBLE_DEVICES" in admit(KAI, elsewhere)[0]
    # Kueue hands out no fractions: the same pod is the member's own.
    assert any("NVIDIA_VISIBLE_DEVICES" in message for message in admit(KUEUE, kai_fraction_pod()))


def test_a_cdi_annotation_is_refused():
    denied = admit(KAI, pod(gpus=0, annotations={"cdi.k8s.io/x": "nvidia.com/gpu=all"}))
    assert len(denied) == 1 and denied[0].endswith("found cdi.k8s.io/x")


def config_map(data=None, kind="ConfigMap", field="data"):
    return {"apiVersion": "v1", "kind": kind, "metadata": {"name": "c", "namespace": "team-a"}, field: data or {}}


@pytest.mark.parametrize(
    "kind, field", [("ConfigMap", "data"), ("ConfigMap", "binaryData"), ("Secret", "data"), ("Secret", "stringData")]
)
def test_only_the_engine_and_the_site_s_admins_write_a_device_variable_into_an_object(kind, field):
    carrying = config_map({"NVIDIA_VISIBLE_DEVICES": "all", "other": "x"}, kind, field)
    denied = admit(KAI, carrying)
    assert len(denied) == 1 and denied[0].endswith("found key NVIDIA_VISIBLE_DEVICES"), denied
    assert admit(KAI, carrying, operation="UPDATE")
    assert admit(KAI, carrying, username="system:serviceaccount:kai-scheduler:binder") == []
    assert admit(KAI, carrying, username="kubernetes-admin", groups=["kubeadm:cluster-admins"]) == []
    assert admit(KAI, carrying, username="system:serviceaccount:team-a:default")
    assert admit(KAI, config_map({"other": "x"}, kind, field)) == []
    # Kueue's components write no device variable: only the site's admins do.
    assert admit(KUEUE, carrying, username="system:serviceaccount:kai-scheduler:binder")


def service(**spec):
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "s", "namespace": "team-a"},
        "spec": {"ports": [{"port": 80}], **spec},
    }


def test_a_service_stays_inside_the_cluster_network():
    assert admit(KAI, service()) == [] and admit(KAI, service(type="ClusterIP")) == []
    assert admit(KAI, service(type="ExternalName", externalName="example.org")) == []
    assert "externalIPs" in admit(KUEUE, service(externalIPs=["192.0.2.1"]))[0]
    for exposed in ("NodePort", "LoadBalancer"):
        denied = admit(KAI, service(type=exposed))
        assert len(denied) == 1 and denied[0].endswith("found " + exposed)


def bound_pod(name, gpus, priority=None, labels=None, phase="Running"):
    spec = {"nodeName": "n1", "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}
    if priority is not None:
        spec["priority"] = priority
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": spec, "status": {"phase": phase}}


def test_gpus_held_past_the_quota_that_kai_cannot_take_back_fail_the_project():
    rules = KAI.admission_rules
    # team-a's escape before the node-name rule: 16 GPUs of build (100) pods bound by their author.
    escaped = [bound_pod("escape-%d" % index, 8, priority=100) for index in range(2)]
    check = checks.held_check("team-a", 4, escaped, rules)
    assert check.status == "fail" and check.category == "security"
    assert check.observed == "16 GPUs in 2 non-preemptible pods"
    assert "holds 16 GPUs that KAI scheduler will never take back, past its quota of 4" in check.message
    # Preemptible work past the quota is KAI's to reclaim; non-preemptible work within it is the quota.
    borrowing = [bound_pod("train", 12, priority=50), bound_pod("build", 4, priority=100)]
    assert checks.held_check("team-a", 4, borrowing, rules).status == "pass"
    # KAI's label makes a pod non-preemptible whatever its priority; a finished pod holds nothing.
    labelled = [bound_pod("l", 5, priority=50, labels={"kai.scheduler/preemptibility": "non-preemptible"})]
    assert checks.held_check("team-a", 4, labelled, rules).status == "fail"
    assert checks.held_check("team-a", 4, [bound_pod("done", 8, 100, phase="Succeeded")], rules).status == "pass"
    # Kueue takes back what it lent whatever the priority: not judged so.
    assert checks.held_check("team-a", 4, escaped, KUEUE.admission_rules).status == "skip"


def hides_devices(backend, obj) -> bool:
    """Whether the mutating policy's match condition takes ``obj`` (a pod): a container of it asks
    for no device and names none, in a pod with no fraction."""
    policy = admission.policy_manifests(backend.admission_rules)[4]
    assert policy["kind"] == "MutatingAdmissionPolicy"
    (condition,) = policy["spec"]["matchConditions"]
    program = ENV.program(ENV.compile(condition["expression"]))
    return bool(program.evaluate({"object": celpy.json_to_cel(obj)}))


def test_every_container_that_asks_for_no_gpu_is_given_none_whatever_its_image_sets():
    # A CUDA image sets NVIDIA_VISIBLE_DEVICES=all; the policy's void comes after it and wins.
    for backend in (KAI, KUEUE):
        assert hides_devices(backend, pod(gpus=0))
        assert not hides_devices(backend, pod(gpus=1))
        sidecar = pod(gpus=1)
        sidecar["spec"]["containers"].append({"name": "sidecar", "image": "x"})
        assert hides_devices(backend, sidecar)
        assert not hides_devices(
            backend, with_env(pod(gpus=0), env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}])
        )
        init = pod(gpus=1)
        init["spec"]["initContainers"] = [{"name": "setup", "image": "x"}]
        assert hides_devices(backend, init)
    # A fractional pod is KAI's to give its GPU (its webhook's env, from the GPU-sharing ConfigMap).
    assert not hides_devices(KAI, pod(gpus=0, annotations={"gpu-fraction": "0.5"}))
    assert hides_devices(KUEUE, pod(gpus=0, annotations={"gpu-fraction": "0.5"}))
    policy, binding = admission.policy_manifests(KAI.admission_rules)[4:]
    assert binding["spec"]["policyName"] == policy["metadata"]["name"] == admission.DEVICES_POLICY_NAME
    assert policy["spec"]["matchConstraints"]["resourceRules"][0]["operations"] == ["CREATE"]


def test_the_image_env_attempt_passes_only_when_every_container_came_back_hiding_its_devices():
    attempt = by_key(checks.attempts("team-a", "team-b", KAI.admission_rules, SETTINGS))["image-env"]
    assert attempt.expect_hidden and not attempt.expect_refused
    hidden = copy.deepcopy(attempt.manifest)
    hidden["spec"]["containers"][0]["env"] = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]
    assert checks.judge(attempt, ALICE, checks.Outcome(True, admitted_as=hidden)).status == "pass"
    check = checks.judge(attempt, ALICE, checks.Outcome(True, admitted_as=attempt.manifest))
    assert check.status == "fail" and check.category == "security"
    assert "admitted without NVIDIA_VISIBLE_DEVICES=void in container probe" in check.message
    assert checks.judge(attempt, ALICE, checks.Outcome(False, 403, "cannot create resource")).status == "fail"


def test_a_server_without_mutating_admission_policies_gets_the_validating_ones_and_a_warning():
    # Kubernetes 1.35 (the previous minor the lab upgrades from) serves MutatingAdmissionPolicy in no v1.
    wanted = admission.policy_manifests(KAI.admission_rules)
    kept, left = admission.served(wanted, lambda version, kind: not kind.startswith("Mutating"))
    assert [m["kind"] for m in kept] == ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"] * 2
    assert left == [
        "MutatingAdmissionPolicy/" + admission.DEVICES_POLICY_NAME,
        "MutatingAdmissionPolicyBinding/" + admission.DEVICES_POLICY_NAME,
    ]
    assert checks.policy_check(kept, kept).status == "pass"
    attempt = by_key(checks.attempts("team-a", "team-b", KAI.admission_rules, SETTINGS))["image-env"]
    check = checks.judge(attempt, ALICE, checks.Outcome(True, admitted_as=attempt.manifest), left)
    assert check.status == "warn" and "serves no MutatingAdmissionPolicy" in check.message
    assert checks.judge(attempt, ALICE, checks.Outcome(True, admitted_as=attempt.manifest)).status == "fail"


def resumed(job):
    changed = copy.deepcopy(job)
    changed["spec"]["suspend"] = False
    return changed


def test_only_kueue_resumes_a_job_it_holds():
    held = kueue_job()
    held["spec"]["suspend"] = True
    denied = admit(KUEUE, resumed(held), operation="UPDATE", old=held)
    assert denied == ["project team-a: a Job runs when Kueue admits it: spec.suspend may be set false by Kueue alone"]
    kueue = "system:serviceaccount:kueue-system:kueue-controller-manager"
    assert admit(KUEUE, resumed(held), operation="UPDATE", old=held, username=kueue) == []
    assert admit(KUEUE, resumed(held), operation="UPDATE", old=held, groups=["system:masters"]) == []
    # Suspending, other changes, and creating a Job with suspend false (Kueue's webhook suspends it) pass.
    assert admit(KUEUE, held, operation="UPDATE", old=resumed(held)) == []
    assert admit(KUEUE, held, operation="UPDATE", old=held) == []
    assert admit(KUEUE, resumed(held)) == []
    # KAI holds no Job: a member may suspend and resume its own.
    kai_job = wrapped("Job", pod())
    kai_job["spec"]["suspend"] = True
    assert admit(KAI, resumed(kai_job), operation="UPDATE", old=kai_job) == []


def affined(target, *hostnames, operator="In", key="kubernetes.io/hostname"):
    term = {"matchExpressions": [{"key": key, "operator": operator, "values": list(hostnames)}]}
    target["spec"]["affinity"] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
    }
    return target


INTERACTIVE_ON_DGX1_2 = {projects.INTERACTIVE_NODES_ANNOTATION: "dgx1-2", projects.TRAINING_NODES_ANNOTATION: ""}


def interactive_pod():
    built = pod()
    built["spec"]["priorityClassName"] = "build"
    return built


def test_gpu_work_keeps_to_the_project_s_declared_nodes():
    # team-b's interactive work runs on dgx1-2 (NetApp 4.8's figure): on dgx1-1 it takes team-c's GPUs.
    denied = admit(KAI, affined(interactive_pod(), "dgx1-1"), annotations=INTERACTIVE_ON_DGX1_2)
    assert denied == [
        "project team-a: the project's GPU work runs on its declared nodes: a required node affinity (or node "
        "selector) on kubernetes.io/hostname among them (dgx1-2)"
    ]
    assert admit(KAI, interactive_pod(), annotations=INTERACTIVE_ON_DGX1_2)  # no affinity at all
    assert admit(KAI, affined(interactive_pod(), "dgx1-2", "dgx1-1"), annotations=INTERACTIVE_ON_DGX1_2)
    assert admit(KAI, affined(interactive_pod(), "dgx1-2", operator="NotIn"), annotations=INTERACTIVE_ON_DGX1_2)
    assert admit(KAI, affined(interactive_pod(), "dgx1-2"), annotations=INTERACTIVE_ON_DGX1_2) == []
    selected = interactive_pod()
    selected["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "dgx1-2"}
    assert admit(KAI, selected, annotations=INTERACTIVE_ON_DGX1_2) == []
    # A prefix of a declared name is not that name.
    assert admit(KAI, affined(interactive_pod(), "dgx1-"), annotations=INTERACTIVE_ON_DGX1_2)
    # Training work, CPU work and an undeclared kind are free; inference is interactive too, and a
    # Deployment naming no class is what KAI's pod grouper makes it (inference).
    assert admit(KAI, pod(), annotations=INTERACTIVE_ON_DGX1_2) == []
    assert admit(KAI, pod(gpus=0), annotations=INTERACTIVE_ON_DGX1_2) == []
    inference = pod()
    inference["spec"]["priorityClassName"] = "inference"
    assert admit(KAI, inference, annotations=INTERACTIVE_ON_DGX1_2)
    assert admit(KAI, wrapped("Deployment", pod()), annotations=INTERACTIVE_ON_DGX1_2)
    assert admit(KAI, wrapped("Job", pod()), annotations=INTERACTIVE_ON_DGX1_2) == []
    # Kueue tells interactive work by its workload priority class.
    job = wrapped(
        "Job",
        pod(queue=None, scheduler=None),
        labels={QUEUE_NAME: "team-a", "kueue.x-k8s.io/priority-class": "clusterproof-interactive"},
    )
    assert admit(KUEUE, job, annotations=INTERACTIVE_ON_DGX1_2)
    assert admit(KUEUE, affined(job["spec"]["template"], "dgx1-2") and job, annotations=INTERACTIVE_ON_DGX1_2) == []


def test_the_node_affinity_attempt_is_made_only_where_the_project_declares_nodes():
    rules = KAI.admission_rules
    assert "node-affinity" not in by_key(checks.attempts("team-a", "team-b", rules, SETTINGS))
    attempt = by_key(checks.attempts("team-b", "team-c", rules, SETTINGS, ("dgx1-2",)))["node-affinity"]
    assert attempt.manifest["spec"]["priorityClassName"] == "build" and attempt.expect_refused


def test_clusterproof_s_own_interactive_workloads_keep_to_the_declared_nodes():
    from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import workloads

    settings = workloads.ProjectSettings("team-a", interactive_nodes=("dgx1-2",))
    for backend in (KAI, KUEUE):
        workload = workloads.Workload("w", "team-a", workloads.INTERACTIVE, 1)
        job = backend.workload_manifests(workload, settings, None, "gpu")[0]
        assert admit(backend, job, annotations=INTERACTIVE_ON_DGX1_2) == [], backend.name


# --- the project's interactive time limit --------------------------------------------------------

LIMITED = {projects.INTERACTIVE_LIMIT_ANNOTATION: "600"}
KUEUE_INTERACTIVE = {QUEUE_NAME: "team-a", "kueue.x-k8s.io/priority-class": "clusterproof-interactive"}
MAX_EXEC = "kueue.x-k8s.io/max-exec-time-seconds"


def with_deadline(target, seconds, where="spec"):
    target[where]["activeDeadlineSeconds"] = seconds
    return target


def test_kai_holds_a_member_s_interactive_gpu_work_to_the_project_s_time_limit():
    denied = admit(KAI, interactive_pod(), annotations=LIMITED)
    assert denied == [
        "project team-a: the project's interactive GPU work ends within its time limit of 600 s: a Pod, Job or "
        "CronJob's Job must carry spec.activeDeadlineSeconds of at most that (a Deployment cannot), found none"
    ]
    assert admit(KAI, with_deadline(interactive_pod(), 600), annotations=LIMITED) == []
    assert admit(KAI, with_deadline(interactive_pod(), 60), annotations=LIMITED) == []
    assert admit(KAI, with_deadline(interactive_pod(), 601), annotations=LIMITED)[0].endswith("found 601")
    assert admit(KAI, with_deadline(interactive_pod(), 0), annotations=LIMITED)
    # A Job's own limit holds its pods; one on its pod template alone does not (the Job makes another).
    job = wrapped("Job", interactive_pod())
    assert admit(KAI, job, annotations=LIMITED)
    assert admit(KAI, with_deadline(job, 600), annotations=LIMITED) == []
    templated = wrapped("Job", with_deadline(interactive_pod(), 600))
    assert admit(KAI, templated, annotations=LIMITED)
    cron = wrapped("CronJob", interactive_pod())
    assert admit(KAI, cron, annotations=LIMITED)
    cron["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"] = 300
    assert admit(KAI, cron, annotations=LIMITED) == []
    # A Deployment carries no limit: interactive GPU work there is refused; inference is not held.
    assert admit(KAI, wrapped("Deployment", interactive_pod()), annotations=LIMITED)
    inference = pod()
    inference["spec"]["priorityClassName"] = "inference"
    assert admit(KAI, inference, annotations=LIMITED) == []
    assert admit(KAI, wrapped("Deployment", pod()), annotations=LIMITED) == []
    # Training work, CPU work, a project without a limit, and the Job controller's pods are free.
    assert admit(KAI, pod(), annotations=LIMITED) == []
    cpu = interactive_pod()
    del cpu["spec"]["containers"][0]["resources"]
    assert admit(KAI, cpu, annotations=LIMITED) == []
    assert admit(KAI, interactive_pod()) == []
    assert admit(KAI, interactive_pod(), annotations={projects.INTERACTIVE_LIMIT_ANNOTATION: "soon"}) == []
    controller = admission.CONTROLLER_PREFIX + "job-controller"
    assert admit(KAI, interactive_pod(), annotations=LIMITED, username=controller) == []
    # A fraction is GPU work too.
    fraction = interactive_pod()
    del fraction["spec"]["containers"][0]["resources"]
    fraction["metadata"]["annotations"] = {"gpu-fraction": "0.5"}
    assert admit(KAI, fraction, annotations=LIMITED)


def test_kueue_holds_interactive_jobs_to_the_time_limit_by_its_label_or_the_job_s_deadline():
    def job(labels):
        return wrapped("Job", pod(queue=None, scheduler=None), labels=labels)

    denied = admit(KUEUE, job(KUEUE_INTERACTIVE), annotations=LIMITED)
    assert denied == [
        "project team-a: the project's interactive GPU work ends within its time limit of 600 s: a Pod, Job or "
        "CronJob's Job must carry spec.activeDeadlineSeconds (or label %s) of at most that (a Deployment cannot), "
        "found none" % MAX_EXEC
    ]
    assert admit(KUEUE, job({**KUEUE_INTERACTIVE, MAX_EXEC: "600"}), annotations=LIMITED) == []
    assert admit(KUEUE, job({**KUEUE_INTERACTIVE, MAX_EXEC: "900"}), annotations=LIMITED)[0].endswith("found 900")
    assert admit(KUEUE, job({**KUEUE_INTERACTIVE, MAX_EXEC: "ten"}), annotations=LIMITED)
    assert admit(KUEUE, with_deadline(job(KUEUE_INTERACTIVE), 120), annotations=LIMITED) == []
    assert admit(KUEUE, job({QUEUE_NAME: "team-a"}), annotations=LIMITED) == []  # training


def test_clusterproof_s_own_interactive_workloads_carry_the_time_limit():
    from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import workloads

    settings = workloads.ProjectSettings("team-a", interactive_time_limit_seconds=600)
    for backend in (KAI, KUEUE):
        for gpus in (1, 0.5) if backend is KAI else (1,):
            workload = workloads.Workload("w", "team-a", workloads.INTERACTIVE, gpus)
            for manifest in backend.workload_manifests(workload, settings, None, "gpu"):
                if manifest["kind"] in WORKLOAD_KINDS:
                    assert admit(backend, manifest, annotations=LIMITED) == [], (backend.name, manifest["kind"])
    gang = workloads.Workload("g", "team-a", workloads.INTERACTIVE, 1)
    pods = [m for m in KAI.workload_manifests(gang, settings, 2, "gpu", min_replicas=2) if m["kind"] == "Pod"]
    assert pods and all(admit(KAI, made, annotations=LIMITED) == [] for made in pods)


def test_the_time_limit_attempt_is_made_where_the_project_declares_a_limit_on_its_interactive_nodes():
    for backend in (KAI, KUEUE):
        rules = backend.admission_rules
        assert "time-limit" not in by_key(checks.attempts("team-a", "team-b", rules, SETTINGS))
        attempt = by_key(checks.attempts("team-a", "team-b", rules, SETTINGS, ("dgx1-2",), 600))["time-limit"]
        assert attempt.expect_refused
        # Refused for its missing limit alone, not for its nodes.
        assert admit(backend, attempt.manifest, annotations={**LIMITED, **INTERACTIVE_ON_DGX1_2}) == [
            admit(backend, attempt.manifest, annotations=LIMITED)[0]
        ]
        assert "time limit of 600 s" in admit(backend, attempt.manifest, annotations=LIMITED)[0]


# --- what a project may hold beside its GPUs: its ResourceQuota ---------------------------------

from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import resource_quota  # noqa: E402


def test_a_project_gets_the_default_ceilings_unless_the_site_or_the_project_changes_them():
    project = projects.Project.from_dict({"name": "team-a", "gpu_quota": 4})
    made = {m["kind"]: m for m in KAI.project_manifests(project)}
    assert made["ResourceQuota"]["metadata"] == {
        "name": "clusterproof-project",
        "namespace": "team-a",
        "labels": {"app.kubernetes.io/managed-by": "clusterproof"},
    }
    assert made["ResourceQuota"]["spec"]["hard"] == resource_quota.DEFAULT_HARD
    assert "LimitRange" not in made  # no CPU or memory held: pods need not state them
    held = projects.Project.from_dict({"name": "team-a", "gpu_quota": 4, "resource_quota": {"requests.cpu": "64"}})
    made = {m["kind"]: m for m in KUEUE.project_manifests(held)}
    assert made["ResourceQuota"]["spec"]["hard"] == {"requests.cpu": "64"}
    assert made["LimitRange"]["spec"]["limits"] == [
        {"type": "Container", "defaultRequest": {"cpu": "100m", "memory": "128Mi"}}
    ]
    none = projects.Project.from_dict({"name": "team-a", "gpu_quota": 4, "resource_quota": {}})
    assert not {m["kind"] for m in KAI.project_manifests(none)} & {"ResourceQuota", "LimitRange"}


def test_the_inventory_resolves_each_project_s_ceilings_from_the_site_s():
    tenancy, problems = isolation.check_settings(
        {"resource_quota": {"pods": "200", "secrets": None, "requests.cpu": "32"}}, ["team-a"]
    )
    assert problems == []
    expected = {**resource_quota.DEFAULT_HARD, "pods": "200", "requests.cpu": "32"}
    del expected["secrets"]
    assert tenancy.resource_quota == expected
    assert isolation.TenancySettings.from_dict(tenancy.to_dict()) == tenancy
    project = {"resource_quota": {"requests.cpu": None, "pods": "50"}}
    site, errors = declare({"resource_quota": {"requests.cpu": "32"}}, project_extra=project)
    assert errors == []
    assert site.projects[0].resource_quota == {**resource_quota.DEFAULT_HARD, "pods": "50"}
    assert "resource_quota.pods" in " ".join(messages(project_extra={"resource_quota": {"pods": "x"}}))
    assert "clusterproof_tenancy.resource_quota.gpus" in " ".join(messages({"resource_quota": {"gpus": "1"}}))


@pytest.mark.parametrize(
    ("hard", "field", "expected"),
    [
        ({"nvidia.com/gpu": "4"}, "resource_quota.nvidia.com/gpu", "GPUs are the quota scheduler's"),
        ({"pods": "lots"}, "resource_quota.pods", "a non-negative Kubernetes quantity"),
        ({"pods": "-1"}, "resource_quota.pods", "a non-negative Kubernetes quantity"),
        ({"pods": "2.5"}, "resource_quota.pods", "a whole number of objects"),
        ({"requests.storage": "10TB"}, "resource_quota.requests.storage", "a non-negative Kubernetes quantity"),
        ({"requests.cpu": True}, "resource_quota.requests.cpu", "a non-negative Kubernetes quantity"),
        (["pods"], "resource_quota", "a mapping of"),
    ],
)
def test_bad_ceilings_are_refused_naming_the_key(hard, field, expected):
    _, problems = resource_quota.check_hard(hard, "resource_quota")
    assert [problem.field for problem in problems] == [field]
    assert expected in problems[0].expected


def test_quantities_are_read_as_kubernetes_writes_them():
    assert resource_quota.quantity("10Ti") == 10 * 2**40
    assert resource_quota.quantity("100m") * 1000 == 100
    assert resource_quota.quantity("1e3") == 1000
    assert resource_quota.quantity(500) == 500
    assert resource_quota.quantity("1.5G") == 1_500_000_000
    for bad in ("", "1.2.3", "5 Gi", "Gi", "10TB", None, True, 1.5):
        assert resource_quota.quantity(bad) is None, bad


def test_the_attempts_past_a_ceiling_are_made_where_the_project_holds_it():
    rules = KAI.admission_rules
    assert not {"cpu-pods", "storage"} & set(by_key(checks.attempts("team-a", "team-b", rules, SETTINGS)))
    tried = by_key(checks.attempts("team-a", "team-b", rules, SETTINGS, ceilings={"requests.storage": "10Ti"}))
    claim = tried["storage"].manifest
    assert claim["kind"] == "PersistentVolumeClaim" and tried["storage"].expect_refused
    assert int(claim["spec"]["resources"]["requests"]["storage"]) == 10 * 2**40 + 2**30
    assert tried["storage"].refused_by == "exceeded quota: clusterproof-project"
    assert "cpu-pods" not in tried
    tried = by_key(checks.attempts("team-a", "team-b", rules, SETTINGS, ceilings={"requests.cpu": "500m"}))
    pod_spec = tried["cpu-pods"].manifest["spec"]
    assert pod_spec["containers"][0]["resources"] == {"requests": {"cpu": "2"}}
    assert "schedulerName" not in pod_spec  # the default scheduler's: what the engine does not hold
    # The probe pod itself passes every policy but the quota.
    assert admit(KAI, tried["cpu-pods"].manifest) == []


def test_the_resource_quota_check_passes_as_declared_and_names_what_differs():
    wanted = {"pods": "500", "requests.storage": "10Ti"}

    def quota(hard):
        return {"spec": {"hard": hard}}

    ok = checks.resource_quota_check("team-a", wanted, quota({"pods": "500", "requests.storage": "10Ti"}), None)
    assert ok.status == "pass" and ok.id == "isolation/team-a/resource-quota"
    missing = checks.resource_quota_check("team-a", wanted, None, None)
    assert missing.status == "fail" and missing.observed == "ResourceQuota/clusterproof-project missing"
    changed = checks.resource_quota_check("team-a", wanted, quota({"pods": "9000"}), None)
    assert changed.observed == "pods: 500 wanted, 9000 found; requests.storage: 10Ti wanted, none found"
    assert changed.category == "security" and "projects stage" in changed.action
    # The same amount written otherwise is the same.
    assert checks.resource_quota_check(
        "team-a", {"requests.cpu": "1"}, quota({"requests.cpu": "1000m"}), {}
    ).status == ("pass")
    no_defaults = checks.resource_quota_check("team-a", {"requests.cpu": "1"}, quota({"requests.cpu": "1"}), None)
    assert no_defaults.status == "fail" and "LimitRange/clusterproof-project-defaults missing" in no_defaults.observed
    nothing = checks.resource_quota_check("team-a", {}, None, None)
    assert nothing.status == "warn" and "declares no ceiling" in nothing.message


# --- images cached on a node: each real kubelet's check of pull credentials ---------------------


def kubelet(policy="NeverVerifyPreloadedImages", version="v1.36.3", gates=None, unread=""):
    config = (
        None
        if unread
        else {"featureGates": gates or {}, **({checks.IMAGE_CREDENTIALS_POLICY: policy} if policy else {})}
    )
    return checks.Kubelet(version, config, unread)


def test_a_kubelet_that_checks_cached_images_credentials_passes_and_one_that_does_not_is_named():
    passed = checks.image_credentials_check(True, {"cp-1": kubelet(), "w-1": kubelet("AlwaysVerify")})
    assert passed.status == "pass" and passed.observed == {"cp-1": "NeverVerifyPreloadedImages", "w-1": "AlwaysVerify"}
    failed = checks.image_credentials_check(
        True,
        {
            "cp-1": kubelet(),
            "w-1": kubelet("NeverVerify"),
            "w-2": kubelet(gates={checks.IMAGE_CREDENTIALS_GATE: False}),
            # Before 1.35 the gate is off unless turned on.
            "w-3": kubelet(None, version="v1.34.2"),
        },
    )
    assert failed.status == "fail" and failed.category == "security"
    assert failed.message.startswith("on w-1, w-2, w-3, a pod runs an image")
    assert "w-1: imagePullCredentialsVerificationPolicy is NeverVerify" in failed.message
    assert "w-2: KubeletEnsureSecretPulledImages is turned off" in failed.message
    assert "w-3: kubelet v1.34.2 has KubeletEnsureSecretPulledImages off by default (on from 1.35)" in failed.message
    assert "clusterproof_kubelet_config" in failed.action
    # Turned on before 1.35, with a verifying policy: checked.
    early = kubelet(version="v1.34.2", gates={checks.IMAGE_CREDENTIALS_GATE: True})
    assert checks.image_credentials_check(True, {"w-1": early}).status == "pass"


def test_an_unread_kubelet_is_a_warning_and_a_site_without_kubelets_skips_the_check():
    unread = checks.image_credentials_check(True, {"cp-1": kubelet(), "w-1": kubelet(unread="GET ...: 503")})
    assert unread.status == "warn" and "w-1" in unread.message
    assert unread.observed["w-1"] == "unread: GET ...: 503"
    # A failing kubelet is failed even where another could not be read.
    mixed = checks.image_credentials_check(True, {"w-1": kubelet("NeverVerify"), "w-2": kubelet(unread="x")})
    assert mixed.status == "fail" and "w-2" not in mixed.message
    assert checks.image_credentials_check(False, {}).status == "skip"
    assert checks.image_credentials_check(True, {}).status == "skip"


def test_the_image_cache_row_is_tried_by_the_image_credentials_check():
    row = next(threat for threat in threats.THREATS if threat.key == "image-cache")
    assert row.guard == threats.KUBERNETES and row.tried_by == "image-credentials"
    assert checks.image_credentials_check(False, {}).id == "isolation/%s" % row.tried_by
