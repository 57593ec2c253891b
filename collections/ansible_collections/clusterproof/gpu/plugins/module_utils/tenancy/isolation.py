"""The boundary around a project, scheduler-neutral: what keeps a tenant inside its quota, its
namespace and its own network. Pure.

A site declares it once (``clusterproof_tenancy``, checked by ``check_settings``) and every project
namespace gets it:

- Pod Security Admission labels (``namespace_security_labels``): ``baseline`` unless the project
  asks for ``restricted`` or an exception allows ``privileged``. Baseline already refuses
  privileged containers, host networking, host PID/IPC and host paths: what owns a host.
- A NetworkPolicy (``network_policy_manifest``): ingress only from the same namespace and from the
  namespaces the site names (DNS, the engine's webhooks, monitoring). Egress stays open: DNS and
  the API server are reached from a project's pods.
- The namespace label ``QUEUE_NAMESPACE_LABEL`` naming the one queue the namespace's work may be
  charged to; the admission policy (``tenancy/admission.py``) reads it.

Exceptions are declared, never implied: a project allowed privileged pods (``privileged``), or a
project whose namespace every project may reach over the network (``shared``, a shared service),
each with its reason, shown in the report as exceptions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.common.problems import FieldProblem
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import names, resource_quota

# The queue a namespace's workloads may be charged to (a project's, or a quota-tree leaf's).
QUEUE_NAMESPACE_LABEL = "clusterproof.io/queue"
# The labels on a project namespace are written by the site, never the tenant.
PROJECT_LABEL = "clusterproof.io/project"
MANAGED_BY = {"app.kubernetes.io/managed-by": "clusterproof"}
NETWORK_POLICY_NAME = "clusterproof-project-isolation"

# Pod Security Standards, strictest first (Kubernetes' names).
POD_SECURITY_LEVELS = ("restricted", "baseline", "privileged")
DEFAULT_POD_SECURITY = "baseline"
# What a project may ask for itself; privileged only through a declared exception.
PROJECT_POD_SECURITY = ("restricted", "baseline")
POD_SECURITY_PREFIX = "pod-security.kubernetes.io/"

# The exceptions a site may declare, and what each allows.
EXCEPTIONS = {
    "privileged": "the project's pods may be privileged or use the host's network (Pod Security privileged)",
    "shared": "every project's pods may reach the project's pods over the network (a shared service)",
}
# Namespaces that reach project pods on every site: cluster DNS and the control plane's add-ons.
SYSTEM_INGRESS_NAMESPACES = ("kube-system",)
SETTINGS_FIELDS = {
    "pod_security": "the Pod Security level of every project namespace: %s" % " | ".join(PROJECT_POD_SECURITY),
    "network_isolation": "whether each project namespace gets its NetworkPolicy (true unless set false)",
    "ingress_namespaces": "namespaces beside kube-system and the engine's that may reach project pods (monitoring)",
    "exceptions": "declared exceptions: [{project, allow: %s, reason}]" % " | ".join(EXCEPTIONS),
    "resource_quota": "every project's ceilings beside its GPUs, changing the defaults (a key set to null: none)",
}
EXCEPTION_FIELDS = ("project", "allow", "reason")


@dataclasses.dataclass(frozen=True)
class IsolationException:
    """A declared exception to a project's boundary, with the reason the site gave."""

    project: str
    allow: str
    reason: str


@dataclasses.dataclass(frozen=True)
class TenancySettings:
    """The site's tenancy: the default Pod Security level, whether projects get NetworkPolicies,
    which further namespaces may reach project pods, the declared exceptions, and every project's
    ceilings beside its GPUs (``resource_quota.DEFAULT_HARD`` changed as the site declares)."""

    pod_security: str = DEFAULT_POD_SECURITY
    network_isolation: bool = True
    ingress_namespaces: tuple[str, ...] = ()
    exceptions: tuple[IsolationException, ...] = ()
    resource_quota: Mapping[str, str] = dataclasses.field(default_factory=lambda: dict(resource_quota.DEFAULT_HARD))

    def allows(self, project: str, allow: str) -> IsolationException | None:
        """The exception that allows ``allow`` to ``project``, or None."""
        for exception in self.exceptions:
            if exception.project == project and exception.allow == allow:
                return exception
        return None

    def pod_security_of(self, project: str, declared: str | None = None) -> str:
        """A project's Pod Security level: privileged by exception, else its own, else the site's."""
        if self.allows(project, "privileged"):
            return "privileged"
        return declared or self.pod_security

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> TenancySettings:
        data = data or {}
        return cls(
            pod_security=str(data.get("pod_security") or DEFAULT_POD_SECURITY),
            network_isolation=bool(data.get("network_isolation", True)),
            ingress_namespaces=tuple(data.get("ingress_namespaces") or ()),
            exceptions=tuple(IsolationException(**dict(item)) for item in data.get("exceptions") or ()),
            # As the inventory check resolved it (the defaults changed by the site), else the defaults.
            resource_quota=resource_quota.resolved(
                {} if data.get("resource_quota") is not None else resource_quota.DEFAULT_HARD,
                data.get("resource_quota"),
            ),
        )


