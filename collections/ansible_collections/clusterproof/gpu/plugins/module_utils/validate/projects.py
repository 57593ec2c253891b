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

from ansible_collections.clusterproof.gpu.plugins.module_utils.model import fairshare, quota_lint
from ansible_collections.clusterproof.gpu.plugins.module_utils.report.model import Check
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import registry
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler.base import Backend, shown
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import projects

LINT_TITLES = {
    "quotas-above-capacity": "quotas fit in what they divide",
    "limit-below-quota": "the limit is at least the quota",
    "child-above-parent": "a child's quota is at most its parent's",
    "zero-weight": "the over-quota weight is above 0",
}


def quota_lint_checks(findings: Sequence[quota_lint.Finding], prefix: str) -> list[Check]:
    """Quota lint findings as warning checks ``<prefix>/lint/<code>/<field>``: what was set, and
    what the engine does with it (a warning: every engine accepts these settings)."""
    return [
        Check(
            f"{prefix}/lint/{finding.code}/{finding.field}",
            f"{finding.field}: {LINT_TITLES[finding.code]}",
            "warn",
            finding.expected,
            finding.found,
            finding.what_the_engine_does,
            category="configuration",
            action=f"nothing, if this is what the site wants; otherwise change {finding.field}",
        )
        for finding in findings
    ]


GPU_RESOURCE = "nvidia.com/gpu"


def allocatable_gpus(nodes: Sequence[Mapping[str, Any]]) -> float:
    """The GPUs the engine can hand out: the nodes' allocatable ``nvidia.com/gpu``, summed."""
    total = 0.0
    for node in nodes:
        value = ((node.get("status") or {}).get("allocatable") or {}).get(GPU_RESOURCE)
        try:
            total += float(value or 0)
        except (TypeError, ValueError):
            continue  # a quantity that is not a plain count is not a device plugin's GPU count
    return total


def lint_projects(declared: Sequence[Mapping[str, Any]], capacity: float | None, policy: str) -> list[Check]:
    """Quota lint of the inventory's projects (a flat list: the tree is ``clusterproof_quota_tree``)
    sharing ``capacity`` GPUs (None: not known)."""
    model = [
        fairshare.Project(wanted.name, wanted.gpu_quota, wanted.gpu_limit, wanted.over_quota_weight)
        for wanted in (projects.Project.from_dict(project) for project in declared)
    ]
    return quota_lint_checks(quota_lint.lint(model, capacity, policy), "projects")


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
