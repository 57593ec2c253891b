"""The site validation report rendered: JSON, JUnit XML, a self-contained HTML page, and a run's files.

Pure string rendering over the model in ``report.model`` (which says what each file holds), plus
:func:`write_report`, the one function that touches the filesystem: it writes a run's artefacts
under the reports directory and moves the ``latest`` link.

May import: ``report.model`` and the standard library. Nothing runs on a GPU host from here: host-side
code (``node/``) imports the model alone.
"""

from __future__ import annotations

import datetime
import html
import json
import math
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from ansible_collections.clusterproof.gpu.plugins.module_utils.report.model import (
    GENERATOR,
    SCHEMA_VERSION,
    STATUSES,
    Chart,
    Check,
    Report,
    Section,
    Table,
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

_CSS = """
:root { --pass: #1a7f37; --fail: #cf222e; --warn: #9a6700; --skip: #6e7781; --hw: #6639ba; }
* { box-sizing: border-box; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; margin: 0;
  color: #1f2328; background: #f6f8fa; line-height: 1.45; }
main { max-width: 1200px; margin: 0 auto; padding: 1.5rem; }
h1 { font-size: 1.5rem; margin: 0 0 .25rem; }
h2 { font-size: 1.25rem; margin: 0 0 .75rem; }
h3 { font-size: 1rem; margin: 1rem 0 .5rem; }
.banner { border-radius: 8px; padding: 1rem 1.25rem; color: #fff; margin-bottom: 1.25rem; }
.banner.pass { background: var(--pass); }
.banner.fail { background: var(--fail); }
.banner .verdict { font-size: 2rem; font-weight: 700; letter-spacing: .05em; }
.banner dl { display: grid; grid-template-columns: max-content 1fr; gap: .1rem 1rem; margin: .5rem 0 0; }
.banner dt { opacity: .85; }
.banner dd { margin: 0; font-weight: 600; }
.counts { display: flex; flex-wrap: wrap; gap: .5rem; margin-top: .75rem; }
.count { background: rgba(255,255,255,.92); color: #1f2328; border-radius: 999px; padding: .1rem .7rem;
  font-size: .9rem; }
section.card { background: #fff; border: 1px solid #d0d7de; border-radius: 8px; padding: 1rem 1.25rem;
  margin-bottom: 1.25rem; }
table { border-collapse: collapse; width: 100%; font-size: .9rem; }
th, td { border: 1px solid #d0d7de; padding: .35rem .5rem; text-align: left; vertical-align: top; }
th { background: #f6f8fa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.msg { max-width: 32rem; overflow-wrap: anywhere; }
tr.row-fail td { background: #ffebe9; }
tr.row-warn td { background: #fff8c5; }
.status { display: inline-block; min-width: 6.5rem; text-align: center; border-radius: 4px; color: #fff;
  font-weight: 600; font-size: .8rem; padding: .05rem .4rem; text-transform: uppercase; }
.status.pass { background: var(--pass); }
.status.fail { background: var(--fail); }
.status.warn { background: var(--warn); }
.status.skip { background: var(--skip); }
.status.needs-hardware { background: var(--hw); }
.failed-list li { margin: .2rem 0; }
.category { font-size: .8em; font-weight: 600; text-transform: uppercase; padding: 0 .3em;
  border: 1px solid #999; border-radius: 3px; }
.action { font-size: .9em; font-style: italic; }
.chart { margin: .5rem 0 1rem; overflow-x: auto; }
code { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: .85em; }
footer { color: #6e7781; font-size: .8rem; text-align: center; padding: 1rem; }
"""


def _e(value: Any) -> str:
    return html.escape(value if isinstance(value, str) else format_value(value), quote=True)


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


def to_html(report: Report) -> str:
    """A self-contained HTML page: verdict banner, failed checks, then each section in order."""
    classify(report)
    counts = report.counts
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{GENERATOR}: {report.verdict.upper()}, site {_e(report.site)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        "<main>",
        f'<header class="banner {report.verdict}" id="verdict">',
        f'<div class="verdict">{report.verdict.upper()}</div>',
        f"<h1>Site validation: {_e(report.site)}</h1>",
        "<dl>",
        f"<dt>Cluster mode</dt><dd>{_e(report.cluster_mode)}</dd>",
        f"<dt>Started</dt><dd>{_e(report.started or None)}</dd>",
        f"<dt>Finished</dt><dd>{_e(report.finished or None)}</dd>",
        "</dl>",
        f'<div class="counts">{_count_chips(counts)}</div>',
        "</header>",
    ]
    failed = report.failed_checks
    if failed:
        parts.append(f'<section class="card" id="failed-checks"><h2>Failed checks ({len(failed)})</h2>')
        parts.append('<ul class="failed-list">')
        for check in failed:
            link = f'<a href="#{_e(_anchor(check.id))}"><code>{_e(check.id)}</code></a>'
            parts.append(
                f'<li>{link} <span class="category">{_e(check.category)}</span>: {_e(check.message or check.title)}'
                f'<br><span class="action">What to do: {_e(check.action)}</span></li>'
            )
        parts.append("</ul></section>")
    for section in report.sections:
        parts.append(_section_html(section))
    parts.append(
        f"<footer>{GENERATOR} report, schema version {SCHEMA_VERSION}. "
        "Also written as report.json and junit.xml.</footer>"
    )
    parts.extend(["</main>", "</body>", "</html>", ""])
    return "\n".join(parts)


def _count_chips(counts: Mapping[str, int]) -> str:
    chips = [f'<span class="count">{counts["total"]} checks</span>']
    for status in STATUSES:
        if counts[status]:
            chips.append(f'<span class="count">{counts[status]} {_e(status)}</span>')
    return "".join(chips)


def _section_html(section: Section) -> str:
    parts = [
        f'<section class="card" id="{_e("section-" + section.id)}">',
        f'<h2><span class="status {section.verdict}">{section.verdict}</span> {_e(section.title)}</h2>',
    ]
    for table in section.tables:
        parts.append(_table_html(table))
    for chart in section.charts:
        parts.append(render_chart(chart))
    if section.checks:
        parts.append("<h3>Checks</h3>")
        parts.append(
            "<table><thead><tr><th>Status</th><th>Check</th><th>Expected</th><th>Observed</th><th>Message</th>"
            "</tr></thead><tbody>"
        )
        for check in section.checks:
            row_class = {"fail": "row-fail", "warn": "row-warn"}.get(check.status, "")
            parts.append(
                f'<tr id="{_e(_anchor(check.id))}" class="{row_class}">'
                f'<td><span class="status {_e(check.status)}">{_e(check.status)}</span></td>'
                f"<td>{_e(check.title)}<br><code>{_e(check.id)}</code></td>"
                f"<td>{_e(check.expected)}</td><td>{_e(check.observed)}</td>"
                f'<td class="msg">{_e(check.message) if check.message else ""}{_action_html(check)}</td></tr>'
            )
        parts.append("</tbody></table>")
    parts.append("</section>")
    return "\n".join(parts)


def _action_html(check: Check) -> str:
    if check.status not in ("fail", "warn") or not check.category:
        return ""
    return (
        f'<br><span class="category">{_e(check.category)}</span> '
        f'<span class="action">What to do: {_e(check.action)}</span>'
    )


def _table_html(table: Table) -> str:
    parts = [
        f"<h3>{_e(table.title)}</h3>",
        f'<table id="{_e("table-" + table.id)}"><thead><tr>'
        + "".join(f"<th>{_e(column)}</th>" for column in table.columns)
        + "</tr></thead><tbody>",
    ]
    for index, row in enumerate(table.rows):
        status = table.row_status[index] if table.row_status and index < len(table.row_status) else ""
        cells = "".join(
            f'<td class="num">{_e(cell)}</td>'
            if isinstance(cell, (int, float)) and not isinstance(cell, bool)
            else f"<td>{_e(cell)}</td>"
            for cell in row
        )
        parts.append(f'<tr class="{_e("row-" + status) if status else ""}">{cells}</tr>')
    parts.append("</tbody></table>")
    return "\n".join(parts)


def _anchor(check_id: str) -> str:
    return "check-" + re.sub(r"\s", "_", check_id)


def render_chart(chart: Chart) -> str:
    """The hook the HTML uses for a section's charts; today every chart is an allocation chart."""
    svg = allocation_chart_svg(chart.timeline, title=chart.title, y_label=chart.y_label)
    return f'<h3>{_e(chart.title)}</h3><div class="chart" id="{_e("chart-" + chart.id)}">{svg}</div>'


_PALETTE = ("#0969da", "#cf222e", "#1a7f37", "#9a6700", "#8250df", "#bf3989", "#1b7c83", "#953800", "#57606a")


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
    points = sorted(((float(t), dict(values)) for t, values in timeline), key=lambda point: point[0])
    projects: list[str] = []
    for _, values in points:
        for project in values:
            if project not in projects:
                projects.append(project)
    legend_width = 170
    left, right, top, bottom = 56, width - legend_width, 28, height - 44
    svg = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{_e(title)}" font-family="sans-serif" '
        'font-size="12">',
        f"<title>{_e(title)}</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#fff"/>',
    ]
    if not points or not projects:
        svg.append(
            f'<text x="{width // 2}" y="{height // 2}" text-anchor="middle" fill="#6e7781">'
            "no allocation recorded</text></svg>"
        )
        return "".join(svg)

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
    tick = 0.0
    while tick <= y_max + y_step / 2:
        y = y_of(tick)
        svg.append(f'<line x1="{left}" y1="{y}" x2="{right}" y2="{y}" stroke="#eaeef2"/>')
        svg.append(f'<text x="{left - 6}" y="{y}" dy="4" text-anchor="end" fill="#57606a">{_num(tick)}</text>')
        tick += y_step
    # X ticks.
    tick = math.ceil(t_min / x_step) * x_step
    while tick <= t_max + x_step / 1000:
        x = x_of(tick)
        svg.append(f'<line x1="{x}" y1="{bottom}" x2="{x}" y2="{bottom + 4}" stroke="#57606a"/>')
        svg.append(f'<text x="{x}" y="{bottom + 17}" text-anchor="middle" fill="#57606a">{_num(tick)}</text>')
        tick += x_step
    # Axes and their labels.
    middle_x, middle_y = (left + right) // 2, (top + bottom) // 2
    svg.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="#57606a"/>')
    svg.append(f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#57606a"/>')
    svg.append(f'<text x="{middle_x}" y="{height - 8}" text-anchor="middle" fill="#1f2328">time (s)</text>')
    svg.append(
        f'<text x="14" y="{middle_y}" text-anchor="middle" fill="#1f2328" '
        f'transform="rotate(-90 14 {middle_y})">{_e(y_label)}</text>'
    )
    # One step line per project, then its legend entry.
    for index, project in enumerate(projects):
        colour = _PALETTE[index % len(_PALETTE)]
        path = []
        for position, (t, values) in enumerate(points):
            x, y = x_of(t), y_of(float(values.get(project, 0.0)))
            # Allocation holds until the next point, then steps to the new value.
            path.append(f"H{x} V{y}" if position else f"M{x} {y}")
        path.append(f"H{x_of(t_max)}")
        # Projects often hold the same number of GPUs at once: each line is nudged a pixel or two off
        # the others so that overlapping lines stay visible side by side.
        nudge = (index - (len(projects) - 1) / 2) * min(2.5, 12 / len(projects))
        svg.append(
            f'<path d="{" ".join(path)}" transform="translate(0 {nudge:.2f})" fill="none" stroke="{colour}" '
            f'stroke-width="2" data-project="{_e(project)}"><title>{_e(project)}</title></path>'
        )
        legend_y = top + 8 + index * 20
        svg.append(
            f'<line x1="{right + 16}" y1="{legend_y}" x2="{right + 36}" y2="{legend_y}" '
            f'stroke="{colour}" stroke-width="3"/>'
        )
        svg.append(f'<text x="{right + 42}" y="{legend_y + 4}" fill="#1f2328">{_e(project)}</text>')
    svg.append("</svg>")
    return "".join(svg)


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
    _write_atomically(Path(paths["html"]), lambda file: file.write(to_html(report)))
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
