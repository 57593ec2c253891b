"""Tenant isolation, tried as the tenant: each escape a member of a project could attempt, and
what the site did with it. Pure.

For every project with a declared member (a user, or a group), the validator sends each
:class:`Attempt` to the API server as that member and judges the answer. The first is the control,
``own-queue``: a GPU workload in the project's own queue, through the engine, must be admitted (so
that the refusals are the guards', not a member who can do nothing). The others are the rows of the
threat model (``tenancy/threats.py``) that apply to the engine and have a probe, each built from its
row and nothing else: a variation of that workload, another object in the project's namespace (a
Service, a ConfigMap), both sent impersonated as a server-side dry run (admission runs in full,
nothing is created), or a question to the API server's authorizers (a SubjectAccessReview: may the
member write the namespace, a NetworkPolicy, ephemeral containers, the engine's objects). Each must
be refused by the guard its row names (the admission policies, Pod Security, RBAC), or admitted
where the site declared an exception for it, shown as such.

Beside them, read back: the admission policies and their bindings as clusterproof installs them,
and each project's NetworkPolicy. Where pods really run, real pods try a connection to each
project's Service from another project's namespace and from its own (``validate.reach_probe`` runs
them; the manifests and the verdict are here), and each real kubelet's configuration is read for
its check of cached images' pull credentials. What only running pods can show (that connection, a
GPU seen through an image's ``NVIDIA_VISIBLE_DEVICES``) is said as such where pods do not run. The
section's first table is the threat model with how each row was tried.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils import versions
from ansible_collections.clusterproof.gpu.plugins.module_utils.common import pods as common_pods
from ansible_collections.clusterproof.gpu.plugins.module_utils.common.objects import is_subset
from ansible_collections.clusterproof.gpu.plugins.module_utils.install import storage
from ansible_collections.clusterproof.gpu.plugins.module_utils.report.model import Check
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import (
    admission,
    isolation,
    resource_quota,
    threats,
)

SECTION_ID = "isolation"
SECTION_TITLE = "Tenant isolation: each escape tried as a member of the project"
# What in a refusal's message says who refused it.
BY_POLICY = "ValidatingAdmissionPolicy '%s'" % admission.POLICY_NAME
BY_POD_SECURITY = "violates PodSecurity"
BY_RBAC = "cannot create resource"
BY_OBJECTS_POLICY = "ValidatingAdmissionPolicy '%s'" % admission.OBJECTS_POLICY_NAME
# An access review's denial, as kube.client.review_access words it.
BY_ACCESS = "RBAC does not allow"
BY_QUOTA = "exceeded quota: %s" % resource_quota.NAME
# The attempts are dry runs: no image is pulled. The pinned pause is the one a site's mirror holds.
PROBE_IMAGE = versions.PAUSE.image
ATTEMPT_NAME = "clusterproof-isolation-probe"
# A container that every Pod Security level admits: the attempts differ from it only in what they try.
RESTRICTED_POD_SECURITY = {
    "runAsNonRoot": True,
    "runAsUser": 65534,
    "seccompProfile": {"type": "RuntimeDefault"},
}
RESTRICTED_CONTAINER_SECURITY = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


@dataclasses.dataclass(frozen=True)
class Member:
    """Whom the validator acts as: a declared user, or a stand-in user in a declared group."""

    user: str
    groups: tuple[str, ...] = ()

    @property
    def shown(self) -> str:
        return self.user if not self.groups else "%s (group %s)" % (self.user, ", ".join(self.groups))


def member_of(project: Mapping[str, Any]) -> Member | None:
    """The member the validator impersonates for ``project`` (a declared project as a dict): its
    first user, else a stand-in user in its first group; None when it declares neither."""
    users = list(project.get("users") or ())
    if users:
        return Member(str(users[0]))
    groups = list(project.get("groups") or ())
    if groups:
        return Member("clusterproof-validator:%s" % project["name"], (str(groups[0]),))
    return None


@dataclasses.dataclass(frozen=True)
class Attempt:
    """One thing a tenant tries: the object sent (as ``member``, dry run), whether the site must
    refuse it, and the words in a refusal that say the right guard refused it."""

    project: str
    key: str
    title: str
    manifest: dict[str, Any]
    expect_refused: bool
    refused_by: str
    action: str
    exception: isolation.IsolationException | None = None
    # Admitted, with every container hiding its devices (the devices policy's change).
    expect_hidden: bool = False
    # ``manifest`` is a Job the validator makes and the engine holds; the member tries to resume it.
    resume: bool = False

    @property
    def namespace(self) -> str:
        return str(self.manifest["metadata"]["namespace"])


@dataclasses.dataclass(frozen=True)
class Outcome:
    """The API server's answer to an attempt: admitted, or refused with its status and message."""

    admitted: bool
    status: int | None = None
    message: str = ""
    # The object as admitted (a dry run's answer), where one came back.
    admitted_as: Mapping[str, Any] | None = None


