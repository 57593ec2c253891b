"""What a project (a tenant: a team with a GPU quota) is, scheduler-neutral. Pure.

A project is its namespace, its scheduler objects and the access of its members. This module holds
the neutral part; the scheduler objects (a KAI queue, Kueue's ClusterQueue and LocalQueue) are the
engine's, in ``scheduler/`` (``Backend.project_objects``):

- Namespace ``<name>``, labelled with the project (and whatever the engine adds, such as KAI's
  queue label), and annotated with the project's workload settings (node affinity for training
  and for interactive work, the interactive time limit) so that anything building workloads for
  it, the validator included, reads one source.
- Role ``clusterproof-project-member`` in the namespace (submit and manage workloads there, and
  nothing cluster-wide, plus what the engine lets members read) and a RoleBinding of the declared
  users and groups to it. Nothing binds them elsewhere, so a member of team-a cannot create
  workloads in team-b's namespace.
- Its boundary (``tenancy/isolation.py``): Pod Security labels and the queue label on the
  namespace, and a NetworkPolicy that lets in only the namespace itself and the site's system
  namespaces; and what it may hold beside its GPUs (``tenancy/resource_quota.py``): a
  ResourceQuota, with a LimitRange where CPU or memory is held.

The rules a project's declaration follows are written here once (``problems``), for the inventory,
the ``gpu_project`` module and the engines.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.common.problems import FieldProblem
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import isolation, names, resource_quota

PROJECT_LABEL = isolation.PROJECT_LABEL
MANAGED_BY = isolation.MANAGED_BY
TRAINING_NODES_ANNOTATION = "clusterproof.io/node-affinity-training"
INTERACTIVE_NODES_ANNOTATION = "clusterproof.io/node-affinity-interactive"
INTERACTIVE_LIMIT_ANNOTATION = "clusterproof.io/interactive-time-limit-seconds"
MEMBER_ROLE = "clusterproof-project-member"
# A project's CPU (cores) and memory (GiB) quotas and limits beside its GPUs, and each one's unit.
RESOURCE_FIELDS = ("cpu_quota", "cpu_limit", "memory_quota", "memory_limit")
RESOURCE_UNITS = {"cpu": "CPU cores", "memory": "GiB of memory"}


def valid_name(name: str) -> bool:
    """A project name must be a DNS label: it names the namespace and the queue."""
    return names.is_dns_label(name)


# What a member may do in the project's namespace: run and manage workloads and their inputs.
MEMBER_RULES = [
    {
        "apiGroups": [""],
        "resources": ["pods", "services", "configmaps", "persistentvolumeclaims", "secrets"],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
    },
    {
        "apiGroups": [""],
        "resources": ["pods/log", "pods/exec", "pods/portforward", "events"],
        "verbs": ["get", "list", "create"],
    },
    {
        "apiGroups": ["batch"],
        "resources": ["jobs", "cronjobs"],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
    },
    {
        "apiGroups": ["apps"],
        "resources": ["deployments", "statefulsets"],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
    },
]


@dataclasses.dataclass(frozen=True)
class Project:
    name: str
    gpu_quota: float
    over_quota_weight: float
    gpu_limit: float | None = None
    priority: int | None = None
    training_nodes: tuple[str, ...] = ()
    interactive_nodes: tuple[str, ...] = ()
    interactive_time_limit_seconds: int | None = None
    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    # Only on an engine that lends quota by a limit (``Backend.lends_quota``): the most of its
    # quota the project lends to others (all of it when None).
    gpu_lending_limit: float | None = None
    # Only on an engine that takes them (``Backend.cpu_memory_quotas``: KAI): CPU cores and memory
    # (GiB) guaranteed and at most, beside the GPUs (None: none, unlimited).
    cpu_quota: float | None = None
    cpu_limit: float | None = None
    memory_quota: float | None = None
    memory_limit: float | None = None
    # The boundary (tenancy/isolation.py): the namespace's Pod Security level, whether it gets its
    # NetworkPolicy, the namespaces beside kube-system and the engine's that may reach its pods,
    # and whether every project may (a declared ``shared`` exception).
    pod_security: str = isolation.DEFAULT_POD_SECURITY
    network_isolation: bool = True
    ingress_namespaces: tuple[str, ...] = ()
    ingress_from_all_projects: bool = False
    # What the project may hold beside its GPUs (resource_quota.KEYS to quantities; empty: nothing).
    resource_quota: Mapping[str, str] = dataclasses.field(default_factory=lambda: dict(resource_quota.DEFAULT_HARD))

    @property
    def cpu_memory_declared(self) -> bool:
        """Whether the project declares a CPU or memory quota or limit."""
        return any(getattr(self, field) is not None for field in RESOURCE_FIELDS)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Project:
        affinity = data.get("node_affinity") or {}
        return cls(
            name=data["name"],
            gpu_quota=float(data["gpu_quota"]),
            over_quota_weight=float(data.get("over_quota_weight", data["gpu_quota"])),
            gpu_limit=None if data.get("gpu_limit") is None else float(data["gpu_limit"]),
            priority=data.get("priority"),
            training_nodes=tuple(affinity.get("training") or ()),
            interactive_nodes=tuple(affinity.get("interactive") or ()),
            interactive_time_limit_seconds=data.get("interactive_time_limit_seconds"),
            users=tuple(data.get("users") or ()),
            groups=tuple(data.get("groups") or ()),
            gpu_lending_limit=None if data.get("gpu_lending_limit") is None else float(data["gpu_lending_limit"]),
            **{field: None if data.get(field) is None else float(data[field]) for field in RESOURCE_FIELDS},
            pod_security=data.get("pod_security") or isolation.DEFAULT_POD_SECURITY,
            network_isolation=bool(data.get("network_isolation", True)),
            ingress_namespaces=tuple(data.get("ingress_namespaces") or ()),
            ingress_from_all_projects=bool(data.get("ingress_from_all_projects", False)),
            resource_quota=resource_quota.resolved(
                {} if data.get("resource_quota") is not None else resource_quota.DEFAULT_HARD,
                data.get("resource_quota"),
            ),
        )


def namespace_manifest(project: Project, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The project's namespace; ``labels``: what the engine adds (``Backend.namespace_labels``)."""
    annotations = {
        TRAINING_NODES_ANNOTATION: ",".join(project.training_nodes),
        INTERACTIVE_NODES_ANNOTATION: ",".join(project.interactive_nodes),
        INTERACTIVE_LIMIT_ANNOTATION: ""
        if project.interactive_time_limit_seconds is None
        else str(project.interactive_time_limit_seconds),
    }
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": project.name,
            "labels": {
                **MANAGED_BY,
                PROJECT_LABEL: project.name,
                isolation.QUEUE_NAMESPACE_LABEL: project.name,
                **isolation.namespace_security_labels(project.pod_security),
                **(labels or {}),
            },
            "annotations": annotations,
        },
    }


