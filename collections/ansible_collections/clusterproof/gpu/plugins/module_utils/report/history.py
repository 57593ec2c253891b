"""What changed since an earlier run of the same site, and which earlier run to compare with.

A report records the state it found (``site_state``: nodes with their GPUs, product and Ready; the
control planes declared and etcd's members; projects with the quota and weight configured in the
cluster; storage classes and the default; benchmark figures), read from the tables and checks its
validation sections carry. The next run compares its own state with the earlier one's
(``compare``) and shows the differences first: a block in the JSON (``changes``) and the report's
first section, whose failed checks are the regressions (a node or a declared control plane's etcd
member gone, fewer GPUs, another GPU product, a quota or weight that differs, a storage class gone or the
default moved). The first run of a site has nothing to compare with and says so.

Earlier runs are read from the reports directory: ``latest`` (the previous run, before this one is
written), ``baseline`` (the run an admin accepted, ``set_baseline``), a run's stamp, or a path to a
``report.json``. May import: the standard library and ``report.model``. Touches: the reports
directory (reads runs; ``set_baseline`` writes the ``baseline`` link).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.report.model import (
    SCHEMA_VERSION,
    Check,
    Report,
    Section,
    Table,
)

CHANGES_SECTION_ID = "changes"
# The control-plane section's check of etcd's members: it expects the declared control planes and
# observes the members (validate/control_plane.py, which this package may not import).
ETCD_MEMBERS_CHECK = "control-plane/etcd-members"
HEALTH_TABLE_PREFIX = "gpu-health-"
BASELINE_LINK = "baseline"
LATEST_LINK = "latest"
# Figures are compared to a tenth of a percent; quotas and weights to a hundredth of a GPU.
_EPSILON = 0.005


class HistoryError(ValueError):
    """An earlier run that was asked for and cannot be used; the message names the field."""


# --- the state a report found ---------------------------------------------------------------------


def _table(report: Report, table_id: str) -> Table | None:
    return next((table for section in report.sections for table in section.tables if table.id == table_id), None)


def _column(table: Table, name: str) -> int | None:
    return table.columns.index(name) if name in table.columns else None


def _number(value: Any) -> float | None:
    try:
        return None if value is None or isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        return None


def site_state(report: Report, benchmark_figures: Mapping[str, float] | None = None) -> dict[str, Any]:
    """The state the report's sections found, as plain data (the JSON block ``site_state``).
    ``benchmark_figures``: each GPU figure by ``host/gpu<index>/<metric>`` (or ``host/<metric>``)."""
    nodes: dict[str, dict[str, Any]] = {}
    # The nodes the inventory declared (found or not); None where the run had no node table.
    declared: list[str] | None = None
    node_table = _table(report, "node-gpus")
    if node_table is not None:
        name_at, gpus_at = _column(node_table, "Node"), _column(node_table, "Found GPUs")
        product_at, ready_at = _column(node_table, "Found product"), _column(node_table, "Ready")
        kubelet_at = _column(node_table, "Kubelet")
        declared = sorted(
            str(row[name_at])
            for row in node_table.rows
            if name_at is not None and not str(row[name_at]).endswith(" (not declared)")
        )
        for row in node_table.rows:
            if name_at is None or ready_at is None or row[ready_at] == "not in cluster":
                continue  # declared but not in the cluster: not part of what was found
            name = str(row[name_at]).removesuffix(" (not declared)")
            nodes[name] = {
                "gpus": _number(row[gpus_at]) if gpus_at is not None else None,
                "product": row[product_at] if product_at is not None else None,
                "ready": row[ready_at],
                "kubelet": row[kubelet_at] if kubelet_at is not None else None,
            }
    projects: dict[str, dict[str, Any]] = {}
    quota_table = _table(report, "project-quotas")
    if quota_table is not None:
        # Columns: project, quota declared, quota as the engine holds it, weight declared, weight as
        # the engine holds it, GPUs held now (the engine's columns are named after the engine).
        for row in quota_table.rows:
            projects[str(row[0])] = {"quota": _number(row[2]), "weight": _number(row[4])}
    # None: the run looked at no storage class (the inventory declared none); {} : it looked and found
    # none of those declared.
    storage: dict[str, Any] | None = None
    class_table = _table(report, "storage-classes")
    if class_table is not None and class_table.rows:
        storage = {}
        name_at, default_at, found_at = (_column(class_table, c) for c in ("Class", "Default (found)", "Found"))
        for row in class_table.rows:
            if None in (name_at, default_at, found_at) or row[found_at] != "yes":
                continue
            storage[str(row[name_at])] = {"default": row[default_at] == "yes"}
    # The driver each GPU host runs, from its passive health table (report sections gpu-health-<host>).
    drivers: dict[str, str] = {}
    for section in report.sections:
        for table in section.tables:
            driver_at = _column(table, "Driver")
            if table.id.startswith(HEALTH_TABLE_PREFIX) and driver_at is not None and table.rows:
                drivers[table.id.removeprefix(HEALTH_TABLE_PREFIX)] = str(table.rows[0][driver_at])
    return {
        "nodes": nodes,
        "declared_nodes": declared,
        "control_planes": _control_planes(report),
        "drivers": drivers,
        "projects": projects,
        "storage_classes": storage,
        "benchmarks": dict(benchmark_figures or {}),
    }


def _control_planes(report: Report) -> dict[str, list[str]] | None:
    """The control planes declared and etcd's members as the run read them; None where the run read no
    member list (a site kubeadm did not make, or etcd did not answer)."""
    check = next(
        (check for section in report.sections for check in section.checks if check.id == ETCD_MEMBERS_CHECK), None
    )
    if check is None or not isinstance(check.expected, list) or not isinstance(check.observed, list):
        return None
    return {"declared": sorted(map(str, check.expected)), "members": sorted(map(str, check.observed))}


# --- comparing two states -------------------------------------------------------------------------


def _differs(before: Any, after: Any) -> bool:
    if isinstance(before, (int, float)) and isinstance(after, (int, float)):
        return abs(before - after) > _EPSILON
    return before != after


def _control_plane_changes(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> dict[str, Any]:
    """etcd members added, gone and removed as declared (their control plane out of the inventory, as
    remove_node.yml leaves it). Not compared where either run read no member list (a site kubeadm did
    not make: the section then has no control-plane checks)."""
    if not before or not after:
        return {
            "control_planes_compared": False,
            "control_planes_added": [],
            "control_planes_gone": [],
            "control_planes_removed": [],
        }
    old_members, new_members = set(before["members"]), set(after["members"])
    gone = sorted(old_members - new_members)
    declared_now = set(after["declared"])
    return {
        "control_planes_compared": True,
        "control_planes_added": sorted(new_members - old_members),
        "control_planes_gone": [name for name in gone if name in declared_now],
        "control_planes_removed": [name for name in gone if name not in declared_now],
    }


def compare(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """What differs between two ``site_state`` blocks: each kind of change as a list."""
    old_nodes, new_nodes = before.get("nodes") or {}, after.get("nodes") or {}
    old_projects, new_projects = before.get("projects") or {}, after.get("projects") or {}
    old_classes, new_classes = before.get("storage_classes"), after.get("storage_classes")
    if old_classes is None or new_classes is None:
        # One of the runs looked at no storage class: nothing to compare (not every class gone).
        old_classes = new_classes = {}
    old_figures, new_figures = before.get("benchmarks") or {}, after.get("benchmarks") or {}
    gone = sorted(set(old_nodes) - set(new_nodes))
    # A node gone that the inventory no longer declares was removed as declared (remove_node.yml and the
    # host out of the inventory): no regression. Where the later run names no declared nodes (a report
    # from before they were recorded), every node gone counts as gone.
    declared_now = after.get("declared_nodes")
    removed = [] if declared_now is None else [name for name in gone if name not in set(declared_now)]
    changes: dict[str, Any] = {
        "nodes_added": sorted(set(new_nodes) - set(old_nodes)),
        "nodes_gone": [name for name in gone if name not in removed],
        "nodes_removed": removed,
        **_control_plane_changes(before.get("control_planes"), after.get("control_planes")),
        "gpu_counts": [],
        "products": [],
        "kubelets": [],
        "drivers": [],
        "projects_added": sorted(set(new_projects) - set(old_projects)),
        "projects_gone": sorted(set(old_projects) - set(new_projects)),
        "quotas": [],
        "weights": [],
        "storage_classes_added": sorted(set(new_classes) - set(old_classes)),
        "storage_classes_gone": sorted(set(old_classes) - set(new_classes)),
        "default_storage_class": None,
        "benchmarks": [],
    }
    for name in sorted(set(old_nodes) & set(new_nodes)):
        old, new = old_nodes[name], new_nodes[name]
        if _differs(old.get("gpus"), new.get("gpus")):
            changes["gpu_counts"].append({"node": name, "before": old.get("gpus"), "after": new.get("gpus")})
        if old.get("product") != new.get("product"):
            changes["products"].append({"node": name, "before": old.get("product"), "after": new.get("product")})
        if old.get("kubelet") and new.get("kubelet") and old["kubelet"] != new["kubelet"]:
            changes["kubelets"].append({"node": name, "before": old["kubelet"], "after": new["kubelet"]})
    old_drivers, new_drivers = before.get("drivers") or {}, after.get("drivers") or {}
    for name in sorted(set(old_drivers) & set(new_drivers)):
        if old_drivers[name] != new_drivers[name]:
            changes["drivers"].append({"node": name, "before": old_drivers[name], "after": new_drivers[name]})
    for name in sorted(set(old_projects) & set(new_projects)):
        for field, kind in (("quota", "quotas"), ("weight", "weights")):
            old, new = old_projects[name].get(field), new_projects[name].get(field)
            if _differs(old, new):
                changes[kind].append({"project": name, "before": old, "after": new})
    defaults = [
        sorted(name for name, data in classes.items() if data.get("default")) for classes in (old_classes, new_classes)
    ]
    if defaults[0] != defaults[1]:
        changes["default_storage_class"] = {"before": defaults[0], "after": defaults[1]}
    for key in sorted(set(old_figures) & set(new_figures)):
        old, new = float(old_figures[key]), float(new_figures[key])
        if old and abs(new - old) / old > 0.001:
            changes["benchmarks"].append(
                {"figure": key, "before": old, "after": new, "change_pct": round(100.0 * (new - old) / old, 1)}
            )
    return changes


def _check(check_id: str, title: str, ok: bool, expected: Any, observed: Any, message: str, category: str) -> Check:
    return Check(
        f"{CHANGES_SECTION_ID}/{check_id}",
        title,
        "pass" if ok else "fail",
        expected,
        observed,
        message,
        category=None if ok else category,
    )


def changes_section(changes: Mapping[str, Any] | None, against: str, note: str = "") -> Section:
    """The report's first section: the regressions since ``against`` as failed checks, the rest as
    passes that say what changed, and a table of every change. ``changes`` None: nothing to
    compare with (``note`` says why)."""
    title = f"What changed since {against}" if changes is not None else "What changed since the last run"
    if changes is None:
        status = "warn" if note.startswith("cannot") else "skip"
        check = Check(f"{CHANGES_SECTION_ID}/compared", "Compared with an earlier run", status, message=note)
        return Section(CHANGES_SECTION_ID, title, [check])
    gone, added = changes["nodes_gone"], changes["nodes_added"]
    removed = changes.get("nodes_removed") or []
    checks = [
        _check("nodes-gone", "no node is gone", not gone, [], gone,
               f"gone since {against}: {', '.join(gone)}" if gone else "", "capacity"),
        _check("nodes-added", "nodes added", True, None, added, ", ".join(added) or "none", "capacity"),
        _check("nodes-removed", "nodes removed as declared (no longer in the inventory)", True, None, removed,
               ", ".join(removed) or "none", "capacity"),
    ]  # fmt: skip
    # A control plane's etcd member gone while the inventory still declares it fails here too (the
    # control-plane section says why); one removed with its host out of the inventory is as declared.
    if changes.get("control_planes_compared"):
        cp_gone, cp_added = changes["control_planes_gone"], changes["control_planes_added"]
        cp_removed = changes["control_planes_removed"]
        checks += [
            _check("control-planes-gone", "no declared control plane's etcd member is gone", not cp_gone, [],
                   cp_gone, f"gone since {against}: {', '.join(cp_gone)}" if cp_gone else "", "configuration"),
            _check("control-planes-added", "etcd members added", True, None, cp_added,
                   ", ".join(cp_added) or "none", "configuration"),
            _check("control-planes-removed", "control planes removed as declared (no longer in the inventory)",
                   True, None, cp_removed, ", ".join(cp_removed) or "none", "configuration"),
        ]  # fmt: skip
    fewer = [c for c in changes["gpu_counts"] if (c["after"] or 0) < (c["before"] or 0)]
    checks.append(
        _check("gpu-counts", "no node has fewer GPUs", not fewer, [], changes["gpu_counts"],
               "; ".join(f"{c['node']}: {c['before']:g} -> {c['after']:g} GPUs" for c in fewer), "capacity")
    )  # fmt: skip
    checks.append(
        _check("gpu-products", "every node has the GPU product it had", not changes["products"], [],
               changes["products"],
               "; ".join(f"{c['node']}: {c['before']} -> {c['after']}" for c in changes["products"]), "hardware")
    )  # fmt: skip
    # An upgrade moves the kubelets' versions on purpose: shown, never a regression (the other checks say
    # whether the site still holds).
    kubelets = changes.get("kubelets") or []
    checks.append(
        _check("kubelet-versions", "each node's Kubernetes version (an upgrade is no regression)", True, None,
               kubelets, "; ".join(f"{c['node']}: {c['before']} -> {c['after']}" for c in kubelets) or "unchanged",
               "configuration")
    )  # fmt: skip
    # A new driver is not a regression by itself (an upgrade is often the point), but it is the
    # first suspect of any other change: a warning, never silent.
    drivers = changes.get("drivers") or []
    checks.append(
        Check(
            f"{CHANGES_SECTION_ID}/drivers", "every node runs the NVIDIA driver it ran", "warn" if drivers else "pass",
            [], drivers, "; ".join(f"{c['node']}: {c['before']} -> {c['after']}" for c in drivers),
            category="configuration" if drivers else None,
            action="confirm the upgrade was meant, and compare the benchmark figures with the baseline"
            if drivers else None,
        )
    )  # fmt: skip
    for kind, word in (("quotas", "quota"), ("weights", "over-quota weight")):
        listed = changes[kind]
        checks.append(
            _check(kind, f"every project's {word} is what it was", not listed, [], listed,
                   "; ".join(f"{c['project']}: {c['before']} -> {c['after']} (in the cluster)" for c in listed),
                   "configuration")
        )  # fmt: skip
    gone_projects = changes["projects_gone"]
    checks.append(
        _check("projects-gone", "no project is gone", not gone_projects, [], gone_projects,
               ", ".join(gone_projects), "configuration")
    )  # fmt: skip
    gone_classes, default_moved = changes["storage_classes_gone"], changes["default_storage_class"]
    checks.append(
        _check("storage-classes", "no storage class is gone and the default is where it was",
               not gone_classes and default_moved is None, [], {"gone": gone_classes, "default": default_moved},
               "; ".join(filter(None, [f"gone: {', '.join(gone_classes)}" if gone_classes else "",
                                       f"default: {default_moved['before']} -> {default_moved['after']}"
                                       if default_moved else ""])), "configuration")
    )  # fmt: skip
    rows = [[c["figure"], c["before"], c["after"], f"{c['change_pct']:+.1f}%"] for c in changes["benchmarks"]]
    tables = []
    if rows:
        table_title = f"Benchmark figures since {against} (judged in the site's benchmark section)"
        tables.append(Table("changes-benchmarks", table_title, ["Figure", "Before", "Now", "Change"], rows))
    return Section(CHANGES_SECTION_ID, title, checks, tables)


# --- earlier runs ---------------------------------------------------------------------------------


def site_dir(reports_dir: str | os.PathLike[str], site: str) -> Path:
    return Path(reports_dir) / site


def resolve_run(reports_dir: str | os.PathLike[str], site: str, which: str) -> Path | None:
    """The ``report.json`` of an earlier run: ``which`` is ``latest``, ``baseline``, a run's stamp
    (a directory under the site's), or a path to a report.json. None when ``latest`` or
    ``baseline`` does not exist yet; HistoryError when a named run does not."""
    root = site_dir(reports_dir, site)
    if which in (LATEST_LINK, BASELINE_LINK):
        path = root / which / "report.json"
        return path if path.is_file() else None
    candidate = Path(which).expanduser()
    if candidate.is_file():
        return candidate
    if (root / which / "report.json").is_file() and "/" not in which:
        return root / which / "report.json"
    runs = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.is_symlink()) if root.is_dir() else []
    raise HistoryError(
        f"compare_with: expected latest, baseline, a run of site {site} ({', '.join(runs[-5:]) or 'none yet'}) "
        f"or a report.json path, found {which!r}"
    )


def load_run(path: Path) -> tuple[dict[str, Any] | None, str]:
    """An earlier run's report as data and its label (its run directory's name), or None and why
    it cannot be read (a report of a newer schema, a file that is not a report)."""
    label = path.parent.resolve().name
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        return None, f"cannot read the run {label} ({path}): {error}"
    version = data.get("schema_version") if isinstance(data, dict) else None
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        return (
            None,
            f"cannot compare with the run {label}: its schema_version {version!r} is not one this reader "
            f"knows (1 to {SCHEMA_VERSION})",
        )
    return data, label


def set_baseline(reports_dir: str | os.PathLike[str], site: str, run: str = LATEST_LINK) -> Path:
    """Mark a run (its stamp, or ``latest``) as the site's acceptance baseline: the relative link
    ``<site>/baseline``, replaced atomically. Returns the run's directory."""
    root = site_dir(reports_dir, site)
    target = (root / run).resolve() if run == LATEST_LINK else root / run
    if not (target / "report.json").is_file() or target.parent.resolve() != root.resolve():
        runs = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.is_symlink()) if root.is_dir() else []
        raise HistoryError(
            f"run: expected latest or a run of site {site} under {root} ({', '.join(runs[-5:]) or 'none yet'}), "
            f"found {run!r}"
        )
    link, temporary = root / BASELINE_LINK, root / f".{BASELINE_LINK}.tmp"
    if temporary.is_symlink() or temporary.exists():
        temporary.unlink()
    temporary.symlink_to(target.name)
    temporary.replace(link)
    return target