def _pod_spec(rules: admission.AdmissionRules, probe: threats.Probe) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "probe",
        "image": PROBE_IMAGE,
        "securityContext": dict(RESTRICTED_CONTAINER_SECURITY),
    }
    if probe.gpus:
        container["resources"] = {"limits": {admission.GPU_RESOURCE: str(probe.gpus)}}
    container.update(copy.deepcopy(dict(probe.container)))
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "securityContext": dict(RESTRICTED_POD_SECURITY),
        "containers": [container],
    }
    spec.update(copy.deepcopy(dict(probe.pod_spec)))
    if probe.interactive and rules.interactive_classes:
        spec["priorityClassName"] = rules.interactive_classes[0]
    if probe.time_limited and rules.time_limited_classes:
        spec["priorityClassName"] = rules.time_limited_classes[0]
    name = probe.scheduler if probe.scheduler is not None else rules.scheduler_name
    if name:
        spec["schedulerName"] = name
    return spec


def _workload(
    rules: admission.AdmissionRules, probe: threats.Probe, namespace: str, queue: str | None
) -> dict[str, Any]:
    """A workload as the engine takes it, changed as ``probe`` says: a pod where the engine takes
    pods, else a Job (whose pods a controller makes); labelled with ``queue`` unless None."""
    labels = {rules.queue_labels[0]: queue} if queue is not None else {}
    if probe.interactive or probe.time_limited:
        labels.update({label: values[0] for label, values in rules.interactive_labels[:1]})
    if probe.priority_labels:
        labels.update({label: threats.NOWHERE for label, _ in rules.priority_labels})
    annotations = dict(probe.annotations)
    if probe.fraction_annotations:
        annotations.update({annotation: "1" for annotation in rules.fraction_annotations})
    spec = _pod_spec(rules, probe)
    kind = probe.kind or ("Job" if rules.gpu_pods_from_controllers_only else "Pod")
    metadata = {"name": ATTEMPT_NAME, "namespace": namespace, "labels": labels, "annotations": annotations}
    if kind == "Pod":
        return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    template = {"metadata": {"labels": dict(labels), "annotations": dict(annotations)}, "spec": spec}
    if kind == "Deployment":
        spec.pop("restartPolicy")
        template["metadata"]["labels"]["app.kubernetes.io/name"] = ATTEMPT_NAME
        selector = {"matchLabels": {"app.kubernetes.io/name": ATTEMPT_NAME}}
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": metadata,
            "spec": {"replicas": 1, "selector": selector, "template": template},
        }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {"backoffLimit": 0, "template": template},
    }


FIX_POLICY = (
    "run the scheduler stage again (it installs the admission policies %s and %s and their bindings); a "
    "workload admitted here decides what the site declared it may not"
    % (admission.POLICY_NAME, admission.OBJECTS_POLICY_NAME)
)
FIX_POD_SECURITY = (
    "label the namespace with Pod Security baseline or restricted (the scheduler stage does), or "
    "declare the exception in clusterproof_tenancy.exceptions if the project really needs it"
)
FIX_RBAC = "remove the RoleBinding or ClusterRoleBinding that gives this member rights outside its project"
FIX_QUOTA = (
    "run the projects stage again (it makes each project's ResourceQuota %s from clusterproof_tenancy.resource_quota "
    "and the project's resource_quota)" % resource_quota.NAME
)
FIX_ACCESS = (
    "remove the Role, RoleBinding or ClusterRoleBinding that gives this member the right; the member Role "
    "(clusterproof-project-member) does not"
)
# What in a refusal says which guard refused it, and what to do when another answered.
_REFUSED_BY = {
    threats.POLICY: (BY_POLICY, FIX_POLICY),
    threats.OBJECTS_POLICY: (BY_OBJECTS_POLICY, FIX_POLICY),
    threats.POD_SECURITY: (BY_POD_SECURITY, FIX_POD_SECURITY),
    threats.RBAC: (BY_RBAC, FIX_RBAC),
    threats.DEVICES_POLICY: ("", FIX_POLICY),
    threats.RESOURCE_QUOTA: (BY_QUOTA, FIX_QUOTA),
}


def attempts(
    project: str,
    target: str | None,
    rules: admission.AdmissionRules,
    settings: isolation.TenancySettings,
    interactive_nodes: Sequence[str] = (),
    time_limit: int | None = None,
    ceilings: Mapping[str, str] | None = None,
) -> list[Attempt]:
    """What a member of ``project`` tries, against ``target`` (another project; None when the site
    has one project only, and the attempts on another are left out): the control (its own GPU work,
    admitted), then each row of the threat model that applies to the engine and has a probe (the
    interactive one where the project declares ``interactive_nodes``, the time-limited one where it
    declares an interactive ``time_limit``, each past a ceiling where its ResourceQuota holds that
    key: ``ceilings``)."""
    ceilings = ceilings or {}
    found = [
        Attempt(
            project,
            "own-queue",
            "a GPU workload in the project's own queue is admitted",
            _workload(rules, threats.Probe(threats.WORKLOAD), project, project),
            False,
            "",
            "give the project's members the clusterproof-project-member role (the scheduler stage does); if the "
            "admission policy refused it, its message says which rule",
        )
    ]
    context = (project, target, rules, settings)
    for threat in threats.applicable(rules):
        probe = threat.probe
        if probe is None or (probe.interactive and not interactive_nodes) or (probe.time_limited and not time_limit):
            continue
        if probe.past_ceiling is not None:
            if probe.past_ceiling in ceilings:
                manifest = past_ceiling(project, probe.past_ceiling, ceilings[probe.past_ceiling])
                found.extend(_attempts_of(threat, dataclasses.replace(probe, manifest=manifest), *context))
            continue
        if probe.time_limited and interactive_nodes:
            # On the project's own interactive nodes, so that the time limit is what refuses it.
            selector = {"nodeSelector": {admission.HOSTNAME_LABEL: interactive_nodes[0]}}
            probe = dataclasses.replace(probe, pod_spec={**probe.pod_spec, **selector})
        found.extend(_attempts_of(threat, probe, *context))
    return found


