"""The report's monitoring section: what Prometheus says, judged against the cluster and the rules
clusterproof ships. Pure: plain data in (Prometheus's answers, the pods' GPUs, the shipped rule
names), report checks out (``report.model``). Touches nothing.

- ``monitoring/prometheus``: Prometheus answers (the only check when it does not);
- ``monitoring/target/<job>``: every target of the job was scraped, and up, after the check began
  (a stopped endpoint is down at its next scrape, whatever its health was before);
- ``monitoring/rules``: every rule of the shipped files is loaded, and evaluates without error;
- ``monitoring/allocation/<project>``: the GPUs Prometheus records for the project
  (``project:gpus_allocated:sum``) are those its running pods hold;
- ``monitoring/step/<name>/<step>``: the same, for a scenario's projects after each of its steps.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.report.model import (
    Check,
    Section,
    Table,
    section_to_dict,
)

SECTION_ID = "monitoring"
ALLOCATED = "project:gpus_allocated:sum"
QUOTA = "project:gpus_quota:max"
FAIR_SHARE = "project:gpus_fair_share:max"
BORROWED = "project:gpus_borrowed:sum"
# The label the scrape configuration gives the GPU scheduler's own targets (config.ROLE_LABEL).
SCHEDULER_LABEL = ("clusterproof_role", "scheduler")


# RFC 3339 as Prometheus writes it: nanoseconds (Python reads at most microseconds), Z or an offset.
_RFC3339 = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)")


def scraped_since(target: Mapping[str, Any], since: datetime.datetime) -> bool:
    """Whether Prometheus scraped ``target`` after ``since`` (its ``lastScrape``)."""
    match = _RFC3339.fullmatch(str(target.get("lastScrape") or ""))
    if match is None:
        return False
    seconds, fraction, zone = match.groups()
    text = seconds + ("." + fraction[:6] if fraction else "") + ("+00:00" if zone == "Z" else zone)
    return datetime.datetime.fromisoformat(text) > since


def target_checks(
    targets: Iterable[Mapping[str, Any]], since: datetime.datetime, expected: Iterable[str] = ()
) -> list[Check]:
    """One check per scrape job: each of its targets scraped since ``since``, and up. A job of
    ``expected`` with no target at all (service discovery found nothing: a Service renamed or gone)
    fails too."""
    jobs: dict[str, list[Mapping[str, Any]]] = {}
    for target in targets:
        jobs.setdefault(target["labels"].get("job", "?"), []).append(target)
    checks = [
        Check(
            id="monitoring/target/%s" % job,
            title="Prometheus scrapes %s" % job,
            status="fail",
            expected="at least one target",
            observed="no target found",
            message="Prometheus found nothing to scrape for %s" % job,
            category="configuration",
            action=(
                "check that what serves %s runs, and that its Service (or pods) are where the scrape "
                "configuration looks (docs/monitoring.md, monitoring.cluster)" % job
            ),
        )
        for job in sorted(set(expected) - set(jobs))
    ]
    for job, found in sorted(jobs.items()):
        scheduler = any(t["labels"].get(SCHEDULER_LABEL[0]) == SCHEDULER_LABEL[1] for t in found)
        down = [t for t in found if t.get("health") != "up" or not scraped_since(t, since)]
        what = "the GPU scheduler's metrics (%s)" % job if scheduler else job
        observed = "; ".join(
            "%s %s%s"
            % (
                t.get("scrapeUrl", "?"),
                t.get("health", "?") if scraped_since(t, since) else "not scraped since the check began",
                ": %s" % t["lastError"] if t.get("lastError") else "",
            )
            for t in down
        )
        checks.append(
            Check(
                id="monitoring/target/%s" % job,
                title="Prometheus scrapes %s" % what,
                status="fail" if down else "pass",
                expected="every target up",
                observed=observed or "%d target(s) up" % len(found),
                message=("Prometheus cannot scrape %s: %s" % (what, observed) if down else ""),
                category="configuration" if down else None,
                action=(
                    "check that the process serving %s runs and answers on its metrics port (on the sandbox: "
                    "logs/<process>.log; playbooks/sandbox.yml starts one that died again, the stage that installs "
                    "it one that was stopped)" % job
                    if down
                    else None
                ),
            )
        )
    return sorted(checks, key=lambda check: check.id)


def unreachable_check(prometheus_url: str, error: str) -> Check:
    """Prometheus itself does not answer: the one check of the section, saying why."""
    return Check(
        id="monitoring/prometheus",
        title="Prometheus answers at %s" % prometheus_url,
        status="fail",
        expected="Prometheus's API answers",
        observed=error,
        message="Prometheus does not answer: %s" % error,
        category="configuration",
        action="run playbooks/monitoring.yml again (on the sandbox its log is logs/prometheus.log)",
    )


def rule_check(shipped: Iterable[str], groups: Iterable[Mapping[str, Any]]) -> Check:
    """Every shipped rule (recording or alert, by name) is loaded and evaluates without error."""
    loaded: dict[str, list[Mapping[str, Any]]] = {}
    for group in groups:
        for rule in group.get("rules", ()):
            loaded.setdefault(rule["name"], []).append(rule)
    wanted = sorted(set(shipped))
    missing = [name for name in wanted if name not in loaded]
    failing = [
        "%s: %s" % (name, rule.get("lastError") or rule.get("health"))
        for name in wanted
        for rule in loaded.get(name, ())
        if rule.get("health") not in ("ok", "unknown")
    ]
    problems = (["not loaded: %s" % ", ".join(missing)] if missing else []) + failing
    return Check(
        id="monitoring/rules",
        title="Prometheus has loaded every rule clusterproof ships",
        status="fail" if problems else "pass",
        expected="%d rules loaded, each evaluating without error" % len(wanted),
        observed="; ".join(problems) or "%d rules loaded" % len(wanted),
        message="; ".join(problems),
        category="configuration" if problems else None,
        action="run playbooks/monitoring.yml again; promtool check rules names a rule Prometheus refuses"
        if problems
        else None,
    )


def _shown(value: float | None) -> str:
    if value is None:
        return "no series"
    return str(int(value)) if float(value).is_integer() else "%g" % value


def allocation_checks(held: Mapping[str, float], recorded: Mapping[str, float]) -> list[Check]:
    """Per project: Prometheus's recorded allocation equals the GPUs its pods hold."""
    checks = []
    for project, pods in sorted(held.items()):
        found = recorded.get(project)
        same = found is not None and abs(found - pods) < 1e-9
        checks.append(
            Check(
                id="monitoring/allocation/%s" % project,
                title="Prometheus's GPUs allocated to %s are what its pods hold" % project,
                status="pass" if same else "fail",
                expected="%s GPUs (its running pods)" % _shown(pods),
                observed="%s GPUs (%s)" % (_shown(found), ALLOCATED)
                if found is not None
                else "no %s series" % ALLOCATED,
                message=""
                if same
                else "Prometheus records %s for %s, its pods hold %s GPUs"
                % ("no allocation" if found is None else "%s GPUs" % _shown(found), project, _shown(pods)),
                category=None if same else "configuration",
                action=None
                if same
                else "check the kube-scheduler-resources target and the recording rules (docs/monitoring.md)",
            )
        )
    return checks


