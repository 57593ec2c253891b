"""Configuration checks: every declared project exists in the scheduler as declared. Pure.

Compares the inventory's projects with what the cluster holds: the KAI queue (GPU quota,
over-quota weight, limit, parent) and the namespace (node affinity and interactive time limit
annotations), and reports GPUs each project holds right now, for the quota table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.report.model import Check
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import kai
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import projects


def _fmt(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _namespace_check(wanted: projects.Project, namespace: Mapping[str, Any] | None) -> Check:
    """The project's namespace carries the settings (node affinity, time limit) it is declared with."""
    name = wanted.name
    settings_ok = namespace is not None and all(
        (namespace["metadata"].get("annotations") or {}).get(key) == value
        for key, value in projects.namespace_manifest(wanted)["metadata"]["annotations"].items()
    )
    return Check(
        "projects/%s/namespace" % name,
        "%s: namespace carries its node affinity and time limit" % name,
        "pass" if settings_ok else "fail",
        "namespace %s as declared" % name,
        "as declared" if settings_ok else ("missing" if namespace is None else "differs"),
        "",
    )


def validate_projects(
    declared: Sequence[Mapping[str, Any]],
    queues: Sequence[Mapping[str, Any]],
    namespaces: Sequence[Mapping[str, Any]],
    holding: Mapping[str, float],
) -> tuple[list[Check], dict[str, Any]]:
    """Checks per project and the quota table (declared, configured, holding now)."""
    by_queue = {queue["metadata"]["name"]: queue for queue in queues}
    by_namespace = {namespace["metadata"]["name"]: namespace for namespace in namespaces}
    checks: list[Check] = []
    rows, status = [], []
    for project in declared:
        name = project["name"]
        wanted = projects.Project.from_dict(project)
        queue = by_queue.get(name)
        prefix = "projects/%s" % name
        if queue is None:
            checks.append(
                Check(
                    "%s/queue" % prefix,
                    "%s has a KAI queue" % name,
                    "fail",
                    "Queue %s" % name,
                    "missing",
                    "run playbooks/scheduler.yml to create it",
                )
            )
            rows.append(
                [
                    name,
                    _fmt(wanted.gpu_quota),
                    "missing",
                    _fmt(wanted.over_quota_weight),
                    "missing",
                    _fmt(holding.get(name, 0.0)),
                ]
            )
            status.append("fail")
            continue
        gpu = ((queue.get("spec") or {}).get("resources") or {}).get("gpu") or {}
        configured = {
            "quota": gpu.get("quota"),
            "over-quota weight": gpu.get("overQuotaWeight"),
            "limit": None if gpu.get("limit") in (None, -1) else gpu.get("limit"),
            "parent queue": (queue.get("spec") or {}).get("parentQueue"),
        }
        expected = {
            "quota": wanted.gpu_quota,
            "over-quota weight": wanted.over_quota_weight,
            "limit": wanted.gpu_limit,
            "parent queue": kai.DEPARTMENT_QUEUE,
        }
        row_ok = True
        for field, value in expected.items():
            seen = configured[field]
            ok = (
                seen == value
                if isinstance(value, str) or value is None
                else (seen is not None and float(seen) == float(value))
            )
            row_ok &= ok
            checks.append(
                Check(
                    "%s/%s" % (prefix, field.replace(" ", "-")),
                    "%s: queue %s is %s" % (name, field, _fmt(value)),
                    "pass" if ok else "fail",
                    _fmt(value),
                    _fmt(seen),
                    "" if ok else "queue %s differs from the inventory; re-run playbooks/scheduler.yml" % name,
                )
            )
        namespace_check = _namespace_check(wanted, by_namespace.get(name))
        row_ok &= namespace_check.status == "pass"
        checks.append(namespace_check)
        rows.append(
            [
                name,
                _fmt(wanted.gpu_quota),
                _fmt(configured["quota"]),
                _fmt(wanted.over_quota_weight),
                _fmt(configured["over-quota weight"]),
                _fmt(holding.get(name, 0.0)),
            ]
        )
        status.append("pass" if row_ok else "fail")
    table = {
        "id": "project-quotas",
        "title": "GPU quota per project: declared, configured in the scheduler, held now",
        "columns": [
            "Project",
            "Quota (declared)",
            "Quota (configured)",
            "Weight (declared)",
            "Weight (configured)",
            "GPUs held now",
        ],
        "rows": rows,
        "row_status": status,
    }
    return checks, table


def validate_projects_on_kueue(
    declared: Sequence[Mapping[str, Any]],
    cluster_queues: Sequence[Mapping[str, Any]],
    namespaces: Sequence[Mapping[str, Any]],
    holding: Mapping[str, float],
) -> tuple[list[Check], dict[str, Any]]:
    """The same checks and table on a Kueue site: each project's ClusterQueue (nominal quota,
    borrowing and lending limits, fair-sharing weight, cohort) and namespace."""
    from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import kueue

    by_queue = {queue["metadata"]["name"]: queue for queue in cluster_queues}
    by_namespace = {namespace["metadata"]["name"]: namespace for namespace in namespaces}
    checks: list[Check] = []
    rows, status = [], []
    for project in declared:
        name = project["name"]
        wanted = projects.Project.from_dict(project)
        queue = by_queue.get(name)
        differences = kueue.queue_differences(wanted, queue)
        checks.append(
            Check(
                "projects/%s/cluster-queue" % name,
                "%s: ClusterQueue as declared (quota, limits, weight, cohort)" % name,
                "fail" if differences else "pass",
                "ClusterQueue %s as declared" % name,
                "; ".join("%s %s, not %s" % (field, found, want) for field, want, found in differences)
                or "as declared",
                "re-run playbooks/scheduler.yml" if differences else "",
            )
        )
        namespace_check = _namespace_check(wanted, by_namespace.get(name))
        settings_ok = namespace_check.status == "pass"
        checks.append(namespace_check)
        spec = (queue or {}).get("spec") or {}
        nominal = next(
            (
                resource.get("nominalQuota")
                for group in spec.get("resourceGroups") or []
                for flavor in group.get("flavors") or []
                for resource in flavor.get("resources") or []
                if resource.get("name") == kueue.GPU
            ),
            None,
        )
        rows.append(
            [
                name,
                _fmt(wanted.gpu_quota),
                "missing" if queue is None else _fmt(nominal),
                _fmt(wanted.over_quota_weight),
                "missing" if queue is None else _fmt((spec.get("fairSharing") or {}).get("weight")),
                _fmt(holding.get(name, 0.0)),
            ]
        )
        status.append("fail" if differences or not settings_ok else "pass")
    table = {
        "id": "project-quotas",
        "title": "GPU quota per project: declared, configured in Kueue, held now",
        "columns": [
            "Project",
            "Quota (declared)",
            "Nominal quota (configured)",
            "Weight (declared)",
            "Fair-sharing weight (configured)",
            "GPUs held now",
        ],
        "rows": rows,
        "row_status": status,
    }
    return checks, table
