"""The report's HTML page, byte for byte, for representative reports: a change to how the page is
rendered (issue 31: the page through Jinja2 templates) must not change what it says.

Each case renders one report and compares it with its recorded file under
``tests/unit/fixtures/report_html/``. One case, ``sample``, is recorded as the whole page, but for
its stylesheet: ``templates.CSS`` as it is, recorded by its digest. Every other case records only
the parts of its page it is about (its banner, its sections) and, in a last line, the page's
outline, which says of each other part whether it is the same as in ``sample.html``. So the
skeleton is recorded once, and what each case adds is recorded once. A change meant to alter the
page records the pages again::

    CLUSTERPROOF_RECORD_REPORT_HTML=1 pytest tests/unit/plugins/module_utils/test_report_html_golden.py

and the recorded files' diff shows, in review, what the change did to every kind of section.
The cases cover what the renderers meet: node tables with row statuses, allocation charts (with
lines, one point, none), checks of every status with categories and actions, the changes since an
earlier run, tenant isolation, GPU health and benchmark sections, a stopped run, an empty report,
and markup, ``&``, quotes and non-ASCII text in every field the page shows.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.report import history, render, templates
from ansible_collections.clusterproof.gpu.plugins.module_utils.report import model as rp
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import registry
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import admission, isolation, projects
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import isolation as isolation_checks
from tests.unit.plugins.module_utils.helpers import UNIT_FIXTURES, recorded_benchmark
from tests.unit.plugins.module_utils.report_samples import (
    browser_sample,
    health_section,
    history_sections,
    node_row,
    site_state,
)

RECORDED = UNIT_FIXTURES / "report_html"
RECORD = os.environ.get("CLUSTERPROOF_RECORD_REPORT_HTML") == "1"

TIMELINE = [
    (0.0, {"team-a": 4, "team-b": 2}),
    (30.0, {"team-a": 4, "team-b": 4, "team-d": 4}),
    (60.5, {"team-a": 4, "team-b": 2, "team-c": 2, "team-d": 8}),
]
ODD = "<script>alert('x & \"y\"')</script> café ☃ 日本"


def nodes_section(node: str = "dgx1-2") -> rp.Section:
    """The sample of test_report.py: a node table, and a pass, a fail and a warning."""
    return rp.Section(
        id="gpu-nodes",
        title="GPU nodes",
        checks=[
            rp.Check("gpu-nodes/dgx1-1/gpu-count", "dgx1-1 has 8 allocatable GPUs", "pass", 8, 8),
            rp.Check(f"gpu-nodes/{node}/gpu-count", f"{node} has 8 allocatable GPUs", "fail", 8, 6,
                     f"node {node}: expected 8 allocatable nvidia.com/gpu, found 6.", 0.25),
            rp.Check("cluster/undeclared-gpu-nodes", "no GPU nodes outside the inventory", "warn", [], ["x"], "x"),
        ],
        tables=[rp.node_table([node_row("dgx1-1", 8), node_row(node, 6, status="fail")])],
    )  # fmt: skip


def scenario_section(timeline=TIMELINE) -> rp.Section:
    return rp.Section(
        id="scenario-4-8",
        title="4.8 High utilisation with over-quota allocation",
        checks=[
            rp.Check("scenario-4-8/running", "all 13 workloads run", "pass", 13, 13, duration_s=42.0),
            rp.Check("scenario-4-8/deadline", "interactive time limit ends the job", "needs-hardware", message="KWOK"),
            rp.Check("scenario-4-8/skipped", "too small", "skip", message="cluster has 2 idle GPUs, needs 16"),
        ],
        charts=[rp.Chart("allocation", "GPUs per project", list(timeline))] if timeline is not None else [],
    )


def sample() -> rp.Report:
    return rp.Report("netapp-sandbox", "sandbox", "2025-03-04T05:00:00+00:00", "2025-03-04T05:06:07+00:00",
                     [nodes_section(), scenario_section()])  # fmt: skip


def passing_without_chart() -> rp.Report:
    report = rp.Report("netapp-sandbox", "existing", "2025-03-04T05:00:00+00:00", "", [nodes_section(),
                       scenario_section(timeline=None)])  # fmt: skip
    report.sections[0].checks[1].status = "pass"
    return report


def odd_characters() -> rp.Report:
    """Markup, ``&``, both quotes and non-ASCII text in every field the page shows."""
    nodes = nodes_section(node="<script>alert(1)</script>")
    odd = rp.Section(
        id=f"odd section {ODD}",
        title=f"Odd: {ODD}",
        checks=[
            rp.Check(f"odd/check id\twith spaces {ODD}", f"title {ODD}", "fail", {"a&b": ODD, "n": 1.0},
                     [ODD, 2.5, True, None], f"message {ODD}\nsecond line", 1.5, category="hardware",
                     action=f"{rp.REPLACE_GPU} {ODD}"),
            rp.Check("odd/warn", "a warning with its own action", "warn", None, False, "", category="security",
                     action="look at \"it\" & 'that'"),
            rp.Check("odd/empty", "empty values", "pass", [], {}, ""),
            rp.Check("odd/skip", "skipped <b>", "skip", message="'quoted' & \"double\""),
            rp.Check("odd/hw", "needs hardware", "needs-hardware", "8 × H100", "–", "µs ≤ 5"),
        ],
        tables=[
            rp.Table(f"odd table {ODD}", f"Table {ODD}", [f"col {ODD}", "Number", "Float", "Bool", "None", "List"],
                     [[ODD, 3, 2.5, True, None, ["a", "<b>"]],
                      ["plain", -1, 0.1, False, {"k": "v&"}, []],
                      ["third", 10**12, 1e-9, None, "x", "y"]],
                     row_status=["fail", "warn"]),
            rp.Table("plain", "A plain table", ["A"], [["1"], ["2"]]),
            rp.Table("empty", "An empty table", ["A", "B"], []),
        ],
        charts=[
            rp.Chart(f"odd chart {ODD}", f"Chart {ODD}", [(0, {ODD: 1, "b&": 2}), (10, {ODD: 3})], y_label=ODD),
        ],
    )  # fmt: skip
    return rp.Report(f"site {ODD}", f'"><img src=x onerror=alert(1)> {ODD}', f"started {ODD}", f"finished {ODD}",
                     [nodes, odd])  # fmt: skip


def charts() -> rp.Report:
    """Charts with no data, one fractional point, many projects (the palette wraps), a long run."""
    many = [(t * 17.0, {f"project-{p}": (p + t) % 5 for p in range(11)}) for t in range(8)]
    section = rp.Section(
        id="charts",
        title="Charts",
        checks=[rp.Check("charts/ok", "ok", "pass")],
        charts=[
            rp.Chart("none", "Nothing recorded", []),
            rp.Chart("one", "One point", [(5, {"team-b": 0.6})]),
            rp.Chart("many", "Eleven projects", many, y_label="GPUs held"),
            rp.Chart("long", "A long run", [(1000.0, {"a": 0.25}), (86400.0, {"a": 120, "b": 7.5})]),
        ],
    )
    return rp.Report("charts", "sandbox", "2025-03-04T05:00:00+00:00", "2025-03-04T05:06:07+00:00", [section])


def changes() -> rp.Report:
    """A second run: what changed first (regressions failed, a new driver a warning), then the run."""

    before_data = [*history_sections(), health_section("dgx1-1", "580.159.04")]
    after_data = [
        *history_sections(nodes=[node_row("dgx1-1", 6), node_row("dgx1-3", 8)], quota_b=3, weight_b=1,
                          classes=(("local-path", False), ("nfs", True))),
        health_section("dgx1-1", "580.172.01"),
    ]  # fmt: skip
    found = history.compare(site_state(before_data), site_state(after_data))
    sections = [history.changes_section(found, "the run 20261124T100000Z")]
    sections += [rp.section_from_dict(s) for s in after_data]
    return rp.Report("s", "sandbox", "2026-11-24T11:00:00+00:00", "2026-11-24T11:05:00+00:00", sections)


def first_run() -> rp.Report:
    sections = [history.changes_section(None, "", "no earlier run for site s")]
    sections += [history.changes_section(None, "", "cannot read the run x: not JSON")]
    sections += [rp.section_from_dict(s) for s in history_sections()]
    return rp.Report("s", "sandbox", "2026-11-24T10:00:00+00:00", "2026-11-24T10:05:00+00:00", sections)


def tenant_isolation() -> rp.Report:
    """The security section: each escape judged, a policy and a network policy check, exceptions."""
    kai = registry.backend("kai")
    settings = isolation.TenancySettings(
        exceptions=(isolation.IsolationException("team-a", "privileged", 'profiling with "nsys" & <perf>'),)
    )
    alice = isolation_checks.Member("alice")
    attempts = {a.key: a for a in isolation_checks.attempts("team-a", "team-b", kai.admission_rules, settings)}
    refused = isolation_checks.Outcome(
        False, 403, "admission webhook denied: ValidatingAdmissionPolicy 'clusterproof-project-quota' with binding"
    )
    checks = [
        isolation_checks.judge(attempts["own-queue"], alice, isolation_checks.Outcome(True)),
        isolation_checks.judge(attempts["other-queue"], alice, isolation_checks.Outcome(True)),
        isolation_checks.judge(attempts["bypass-scheduler"], alice, refused),
        isolation_checks.judge(attempts["privileged-pod"], alice, isolation_checks.Outcome(True)),
        isolation_checks.judge(attempts["other-namespace"], alice,
                               isolation_checks.Outcome(False, 403, 'pods is forbidden: User "alice" cannot')),
    ]  # fmt: skip
    wanted = admission.policy_manifests(kai.admission_rules)
    checks.append(isolation_checks.policy_check(wanted, [None, *wanted[1:]]))
    network = projects.network_policy_manifest(projects.Project("team-a", 1, 1), "kai-scheduler")
    checks.append(isolation_checks.network_policy_check("team-a", network, None))
    checks.append(isolation_checks.gpu_visibility_check())
    section = rp.section_from_dict(isolation_checks.section(checks, settings, kai.admission_rules))
    return rp.Report("netapp-sandbox", "sandbox", "2025-03-04T05:00:00+00:00", "2025-03-04T05:06:07+00:00", [section])


def gpu_host() -> rp.Report:
    """A GPU host's passive health and its benchmark, as the recorded H100 gave them."""
    benchmark = recorded_benchmark("benchmark-h100.json")
    sections = [rp.section_from_dict(health_section("dgx-h100-1", "580.159.04")), rp.section_from_dict(benchmark)]
    return rp.Report("h100-lab", "existing", "2026-11-22T12:00:00+00:00", "2026-11-22T12:07:00+00:00", sections)


