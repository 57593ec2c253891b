"""Judge GPU benchmark figures across the site and across runs: stragglers and baselines.

Pure: no I/O, no clock, nothing touched. May import the standard library, ``report.model`` and the
constants of ``node.gpu_benchmark`` (whose section shape it reads). What it reads is what the
``gpu_benchmark`` module returns per host (``section``: ``gpu-benchmark-<host>``, whose figures
table has ``gpu_benchmark.FIGURE_COLUMNS``) and what a saved ``report.json`` holds (schema 1 or 2,
including reports written before the figures table had its "Model" column). What it gives is one
report section, ``gpu-benchmark-site`` (:func:`site_section`):

**Stragglers.** Every per-GPU figure is compared with the same model's figures for the same
benchmark across the site; a GPU more than ``straggler_tolerance`` (default 5 %, DeepOps' burn-in
rule: slower than 1.05 x the best) below its yardstick is a failed ``performance`` check whose
action is to isolate its node. The yardstick:

* 3 GPUs or more: their median. One slow GPU cannot move the median, so it stands out by all it
  lost; it stays the rule while fewer than half of the GPUs are slow (half or more slow by the
  same amount pull the median down with them: the baseline catches those).
* 2 GPUs: the better of the two. Their median would be their mean, which the slow one drags
  halfway down: a GPU 10 % slow would sit only 5 % below it, and pass.
* 1 GPU: nothing to compare with (a ``skip``): the baseline is its only yardstick.

Figures of a whole host (the all-reduce bus bandwidth) are not compared across hosts: they
depend on how many GPUs the host has and how they are linked, which the figures do not record.
They are compared with the baseline, host by host.

**Baseline.** Each figure of this run (host, GPU index, benchmark) is compared with the same
figure of a reference run (the site's saved baseline, or its previous run; the caller says which
in ``reference_label``); one that fell more than ``tolerance`` (default 5 %) below it is a failed
``performance`` check naming both figures and the fall in percent. A figure the reference lacks,
or measured there on another GPU model, is *new*: counted, never failed.

The 5 % defaults and the recorded H100's run-to-run spread (two runs of the runner a minute
apart: bf16 591.7 and 602.1 TFLOP/s, fp16 583.9 and 557.3, a 4.6 % fall; copy within 0.1 %) are
in roles/gpu_benchmark/README.md: on power-capped GPUs the matmul figures move by several percent
between runs, so a site whose repeat runs spread wider raises ``tolerance`` rather than ignoring
the check.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from ansible_collections.clusterproof.gpu.plugins.module_utils.node.gpu_benchmark import (
    SECTION_ID_PREFIX,
    as_number,
    format_figure,
)
from ansible_collections.clusterproof.gpu.plugins.module_utils.report.model import (
    ISOLATE_NODE,
    REBOOT_NODE,
    REPLACE_GPU,
    RESET_GPU,
    Check,
    Table,
)

SITE_SECTION_ID = f"{SECTION_ID_PREFIX}-site"
DEFAULT_TOLERANCE = 0.05
# Below this many GPUs of a model, the median gives way to the better GPU (module docstring).
MEDIAN_MIN_GPUS = 3
READABLE_SCHEMA_VERSIONS = (1, 2)
# A figures table names its columns; older reports lack "Model" and "In practice". Read in this order.
_NEEDED_COLUMNS = ("GPU", "Benchmark", "Measured", "Unit", "Status")
# Rows that hold no GPU figure: a dry run on the CPU, or a benchmark that did not run.
_NOT_A_GPU_FIGURE = ("needs-hardware",)


class Figure(NamedTuple):
    """One measured figure of one run: on a host's GPU (``gpu`` its index) or of the whole host.

    A named tuple, not a dataclass: a site of 80,000 GPUs reads 400,000 of them per run, twice.
    """

    host: str
    gpu: int | None
    metric: str
    model: str
    value: float
    unit: str

    @property
    def where(self) -> str:
        return f"{self.host}" if self.gpu is None else f"{self.host} GPU {self.gpu}"

    @property
    def key(self) -> tuple[str, int | None, str]:
        """The same figure in another run: host, GPU index, benchmark (the first three fields)."""
        return self[:3]


# ---------------------------------------------------------------------------------------------
# Reading figures from sections and reports


def figures_from_sections(sections: Iterable[Mapping[str, Any]]) -> list[Figure]:
    """Every GPU figure in the hosts' benchmark sections, in their order; other sections are passed over."""
    figures: list[Figure] = []
    for section in sections:
        section_id = str(section.get("id") or "")
        if not section_id.startswith(SECTION_ID_PREFIX + "-"):
            continue
        host = section_id[len(SECTION_ID_PREFIX) + 1 :]
        for table in section.get("tables") or []:
            figures.extend(_figures_from_table(host, table))
    return figures


