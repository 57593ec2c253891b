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
each project's NetworkPolicy. Where pods really run, real pods try a connection to each project's
Service from another project's namespace and from its own (``validate.reach_probe`` runs them; the
manifests and the verdict are here). What only running pods can show (that connection, a GPU seen
through ``NVIDIA_VISIBLE_DEVICES``) is said as such where pods do not run.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils import versions
from ansible_collections.clusterproof.gpu.plugins.module_utils.common.objects import is_subset
from ansible_collections.clusterproof.gpu.plugins.module_utils.install import storage
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
