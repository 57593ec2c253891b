"""The site validation report's data model: checks, tables, charts, sections, the report.

Pure data: dataclasses and their dict forms, no Ansible, no Kubernetes, no rendering. May import
the standard library only, so that code which runs on GPU hosts (``node/``) can report checks
without carrying the renderers. Validation modules return their findings as sections (plain data);
``site_report`` turns them back into this model with :func:`report_from_dict`, and
``report.render`` writes a run's artefacts (``render.write_report``)::

    reports/<site>/<YYYYmmddTHHMMSSZ>/report.json   machine-readable, schema below
    reports/<site>/<YYYYmmddTHHMMSSZ>/junit.xml     one testsuite per section, one testcase per check
    reports/<site>/<YYYYmmddTHHMMSSZ>/report.html   for people; opens offline, no external assets
    reports/<site>/latest -> <YYYYmmddTHHMMSSZ>     relative symlink, replaced atomically

``report.json`` (``schema_version`` 1). Fields marked *derived* are recomputed on reading::

    schema_version  int, 1
    generator       "clusterproof"
    site            str
    cluster_mode    str ("sandbox", "existing", ...)
    started         str, ISO 8601 (may be "")
    finished        str, ISO 8601 (may be "")
    verdict         "pass" | "fail"; fail when any check failed                  (derived)
    counts          {"pass": n, "fail": n, "warn": n, "skip": n, "needs-hardware": n, "total": n}  (derived)
    sections[]      id, title, verdict (derived), counts (derived), checks[], tables[], charts[]
    site_state      what the run found, or null: nodes {name: gpus, product, ready}, drivers {host:
                    NVIDIA driver version, from its passive health}, projects {name:
                    quota, weight as the engine holds them}, storage_classes {name: default},
                    benchmarks {"host/gpuN/metric": value} (report.history)
    changes         what differs from an earlier run's site_state, or null: nodes_added, nodes_gone,
                    gpu_counts, products, drivers, projects_added, projects_gone, quotas, weights,
                    storage_classes_added, storage_classes_gone, default_storage_class, benchmarks,
                    against (the earlier run's name)
      checks[]      id, title, status (one of STATUSES), expected, observed (any JSON value or null),
                    message (str), duration_s (number or null), category (one of CATEGORIES or null),
                    action (str or null); a failed or warning check always has both: its own, or
                    its section's (``SECTION_CATEGORIES``, ``DEFAULT_ACTIONS``)           (derived)
      tables[]      id, title, columns (list of str), rows (list of lists), row_status (list of a
                    status per row, or null)
      charts[]      id, title, kind ("allocation"), y_label, timeline: [[t_seconds, {project: gpus}], ...]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

# 2: checks carry ``category`` and ``action``. A reader of version 2 reads version 1 reports.
SCHEMA_VERSION = 2
GENERATOR = "clusterproof"
STATUSES = ("pass", "fail", "warn", "skip", "needs-hardware")

# What kind of problem a failed check is, so that an admin knows whom it concerns.
CATEGORIES = ("configuration", "capacity", "fairness", "hardware", "performance", "security")
# The actions a hardware verdict recommends, mildest first (the order DCGM's and the cloud node
# health checks escalate in). A check names one of them, or its own sentence.
ISOLATE_NODE = "isolate the node (cordon and drain it)"
RESET_GPU = "reset the GPU (nvidia-smi -r, with the node drained)"
REBOOT_NODE = "reboot the node"
REPLACE_GPU = "replace the GPU (open a hardware case with its serial number)"
HARDWARE_ACTIONS = (ISOLATE_NODE, RESET_GPU, REBOOT_NODE, REPLACE_GPU)
# The action of a failed check that names none: what to do about its category.
DEFAULT_ACTIONS: dict[str, str] = {
    "configuration": "make the cluster match the inventory (or the inventory match the site), then validate again",
    "capacity": "bring back the missing nodes or GPUs (or declare what the site has), then validate again",
    "fairness": "compare the scheduler's version and settings with the inventory; report the scenario to the "
    "engine's maintainers if they match",
    "hardware": f"{ISOLATE_NODE}, then {RESET_GPU}; {REBOOT_NODE} or {REPLACE_GPU} if it persists",
    "performance": f"{ISOLATE_NODE} and run the benchmark again alone; compare with the site's baseline",
    "security": "install the site's tenancy again (the scheduler stage), then validate again; until it passes, "
    "a tenant can take GPUs outside its quota or reach another project",
}
# The category of a check that names none, by the first of these prefixes its section id has.
SECTION_CATEGORIES: tuple[tuple[str, str], ...] = (
    ("gpu-nodes", "capacity"),
    ("gpu-health", "hardware"),
    ("gpu-benchmark", "performance"),
    ("host-tests", "configuration"),
    ("storage", "configuration"),
    ("project", "configuration"),
    ("quota-tree", "fairness"),
    ("isolation", "security"),
    ("scenario", "fairness"),
    ("run", "configuration"),
)
FALLBACK_CATEGORY = "configuration"


def section_category(section_id: str) -> str:
    """The category of the checks of a section that name none (``SECTION_CATEGORIES``)."""
    for prefix, category in SECTION_CATEGORIES:
        if section_id.startswith(prefix):
            return category
    return FALLBACK_CATEGORY


# A point of an allocation timeline: seconds since the scenario began, and GPUs held per project.
TimelinePoint = tuple[float, Mapping[str, float]]


@dataclasses.dataclass
class Check:
    """One thing the validator verified, and what it found."""

    id: str
    title: str
    status: str
    expected: Any = None
    observed: Any = None
    message: str = ""
    duration_s: float | None = None
    category: str | None = None  # one of CATEGORIES; for failed and warning checks, see classify()
    action: str | None = None  # what an admin should do when the check failed

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"check {self.id}: status {self.status!r} is not one of {', '.join(STATUSES)}")
        if self.category is not None and self.category not in CATEGORIES:
            raise ValueError(f"check {self.id}: category {self.category!r} is not one of {', '.join(CATEGORIES)}")

    def classify(self, section_id: str) -> None:
        """Give a failed or warning check its category and action when it names none: its
        section's category (``section_category``) and that category's default action."""
        if self.status not in ("fail", "warn"):
            return
        if self.category is None:
            self.category = section_category(section_id)
        if not self.action:
            self.action = DEFAULT_ACTIONS[self.category]

    def to_dict(self) -> dict[str, Any]:
        # Every field in order, as it is: the instance's dict holds exactly the fields. Not
        # dataclasses.asdict, whose deep copy costs five times as much on a report of thousands.
        # Category and action only where set (failed and warning checks): most checks pass.
        data = dict(vars(self))
        if data["category"] is None:
            del data["category"]
        if data["action"] is None:
            del data["action"]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Check:
        for key in ("id", "status"):
            if not data.get(key):
                raise ValueError(f"a check has no {key}: {dict(data)!r}")
        duration = data.get("duration_s")
        category, action = data.get("category"), data.get("action")
        return cls(
            id=str(data["id"]),
            title=str(data.get("title") or data["id"]),
            status=str(data["status"]),
            expected=data.get("expected"),
            observed=data.get("observed"),
            message=str(data.get("message") or ""),
            duration_s=None if duration is None else float(duration),
            category=None if category is None else str(category),
            action=None if action is None else str(action),
        )


@dataclasses.dataclass
class Table:
    """A table shown with its section, e.g. GPUs per node, declared against found."""

    id: str
    title: str
    columns: list[str]
    rows: list[list[Any]]
    row_status: list[str] | None = None  # a status per row, to colour it; None for plain tables

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "columns": list(self.columns),
            "rows": [list(row) for row in self.rows],
            "row_status": None if self.row_status is None else list(self.row_status),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Table:
        row_status = data.get("row_status")
        return cls(
            id=str(data.get("id", "")),
            title=str(data.get("title", "")),
            columns=[str(column) for column in data.get("columns") or []],
            rows=[list(row) for row in data.get("rows") or []],
            row_status=None if row_status is None else [str(status) for status in row_status],
        )


@dataclasses.dataclass
class Chart:
    """GPUs allocated per project over time, drawn by :func:`allocation_chart_svg`."""

    id: str
    title: str
    timeline: list[TimelinePoint]
    kind: str = "allocation"
    y_label: str = "GPUs allocated"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "kind": self.kind,
            "y_label": self.y_label,
            "timeline": [[t, dict(values)] for t, values in self.timeline],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Chart:
        return cls(
            id=str(data.get("id", "")),
            title=str(data.get("title", "")),
            kind=str(data.get("kind") or "allocation"),
            y_label=str(data.get("y_label") or "GPUs allocated"),
            timeline=[(float(t), {str(k): _number(v) for k, v in values.items()}) for t, values in data["timeline"]],
        )


@dataclasses.dataclass
class Section:
    """A group of checks (a validator stage), with the tables and charts that explain them."""

    id: str
    title: str
    checks: list[Check]
    tables: list[Table] = dataclasses.field(default_factory=list)
    charts: list[Chart] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        for check in self.checks:
            check.classify(self.id)

    @property
    def counts(self) -> dict[str, int]:
        return _counts(self.checks)

    @property
    def verdict(self) -> str:
        return "fail" if any(check.status == "fail" for check in self.checks) else "pass"


@dataclasses.dataclass
class Report:
    """One validation run of one site."""

    site: str
    cluster_mode: str
    started: str
    finished: str
    sections: list[Section]
    # What the run found (history.site_state) and what changed since an earlier run (history.compare).
    site_state: dict[str, Any] | None = None
    changes: dict[str, Any] | None = None

    @property
    def checks(self) -> list[Check]:
        return [check for section in self.sections for check in section.checks]

    @property
    def failed_checks(self) -> list[Check]:
        return [check for check in self.checks if check.status == "fail"]

    @property
    def counts(self) -> dict[str, int]:
        return _counts(self.checks)

    @property
    def verdict(self) -> str:
        """``fail`` when any check failed; warnings, skips and needs-hardware do not fail a run."""
        return "fail" if self.failed_checks else "pass"


# --- a run that stopped ---------------------------------------------------------------------------

STOPPED_SECTION_ID = "run"
STOPPED_CHECK_ID = "run/stopped"
# How much of a stopping error's message the check keeps: the first lines say what and why; a
# traceback's tail is in the run's log.
_STOPPED_MESSAGE_CHARS = 2000


def failure_message(result: Mapping[str, Any]) -> str:
    """What a failed Ansible task result says went wrong: its ``msg``, or for a loop (whose own msg
    is only "One or more items failed") each failed item's, joined."""
    items = [item for item in result.get("results") or [] if isinstance(item, Mapping) and item.get("failed")]
    if items:
        return "; ".join(str(item.get("msg") or "failed, with no message") for item in items)
    return str(result.get("msg") or "failed, with no message")