# What a regular expression (RE2) gives a meaning to, escaped in a PromQL matcher with a backslash that
# the string literal itself keeps (written twice); re.escape would also escape "-", which PromQL's
# string literal refuses ("unknown escape sequence").
_RE2_SPECIAL = frozenset(".+*?()|[]{}^$\\")


def of_projects(record: str, projects: Iterable[str]) -> str:
    """The query of ``record`` for ``projects`` (by the rules' ``project`` label)."""

    def literal(name: str) -> str:
        return "".join("\\\\" + c if c in _RE2_SPECIAL else ('\\"' if c == '"' else c) for c in name)

    return '%s{project=~"%s"}' % (record, "|".join(literal(project) for project in sorted(projects)))


def step_allocation_check(
    scenario: str, index: int, held: Mapping[str, float], recorded: Mapping[str, float], waited_s: float
) -> Check:
    """After step ``index`` of ``scenario``: Prometheus's allocation of each of the run's projects
    equals the whole GPUs its pods hold (waited for ``waited_s`` seconds)."""
    check_id = "monitoring/step/%s/%d" % (scenario, index + 1)
    title = "Prometheus records the GPUs each project's pods hold after step %d" % (index + 1)
    observed = {project: recorded.get(project) for project in sorted(held)}
    expected = {project: held[project] for project in sorted(held)}
    wrong = [
        project
        for project in sorted(held)
        if recorded.get(project) is None or abs(float(recorded[project]) - held[project]) >= 1e-9
    ]
    if not wrong:
        return Check(check_id, title, "pass", expected, observed, "recorded after %.0f s" % waited_s)
    message = "after %.0f s Prometheus records %s, where the pods hold %s" % (
        waited_s,
        ", ".join(
            "%s: %s" % (project, "nothing" if recorded.get(project) is None else _shown(recorded[project]))
            for project in wrong
        ),
        ", ".join("%s: %s" % (project, _shown(held[project])) for project in wrong),
    )
    return Check(
        check_id,
        title,
        "fail",
        expected,
        observed,
        message,
        category="configuration",
        action="check the kube-scheduler-resources target and the recording rules (docs/monitoring.md)",
    )


def unanswered_step_check(scenario: str, index: int, prometheus_url: str, error: str) -> Check:
    """Prometheus did not answer after step ``index``: the check says why; the run goes on."""
    return Check(
        "monitoring/step/%s/%d" % (scenario, index + 1),
        "Prometheus records the GPUs each project's pods hold after step %d" % (index + 1),
        "fail",
        message="Prometheus at %s did not answer: %s" % (prometheus_url, error),
        category="configuration",
        action="see the monitoring section; playbooks/monitoring.yml starts Prometheus again",
    )


def section(checks: list[Check], prometheus_url: str, rows: list[list[Any]] | None = None) -> dict[str, Any]:
    """The report's monitoring section, as the dict site_report reads; with ``rows``, the table of
    GPUs per project as Prometheus records them, naming the address and the queries."""
    tables = []
    if rows is not None:
        tables.append(
            Table(
                id="monitoring-projects",
                title="GPUs per project as Prometheus at %s records them (%s, %s, %s, %s)"
                % (prometheus_url, QUOTA, ALLOCATED, FAIR_SHARE, BORROWED),
                columns=["Project", "Quota", "Allocated", "Held by pods", "Fair share", "Borrowed"],
                rows=rows,
            )
        )
    found = Section(SECTION_ID, "Monitoring: Prometheus against the cluster", checks, tables)
    return {**section_to_dict(found), "charts": []}


def project_rows(held: Mapping[str, float], queried: Mapping[str, Mapping[str, float]]) -> list[list[Any]]:
    """A row per project: quota, allocated, held by pods, fair share and borrowed (``queried``:
    recording rule -> project -> value; "" where Prometheus has no series)."""

    def cell(rule: str, project: str) -> Any:
        value = queried.get(rule, {}).get(project)
        return "" if value is None else (int(value) if float(value).is_integer() else value)

    return [
        [
            project,
            cell(QUOTA, project),
            cell(ALLOCATED, project),
            _shown(pods),
            cell(FAIR_SHARE, project),
            cell(BORROWED, project),
        ]
        for project, pods in sorted(held.items())
    ]