def _attempts_of(
    threat: threats.Threat,
    probe: threats.Probe,
    project: str,
    target: str | None,
    rules: admission.AdmissionRules,
    settings: isolation.TenancySettings,
) -> list[Attempt]:
    other = target or "clusterproof-another-queue"
    if probe.namespace == threats.OTHER and target is None:
        return []
    exception = settings.allows(project, probe.exception) if probe.exception else None
    refused_by, action = _REFUSED_BY[threat.guard]
    title = "%s (%s) is %s" % (
        threat.could,
        threat.surface,
        "admitted (declared exception)" if exception else "refused",
    )

    hidden = threat.guard == threats.DEVICES_POLICY
    if hidden:
        title = "%s (%s): every container is admitted with %s=void" % (
            threat.could,
            threat.surface,
            admission.DEVICE_ENV[0],
        )

    def attempt(manifest: dict[str, Any], key: str = threat.key, by: str = refused_by, fix: str = action) -> Attempt:
        expect_refused = exception is None and not hidden
        resume = probe.sends == threats.RESUME
        return Attempt(project, key, title, manifest, expect_refused, by, fix, exception, hidden, resume)

    if probe.sends == threats.RESUME:
        return [attempt(manifest=held_job(rules, project))]
    if probe.sends == threats.ACCESS:
        wanted = [probe.access] if not probe.engine_objects else [("create", g, r, "") for g, r in rules.engine_objects]
        return [
            attempt(
                manifest=access_review(project, *access),
                key="%s-%s" % (threat.key, access[2]) if probe.engine_objects else threat.key,
                by=BY_ACCESS,
                fix=FIX_ACCESS,
            )
            for access in wanted
        ]
    if probe.sends == threats.OBJECT:
        manifest = copy.deepcopy(dict(probe.manifest))
        manifest["metadata"] = {"name": ATTEMPT_NAME, "namespace": project}
        return [attempt(manifest=manifest)]
    namespace = target if probe.namespace == threats.OTHER else project
    queue = {threats.OWN: project, threats.OTHER: other, threats.NONE: None}[probe.queue]
    return [attempt(manifest=_workload(rules, probe, str(namespace), queue))]


# One unit past a ceiling: a core, or a GiB.
_PAST = {"requests.cpu": Decimal(1), "requests.memory": Decimal(2) ** 30, "requests.storage": Decimal(2) ** 30}


def past_ceiling(namespace: str, key: str, ceiling: str) -> dict[str, Any]:
    """What asks one unit past the ResourceQuota's ``ceiling`` of ``key``: a claim (storage), or a
    CPU pod on the default scheduler (CPU, memory), which Kubernetes' quota admission refuses."""
    amount = (resource_quota.quantity(ceiling) or Decimal(0)) + _PAST[key]
    asked = str(amount.to_integral_value(rounding="ROUND_CEILING"))
    metadata = {"name": ATTEMPT_NAME, "namespace": namespace}
    if key == "requests.storage":
        return {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": metadata,
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": threats.NOWHERE,
                "resources": {"requests": {"storage": asked}},
            },
        }
    container = {
        "name": "probe",
        "image": PROBE_IMAGE,
        "securityContext": dict(RESTRICTED_CONTAINER_SECURITY),
        "resources": {"requests": {key.split(".", 1)[1]: asked}},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"restartPolicy": "Never", "securityContext": dict(RESTRICTED_POD_SECURITY), "containers": [container]},
    }


def resource_quota_check(
    project: str, wanted: Mapping[str, str], found: Mapping[str, Any] | None, limit_range: Mapping[str, Any] | None
) -> Check:
    """The project's ResourceQuota as declared, and its LimitRange where it holds CPU or memory."""
    check_id = "%s/%s/resource-quota" % (SECTION_ID, project)
    title = "%s: holds no more pods, claims, storage or objects than its ResourceQuota allows" % project
    if not wanted:
        return Check(
            check_id,
            title,
            "warn",
            "a ResourceQuota",
            "present" if found else "none",
            "the site declares no ceiling for the project (resource_quota {}): its pods and claims can fill the "
            "nodes and the storage other projects need",
            category="security",
            action="declare ceilings in clusterproof_tenancy.resource_quota (or the project's resource_quota)",
        )
    expected = "ResourceQuota %s: %s" % (
        resource_quota.NAME,
        ", ".join("%s %s" % item for item in sorted(wanted.items())),
    )
    problems = resource_quota.differences(wanted, found)
    if resource_quota.holds_cpu_or_memory(wanted) and limit_range is None:
        problems.append(
            "LimitRange/%s missing (pods that state no CPU or memory are refused)" % resource_quota.LIMIT_RANGE_NAME
        )
    if problems:
        return Check(
            check_id,
            title,
            "fail",
            expected,
            "; ".join(problems),
            "the namespace's ceilings are not as declared",
            category="security",
            action=FIX_QUOTA,
        )
    hard = (found or {}).get("spec", {}).get("hard") or {}
    return Check(check_id, title, "pass", expected, ", ".join("%s %s" % item for item in sorted(hard.items())))