def stopped_section(task: str, cause: str) -> Section:
    """The section a run that stopped before its end adds to the report: one failed check that
    names where it stopped (the task) and why (the error's message, or the signal)."""
    where = " ".join(str(task or "").split()) or "an unnamed task"
    why = str(cause or "").strip() or "no message"
    if len(why) > _STOPPED_MESSAGE_CHARS:
        why = why[:_STOPPED_MESSAGE_CHARS] + " […]"
    check = Check(
        id=STOPPED_CHECK_ID,
        title="The run went to its end",
        status="fail",
        expected="every stage ran",
        observed="stopped at: %s" % where,
        message=why,
    )
    return Section(id=STOPPED_SECTION_ID, title="Run: stopped before its end", checks=[check])


# --- building from data ---------------------------------------------------------------------------

NODE_TABLE_COLUMNS = [
    "Node",
    "Declared GPUs",
    "Found GPUs",
    "GPUs counted from",
    "Declared product",
    "Found product",
    "Ready",
    "Kubelet",
]
# How a node's GPUs were counted (validate.nodes): the device plugin's allocatable, or DRA ResourceSlices.
GPU_SOURCES = {"device-plugin": "device plugin", "dra": "DRA ResourceSlices", "none": "—"}


def node_table(rows: Iterable[Mapping[str, Any]]) -> Table:
    """The per-node GPU table (declared against found) from ``node_validation`` rows as dicts."""
    body: list[list[Any]] = []
    statuses: list[str] = []
    for row in rows:
        if not row.get("present", True):
            ready: Any = "not in cluster"
        else:
            ready = {True: "yes", False: "no"}.get(row.get("ready"), None)
        name = str(row.get("name", ""))
        if row.get("declared") is False:
            name += " (not declared)"
        body.append(
            [
                name,
                row.get("declared_gpus"),
                row.get("found_gpus"),
                _gpu_source(row),
                row.get("declared_product"),
                row.get("found_product"),
                ready,
                row.get("kubelet"),
            ]
        )
        statuses.append(str(row.get("status") or "pass"))
    return Table(
        id="node-gpus",
        title="GPUs per node: declared and found",
        columns=list(NODE_TABLE_COLUMNS),
        rows=body,
        row_status=statuses,
    )


