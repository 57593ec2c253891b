#!/usr/bin/python
"""Write a run's site validation report: report.json, report.html and junit.xml.

Takes the sections the validation roles gathered (plain data), builds the one report model of
``module_utils/report/model.py`` and writes it under ``<reports_dir>/<site>/<timestamp>/``, pointing
``<reports_dir>/<site>/latest`` at it. Touches nothing but that directory.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: site_report
short_description: Write the site validation report (HTML, JSON, JUnit XML)
version_added: 0.1.0
author:
  - clusterproof developers
description:
  - Builds the site validation report from the sections that validation tasks returned and writes
    C(report.json), C(report.html) and C(junit.xml) to C(<reports_dir>/<site>/<YYYYmmddTHHMMSSZ>/),
    then points the relative symlink C(<reports_dir>/<site>/latest) at that directory.
  - The verdict is C(fail) when any check failed; warnings, skips and C(needs-hardware) do not fail it.
  - Every run writes a new report, so the task reports a change. In check mode nothing is written,
    the task still reports a change, and no paths are returned.
  - With O(fail_on_failed_checks), the task fails after writing the report when the verdict is
    C(fail), listing the failed checks and the report's path.
options:
  site:
    description: The site's name; names the report directory, so letters, digits, C(.), C(_) and C(-) only.
    type: str
    required: true
  cluster_mode:
    description: How the cluster came to be, e.g. C(sandbox) or C(existing); shown in the report.
    type: str
    required: true
  reports_dir:
    description: Directory under which C(<site>/<run>/) is created.
    type: path
    required: true
  sections:
    description:
      - The report's sections in order, each a dict with C(id), C(title), C(checks) (a list of dicts
        with C(id), C(title), C(status), C(expected), C(observed), C(message), C(duration_s)), and
        optionally C(node_table) (rows as returned by M(clusterproof.gpu.validate_gpu_nodes)),
        C(tables) and C(charts) in the report JSON's form.
    type: list
    elements: dict
    required: true
  started:
    description: When the run started (ISO 8601). Defaults to the time the report is written.
    type: str
  fail_on_failed_checks:
    description: Fail the task, after writing the report, when any check failed.
    type: bool
    default: true
  compare_with:
    description:
      - The earlier run this one is compared with, for the section "What changed since ..." (the
        report's first) and the JSON block C(changes) - C(latest) (the previous run), C(baseline)
        (the run marked with C(./clusterproof baseline)), a run's stamp, or a path to a C(report.json).
      - The first run of a site has nothing to compare with and says so; an earlier report that
        cannot be read, or is of a newer schema, is a warning.
      - Regressions are failed checks - a node gone, fewer GPUs on a node, another GPU product, a
        project's quota or weight in the cluster changed, a project or storage class gone, the
        default storage class moved.
    type: str
    default: latest
  benchmark_tolerance:
    description:
      - How far below the reference run a benchmark figure may fall (a fraction, 0.05 = 5%); the
        reference is the site's baseline when one is marked, else the previous run.
    type: float
    default: 0.05
  straggler_tolerance:
    description: How far below the median of its model's GPUs in the site a GPU's figure may fall (a fraction).
    type: float
    default: 0.05
  stopped:
    description:
      - What stopped the validation before its end, when something did (a rescued task's name and
        result); the report gets a section C(run) with the failed check C(run/stopped) naming the task
        and its error (for a loop, each failed item's), after the sections gathered so far.
    type: dict
    suboptions:
      task:
        description: The task that failed.
        type: str
        default: ""
      result:
        description: Its result (C(ansible_failed_result)).
        type: dict
        default: {}
"""

EXAMPLES = r"""
- name: Write the site report
  clusterproof.gpu.site_report:
    site: netapp-sandbox
    cluster_mode: sandbox
    reports_dir: "{{ playbook_dir }}/../reports"
    sections: "{{ clusterproof_report_sections }}"
  register: site_report

- name: Write the report without failing the play on failed checks
  clusterproof.gpu.site_report:
    site: netapp-sandbox
    cluster_mode: sandbox
    reports_dir: /var/lib/clusterproof/reports
    sections: "{{ clusterproof_report_sections }}"
    started: "2025-01-01T12:00:00+00:00"
    fail_on_failed_checks: false
"""

RETURN = r"""
paths:
  description: Absolute paths of what was written; empty in check mode.
  returned: always
  type: dict
  contains:
    dir:
      description: The run's directory.
      type: str
    json:
      description: report.json
      type: str
    html:
      description: report.html
      type: str
    junit:
      description: junit.xml
      type: str
    latest:
      description: The C(latest) symlink, pointing at the run's directory.
      type: str
  sample:
    dir: /srv/clusterproof/reports/netapp-sandbox/20250101T120000Z
    json: /srv/clusterproof/reports/netapp-sandbox/20250101T120000Z/report.json
    html: /srv/clusterproof/reports/netapp-sandbox/20250101T120000Z/report.html
    junit: /srv/clusterproof/reports/netapp-sandbox/20250101T120000Z/junit.xml
    latest: /srv/clusterproof/reports/netapp-sandbox/latest
verdict:
  description: C(pass), or C(fail) when any check failed.
  returned: always
  type: str
  sample: pass
counts:
  description: Checks per status, and C(total).
  returned: always
  type: dict
  sample: {"pass": 12, "fail": 0, "warn": 1, "skip": 0, "needs-hardware": 2, "total": 15}
failed_checks:
  description: Identifiers of the checks that failed.
  returned: always
  type: list
  elements: str
  sample: []
"""

