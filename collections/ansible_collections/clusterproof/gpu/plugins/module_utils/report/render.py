"""The site validation report rendered: JSON, JUnit XML, a self-contained HTML page, and a run's files.

Pure string rendering over the model in ``report.model`` (which says what each file holds), plus
:func:`write_report`, the one function that touches the filesystem: it writes a run's artefacts
under the reports directory and moves the ``latest`` link. The HTML page is Jinja2's, from the
templates of ``report.templates``, with autoescaping on: Python works out what the page shows (the
chart's coordinates, a value's words in :func:`format_value`) and the engine escapes all of it.

May import: ``report.model``, ``report.templates``, the standard library and ``jinja2``. Jinja2 is a
dependency of ansible-core, so it is there wherever this runs: in ``site_report``, on the controller
(``delegate_to: localhost``, the controller's interpreter). Nothing runs on a GPU host from here:
host-side code (``node/``) imports the model alone.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import json
import math
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import jinja2

from ansible_collections.clusterproof.gpu.plugins.module_utils.report import templates
from ansible_collections.clusterproof.gpu.plugins.module_utils.report.model import (
    GENERATOR,
    SCHEMA_VERSION,
    STATUSES,
    Chart,
    Report,
    TimelinePoint,
    classify,
    to_dict,
)

JSON_OPTIONS: dict[str, Any] = {"indent": 2, "ensure_ascii": False, "default": str}


def to_json(report: Report) -> str:
    """The report as JSON; field order is fixed, so two runs' files diff cleanly."""
    return json.dumps(to_dict(report), **JSON_OPTIONS) + "\n"


def _write_json(report: Report, file: TextIO) -> None:
    """``to_json`` written piece by piece: json.dumps with an indent joins millions of pieces in
    memory first, 5 times the file's size (bench/gpu_health_bench.py: 191 MiB for a 34 MiB report)."""
    json.dump(to_dict(report), file, **JSON_OPTIONS)
    file.write("\n")


# --- JUnit XML ------------------------------------------------------------------------------------

# Characters XML 1.0 cannot carry at all, even escaped.
_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml_text(value: Any) -> str:
    return _NOT_XML.sub("\ufffd", value if isinstance(value, str) else format_value(value))


def to_junit_xml(report: Report) -> str:
    """JUnit XML: a testsuite per section, a testcase per check.

    fail becomes ``<failure>``; skip and needs-hardware become ``<skipped message=...>``; warn
    passes, with the warning in the testcase's ``<system-out>``. A failed or warning check's
    category and action are the testcase's properties; the category is also the failure's type.
    """
    classify(report)
    counts = report.counts
    root = ET.Element(
        "testsuites",
        {
            "name": _xml_text(f"clusterproof site validation: {report.site}"),
            "tests": str(counts["total"]),
            "failures": str(counts["fail"]),
            "errors": "0",
            "skipped": str(counts["skip"] + counts["needs-hardware"]),
            "time": _seconds(sum(check.duration_s or 0.0 for check in report.checks)),
        },
    )
    for section in report.sections:
        section_counts = section.counts
        suite = ET.SubElement(
            root,
            "testsuite",
            {
                "name": _xml_text(section.title),
                "id": _xml_text(section.id),
                "tests": str(section_counts["total"]),
                "failures": str(section_counts["fail"]),
                "errors": "0",
                "skipped": str(section_counts["skip"] + section_counts["needs-hardware"]),
                "time": _seconds(sum(check.duration_s or 0.0 for check in section.checks)),
                "timestamp": _xml_text(report.started),
                "hostname": _xml_text(report.site),
            },
        )
        for check in section.checks:
            case = ET.SubElement(
                suite,
                "testcase",
                {
                    "classname": _xml_text(f"{report.site}.{section.id}"),
                    "name": _xml_text(check.id),
                    "time": _seconds(check.duration_s or 0.0),
                },
            )
            detail = (
                f"{check.title}\nexpected: {format_value(check.expected)}\nobserved: {format_value(check.observed)}"
            )
            if check.category:
                # Testcase properties, as pytest's record_property writes them: CI systems show them
                # beside the failure, and a script can sort failures by whom they concern.
                properties = ET.SubElement(case, "properties")
                ET.SubElement(properties, "property", {"name": "category", "value": _xml_text(check.category)})
                ET.SubElement(properties, "property", {"name": "action", "value": _xml_text(check.action or "")})
            if check.status == "fail":
                failure = ET.SubElement(
                    case,
                    "failure",
                    {"message": _xml_text(check.message or check.title), "type": _xml_text(check.category or "")},
                )
                failure.text = _xml_text(f"{detail}\ncategory: {check.category}\naction: {check.action}")
            elif check.status in ("skip", "needs-hardware"):
                reason = check.message or check.status
                if check.status == "needs-hardware" and not reason.startswith("needs hardware"):
                    reason = f"needs hardware: {reason}"
                ET.SubElement(case, "skipped", {"message": _xml_text(reason)})
            if check.status == "warn":
                detail = f"WARNING: {check.message}\n{detail}"
            ET.SubElement(case, "system-out").text = _xml_text(detail)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _seconds(value: float) -> str:
    return f"{value:.3f}"


