"""The scenario runs over time, as Prometheus recorded them: for each run's window and each of its
projects, the GPUs allocated, the quota and the fair share from range queries of clusterproof's
recording rules, made into the report's charts, a check and the table of the queries, to go into the
scenario's own section beside its step tables. Pure: plain data in (the runs' windows, Prometheus's
range answers), report objects out. Touches nothing; ``modules/monitoring_timeline.py`` asks
Prometheus.

- ``monitoring/timeline/<scenario>``: Prometheus recorded an allocation for every project of the
  run during its window (fails naming those it has no sample of: not scraped, or not labelled).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.monitoring import checks
from ansible_collections.clusterproof.gpu.plugins.module_utils.report.model import Chart, Check, Table

# The recording rules charted, by the name of their line in the chart.
SERIES = (
    ("allocated", "project:gpus_allocated:sum"),
    ("quota", "project:gpus_quota:max"),
    ("fair share", "project:gpus_fair_share:max"),
)
# At most this many points a series: a step of whole seconds, never under MIN_STEP_SECONDS.
MAX_POINTS = 400
MIN_STEP_SECONDS = 5

Samples = list[tuple[float, float]]


class WindowError(ValueError):
    """A run's window is not what validate_scenario returns; the message names the field."""


@dataclasses.dataclass(frozen=True)
class Window:
    """One scenario run on the cluster: its section, when it ran (seconds since the epoch), its
    projects (scenario name -> the namespace and queue name Prometheus labels it by) and what it
    shares (Prometheus's rules count GPUs)."""

    section_id: str
    scenario: str
    start: float
    end: float
    projects: Mapping[str, str]
    resource: str = "gpu"

    @property
    def step(self) -> int:
        return max(MIN_STEP_SECONDS, math.ceil((self.end - self.start) / MAX_POINTS))


def window_of(run: Mapping[str, Any], where: str) -> Window | None:
    """The window of one result of validate_scenario (its ``section`` and ``window``), or None for a
    run that did not reach the cluster (skipped, refused)."""
    window = run.get("window")
    if not window:
        return None
    section_id = str((run.get("section") or {}).get("id") or "")
    if not section_id.startswith("scenario-"):
        raise WindowError("%s.section.id: expected scenario-<name>, found %r" % (where, section_id))
    try:
        start, end = float(window["start"]), float(window["end"])
    except (KeyError, TypeError, ValueError):
        raise WindowError(
            "%s.window: expected start and end in seconds since the epoch, found %r" % (where, window)
        ) from None
    if not math.isfinite(start) or not math.isfinite(end) or end < start:
        raise WindowError("%s.window: expected start <= end, found start %r, end %r" % (where, start, end))
    projects = window.get("projects")
    if not isinstance(projects, Mapping):
        raise WindowError("%s.window.projects: expected a mapping, found %r" % (where, projects))
    return Window(
        section_id,
        section_id[len("scenario-") :],
        start,
        end,
        {str(name): str(label) for name, label in projects.items()},
        str(window.get("resource") or "gpu"),
    )


def selector(record: str, window: Window) -> str:
    """The range query of ``record`` for the window's projects."""
    return checks.of_projects(record, window.projects.values())


def by_project(series: Sequence[tuple[Mapping[str, str], Samples]]) -> dict[str, Samples]:
    """A range answer's series keyed by their ``project`` label."""
    return {labels["project"]: list(samples) for labels, samples in series if "project" in labels}