def _gpu_source(row: Mapping[str, Any]) -> str | None:
    if row.get("simulated"):
        return "simulated (KWOK)"
    source = row.get("gpu_source")
    if source is None:
        return None  # a row of an older validator
    shown = GPU_SOURCES.get(str(source), str(source))
    return f"{shown} (both report GPUs)" if row.get("both_sources") else shown


def section_to_dict(section: Section) -> dict[str, Any]:
    """A section as a validator hands it to the report: ``id``, ``title``, ``checks``, ``tables``
    (what :func:`section_from_dict` reads back; the report's verdict and counts are derived there)."""
    return {
        "id": section.id,
        "title": section.title,
        "checks": [check.to_dict() for check in section.checks],
        "tables": [table.to_dict() for table in section.tables],
    }


def section_from_dict(data: Mapping[str, Any]) -> Section:
    """A section from data: ``id``, ``title``, ``checks``, optional ``tables``, ``charts``, ``node_table``."""
    if not data.get("id"):
        raise ValueError(f"a report section has no id: {sorted(data)!r}")
    tables = [Table.from_dict(table) for table in data.get("tables") or []]
    if data.get("node_table"):
        tables.insert(0, node_table(data["node_table"]))
    return Section(
        id=str(data["id"]),
        title=str(data.get("title") or data["id"]),
        checks=[Check.from_dict(check) for check in data.get("checks") or []],
        tables=tables,
        charts=[Chart.from_dict(chart) for chart in data.get("charts") or []],
    )