def held_job(rules: admission.AdmissionRules, namespace: str) -> dict[str, Any]:
    """A Job the engine holds and never admits: suspended, naming no queue, asking for no GPU."""
    job = _workload(rules, threats.Probe(threats.WORKLOAD, gpus=0, kind="Job"), namespace, None)
    job["metadata"]["name"] = ATTEMPT_NAME + "-held"
    job["spec"]["suspend"] = True
    return job


def access_review(namespace: str, verb: str, group: str, resource: str, subresource: str) -> dict[str, Any]:
    """What an access attempt asks: may the member ``verb`` ``resource`` (``subresource``) in ``namespace``
    (a cluster-wide resource: the project's namespace object itself)."""
    attributes = {"verb": verb, "group": group, "resource": resource, "namespace": namespace}
    if resource == "namespaces":
        attributes = {"verb": verb, "group": group, "resource": resource, "name": namespace}
    if subresource:
        attributes["subresource"] = subresource
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "metadata": {"namespace": namespace},
        "spec": {"resourceAttributes": attributes},
    }


def _short(message: str, most: int = 400) -> str:
    return message if len(message) <= most else message[: most - 1] + "…"


def judge(attempt: Attempt, member: Member, outcome: Outcome, not_served: Sequence[str] = ()) -> Check:
    """The check of one attempt: expected against observed, with what to do when it failed.
    ``not_served``: the policies the API server does not serve (``admission.served``); an attempt
    whose guard is one of them is a warning that says so, not a failure."""
    check_id = "%s/%s/%s" % (SECTION_ID, attempt.project, attempt.key)
    title = "%s: %s" % (attempt.project, attempt.title)
    expected = "refused (%s)" % attempt.refused_by if attempt.expect_refused else "admitted"
    observed = "admitted" if outcome.admitted else "refused (%s): %s" % (outcome.status, _short(outcome.message))
    as_whom = "as %s: " % member.shown
    if attempt.expect_refused and outcome.admitted:
        message = as_whom + "the API server admitted it (dry run): a tenant can do this"
        return Check(check_id, title, "fail", expected, observed, message, category="security", action=attempt.action)
    if attempt.expect_refused and attempt.refused_by not in outcome.message:
        message = as_whom + "refused, but not by %s: the guard this attempt tests did not answer" % attempt.refused_by
        return Check(check_id, title, "fail", expected, observed, message, category="security", action=attempt.action)
    if attempt.expect_hidden and any(name.endswith("/" + admission.DEVICES_POLICY_NAME) for name in not_served):
        return Check(
            check_id,
            title,
            "warn",
            "admitted, each container with %s=void" % admission.DEVICE_ENV[0],
            "admitted as is" if outcome.admitted else "refused (%s)" % outcome.status,
            as_whom + "the API server serves no MutatingAdmissionPolicy (Kubernetes 1.36 and newer): an image's own "
            "%s reaches the runtime, and only the NVIDIA toolkit set to volume mounts keeps it from showing the "
            "host's GPUs" % admission.DEVICE_ENV[0],
            category="security",
            action="upgrade the cluster to Kubernetes 1.36 or newer and run the scheduler stage again, or set "
            "nvidia_container_toolkit_gpus_only_by_volume_mounts: true for the GPU hosts (KAI's fractions then see "
            "no GPU)",
        )
    if attempt.expect_hidden and outcome.admitted:
        shown = [
            container["name"]
            for container in ((outcome.admitted_as or {}).get("spec") or {}).get("containers") or ()
            if {"name": admission.DEVICE_ENV[0], "value": admission.NO_DEVICE_VALUES[0]}
            not in (container.get("env") or ())
        ]
        expected = "admitted, each container with %s=void" % admission.DEVICE_ENV[0]
        if shown or outcome.admitted_as is None:
            message = (
                as_whom + "admitted without %s=void in container %s: an image that sets the variable shows "
                "every GPU of its host where the toolkit reads it"
                % (admission.DEVICE_ENV[0], ", ".join(shown) or "(no object came back)")
            )
            return Check(
                check_id, title, "fail", expected, "admitted as is", message, category="security", action=attempt.action
            )
        return Check(
            check_id,
            title,
            "pass",
            expected,
            "admitted with %s=void" % admission.DEVICE_ENV[0],
            as_whom + "admitted, its devices hidden",
        )
    if not attempt.expect_refused and not outcome.admitted:
        message = as_whom + "the project's own work was refused"
        return Check(
            check_id, title, "fail", expected, observed, message, category="configuration", action=attempt.action
        )
    message = as_whom + ("refused as it must be" if attempt.expect_refused else "admitted")
    if attempt.exception is not None:
        message += "; declared exception %s: %s" % (attempt.exception.allow, attempt.exception.reason)
    return Check(check_id, title, "pass", expected, observed, message)


def policy_check(wanted: Sequence[Mapping[str, Any]], found: Sequence[Mapping[str, Any] | None]) -> Check:
    """The admission policies and their bindings are installed as clusterproof makes them."""
    shown = ["%s/%s" % (m["kind"], m["metadata"]["name"]) for m in wanted]
    missing = [name for name, have in zip(shown, found, strict=True) if have is None]
    differs = [
        name for name, m, have in zip(shown, wanted, found, strict=True) if have is not None and not _holds(m, have)
    ]
    expected = "%s, each as installed" % ", ".join(shown)
    title = "the admission policies that hold a project's work to its quota and its own devices are installed"
    if missing or differs:
        observed = "; ".join([*("%s missing" % name for name in missing), *("%s changed" % name for name in differs)])
        return Check(
            "%s/admission-policy" % SECTION_ID,
            title,
            "fail",
            expected,
            observed,
            "without them a tenant can charge another project's quota, bypass the quota scheduler or name its own "
            "devices",
            category="security",
            action=FIX_POLICY,
        )
    return Check("%s/admission-policy" % SECTION_ID, title, "pass", expected, "installed")