def stopped() -> rp.Report:
    section = rp.stopped_section("validate_scenarios : Run each fairness scenario", "scenario x not started: <busy>")
    return rp.Report("s", "sandbox", "2026-11-24T10:00:00+00:00", "", [section, scenario_section(timeline=None)])


def empty() -> rp.Report:
    return rp.Report("empty", "sandbox", "", "", [])


CASES: dict[str, Callable[[], rp.Report]] = {
    "sample": sample,
    "passing-without-chart": passing_without_chart,
    "odd-characters": odd_characters,
    "charts": charts,
    "browser-sample": browser_sample,
    "changes": changes,
    "first-run": first_run,
    "tenant-isolation": tenant_isolation,
    "gpu-host": gpu_host,
    "stopped": stopped,
    "empty": empty,
}

# The case recorded as a whole page, and what each other case is about: the parts of its page
# (by name, as parts() gives them, or its beginning) recorded as they are.
FULL = "sample"
ABOUT: dict[str, tuple[str, ...]] = {
    FULL: ("",),
    "passing-without-chart": ("verdict",),
    "odd-characters": ("title", "verdict", "failed-checks", "section-odd"),
    "charts": ("section-charts",),
    "browser-sample": ("section-gpu-nodes",),
    "changes": ("failed-checks", "section-changes"),
    "first-run": ("section-changes",),
    "tenant-isolation": ("failed-checks", "section-isolation"),
    "gpu-host": ("section-gpu-health-", "section-gpu-benchmark-"),
    "stopped": ("failed-checks", "section-run"),
    "empty": ("verdict",),
}
STYLESHEET = f"<style>{templates.CSS}</style>\n"
BLOCK = re.compile(
    r'^(?:<header [^>]*id="(?P<header>[^"]*)"|<section class="card" id="(?P<section>[^"]*)"|<footer>)', re.M
)


