"""Configuration checks: every declared project exists in the scheduler as declared. Pure.

Compares the inventory's projects with what the cluster holds: the engine's object for each
project (judged by the engine's backend: a KAI queue's quota, over-quota weight, limit and parent;
a Kueue ClusterQueue's quota, limits, weight and cohort) and the namespace (node affinity and
interactive time limit annotations), and reports GPUs each project holds right now, for the quota
table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.report.model import Check
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import registry
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler.base import Backend, shown
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import projects


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
    backend: Backend | None = None,
) -> tuple[list[Check], dict[str, Any]]:
    """Checks per project and the quota table (declared, configured, holding now). ``queues``: the
    objects read from the backend's ``project_apis`` (the default engine's when None)."""
    backend = backend or registry.backend(registry.DEFAULT)
    by_queue = backend.project_objects_by_name(queues)
    by_namespace = {namespace["metadata"]["name"]: namespace for namespace in namespaces}
    checks: list[Check] = []
    rows, status = [], []
    for project in declared:
        name = project["name"]
        wanted = projects.Project.from_dict(project)
        readback = backend.project_readback(wanted, by_queue.get(name))
        checks += [
            Check(
                "projects/%s/%s" % (name, check.field),
                check.title,
                "pass" if check.ok else "fail",
                check.expected,
                check.observed,
                check.fix,
            )
            for check in readback.checks
        ]
        row_ok = all(check.ok for check in readback.checks)
        if readback.complete:
            namespace_check = _namespace_check(wanted, by_namespace.get(name))
            row_ok &= namespace_check.status == "pass"
            checks.append(namespace_check)
        rows.append(
            [
                name,
                shown(wanted.gpu_quota),
                readback.quota,
                shown(wanted.over_quota_weight),
                readback.weight,
                shown(holding.get(name, 0.0)),
            ]
        )
        status.append("pass" if row_ok else "fail")
    table = {
        "id": "project-quotas",
        "title": backend.quota_table.title,
        "columns": [
            "Project",
            "Quota (declared)",
            backend.quota_table.quota_column,
            "Weight (declared)",
            backend.quota_table.weight_column,
            "GPUs held now",
        ],
        "rows": rows,
        "row_status": status,
    }
    return checks, table