def _holds(wanted: Mapping[str, Any], found: Mapping[str, Any]) -> bool:
    """Whether ``found`` holds every field of ``wanted``'s spec (the API server adds defaults)."""
    return is_subset(wanted.get("spec"), found.get("spec"))


def network_policy_check(project: str, wanted: Mapping[str, Any] | None, found: Mapping[str, Any] | None) -> Check:
    """The project's NetworkPolicy as declared (None wanted: the site turned isolation off)."""
    check_id = "%s/%s/network-policy" % (SECTION_ID, project)
    title = "%s: only its own namespace and the site's system namespaces reach its pods" % project
    if wanted is None:
        return Check(
            check_id,
            title,
            "skip",
            "no NetworkPolicy (clusterproof_tenancy.network_isolation: false)",
            "present" if found else "none",
            "the site turned network isolation off",
        )
    peers = wanted["spec"]["ingress"][0]["from"]
    expected = "NetworkPolicy %s letting in: %s" % (isolation.NETWORK_POLICY_NAME, _peers_shown(peers))
    if found is None or not _holds(wanted, found):
        return Check(
            check_id,
            title,
            "fail",
            expected,
            "missing" if found is None else "changed: %s" % _peers_shown(_ingress_peers(found)),
            "another project's pods can open connections to this project's pods",
            category="security",
            action="run the scheduler stage again (it makes each project's NetworkPolicy)",
        )
    return Check(check_id, title, "pass", expected, "as declared")