def project_chart(window: Window, project: str, recorded: Mapping[str, Mapping[str, Samples]]) -> Chart | None:
    """One project's lines (allocated, quota, fair share) over the run, in seconds since it began;
    None when Prometheus has none of them. A line holds its last value until its next sample."""
    label = window.projects[project]
    lines = {name: recorded.get(name, {}).get(label) or [] for name, _ in SERIES}
    lines = {name: samples for name, samples in lines.items() if samples}
    if not lines:
        return None
    times = sorted({t for samples in lines.values() for t, _ in samples})
    timeline = []
    last: dict[str, float] = {}
    position = dict.fromkeys(lines, 0)
    for t in times:
        for name, samples in lines.items():
            while position[name] < len(samples) and samples[position[name]][0] <= t:
                last[name] = samples[position[name]][1]
                position[name] += 1
        timeline.append((round(t - window.start, 1), dict(last)))
    return Chart(
        "%s-prometheus-%s" % (window.section_id, project),
        "%s: GPUs allocated, quota and fair share as Prometheus recorded them (%s)" % (project, window.scenario),
        timeline,
        kind="prometheus",
        y_label="GPUs",
    )


def timeline_check(window: Window, recorded: Mapping[str, Mapping[str, Samples]]) -> Check:
    """Prometheus recorded an allocation for every project of the run during its window."""
    check_id = "monitoring/timeline/%s" % window.scenario
    title = "Prometheus recorded the run's allocation per project over time"
    if window.resource != "gpu":
        return Check(check_id, title, "skip", message="the scenario shares %s; the rules count GPUs" % window.resource)
    allocated = recorded.get("allocated", {})
    samples = {project: len(allocated.get(label) or []) for project, label in sorted(window.projects.items())}
    missing = [project for project, count in samples.items() if count == 0]
    expected = {project: "samples" for project in samples}
    if missing:
        message = (
            "Prometheus has no allocation of %s between %.0f and %.0f (%s): their namespaces' pods were not "
            "scraped from kube-scheduler, or the namespaces lack the project label"
            % (", ".join(missing), window.start, window.end, selector(SERIES[0][1], window))
        )
        return Check(check_id, title, "fail", expected, samples, message)
    return Check(check_id, title, "pass", expected, samples)


def unanswered_check(window: Window, prometheus_url: str, error: str) -> Check:
    """Prometheus did not answer the run's range queries: the check says why."""
    return Check(
        "monitoring/timeline/%s" % window.scenario,
        "Prometheus recorded the run's allocation per project over time",
        "fail",
        message="Prometheus at %s did not answer: %s; the monitoring section says whether it runs"
        % (prometheus_url, error),
    )


def query_table(window: Window, prometheus_url: str) -> Table:
    """The queries behind the charts, with Prometheus's address, so that an admin opens them live."""
    rows = [
        [name, selector(record, window), "%.0f" % window.start, "%.0f" % window.end, "%ds" % window.step]
        for name, record in SERIES
    ]
    return Table(
        "%s-prometheus-queries" % window.section_id,
        "Prometheus range queries behind the charts (%s/graph)" % prometheus_url.rstrip("/"),
        ["line", "query", "from (epoch s)", "to (epoch s)", "step"],
        rows,
    )


def extras(
    window: Window, recorded: Mapping[str, Mapping[str, Samples]], prometheus_url: str
) -> dict[str, list[dict[str, Any]]]:
    """What goes into the scenario's section: the check, a chart per project Prometheus recorded,
    and the table of the queries."""
    charts = [project_chart(window, project, recorded) for project in sorted(window.projects)]
    return {
        "checks": [timeline_check(window, recorded).to_dict()],
        "charts": [chart.to_dict() for chart in charts if chart is not None],
        "tables": [query_table(window, prometheus_url).to_dict()] if window.resource == "gpu" else [],
    }


def merge(
    sections: Sequence[Mapping[str, Any]], added: Mapping[str, Mapping[str, Sequence[Any]]]
) -> list[dict[str, Any]]:
    """The report's sections with ``added`` (section id -> checks, charts, tables) put into those
    sections; every other section as it is."""
    merged = []
    for section in sections:
        more = added.get(str(section.get("id")))
        if more is None:
            merged.append(dict(section))
            continue
        merged.append(
            {
                **section,
                **{
                    part: list(section.get(part) or []) + list(more.get(part) or [])
                    for part in ("checks", "charts", "tables")
                },
            }
        )
    return merged