def _shown(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def check_settings(value: Any, projects: Iterable[str]) -> tuple[TenancySettings, list[tuple[str, FieldProblem]]]:
    """``clusterproof_tenancy`` as declared, against the declared ``projects``: the settings (the
    defaults where it has errors) and every problem as (where, problem)."""
    found: list[tuple[str, FieldProblem]] = []
    where = "group all"
    if value is None:
        return TenancySettings(), found
    if not isinstance(value, Mapping):
        found.append(
            (where, FieldProblem("clusterproof_tenancy", "a mapping of %s" % ", ".join(SETTINGS_FIELDS), value))
        )
        return TenancySettings(), found
    for key in sorted(set(value) - set(SETTINGS_FIELDS), key=str):
        expected = "one of %s" % ", ".join(SETTINGS_FIELDS)
        found.append((where, FieldProblem("clusterproof_tenancy.%s" % key, expected, "an unknown field")))
    level = value.get("pod_security", DEFAULT_POD_SECURITY)
    if level not in PROJECT_POD_SECURITY:
        expected = "one of %s (privileged only as a declared exception)" % ", ".join(PROJECT_POD_SECURITY)
        found.append((where, FieldProblem("clusterproof_tenancy.pod_security", expected, level)))
    isolation = value.get("network_isolation", True)
    if not isinstance(isolation, bool):
        found.append((where, FieldProblem("clusterproof_tenancy.network_isolation", "true or false", isolation)))
    ingress = value.get("ingress_namespaces") or []
    if not isinstance(ingress, list) or not all(names.is_dns_label(item) for item in ingress):
        expected = "a list of namespace names (DNS labels)"
        found.append((where, FieldProblem("clusterproof_tenancy.ingress_namespaces", expected, ingress)))
    exceptions = _check_exceptions(value.get("exceptions"), set(projects), found)
    hard: dict[str, str | None] = {}
    if value.get("resource_quota") is not None:
        hard, problems = resource_quota.check_hard(value["resource_quota"], "clusterproof_tenancy.resource_quota", True)
        found.extend((where, problem) for problem in problems)
    if found:
        return TenancySettings(), found
    ceilings = resource_quota.resolved(resource_quota.DEFAULT_HARD, hard)
    return TenancySettings(str(level), isolation, tuple(ingress), tuple(exceptions), ceilings), found


def _check_exceptions(
    value: Any, projects: set[str], found: list[tuple[str, FieldProblem]]
) -> list[IsolationException]:
    if value is None:
        return []
    if not isinstance(value, list):
        found.append(("group all", FieldProblem("clusterproof_tenancy.exceptions", "a list of exceptions", value)))
        return []
    declared: list[IsolationException] = []
    for index, item in enumerate(value):
        where = "clusterproof_tenancy.exceptions[%d]" % index
        if not isinstance(item, Mapping):
            found.append((where, FieldProblem("exception", "a mapping of %s" % ", ".join(EXCEPTION_FIELDS), item)))
            continue
        before = len(found)
        for key in sorted(set(item) - set(EXCEPTION_FIELDS), key=str):
            found.append((where, FieldProblem(str(key), "one of %s" % ", ".join(EXCEPTION_FIELDS), "an unknown field")))
        project, allow, reason = item.get("project"), item.get("allow"), item.get("reason")
        if project not in projects:
            expected = "a declared project (%s)" % ", ".join(sorted(projects)) if projects else "a declared project"
            found.append((where, FieldProblem("project", expected, project)))
        if allow not in EXCEPTIONS:
            found.append((where, FieldProblem("allow", "one of %s" % ", ".join(EXCEPTIONS), allow)))
        if not isinstance(reason, str) or not reason.strip():
            found.append((where, FieldProblem("reason", "why the site allows it (a sentence)", reason)))
        if len(found) == before:
            exception = IsolationException(str(project), str(allow), reason.strip())
            if exception.project in {e.project for e in declared if e.allow == exception.allow}:
                found.append((where, FieldProblem("allow", "each exception once per project", allow)))
            else:
                declared.append(exception)
    return declared


def namespace_security_labels(level: str) -> dict[str, str]:
    """Pod Security Admission's labels for ``level``: enforced, and warned and audited alike."""
    return {POD_SECURITY_PREFIX + mode: level for mode in ("enforce", "warn", "audit")} | {
        POD_SECURITY_PREFIX + "enforce-version": "latest"
    }


def network_policy_manifest(
    namespace: str, ingress_namespaces: Sequence[str], from_all_projects: bool = False
) -> dict[str, Any]:
    """The namespace's NetworkPolicy: every pod takes connections only from pods of the same
    namespace, of ``ingress_namespaces``, and (a shared service) of every project namespace."""
    peers: list[dict[str, Any]] = [{"podSelector": {}}]
    if ingress_namespaces:
        peers.append(
            {
                "namespaceSelector": {
                    "matchExpressions": [
                        {
                            "key": "kubernetes.io/metadata.name",
                            "operator": "In",
                            "values": sorted(set(ingress_namespaces)),
                        }
                    ]
                }
            }
        )
    if from_all_projects:
        peers.append({"namespaceSelector": {"matchExpressions": [{"key": PROJECT_LABEL, "operator": "Exists"}]}})
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": NETWORK_POLICY_NAME, "namespace": namespace, "labels": dict(MANAGED_BY)},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{"from": peers}]},
    }


def ingress_namespaces(site_namespaces: Sequence[str], engine_namespace: str | None) -> tuple[str, ...]:
    """Every namespace that may reach project pods: kube-system, the engine's, the site's."""
    found = [*SYSTEM_INGRESS_NAMESPACES, *([engine_namespace] if engine_namespace else []), *site_namespaces]
    return tuple(sorted(set(found)))