def parts(page: str) -> list[tuple[str, str]]:
    """The page cut into its parts, in order, each with its name: ``head``, ``title``, ``css`` (the
    ``<style>`` element), ``body`` (to ``<main>``), the banner (``verdict``), ``failed-checks``,
    each section card (``section-<id>``), the ``footer``, and the ``end``."""
    head, title, css, body, main = re.split(
        r"^(<title>[^\n]*\n)(<style>.*?</style>\n)(.*?<main>\n)", page, maxsplit=1, flags=re.M | re.S
    )
    main, end = main.split("</main>\n", 1)
    found = [("head", head), ("title", title), ("css", css), ("body", body)]
    starts = list(BLOCK.finditer(main))
    assert starts and starts[0].start() == 0, "the page's <main> does not begin with a part"
    for this, after in zip(starts, [*starts[1:], None], strict=True):
        name = this["header"] or this["section"] or "footer"
        found.append((name, main[this.start() : after.start() if after else len(main)]))
    return [*found, ("end", "</main>\n" + end)]


def recorded_text(case: str, page: str) -> str:
    """What is recorded for ``case``: the parts it is about as they are, then a line with the
    page's outline, which says of each other part where it is recorded."""
    full = dict(parts(render.to_html(CASES[FULL]())))
    kept, outline = [], []
    for name, text in parts(page):
        if name == "css" and text == STYLESHEET:
            outline.append(f"{name}: templates.CSS, sha256 {hashlib.sha256(text.encode()).hexdigest()}")
        elif name.startswith(ABOUT[case]):
            kept.append(text)
            outline.append(name)
        else:
            outline.append(f"{name}: {'as in ' + FULL + '.html' if full.get(name) == text else 'not recorded here'}")
    return "".join(kept) + f"<!-- {'; '.join(outline)} -->\n"


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_page_is_the_recorded_page(case):
    recorded = recorded_text(case, render.to_html(CASES[case]()))
    path = RECORDED / f"{case}.html"
    if RECORD:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(recorded.encode("utf-8"))
    assert recorded == path.read_bytes().decode("utf-8"), f"{case}: the page differs from {path}"


def test_every_recorded_page_has_its_case():
    # A recorded page whose case was removed would be checked by nothing, and so would a part a
    # case is about that its page no longer has.
    assert sorted(path.stem for path in RECORDED.glob("*.html")) == sorted(CASES) == sorted(ABOUT)
    for case, about in ABOUT.items():
        names = [name for name, _ in parts(render.to_html(CASES[case]()))]
        assert all(any(name.startswith(prefix) for name in names) for prefix in about), case


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_parts_make_the_page(case):
    page = render.to_html(CASES[case]())
    assert "".join(text for _, text in parts(page)) == page


def test_the_engine_escapes_every_value_and_nothing_is_marked_safe():
    # Escaping is the engine's alone: no template marks a value safe, no renderer escapes by hand.
    for name, source in templates.TEMPLATES.items():
        assert not re.search(r"\|\s*safe\b|autoescape\s+false", source), name
    source = Path(render.__file__).read_text()
    assert not re.search(r"^import html\b|^from html\b|Markup\(|markupsafe", source, re.M)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in render.to_html(odd_characters())