def report_from_dict(data: Mapping[str, Any]) -> Report:
    """A report from its JSON form (what :func:`to_dict` gives); derived fields are recomputed."""
    version = data.get("schema_version", SCHEMA_VERSION)
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise ValueError(f"report schema_version {version!r} is newer than this reader ({SCHEMA_VERSION})")
    return Report(
        site=str(data.get("site", "")),
        cluster_mode=str(data.get("cluster_mode", "")),
        started=str(data.get("started") or ""),
        finished=str(data.get("finished") or ""),
        sections=[section_from_dict(section) for section in data.get("sections") or []],
        site_state=data.get("site_state"),
        changes=data.get("changes"),
    )


# --- JSON -----------------------------------------------------------------------------------------


def classify(report: Report) -> Report:
    """Every failed or warning check of the report with its category and action (``Check.classify``);
    the same report, for chaining. The renderers call it, so checks added after their section was
    made are classified too."""
    for section in report.sections:
        for check in section.checks:
            check.classify(section.id)
    return report


def to_dict(report: Report) -> dict[str, Any]:
    classify(report)
    return {
        "schema_version": SCHEMA_VERSION,
        "generator": GENERATOR,
        "site": report.site,
        "cluster_mode": report.cluster_mode,
        "started": report.started,
        "finished": report.finished,
        "verdict": report.verdict,
        "counts": report.counts,
        "sections": [
            {
                "id": section.id,
                "title": section.title,
                "verdict": section.verdict,
                "counts": section.counts,
                "checks": [check.to_dict() for check in section.checks],
                "tables": [table.to_dict() for table in section.tables],
                "charts": [chart.to_dict() for chart in section.charts],
            }
            for section in report.sections
        ],
        "site_state": report.site_state,
        "changes": report.changes,
    }


def _number(value: Any) -> float:
    """A GPU count from data: numbers stay as they are (8 stays 8, 0.5 stays 0.5), text is parsed."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return float(value)


def _counts(checks: Iterable[Check]) -> dict[str, int]:
    counts = dict.fromkeys(STATUSES, 0)
    for check in checks:
        counts[check.status] += 1
    counts["total"] = sum(counts.values())
    return counts