def network_policy_manifest(project: Project, engine_namespace: str | None = None) -> dict[str, Any]:
    """The project's NetworkPolicy: ingress from its own namespace, kube-system, the engine's
    namespace (its webhooks), the site's ``ingress_namespaces`` and, when shared, every project."""
    return isolation.network_policy_manifest(
        project.name,
        isolation.ingress_namespaces(project.ingress_namespaces, engine_namespace),
        project.ingress_from_all_projects,
    )


def network_manifests(project: Project, engine_namespace: str | None = None) -> list[dict[str, Any]]:
    """The project's NetworkPolicy when it is isolated, else nothing (``gpu_project`` then removes
    one made before)."""
    return [network_policy_manifest(project, engine_namespace)] if project.network_isolation else []


def resource_quota_manifests(project: Project) -> list[dict[str, Any]]:
    """The project's ResourceQuota (and LimitRange where CPU or memory is held)."""
    return resource_quota.manifests(project.name, project.resource_quota, MANAGED_BY)


def _subjects(project: Project) -> list[dict[str, str]]:
    subjects = [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"} for user in project.users]
    subjects += [{"kind": "Group", "name": group, "apiGroup": "rbac.authorization.k8s.io"} for group in project.groups]
    return subjects


def rbac_manifests(project: Project, engine_rules: Iterable[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
    """The member Role and its RoleBinding; ``engine_rules``: what members may read of the engine."""
    rules = [*MEMBER_RULES, *(dict(rule) for rule in engine_rules)]
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": MEMBER_ROLE, "namespace": project.name, "labels": dict(MANAGED_BY)},
        "rules": rules,
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": MEMBER_ROLE, "namespace": project.name, "labels": dict(MANAGED_BY)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": MEMBER_ROLE},
    }
    subjects = _subjects(project)
    if subjects:
        # The API server drops an empty list: written, it would differ on every run.
        binding["subjects"] = subjects
    return [role, binding]


def active_workloads(pods: Sequence[Mapping[str, Any]]) -> list[str]:
    """Names of pods that are still pending or running (what removing a project would kill)."""
    return sorted(
        pod["metadata"]["name"]
        for pod in pods
        if (pod.get("status") or {}).get("phase") in ("Pending", "Running")
        and not pod["metadata"].get("deletionTimestamp")
    )


# A declared field that breaks a project rule: what was expected, and the value found.
ProjectProblem = FieldProblem


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _shown(value: Any) -> str:
    return "%g" % value if _is_number(value) else str(value)


def problems(
    values: Mapping[str, Any], lenders: Sequence[str] | None = None, units: bool = False
) -> list[ProjectProblem]:
    """The rules of a project's quota fields, written once: ``gpu_quota`` a non-negative number,
    ``gpu_limit`` not below it, ``over_quota_weight`` non-negative, ``gpu_lending_limit`` from 0
    to the quota (and, when ``lenders`` is given because the project's engine lends no quota by a
    limit, not at all: ``lenders`` name the engines that do), a positive time limit; ``cpu_quota``
    and ``memory_quota`` non-negative, ``cpu_limit`` and ``memory_limit`` not below their quota.

    Fields left out are not checked (the inventory and the module say which they require); a
    ``gpu_quota`` or ``over_quota_weight`` given as None is a problem, other fields may be None.
    ``units``: name the unit in every expectation (the inventory's wording)."""
    found: list[ProjectProblem] = []
    quota = values.get("gpu_quota")
    if "gpu_quota" in values and (not _is_number(quota) or quota < 0):
        found.append(ProjectProblem("gpu_quota", "a non-negative number of GPUs", quota))
    limit = values.get("gpu_limit")
    if limit is not None and (not _is_number(limit) or (_is_number(quota) and limit < quota)):
        unit = " of GPUs" if units else ""
        found.append(ProjectProblem("gpu_limit", "a number%s not below gpu_quota (%s)" % (unit, _shown(quota)), limit))
    weight = values.get("over_quota_weight")
    if "over_quota_weight" in values and (not _is_number(weight) or weight < 0):
        found.append(ProjectProblem("over_quota_weight", "a non-negative number", weight))
    lending = values.get("gpu_lending_limit")
    if lending is not None and lenders is not None:
        expected = "no lending limit: only clusterproof_scheduler %s lends quota by a limit" % " or ".join(lenders)
        found.append(ProjectProblem("gpu_lending_limit", expected, lending))
    elif lending is not None and (not _is_number(lending) or lending < 0 or (_is_number(quota) and lending > quota)):
        found.append(
            ProjectProblem("gpu_lending_limit", "a number of GPUs from 0 to gpu_quota (%s)" % _shown(quota), lending)
        )
    for resource, unit in RESOURCE_UNITS.items():
        least = values.get(resource + "_quota")
        if least is not None and (not _is_number(least) or least < 0):
            found.append(ProjectProblem(resource + "_quota", "a non-negative number of %s" % unit, least))
        most = values.get(resource + "_limit")
        if most is not None and (not _is_number(most) or most < 0 or (_is_number(least) and most < least)):
            floor = "" if least is None else " not below %s_quota (%s)" % (resource, _shown(least))
            found.append(ProjectProblem(resource + "_limit", "a non-negative number of %s%s" % (unit, floor), most))
    time_limit = values.get("interactive_time_limit_seconds")
    if time_limit is not None and not (
        isinstance(time_limit, int) and not isinstance(time_limit, bool) and time_limit > 0
    ):
        wording = "a positive whole number of seconds" if units else "a positive number of seconds"
        found.append(ProjectProblem("interactive_time_limit_seconds", wording, time_limit))
    return found


def problem_messages(name: str, values: Mapping[str, Any], lenders: Sequence[str] | None = None) -> list[str]:
    """``problems`` as sentences that name the project and the field (the module's wording)."""
    return [
        "project %s: %s: expected %s, found %s" % (name, problem.field, problem.expected, _shown(problem.found))
        if _is_number(problem.found)
        else "project %s: %s: expected %s, found %r" % (name, problem.field, problem.expected, problem.found)
        for problem in problems(values, lenders)
    ]