# --- HTML -----------------------------------------------------------------------------------------


def format_value(value: Any) -> str:
    """An expected or observed value as short text for people."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (str, int, float)):
        return str(value)
    if isinstance(value, Mapping):
        return ", ".join(f"{key}={format_value(item)}" for key, item in value.items()) or "—"
    if isinstance(value, (list, tuple)):
        return ", ".join(format_value(item) for item in value) or "(none)"
    return json.dumps(value, default=str)


def _shown(value: Any) -> Any:
    """What the page shows of a value (the environment's ``finalize``): text as it is, anything
    else as :func:`format_value` words it; the engine escapes what this returns."""
    return value if isinstance(value, str) else format_value(value)


def _is_number(value: Any) -> bool:
    """A table cell right-aligned as a number (the ``numeric`` test): a bool is a word, yes or no."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _anchor(check_id: str) -> str:
    return "check-" + re.sub(r"\s", "_", check_id)


_PALETTE = ("#0969da", "#cf222e", "#1a7f37", "#9a6700", "#8250df", "#bf3989", "#1b7c83", "#953800", "#57606a")


@dataclasses.dataclass(frozen=True)
class _ChartLine:
    """One project's step line in the allocation chart, and its legend entry."""

    project: str
    colour: str
    path: str  # the SVG path's d
    nudge: str  # pixels the line is moved down, so that equal lines stay visible side by side
    legend_y: int


@dataclasses.dataclass(frozen=True)
class _ChartGeometry:
    """Where the allocation chart's template draws everything; coordinates are text, as the page
    has them. No ``lines``: no allocation recorded."""

    title: str
    y_label: str
    width: int
    height: int
    left: int
    right: int
    top: int
    bottom: int
    y_ticks: list[tuple[str, str]]  # (y, label)
    x_ticks: list[tuple[str, str]]  # (x, label)
    lines: list[_ChartLine]


_ENVIRONMENT = jinja2.Environment(
    loader=jinja2.DictLoader(templates.TEMPLATES),
    autoescape=True,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined,
    finalize=_shown,
)
_ENVIRONMENT.filters["anchor"] = _anchor
_ENVIRONMENT.tests["numeric"] = _is_number


def to_html(report: Report) -> str:
    """A self-contained HTML page: verdict banner, failed checks, then each section in order."""
    return "".join(_html_pieces(report))


def _html_pieces(report: Report) -> Iterator[str]:
    """The page in pieces, as the template renders it: ``write_report`` writes them as they come."""
    classify(report)
    return _ENVIRONMENT.get_template("page.html").generate(
        report=report,
        counts=report.counts,
        failed=report.failed_checks,
        statuses=STATUSES,
        generator=GENERATOR,
        schema_version=SCHEMA_VERSION,
    )


def _chart_geometry(chart: Chart) -> _ChartGeometry:
    """A section's chart for the page's template; today every chart is an allocation chart."""
    return _allocation_geometry(chart.timeline, title=chart.title, y_label=chart.y_label)


_ENVIRONMENT.globals["chart_geometry"] = _chart_geometry


def allocation_chart_svg(
    timeline: Sequence[TimelinePoint],
    *,
    title: str = "GPUs allocated per project",
    y_label: str = "GPUs allocated",
    width: int = 760,
    height: int = 320,
) -> str:
    """An inline SVG line chart of GPUs per project over time: one line per project, axes, legend.

    ``timeline`` is ``[(t_seconds, {project: gpus}), ...]``. A project absent from a point holds
    0 GPUs there. Allocation changes in steps, so each line holds its value until the next point.
    """
    geometry = _allocation_geometry(timeline, title=title, y_label=y_label, width=width, height=height)
    return str(_ENVIRONMENT.get_template("parts.html").module.allocation_chart(geometry))


def _allocation_geometry(
    timeline: Sequence[TimelinePoint], *, title: str, y_label: str, width: int = 760, height: int = 320
) -> _ChartGeometry:
    """The allocation chart's axes, ticks and one step line per project, for its template."""
    points = sorted(((float(t), dict(values)) for t, values in timeline), key=lambda point: point[0])
    projects: list[str] = []
    for _, values in points:
        for project in values:
            if project not in projects:
                projects.append(project)
    legend_width = 170
    left, right, top, bottom = 56, width - legend_width, 28, height - 44
    geometry = functools.partial(_ChartGeometry, title, y_label, width, height, left, right, top, bottom)
    if not points or not projects:
        return geometry([], [], [])

    t_min, t_last = points[0][0], points[-1][0]
    # The axis runs a little past the last point, so that the state reached there shows as a line.
    t_max = t_last + (t_last - t_min) * 0.05 if t_last > t_min else t_min + 1.0
    y_top_value = max(max((float(v) for v in values.values()), default=0.0) for _, values in points)
    y_step = _nice_step(max(y_top_value, 1.0), 5)
    y_max = max(y_step * math.ceil(y_top_value / y_step), y_step)
    x_step = _nice_step(t_max - t_min, 6)

    def x_of(t: float) -> str:
        return f"{left + (t - t_min) / (t_max - t_min) * (right - left):.1f}"

    def y_of(value: float) -> str:
        return f"{bottom - value / y_max * (bottom - top):.1f}"

    # Grid lines and y ticks.
    y_ticks = []
    tick = 0.0
    while tick <= y_max + y_step / 2:
        y_ticks.append((y_of(tick), _num(tick)))
        tick += y_step
    # X ticks.
    x_ticks = []
    tick = math.ceil(t_min / x_step) * x_step
    while tick <= t_max + x_step / 1000:
        x_ticks.append((x_of(tick), _num(tick)))
        tick += x_step
    # One step line per project, then its legend entry.
    lines = []
    for index, project in enumerate(projects):
        path = []
        for position, (t, values) in enumerate(points):
            x, y = x_of(t), y_of(float(values.get(project, 0.0)))
            # Allocation holds until the next point, then steps to the new value.
            path.append(f"H{x} V{y}" if position else f"M{x} {y}")
        path.append(f"H{x_of(t_max)}")
        # Projects often hold the same number of GPUs at once: each line is nudged a pixel or two off
        # the others so that overlapping lines stay visible side by side.
        nudge = (index - (len(projects) - 1) / 2) * min(2.5, 12 / len(projects))
        lines.append(
            _ChartLine(project, _PALETTE[index % len(_PALETTE)], " ".join(path), f"{nudge:.2f}", top + 8 + index * 20)
        )
    return geometry(y_ticks, x_ticks, lines)


def _nice_step(span: float, target_ticks: int) -> float:
    """A tick step of 1, 2 or 5 times a power of ten giving about ``target_ticks`` ticks."""
    raw = span / max(target_ticks, 1)
    magnitude = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    for factor in (1, 2, 5, 10):
        if raw <= factor * magnitude:
            return factor * magnitude
    return 10 * magnitude


def _num(value: float) -> str:
    return str(int(round(value))) if abs(value - round(value)) < 1e-9 else f"{value:.2f}".rstrip("0").rstrip(".")


# --- writing a run's artefacts --------------------------------------------------------------------

_SAFE_SITE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def run_stamp(now: datetime.datetime) -> str:
    """The run directory's name: UTC time as ``YYYYmmddTHHMMSSZ`` (a naive time is taken as UTC)."""
    if now.tzinfo is not None:
        now = now.astimezone(datetime.UTC)
    return now.strftime("%Y%m%dT%H%M%SZ")


def write_report(report: Report, reports_dir: str | os.PathLike[str], now: datetime.datetime) -> dict[str, str]:
    """Write report.json, report.html and junit.xml for this run, and point ``latest`` at it.

    Returns the absolute paths: ``dir``, ``json``, ``html``, ``junit``, ``latest``. A second run in
    the same second gets a ``-2`` suffix rather than overwriting the first.
    """
    if not _SAFE_SITE.match(report.site):
        raise ValueError(f"site name {report.site!r} cannot name a directory: use letters, digits, '.', '_' and '-'")
    site_dir = Path(reports_dir).expanduser().resolve() / report.site
    site_dir.mkdir(parents=True, exist_ok=True)
    stamp = run_stamp(now)
    run_dir = site_dir / stamp
    suffix = 1
    while True:
        try:
            run_dir.mkdir()
            break
        except FileExistsError:
            suffix += 1
            run_dir = site_dir / f"{stamp}-{suffix}"

    paths = {
        "dir": str(run_dir),
        "json": str(run_dir / "report.json"),
        "html": str(run_dir / "report.html"),
        "junit": str(run_dir / "junit.xml"),
        "latest": str(site_dir / "latest"),
    }
    _write_atomically(Path(paths["json"]), lambda file: _write_json(report, file))
    _write_atomically(Path(paths["html"]), lambda file: file.writelines(_html_pieces(report)))
    _write_atomically(Path(paths["junit"]), lambda file: file.write(to_junit_xml(report)))

    latest = site_dir / "latest"
    if latest.exists() and not latest.is_symlink():
        raise ValueError(f"{latest} exists and is not a symlink; move it away so the latest report can be linked")
    temporary = site_dir / f".latest.{os.getpid()}.tmp"
    if temporary.is_symlink() or temporary.exists():
        temporary.unlink()
    os.symlink(run_dir.name, temporary)
    os.replace(temporary, latest)  # rename over the old link: readers never see it missing
    return paths


def _write_atomically(path: Path, write: Callable[[TextIO], object]) -> None:
    """Write through a temporary file renamed over ``path``: a reader never sees half a file."""
    temporary = path.with_name("." + path.name + ".tmp")
    with temporary.open("w", encoding="utf-8") as file:
        write(file)
    os.replace(temporary, path)
