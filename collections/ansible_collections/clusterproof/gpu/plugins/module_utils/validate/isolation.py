"""Tenant isolation, tried as the tenant: each escape a member of a project could attempt, and
what the site did with it. Pure.

For every project with a declared member (a user, or a group), the validator sends each
:class:`Attempt` to the API server as that member (impersonated, server-side dry run: admission
runs in full, nothing is created) and judges the answer:

- ``own-queue``: a GPU workload in the project's own queue, through the engine: admitted (the
  control: the refusals below are the policy's, not a member who can do nothing);
- ``other-queue``: the same charged to another project's queue: refused by the admission policy;
- ``bypass-scheduler`` (an engine with a scheduler name: KAI): GPUs through the default
  scheduler: refused;
- ``no-queue`` (an engine that gates admission: Kueue): a GPU Job naming no queue: refused;
- ``bare-gpu-pod`` (Kueue): a GPU pod made directly, which Kueue never sees: refused;
- ``privileged-pod``, ``host-network-pod``: refused by Pod Security (admitted where the site
  declared a ``privileged`` exception, shown as such);
- ``other-namespace``: a workload in another project's namespace: refused by RBAC.

Beside them, read back: the admission policy and its binding as clusterproof installs them, and
each project's NetworkPolicy. What only running pods can show (a connection to another project's
Service, a GPU seen through ``NVIDIA_VISIBLE_DEVICES``) is said as such where pods do not run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils import versions
from ansible_collections.clusterproof.gpu.plugins.module_utils.common.objects import is_subset
from ansible_collections.clusterproof.gpu.plugins.module_utils.report.model import Check
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import admission, isolation

SECTION_ID = "isolation"
SECTION_TITLE = "Tenant isolation: each escape tried as a member of the project"
# What in a refusal's message says who refused it.
BY_POLICY = "ValidatingAdmissionPolicy '%s'" % admission.POLICY_NAME
BY_POD_SECURITY = "violates PodSecurity"
BY_RBAC = "cannot create resource"
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

    @property
    def namespace(self) -> str:
        return str(self.manifest["metadata"]["namespace"])


@dataclasses.dataclass(frozen=True)
class Outcome:
    """The API server's answer to an attempt: admitted, or refused with its status and message."""

    admitted: bool
    status: int | None = None
    message: str = ""


def _pod_spec(
    rules: admission.AdmissionRules, gpus: int, scheduler: str | None = None, **security: Any
) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "probe",
        "image": PROBE_IMAGE,
        "securityContext": dict(RESTRICTED_CONTAINER_SECURITY),
    }
    if gpus:
        container["resources"] = {"limits": {admission.GPU_RESOURCE: str(gpus)}}
    if security.get("privileged"):
        container["securityContext"] = {"privileged": True}
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "securityContext": dict(RESTRICTED_POD_SECURITY),
        "containers": [container],
    }
    if security.get("host_network"):
        spec["hostNetwork"] = True
    name = scheduler if scheduler is not None else rules.scheduler_name
    if name:
        spec["schedulerName"] = name
    return spec


def _workload(
    rules: admission.AdmissionRules,
    namespace: str,
    queue: str | None,
    gpus: int = 1,
    kind: str | None = None,
    scheduler: str | None = None,
    **security: Any,
) -> dict[str, Any]:
    """A workload as the engine takes it: a pod where the engine takes pods, else a Job (whose
    pods a controller makes); labelled with ``queue`` unless None."""
    labels = {rules.queue_labels[0]: queue} if queue is not None else {}
    spec = _pod_spec(rules, gpus, scheduler, **security)
    kind = kind or ("Job" if rules.gpu_pods_from_controllers_only else "Pod")
    metadata = {"name": ATTEMPT_NAME, "namespace": namespace, "labels": labels}
    if kind == "Pod":
        return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {"backoffLimit": 0, "template": {"metadata": {"labels": dict(labels)}, "spec": spec}},
    }


FIX_POLICY = (
    "run the scheduler stage again (it installs the admission policy %s and its binding); a workload "
    "admitted here is charged where the tenant chose, not where the site declared" % admission.POLICY_NAME
)
FIX_POD_SECURITY = (
    "label the namespace with Pod Security baseline or restricted (the scheduler stage does), or "
    "declare the exception in clusterproof_tenancy.exceptions if the project really needs it"
)
FIX_RBAC = "remove the RoleBinding or ClusterRoleBinding that gives this member rights outside its project"