def benchmark_sections(sections: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The hosts' benchmark sections (``gpu-benchmark-<host>``), without a site section made here before."""
    return [
        section
        for section in sections
        if str(section.get("id") or "").startswith(SECTION_ID_PREFIX + "-")
        and (section.get("id") != SITE_SECTION_ID or any(_is_figures_table(t) for t in section.get("tables") or []))
    ]


def _is_figures_table(table: Mapping[str, Any]) -> bool:
    columns = table.get("columns") or []
    return all(column in columns for column in _NEEDED_COLUMNS)


def _figures_from_table(host: str, table: Mapping[str, Any]) -> list[Figure]:
    if not _is_figures_table(table):
        return []
    columns = list(table["columns"])
    gpu_at, metric_at, value_at, unit_at, status_at = (columns.index(name) for name in _NEEDED_COLUMNS)
    model_at = columns.index("Model") if "Model" in columns else None
    figures = []
    for row in table.get("rows") or []:
        if len(row) != len(columns):
            continue
        value = as_number(row[value_at])
        if value is None or row[status_at] in _NOT_A_GPU_FIGURE:
            continue
        gpu, model = _gpu_and_model(row[gpu_at], None if model_at is None else row[model_at])
        if model == "CPU":  # the runner fell back to the CPU on a GPU host: not a GPU figure
            continue
        figures.append(Figure(host, gpu, str(row[metric_at]), model, value, str(row[unit_at] or "")))
    return figures


def _gpu_and_model(gpu_cell: Any, model_cell: Any) -> tuple[int | None, str]:
    """The GPU index and model of a row: ``0`` and a "Model" cell, or the older ``"0: NVIDIA H100 ..."``."""
    if type(gpu_cell) is int:  # not a bool
        return gpu_cell, str(model_cell or "unknown")
    text = str(gpu_cell)
    older = re.fullmatch(r"(\d+): (.*)", text)
    if older:
        return int(older.group(1)), str(model_cell or older.group(2))
    return None, str(model_cell or "unknown")


# ---------------------------------------------------------------------------------------------
# Stragglers


def straggler_checks(figures: Sequence[Figure], tolerance: float = DEFAULT_TOLERANCE) -> tuple[list[Check], Table]:
    """Each GPU more than ``tolerance`` below its model's yardstick for a benchmark, as a failed check;
    one passing (or, with a single GPU, skipped) check per model and benchmark where none is."""
    tolerance = checked_tolerance("straggler_tolerance", tolerance)
    groups: dict[tuple[str, str], list[Figure]] = {}
    for figure in figures:
        if figure.gpu is not None:
            groups.setdefault((figure.model, figure.metric), []).append(figure)
    checks: list[Check] = []
    rows: list[list[Any]] = []
    statuses: list[str] = []
    for (model, metric), group in groups.items():
        unit = group[0].unit
        slowest = min(group, key=lambda figure: figure.value)
        check_id = f"{SITE_SECTION_ID}/stragglers/{_slug(model)}/{metric}"
        title = f"The {model} GPUs keep up with each other: {metric}"
        if len(group) == 1:
            checks.append(
                Check(
                    id=check_id,
                    title=title,
                    status="skip",
                    message=f"{metric}: one {model} GPU in the site ({slowest.where}), no peer to compare it "
                    "with; the baseline is its yardstick",
                )
            )
            rows.append([model, metric, 1, "-", None, unit, slowest.where, slowest.value, None, 0, "skip"])
            statuses.append("skip")
            continue
        yardstick, named = _yardstick(group)
        floor = yardstick * (1.0 - tolerance)
        behind = [figure for figure in group if figure.value < floor]
        below = _percent_below(slowest.value, yardstick)
        status = "fail" if behind else "pass"
        rows.append([model, metric, len(group), named, _round(yardstick), unit, slowest.where, slowest.value,
                     below, len(behind), status])  # fmt: skip
        statuses.append(status)
        if not behind:
            checks.append(
                Check(
                    id=check_id,
                    title=title,
                    status="pass",
                    expected=f"every GPU >= {format_figure(floor)} {unit} (within {_pct(tolerance)} of {named})",
                    observed=f"slowest {slowest.where}: {format_figure(slowest.value)} {unit} ({below:.1f}% below)",
                    message=f"{metric} on {len(group)} {model} GPUs: {named} {format_figure(yardstick)} {unit}; "
                    f"the slowest, {slowest.where}, is {below:.1f}% below it, within the {_pct(tolerance)} tolerance",
                )
            )
        checks.extend(_straggler(figure, yardstick, named, floor, tolerance) for figure in behind)
    table = Table(
        id=f"{SITE_SECTION_ID}-stragglers",
        title="Each GPU model's figures across the site: the slowest GPU against its peers",
        columns=[
            "Model",
            "Benchmark",
            "GPUs",
            "Compared with",
            "Value",
            "Unit",
            "Slowest",
            "Slowest value",
            "Below (%)",
            "Stragglers",
            "Status",
        ],
        rows=rows,
        row_status=statuses,
    )
    return checks, table


def _yardstick(group: Sequence[Figure]) -> tuple[float, str]:
    """The figure a GPU is compared with, and how to name it (module docstring says why)."""
    values = [figure.value for figure in group]
    if len(values) >= MEDIAN_MIN_GPUS:
        return statistics.median(values), f"the median of the site's {len(values)}"
    return max(values), "the better of the site's 2"


def _straggler(figure: Figure, yardstick: float, named: str, floor: float, tolerance: float) -> Check:
    below = _percent_below(figure.value, yardstick)
    return _shortfall(
        figure,
        below,
        f"{SITE_SECTION_ID}/straggler/{figure.host}/gpu{figure.gpu}/{figure.metric}",
        f"GPU {figure.gpu} on {figure.host} keeps up with the other {figure.model} GPUs: {figure.metric}",
        f">= {format_figure(floor)} {figure.unit} (within {_pct(tolerance)} of {named}: {format_figure(yardstick)})",
        f"{figure.metric} on {figure.where} ({figure.model}): {format_figure(figure.value)} {figure.unit}, "
        f"{below:.1f}% below {named} {figure.model} GPUs ({format_figure(yardstick)} {figure.unit}); "
        f"the tolerance is {_pct(tolerance)}. A GPU this far behind its peers slows every job that spans "
        f"it. Look at `nvidia-smi -q -d PERFORMANCE,CLOCK,POWER` on {figure.host} (throttle reasons, clocks, "
        "power limit) and for other processes on the GPU (`nvidia-smi`).",
    )


def _shortfall(figure: Figure, below: float, check_id: str, title: str, expected: str, message: str) -> Check:
    """A figure ``below`` % under what it is held to, beyond the tolerance: a failed performance check."""
    return Check(
        id=check_id,
        title=title,
        status="fail",
        expected=expected,
        observed=f"{format_figure(figure.value)} {figure.unit} ({below:.1f}% below)",
        message=message,
        category="performance",
        action=_action(figure),
    )


# ---------------------------------------------------------------------------------------------
# Baseline


def baseline_checks(
    figures: Sequence[Figure],
    reference_figures: Sequence[Figure],
    reference_label: str,
    tolerance: float = DEFAULT_TOLERANCE,
) -> tuple[list[Check], Table]:
    """Each figure that fell more than ``tolerance`` below the same figure of the reference run, as a
    failed check; one passing check per benchmark where none fell; new figures counted, not failed."""
    tolerance = checked_tolerance("tolerance", tolerance)
    then = {figure[:3]: figure for figure in reference_figures}  # figure.key, without a call per figure
    now_keys = {figure[:3] for figure in figures}
    per_metric: dict[str, dict[str, Any]] = {}
    checks: list[Check] = []
    fallen_checks: list[Check] = []
    for figure in figures:
        summary = per_metric.get(figure.metric) or per_metric.setdefault(figure.metric, _summary(figure.unit))
        before = then.get(figure[:3])
        if before is None or before.model != figure.model or before.value <= 0:
            summary["new"] += 1
            continue
        summary["compared"] += 1
        change = round(100.0 * (figure.value / before.value - 1.0), 1) + 0.0  # + 0.0: no "-0.0%"
        if summary["worst"] is None or change < summary["worst"][0]:
            summary["worst"] = (change, figure.where)
        if figure.value < before.value * (1.0 - tolerance):
            summary["fell"] += 1
            fallen_checks.append(_fallen(figure, before, reference_label, tolerance))
    for figure in reference_figures:
        if figure[:3] not in now_keys:
            (per_metric.get(figure.metric) or per_metric.setdefault(figure.metric, _summary(figure.unit)))["gone"] += 1
    rows: list[list[Any]] = []
    statuses: list[str] = []
    for metric, summary in per_metric.items():
        worst_change, worst_where = summary["worst"] or (None, "-")
        status = "fail" if summary["fell"] else "pass" if summary["compared"] else "skip"
        rows.append([metric, summary["unit"], summary["compared"], summary["new"], summary["gone"],
                     summary["fell"], _round(worst_change), worst_where, status])  # fmt: skip
        statuses.append(status)
        if status != "fail":
            checks.append(_held(metric, summary, reference_label, tolerance, status))
    table = Table(
        id=f"{SITE_SECTION_ID}-baseline",
        title=f"This run's figures against {reference_label}",
        columns=[
            "Benchmark",
            "Unit",
            "Compared",
            "New",
            "Gone",
            "Fell beyond tolerance",
            "Worst change (%)",
            "Where",
            "Status",
        ],
        rows=rows,
        row_status=statuses,
    )
    return checks + fallen_checks, table


def _summary(unit: str) -> dict[str, Any]:
    """What one benchmark's comparison counts: figures compared, new, gone, fallen, and the largest fall."""
    return {"unit": unit, "compared": 0, "new": 0, "gone": 0, "fell": 0, "worst": None}


def _held(metric: str, summary: Mapping[str, Any], reference_label: str, tolerance: float, status: str) -> Check:
    new = f"; {summary['new']} new (no counterpart in {reference_label})" if summary["new"] else ""
    gone = f"; {summary['gone']} of {reference_label} not measured now" if summary["gone"] else ""
    if status == "skip":
        message = f"{metric}: no figure of this run has a counterpart in {reference_label}{new}{gone}"
        observed = None
    else:
        change, where = summary["worst"]
        observed = f"worst change {change:+.1f}% ({where})"
        message = (
            f"{metric}: {summary['compared']} figures compared with {reference_label}, none fell more than "
            f"{_pct(tolerance)}; the worst change is {change:+.1f}% on {where}{new}{gone}"
        )
    return Check(
        id=f"{SITE_SECTION_ID}/baseline/{metric}",
        title=f"The {metric} figures hold against {reference_label}",
        status=status,
        expected=f"no figure more than {_pct(tolerance)} below {reference_label}",
        observed=observed,
        message=message,
    )


def _fallen(figure: Figure, before: Figure, reference_label: str, tolerance: float) -> Check:
    below = _percent_below(figure.value, before.value)
    gpu = "" if figure.gpu is None else f"gpu{figure.gpu}/"
    return _shortfall(
        figure,
        below,
        f"{SITE_SECTION_ID}/baseline/{figure.host}/{gpu}{figure.metric}",
        f"{figure.metric} on {figure.where} holds against {reference_label}",
        f">= {format_figure(before.value * (1.0 - tolerance))} {figure.unit} (within {_pct(tolerance)} of "
        f"{format_figure(before.value)} in {reference_label})",
        f"{figure.metric} on {figure.where} ({figure.model}) fell {below:.1f}% below {reference_label}: "
        f"{format_figure(figure.value)} {figure.unit} now, {format_figure(before.value)} {figure.unit} then; "
        f"the tolerance is {_pct(tolerance)}. Look at `nvidia-smi -q -d PERFORMANCE,CLOCK,POWER` on "
        f"{figure.host} (throttle reasons, clocks, power limit), for other processes on the GPU, and at "
        "what changed on the host since (driver, firmware, cooling).",
    )


# ---------------------------------------------------------------------------------------------
# The site section


def site_section(
    current_sections: Sequence[Mapping[str, Any]],
    reference: Mapping[str, Any] | None,
    reference_label: str,
    tolerance: float = DEFAULT_TOLERANCE,
    straggler_tolerance: float = DEFAULT_TOLERANCE,
) -> dict[str, Any] | None:
    """The ``gpu-benchmark-site`` section of a run: its stragglers, and its figures against the
    reference report (a report.json dict, schema 1 or 2; None: nothing to compare with, said in a
    skipped check). ``current_sections`` may hold any sections: the hosts' benchmark sections are
    picked out. None when the run has no benchmark section. Raises ValueError on bad arguments."""
    tolerance = checked_tolerance("tolerance", tolerance)
    straggler_tolerance = checked_tolerance("straggler_tolerance", straggler_tolerance)
    sections = _checked_sections("current_sections", current_sections)
    if reference is not None:
        reference_sections = _checked_reference(reference)
        if not isinstance(reference_label, str) or not reference_label.strip():
            raise ValueError(
                "reference_label: expected the reference run's name, e.g. 'baseline of 20261122T120738Z' or "
                f"'previous run 20261123T090000Z'; found {reference_label!r}"
            )
    hosts = benchmark_sections(sections)
    if not hosts:
        return None
    figures = figures_from_sections(hosts)
    checks: list[Check] = []
    tables: list[Table] = []
    if not figures:
        checks.append(
            Check(
                id=f"{SITE_SECTION_ID}/figures",
                title="GPU figures to compare across the site and with the baseline",
                status="skip",
                message=f"none of the {len(hosts)} hosts' benchmark sections holds a GPU figure (simulated hosts, "
                "check mode, or benchmarks that did not run): nothing to compare",
            )
        )
    else:
        straggling, straggler_table = straggler_checks(figures, straggler_tolerance)
        checks += straggling
        tables.append(straggler_table)
        if reference is None:
            checks.append(
                Check(
                    id=f"{SITE_SECTION_ID}/baseline",
                    title="The figures hold against a reference run",
                    status="skip",
                    message=f"not compared: no reference run ({reference_label or 'no baseline or previous run'})",
                )
            )
        else:
            reference_figures = figures_from_sections(benchmark_sections(reference_sections))
            held, baseline_table = baseline_checks(figures, reference_figures, reference_label, tolerance)
            checks += held
            tables.append(baseline_table)
    return {
        "id": SITE_SECTION_ID,
        "title": "GPU benchmarks across the site: stragglers and baseline",
        "checks": [check.to_dict() for check in checks],
        "tables": [table.to_dict() for table in tables],
    }


def checked_tolerance(name: str, value: Any) -> float:
    """``value`` as a fraction strictly between 0 and 1; ValueError naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < float(value) < 1.0:
        raise ValueError(f"{name}: expected a fraction between 0 and 1 (exclusive), e.g. 0.05; found {value!r}")
    return float(value)


def _checked_sections(name: str, sections: Any) -> list[Mapping[str, Any]]:
    if isinstance(sections, (str, bytes, Mapping)) or not isinstance(sections, Sequence):
        raise ValueError(f"{name}: expected a list of report sections (mappings); found {type(sections).__name__}")
    for index, section in enumerate(sections):
        if not isinstance(section, Mapping):
            raise ValueError(
                f"{name}[{index}]: expected a report section (a mapping with id, title, checks, tables); "
                f"found {type(section).__name__}"
            )
    return list(sections)


def _checked_reference(reference: Any) -> list[Mapping[str, Any]]:
    if not isinstance(reference, Mapping):
        raise ValueError(f"reference: expected a report.json mapping or None; found {type(reference).__name__}")
    version = reference.get("schema_version")
    if version not in READABLE_SCHEMA_VERSIONS or isinstance(version, bool):
        raise ValueError(
            f"reference: expected a report.json of schema_version {' or '.join(map(str, READABLE_SCHEMA_VERSIONS))}; "
            f"found schema_version {version!r}"
        )
    return _checked_sections("reference['sections']", reference.get("sections") or [])


# ---------------------------------------------------------------------------------------------
# Wording


def _action(figure: Figure) -> str:
    """Isolate the node first (the hardware actions' mildest), then what fits a GPU's or the host's figure."""
    if figure.gpu is None:
        return (
            f"{ISOLATE_NODE}: {figure.host}; run the benchmark again there alone, and if its GPUs are still slow "
            f"together, look at their links (`nvidia-smi topo -m`, `nvidia-smi nvlink -s`) and {REBOOT_NODE}"
        )
    return (
        f"{ISOLATE_NODE}: {figure.host}; run the benchmark again there alone, and if GPU {figure.gpu} is still "
        f"slow, {RESET_GPU}; {REPLACE_GPU} if it persists"
    )


def _percent_below(value: float, yardstick: float) -> float:
    return round(100.0 * (1.0 - value / yardstick), 1) if yardstick else 0.0


def _pct(fraction: float) -> str:
    return f"{100.0 * fraction:g}%"


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unknown"
