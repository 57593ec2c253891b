"""What a project (a tenant: a team with a GPU quota) becomes on the cluster. Pure.

A project is its namespace, its KAI queue and the access of its members:

- Namespace ``<name>``, labelled with the project and the queue, and annotated with the project's
  workload settings (node affinity for training and for interactive work, the interactive time
  limit) so that anything building workloads for it, the validator included, reads one source.
- Queue ``<name>`` under the department queue: GPU quota, over-quota weight, limit, priority.
- Role ``clusterproof-project-member`` in the namespace (submit and manage workloads there, and
  nothing cluster-wide) and a RoleBinding of the declared users and groups to it. Nothing binds
  them elsewhere, so a member of team-a cannot create workloads in team-b's namespace.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import kai

PROJECT_LABEL = "clusterproof.io/project"
MANAGED_BY = {"app.kubernetes.io/managed-by": "clusterproof"}
TRAINING_NODES_ANNOTATION = "clusterproof.io/node-affinity-training"
INTERACTIVE_NODES_ANNOTATION = "clusterproof.io/node-affinity-interactive"
INTERACTIVE_LIMIT_ANNOTATION = "clusterproof.io/interactive-time-limit-seconds"
MEMBER_ROLE = "clusterproof-project-member"
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def valid_name(name: str) -> bool:
    """A project name must be a DNS label: it names the namespace and the queue."""
    return bool(_DNS_LABEL.fullmatch(name))


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
    {"apiGroups": ["scheduling.run.ai"], "resources": ["podgroups"], "verbs": ["get", "list", "watch"]},
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
    # Kueue only: the most of its quota the project lends to others (all of it when None).
    gpu_lending_limit: float | None = None

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
        )


def namespace_manifest(project: Project) -> dict[str, Any]:
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
            "labels": {**MANAGED_BY, PROJECT_LABEL: project.name, kai.QUEUE_LABEL: project.name},
            "annotations": annotations,
        },
    }


def queue_manifest(project: Project, department: str = kai.DEPARTMENT_QUEUE) -> dict[str, Any]:
    return kai.queue_manifest(
        project.name,
        project.gpu_quota,
        project.over_quota_weight,
        project.gpu_limit,
        department,
        project.priority,
    )


def _subjects(project: Project) -> list[dict[str, str]]:
    subjects = [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"} for user in project.users]
    subjects += [{"kind": "Group", "name": group, "apiGroup": "rbac.authorization.k8s.io"} for group in project.groups]
    return subjects


def rbac_manifests(project: Project, scheduler: str = "kai") -> list[dict[str, Any]]:
    rules = list(MEMBER_RULES)
    if scheduler == "kueue":
        from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import kueue

        rules += kueue.MEMBER_RULES
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


def scheduler_manifests(project: Project, scheduler: str = "kai") -> list[dict[str, Any]]:
    """The project's objects in the scheduler backend: KAI's Queue, or Kueue's ClusterQueue and
    LocalQueue (module_utils/scheduler/kueue.py)."""
    if scheduler == "kueue":
        # kueue.py builds on this module's Project: imported here, not at the top, to avoid a cycle.
        from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import kueue

        return kueue.project_manifests(project)
    return [queue_manifest(project)]


def manifests(project: Project, scheduler: str = "kai") -> list[dict[str, Any]]:
    """Everything the project is, in the order to create it."""
    return [namespace_manifest(project), *scheduler_manifests(project, scheduler), *rbac_manifests(project, scheduler)]


def active_workloads(pods: Sequence[Mapping[str, Any]]) -> list[str]:
    """Names of pods that are still pending or running (what removing a project would kill)."""
    return sorted(
        pod["metadata"]["name"]
        for pod in pods
        if (pod.get("status") or {}).get("phase") in ("Pending", "Running")
        and not pod["metadata"].get("deletionTimestamp")
    )