def attempts(
    project: str,
    target: str | None,
    rules: admission.AdmissionRules,
    settings: isolation.TenancySettings,
) -> list[Attempt]:
    """What a member of ``project`` tries, against ``target`` (another project; None when the site
    has one project only, and the attempts on another are left out)."""
    other = target or "clusterproof-another-queue"
    privileged = settings.allows(project, "privileged")
    found = [
        Attempt(
            project,
            "own-queue",
            "a GPU workload in the project's own queue is admitted",
            _workload(rules, project, project),
            False,
            "",
            "give the project's members the clusterproof-project-member role (the scheduler stage does); if the "
            "admission policy refused it, its message says which rule",
        ),
        Attempt(
            project,
            "other-queue",
            "a GPU workload charged to another project's queue (%s) is refused" % other,
            _workload(rules, project, other),
            True,
            BY_POLICY,
            FIX_POLICY,
        ),
    ]
    if rules.scheduler_name:
        found.append(
            Attempt(
                project,
                "bypass-scheduler",
                "a GPU pod on the default scheduler, outside %s, is refused" % rules.engine,
                _workload(rules, project, project, kind="Pod", scheduler="default-scheduler"),
                True,
                BY_POLICY,
                FIX_POLICY,
            )
        )
    if rules.queue_required:
        found.append(
            Attempt(
                project,
                "no-queue",
                "a GPU Job that names no queue is refused",
                _workload(rules, project, None, kind="Job"),
                True,
                BY_POLICY,
                FIX_POLICY,
            )
        )
    if rules.gpu_pods_from_controllers_only:
        found.append(
            Attempt(
                project,
                "bare-gpu-pod",
                "a GPU pod made directly, which %s never sees, is refused" % rules.engine,
                _workload(rules, project, project, kind="Pod"),
                True,
                BY_POLICY,
                FIX_POLICY,
            )
        )
    for key, title, security in (
        ("privileged-pod", "a privileged pod", {"privileged": True}),
        ("host-network-pod", "a pod on the host's network", {"host_network": True}),
    ):
        found.append(
            Attempt(
                project,
                key,
                "%s is %s" % (title, "admitted (declared exception)" if privileged else "refused"),
                _workload(rules, project, project, gpus=0, kind="Pod", **security),
                not privileged,
                BY_POD_SECURITY,
                FIX_POD_SECURITY,
                privileged,
            )
        )
    if target is not None:
        found.append(
            Attempt(
                project,
                "other-namespace",
                "a workload in %s's namespace is refused" % target,
                _workload(rules, target, target),
                True,
                BY_RBAC,
                FIX_RBAC,
            )
        )
    return found


def _short(message: str, most: int = 400) -> str:
    return message if len(message) <= most else message[: most - 1] + "…"


def judge(attempt: Attempt, member: Member, outcome: Outcome) -> Check:
    """The check of one attempt: expected against observed, with what to do when it failed."""
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
    """The admission policy and its binding are installed as clusterproof makes them."""
    missing = [m["kind"] for m, have in zip(wanted, found, strict=True) if have is None]
    differs = [m["kind"] for m, have in zip(wanted, found, strict=True) if have is not None and not _holds(m, have)]
    expected = "%s and its binding, as installed" % admission.POLICY_NAME
    if missing or differs:
        observed = "; ".join([*("%s missing" % kind for kind in missing), *("%s changed" % kind for kind in differs)])
        return Check(
            "%s/admission-policy" % SECTION_ID,
            "the admission policy that binds GPU work to its project's queue is installed",
            "fail",
            expected,
            observed,
            "without it a tenant can charge another project's quota or bypass the quota scheduler",
            category="security",
            action=FIX_POLICY,
        )
    return Check(
        "%s/admission-policy" % SECTION_ID,
        "the admission policy that binds GPU work to its project's queue is installed",
        "pass",
        expected,
        "installed",
    )


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


def reach_check(project: str, pods_run: bool) -> Check:
    """A connection from another project's pod to this project's Service: tried only where pods
    run; said as not tried otherwise."""
    check_id = "%s/%s/network-reach" % (SECTION_ID, project)
    title = "%s: another project's pod cannot open a connection to its Service" % project
    if not pods_run:
        return Check(
            check_id,
            title,
            "skip",
            "refused",
            "not tried",
            "pods do not run on this site (simulated nodes): the NetworkPolicy is checked as an object above",
        )
    return Check(
        check_id,
        title,
        "warn",
        "refused",
        "not tried",
        "clusterproof does not yet install a NetworkPolicy enforcer beside flannel, which enforces none: "
        "the NetworkPolicy is in place but nothing may hold it",
        category="security",
        action="install a NetworkPolicy enforcer (kube-network-policies, or a CNI that enforces them)",
    )


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


EXCEPTION_COLUMNS = ("Project", "Allowed", "Reason")


def exceptions_table(settings: isolation.TenancySettings) -> dict[str, Any]:
    return {
        "id": "%s/exceptions" % SECTION_ID,
        "title": "Declared exceptions to the projects' boundaries",
        "columns": list(EXCEPTION_COLUMNS),
        "rows": [[e.project, isolation.EXCEPTIONS[e.allow], e.reason] for e in settings.exceptions],
        "row_status": None,
    }


def section(checks: Sequence[Check], settings: isolation.TenancySettings) -> dict[str, Any]:
    """The report section as data, the shape ``site_report`` accepts."""
    table = exceptions_table(settings)
    return {
        "id": SECTION_ID,
        "title": SECTION_TITLE,
        "checks": [check.to_dict() for check in checks],
        "tables": [table] if table["rows"] else [],
    }