def _ingress_peers(policy: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    rules = (policy.get("spec") or {}).get("ingress") or []
    return [peer for rule in rules for peer in rule.get("from") or ()]


def _peers_shown(peers: Iterable[Mapping[str, Any]]) -> str:
    shown = []
    for peer in peers:
        selector = peer.get("namespaceSelector")
        if selector is None:
            shown.append("its own namespace")
            continue
        for expression in selector.get("matchExpressions") or ():
            if expression.get("operator") == "In":
                shown.append("namespaces %s" % ", ".join(expression.get("values") or ()))
            else:
                shown.append("every namespace labelled %s" % expression.get("key"))
        if selector.get("matchLabels") or selector == {}:
            shown.append("namespaces %s" % (selector.get("matchLabels") or "all"))
    return "; ".join(shown) or "nothing"


# --- a connection between projects, with real pods (validate.reach_probe runs them) ---------------

REACH_LABEL = "clusterproof.io/probe"
REACH_LABEL_VALUE = "network"
REACH_SERVICE = "clusterproof-reach"
REACH_SERVER = "clusterproof-reach-server"
REACH_PORT = 8080
# Tries per client, each with a connect timeout: a refusal is not a race with the Service's endpoints.
REACH_TRIES = 4
REACH_CONNECT_TIMEOUT_S = 3


def _reach_pod(namespace: str, name: str, image: str, nodes: Sequence[str], command: list[str]) -> dict[str, Any]:
    """A pod every Pod Security level admits, on a real node Ready at the start, labelled for cleanup."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {REACH_LABEL: REACH_LABEL_VALUE, "app.kubernetes.io/name": name},
        },
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "securityContext": dict(RESTRICTED_POD_SECURITY),
            # GPU hosts and control planes are tainted; the probe is a few kilobytes of busybox.
            "tolerations": [{"operator": "Exists"}],
            "affinity": {"nodeAffinity": storage.probe_node_affinity(True, nodes)},
            "containers": [
                {
                    "name": "probe",
                    "image": image,
                    "command": command,
                    "securityContext": dict(RESTRICTED_CONTAINER_SECURITY),
                    "resources": {"requests": {"cpu": "10m", "memory": "8Mi"}},
                    # What nc said (a name not resolved, a timeout) comes back in the pod's status.
                    "terminationMessagePolicy": "FallbackToLogsOnError",
                }
            ],
        },
    }


def reach_server(namespace: str, image: str, nodes: Sequence[str]) -> list[dict[str, Any]]:
    """The server a project's pods and another project's pod try to reach: busybox's httpd, and its
    Service."""
    pod = _reach_pod(
        namespace, REACH_SERVER, image, nodes, ["/bin/busybox", "httpd", "-f", "-p", str(REACH_PORT), "-h", "/"]
    )
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": REACH_SERVICE, "namespace": namespace, "labels": {REACH_LABEL: REACH_LABEL_VALUE}},
        "spec": {
            "selector": {"app.kubernetes.io/name": REACH_SERVER},
            "ports": [{"name": "http", "port": REACH_PORT, "targetPort": REACH_PORT, "protocol": "TCP"}],
        },
    }
    return [pod, service]


def reach_client_name(target: str) -> str:
    return "clusterproof-reach-to-%s" % target


def reach_client(namespace: str, target: str, image: str, nodes: Sequence[str]) -> dict[str, Any]:
    """A pod in ``namespace`` that opens a TCP connection to ``target``'s Service by its DNS name
    (so DNS is tried too): it succeeds when one try of a few connects, and fails with nc's words."""
    address = "%s.%s.svc" % (REACH_SERVICE, target)
    tries = " ".join(str(number) for number in range(1, REACH_TRIES + 1))
    script = (
        "for try in %s; do /bin/busybox nc -w %d %s %d </dev/null && exit 0; /bin/busybox sleep 2; done; exit 1"
        % (
            tries,
            REACH_CONNECT_TIMEOUT_S,
            address,
            REACH_PORT,
        )
    )
    return _reach_pod(namespace, reach_client_name(target), image, nodes, ["/bin/busybox", "sh", "-c", script])


@dataclasses.dataclass(frozen=True)
class Connection:
    """What one client pod found: connected or not, and what it said (or why it did not run)."""

    connected: bool | None
    said: str = ""


@dataclasses.dataclass(frozen=True)
class Reach:
    """The connections tried for one project: from its own namespace (the control: its Service
    answers and DNS resolves) and from ``source``, another project's namespace."""

    own: Connection
    source: str
    other: Connection
    # The probe's pods the runtime could not start, made again: "<namespace>/<pod>: what it said".
    made_again: tuple[str, ...] = ()


# The reasons the kubelet gives a container the runtime could not start (containerd's and
# docker's): the probe did not run, so it says nothing about the network.
NOT_STARTED_REASONS = ("StartError", "ContainerCannotRun")


def start_error(pod: Mapping[str, Any] | None) -> str:
    """What the runtime said when it could not start one of the pod's containers (a cgroup it could
    not make, say), or "" when every container started or has yet to. With restartPolicy Never such
    a pod ends Failed without having run at all."""
    for container in ((pod or {}).get("status") or {}).get("containerStatuses") or ():
        terminated = (container.get("state") or {}).get("terminated") or {}
        if terminated.get("reason") in NOT_STARTED_REASONS:
            return (terminated.get("message") or terminated["reason"]).strip()
    return ""


def connection_of(pod: Mapping[str, Any] | None) -> Connection:
    """A client pod (as JSON) read back: Succeeded is connected, Failed is not, anything else is
    unknown with the pod's phase and reason; so is a pod whose container the runtime could not
    start."""
    if pod is None:
        return Connection(None, "the client pod is gone")
    not_started = start_error(pod)
    if not_started:
        return Connection(None, "its container did not start: %s" % not_started)
    status = pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    said = ""
    for container in status.get("containerStatuses") or ():
        terminated = (container.get("state") or {}).get("terminated") or {}
        said = (terminated.get("message") or terminated.get("reason") or "").strip()
    if phase == "Succeeded":
        return Connection(True, said)
    if phase == "Failed":
        return Connection(False, said or "exited non-zero")
    waiting = [
        ((container.get("state") or {}).get("waiting") or {}).get("reason") or ""
        for container in status.get("containerStatuses") or ()
    ]
    why = ", ".join(reason for reason in waiting if reason) or status.get("reason") or ""
    return Connection(None, "still %s%s" % (phase, " (%s)" % why if why else ""))


def reach_check(project: str, pods_run: bool, reach: Reach | None = None, source: str = "") -> Check:
    """A connection from another project's pod to this project's Service: tried with real pods
    where pods run (beside the same from the project's own pod, the control); said as not tried
    on the sandbox, or where there is no other project to try from."""
    check = functools.partial(
        Check,
        "%s/%s/network-reach" % (SECTION_ID, project),
        "%s: another project's pod cannot open a connection to its Service" % project,
    )
    if not pods_run:
        return check(
            "skip",
            "refused",
            "not tried",
            "pods do not run on this site (simulated nodes): the NetworkPolicy is checked as an object above",
        )
    if reach is None:
        return check(
            "skip",
            "refused",
            "not tried",
            "no other project to try a connection from, or no real node Ready to run the probe's pods",
            category="security",
        )
    observed: dict[str, Any] = {
        "from %s (its own)" % project: _shown(reach.own),
        "from %s" % reach.source: _shown(reach.other),
    }
    if reach.made_again:
        observed["pods made again after their container did not start"] = list(reach.made_again)
    expected = {"from %s (its own)" % project: "connected", "from %s" % reach.source: "refused"}
    if reach.own.connected is not True:
        return check(
            "fail",
            expected,
            observed,
            "%s's own pod could not reach its Service %s.%s.svc:%d (%s): the attempt from %s proves nothing "
            "until it can" % (project, REACH_SERVICE, project, REACH_PORT, reach.own.said or "no word", reach.source),
            category="security",
            action="the project's NetworkPolicy must let its own namespace in, and its pods must reach the cluster's "
            "DNS: look at the policy above, CoreDNS, and the server pod %s in %s" % (REACH_SERVER, project),
        )
    if reach.other.connected is None:
        return check(
            "fail",
            expected,
            observed,
            "the client in %s did not finish: %s" % (reach.source, reach.other.said),
            category="security",
            action="look at pod %s in namespace %s" % (reach_client_name(project), reach.source),
        )
    if reach.other.connected:
        return check(
            "warn",
            expected,
            observed,
            "a pod of %s opened a connection to %s's Service: the NetworkPolicy is in place but nothing enforces "
            "it (flannel enforces none, and clusterproof installs no enforcer yet, docs/tenancy.md)"
            % (reach.source, project),
            category="security",
            action="install a NetworkPolicy enforcer beside the CNI, or a CNI that enforces NetworkPolicies",
        )
    return check("pass", expected, observed, category="security")


def _shown(connection: Connection) -> str:
    if connection.connected is True:
        return "connected"
    if connection.connected is False:
        return "refused (%s)" % connection.said if connection.said else "refused"
    return "unknown (%s)" % connection.said


def unreclaimable(pod: Mapping[str, Any], rules: admission.AdmissionRules) -> bool:
    """Whether the engine may never take back what ``pod`` (as JSON) holds: a priority from the
    engine's non-preemptible one on, or the engine's label that makes it so."""
    if rules.non_preemptible_priority is None:
        return False
    if rules.preemptibility_label is not None:
        label, value = rules.preemptibility_label
        if ((pod.get("metadata") or {}).get("labels") or {}).get(label) == value:
            return True
    return int((pod.get("spec") or {}).get("priority") or 0) >= rules.non_preemptible_priority


def held_check(project: str, quota: float, pods: Iterable[Mapping[str, Any]], rules: admission.AdmissionRules) -> Check:
    """The outcome every quota row is about: the whole GPUs the project's pods hold on nodes that
    the engine can never take back stay within the project's quota."""
    check = functools.partial(
        Check,
        "%s/%s/held-past-quota" % (SECTION_ID, project),
        "%s: no GPUs held past its quota that the quota scheduler cannot take back" % project,
    )
    if rules.non_preemptible_priority is None:
        return check(
            "skip",
            "at most %s" % _number(quota),
            "not judged",
            "%s takes back what it lent whatever the priority; GPU work outside it is refused above" % rules.engine,
        )
    held = [pod for pod in pods if common_pods.holds_a_node(pod) and unreclaimable(pod, rules)]
    gpus = sum(common_pods.pod_whole_gpus(pod) for pod in held)
    expected = "at most %s non-preemptible GPUs (its quota)" % _number(quota)
    observed = "%s GPUs in %d non-preemptible pods" % (_number(gpus), len(held))
    if gpus > quota:
        names = ", ".join(sorted(str(pod["metadata"]["name"]) for pod in held)[:10])
        return check(
            "fail",
            expected,
            observed,
            "%s holds %s GPUs that %s will never take back, past its quota of %s (pods %s): other projects' "
            "in-quota work waits for them" % (project, _number(gpus), rules.engine, _number(quota), names),
            category="security",
            action="delete those pods, and find how they were placed past the quota scheduler (a pod that names its "
            "node, or one made before the admission policies were installed: run the scheduler stage again)",
        )
    return check("pass", expected, observed, category="security")


def _number(value: float) -> str:
    return ("%.2f" % value).rstrip("0").rstrip(".")


def no_member_check(project: str) -> Check:
    """A project that declares no user or group: nobody to try the escapes as."""
    return Check(
        "%s/%s/member" % (SECTION_ID, project),
        "%s: the escapes are tried as a member" % project,
        "skip",
        "a declared user or group",
        "none",
        "the project declares no users or groups: only the site's admins can submit work there",
    )


def gpu_visibility_check() -> Check:
    """A pod without a GPU request that sets NVIDIA_VISIBLE_DEVICES: what the runtime decides."""
    return Check(
        "%s/gpu-visibility" % SECTION_ID,
        "a pod that asks for no GPU sees none through NVIDIA_VISIBLE_DEVICES",
        "needs-hardware",
        "no GPU visible",
        None,
        "the container runtime decides on the GPU hosts: the host tests check that the NVIDIA toolkit refuses "
        "NVIDIA_VISIBLE_DEVICES from unprivileged containers and takes devices as volume mounts",
    )


# Kubernetes' check of the pull credentials of an image a node has cached (KEP-2535): with one of
# these policies the kubelet runs an image it pulled with one pod's credentials for another pod only
# when that pod has them too (NeverVerify: any pod runs any cached image). The gate is on by default
# from Kubernetes 1.35 (pkg/features/kube_features.go), the policy then NeverVerifyPreloadedImages.
IMAGE_CREDENTIALS_GATE = "KubeletEnsureSecretPulledImages"
IMAGE_CREDENTIALS_POLICY = "imagePullCredentialsVerificationPolicy"
VERIFYING_POLICIES = ("NeverVerifyPreloadedImages", "NeverVerifyAllowlistedImages", "AlwaysVerify")
IMAGE_CREDENTIALS_DEFAULT_FROM = (1, 35)
# The checks a row is tried by that are the site's, not each project's (a kubelet serves them all).
SITE_CHECKS = ("image-credentials",)
_KUBELET_VERSION = re.compile(r"^v?(\d+)\.(\d+)")


@dataclasses.dataclass(frozen=True)
class Kubelet:
    """What a real node's kubelet runs: its configuration (its /configz) and version, or why the
    configuration could not be read."""

    version: str
    config: Mapping[str, Any] | None = None
    unread: str = ""


def image_credentials_problem(kubelet: Kubelet) -> str | None:
    """Why this kubelet lets a pod run a cached image without the credentials it was pulled with, or None."""
    config = kubelet.config or {}
    gate = (config.get("featureGates") or {}).get(IMAGE_CREDENTIALS_GATE)
    if gate is False:
        return "%s is turned off" % IMAGE_CREDENTIALS_GATE
    version = _KUBELET_VERSION.match(kubelet.version or "")
    if gate is None and (version is None or tuple(map(int, version.groups())) < IMAGE_CREDENTIALS_DEFAULT_FROM):
        return "kubelet %s has %s off by default (on from 1.35)" % (
            kubelet.version or "of no known version",
            IMAGE_CREDENTIALS_GATE,
        )
    policy = config.get(IMAGE_CREDENTIALS_POLICY)
    if policy not in VERIFYING_POLICIES:
        return "%s is %s" % (IMAGE_CREDENTIALS_POLICY, policy or "not set")
    return None


def image_credentials_check(pods_run: bool, kubelets: Mapping[str, Kubelet]) -> Check:
    """Each real kubelet checks a pod's own pull credentials before it runs a cached image (the
    threat model's ``image-cache`` row): failed where one does not, a warning where one's
    configuration could not be read, skipped where no kubelet runs pods (the sandbox)."""
    check = functools.partial(
        Check,
        "%s/image-credentials" % SECTION_ID,
        "a project cannot run another project's private image from a node's cache",
        expected="every kubelet checks the pull credentials of cached images (%s)" % " or ".join(VERIFYING_POLICIES),
        category="security",
    )
    if not pods_run or not kubelets:
        return check(
            "skip",
            observed="not read",
            message="no real kubelet on this site (simulated nodes): what a kubelet decides is read where one runs",
        )
    observed = {
        node: kubelet.unread
        and "unread: %s" % kubelet.unread
        or (kubelet.config or {}).get(IMAGE_CREDENTIALS_POLICY, "not set")
        for node, kubelet in sorted(kubelets.items())
    }
    problems = {
        node: problem
        for node, kubelet in sorted(kubelets.items())
        if not kubelet.unread and (problem := image_credentials_problem(kubelet))
    }
    if problems:
        return check(
            "fail",
            observed=observed,
            message="on %s, a pod runs an image the kubelet pulled with another project's credentials: %s"
            % (", ".join(problems), "; ".join("%s: %s" % item for item in problems.items())),
            action="leave %s on and set %s: NeverVerifyPreloadedImages (Kubernetes' default from 1.35) or AlwaysVerify "
            "in the kubelets' configuration (clusterproof_kubelet_config on a kubeadm site)"
            % (IMAGE_CREDENTIALS_GATE, IMAGE_CREDENTIALS_POLICY),
        )
    unread = sorted(node for node, kubelet in kubelets.items() if kubelet.unread)
    if unread:
        return check(
            "warn",
            observed=observed,
            message="the kubelet configuration of %s could not be read (its /configz through the API server)"
            % ", ".join(unread),
            action="the API server must reach each kubelet (nodes/proxy): look at the node and its kubelet",
        )
    return check("pass", observed=observed)


EXCEPTION_COLUMNS = ("Project", "Allowed", "Reason")


def exceptions_table(settings: isolation.TenancySettings) -> dict[str, Any]:
    return {
        "id": "%s/exceptions" % SECTION_ID,
        "title": "Declared exceptions to the projects' boundaries",
        "columns": list(EXCEPTION_COLUMNS),
        "rows": [[e.project, isolation.EXCEPTIONS[e.allow], e.reason] for e in settings.exceptions],
        "row_status": None,
    }


THREAT_COLUMNS = ("Row", "What a member writes", "Could", "Guard", "How it is tried")


def _where_tried(probe: threats.Probe) -> str:
    """The projects a probe is tried in, where not every one."""
    if probe.past_ceiling:
        return " (where the project's ResourceQuota holds %s)" % probe.past_ceiling
    if probe.time_limited:
        return " (where the project declares an interactive time limit)"
    if probe.interactive:
        return " (where the project declares nodes for interactive work)"
    return ""


def threat_table(rules: admission.AdmissionRules) -> dict[str, Any]:
    """The threat model as it applies to the engine: each row with its guard and what the
    validator did with it (the attempt's check, the real pods' check, or why it is not tried)."""
    rows = []
    for threat in threats.applicable(rules):
        if threat.probe is not None:
            tried = "attempt %s/<project>/%s%s" % (SECTION_ID, threat.key, _where_tried(threat.probe))
        elif threat.tried_by in SITE_CHECKS:
            tried = "check %s/%s" % (SECTION_ID, threat.tried_by)
        elif threat.tried_by:
            tried = "check %s/<project>/%s" % (SECTION_ID, threat.tried_by)
        elif threat.guard == threats.TOOLKIT:
            tried = "needs hardware: %s/gpu-visibility" % SECTION_ID
        else:
            tried = "not tried: %s" % threat.rule
        rows.append([threat.key, threat.surface, threat.could, threat.guard, tried])
    status = ["warn" if threat.guard == threats.OPEN else "" for threat in threats.applicable(rules)]
    return {
        "id": "%s/threat-model" % SECTION_ID,
        "title": "The threat model (docs/tenancy.md): every field and API a member writes, and its guard",
        "columns": list(THREAT_COLUMNS),
        "rows": rows,
        "row_status": status,
    }


def section(
    checks: Sequence[Check], settings: isolation.TenancySettings, rules: admission.AdmissionRules
) -> dict[str, Any]:
    """The report section as data, the shape ``site_report`` accepts."""
    table = exceptions_table(settings)
    return {
        "id": SECTION_ID,
        "title": SECTION_TITLE,
        "checks": [check.to_dict() for check in checks],
        "tables": [threat_table(rules), *([table] if table["rows"] else [])],
    }