import datetime

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.node import benchmark_verdicts
from ansible_collections.clusterproof.gpu.plugins.module_utils.report import history
from ansible_collections.clusterproof.gpu.plugins.module_utils.report.model import (
    Report,
    failure_message,
    section_from_dict,
    stopped_section,
)
from ansible_collections.clusterproof.gpu.plugins.module_utils.report.render import write_report

# How many failed checks the failure message lists by name; the report has them all.
_FAILED_IN_MESSAGE = 10

ARGUMENT_SPEC = {
    "site": {"type": "str", "required": True},
    "cluster_mode": {"type": "str", "required": True},
    "reports_dir": {"type": "path", "required": True},
    "sections": {"type": "list", "elements": "dict", "required": True},
    "started": {"type": "str"},
    "fail_on_failed_checks": {"type": "bool", "default": True},
    "compare_with": {"type": "str", "default": "latest"},
    "benchmark_tolerance": {"type": "float", "default": 0.05},
    "straggler_tolerance": {"type": "float", "default": 0.05},
    "stopped": {
        "type": "dict",
        "options": {"task": {"type": "str", "default": ""}, "result": {"type": "dict", "default": {}}},
    },
}


def _earlier_run(params, which):
    """An earlier run's report data and its name, or None and why there is none."""
    try:
        path = history.resolve_run(params["reports_dir"], params["site"], which)
    except history.HistoryError as error:
        raise runner.ModuleError(f"{error}; no report was written") from error
    if path is None:
        return (
            None,
            f"no {'baseline marked' if which == history.BASELINE_LINK else 'earlier run'} for site {params['site']}",
        )
    return history.load_run(path)


def _figures(sections):
    return {
        (f"{f.host}/gpu{f.gpu}/{f.metric}" if f.gpu is not None else f"{f.host}/{f.metric}"): f.value
        for f in benchmark_verdicts.figures_from_sections(sections)
    }


def _report(params, finished):
    raw_sections = list(params["sections"])
    try:
        sections = [section_from_dict(section) for section in raw_sections]
    except (ValueError, TypeError, KeyError) as error:
        raise runner.ModuleError(f"invalid report sections: {error}") from error
    # The benchmark figures against the baseline (or the previous run) and against their peers.
    previous, previous_note = _earlier_run(params, params["compare_with"])
    baseline, baseline_name = _earlier_run(params, history.BASELINE_LINK)
    if baseline is not None:
        reference, label = baseline, f"baseline of {baseline_name}"
    else:
        reference, label = previous, f"previous run {previous_note}"
    try:
        site_benchmarks = benchmark_verdicts.site_section(
            raw_sections, reference, label, params["benchmark_tolerance"], params["straggler_tolerance"]
        )
    except ValueError as error:
        raise runner.ModuleError(f"{error}; no report was written") from error
    if site_benchmarks is not None:
        sections.append(section_from_dict(site_benchmarks))
        raw_sections.append(site_benchmarks)
    if params["stopped"]:
        stopped = params["stopped"]
        sections.append(stopped_section(stopped["task"], failure_message(stopped["result"])))
    report = Report(
        site=params["site"],
        cluster_mode=params["cluster_mode"],
        started=params["started"] or finished,
        finished=finished,
        sections=sections,
    )
    report.site_state = history.site_state(report, _figures(raw_sections))
    against = (previous or {}).get("site_state")
    if previous is not None and against is not None:
        name = previous_note
        report.changes = dict(history.compare(against, report.site_state), against=name)
        report.sections.insert(0, history.changes_section(report.changes, f"the run {name}"))
    else:
        note = (
            previous_note if previous is None else f"the run {previous_note} recorded no site state (an older report)"
        )
        report.sections.insert(0, history.changes_section(None, "", note))
    return report


def run(module):
    params = module.params
    now = datetime.datetime.now(datetime.UTC)
    report = _report(params, now.isoformat(timespec="seconds"))
    failed = [check.id for check in report.failed_checks]
    result = {"changed": True, "paths": {}, "verdict": report.verdict, "counts": report.counts, "failed_checks": failed}
    if not module.check_mode:
        try:
            result["paths"] = write_report(report, params["reports_dir"], now)
        except (OSError, ValueError) as error:
            message = f"cannot write the report under {params['reports_dir']}: {error}"
            raise runner.ModuleError(message, **result) from error
    if params["fail_on_failed_checks"] and report.verdict == "fail":
        listed = ", ".join(failed[:_FAILED_IN_MESSAGE])
        if len(failed) > _FAILED_IN_MESSAGE:
            listed += f" and {len(failed) - _FAILED_IN_MESSAGE} more"
        where = result["paths"].get("html") or "not written (check mode)"
        raise runner.ModuleError(
            f"site validation of {report.site} failed: {len(failed)} of {report.counts['total']} checks "
            f"failed ({listed}). Report: {where}",
            **result,
        )
    return result


def main() -> None:
    runner.run_module(ARGUMENT_SPEC, run, doing="writing the site report")


if __name__ == "__main__":
    main()
