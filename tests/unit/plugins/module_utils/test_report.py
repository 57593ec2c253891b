"""The report model and its three renderings: JSON, JUnit XML and HTML."""

from __future__ import annotations

import datetime
import json
import os
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.report import model as rp
from ansible_collections.clusterproof.gpu.plugins.module_utils.report import render
from ansible_collections.clusterproof.gpu.plugins.module_utils.report.model import Chart, Check, Report, Section

NOW = datetime.datetime(2025, 3, 4, 5, 6, 7, tzinfo=datetime.UTC)
TIMELINE = [
    (0.0, {"team-a": 4, "team-b": 2}),
    (30.0, {"team-a": 4, "team-b": 4, "team-d": 4}),
    (60.5, {"team-a": 4, "team-b": 2, "team-c": 2, "team-d": 8}),
]


def sample_report(site: str = "netapp-sandbox", node: str = "dgx1-2", chart: bool = True) -> Report:
    nodes = Section(
        id="gpu-nodes",
        title="GPU nodes",
        checks=[
            Check("gpu-nodes/dgx1-1/gpu-count", "dgx1-1 has 8 allocatable GPUs", "pass", 8, 8),
            Check(
                f"gpu-nodes/{node}/gpu-count",
                f"{node} has 8 allocatable GPUs",
                "fail",
                8,
                6,
                f"node {node}: expected 8 allocatable nvidia.com/gpu, found 6.",
                0.25,
            ),
            Check("cluster/undeclared-gpu-nodes", "no GPU nodes outside the inventory", "warn", [], ["x"], "x"),
        ],
        tables=[
            rp.node_table(
                [
                    {"name": "dgx1-1", "declared": True, "present": True, "declared_gpus": 8, "found_gpus": 8,
                     "declared_product": "V100", "found_product": "V100", "ready": True, "status": "pass"},
                    {"name": node, "declared": True, "present": True, "declared_gpus": 8, "found_gpus": 6,
                     "declared_product": "V100", "found_product": "V100", "ready": True, "status": "fail"},
                ]
            )
        ],
    )  # fmt: skip
    scenario = Section(
        id="scenario-4-8",
        title="4.8 High utilisation with over-quota allocation",
        checks=[
            Check("scenario-4-8/running", "all 13 workloads run", "pass", 13, 13, duration_s=42.0),
            Check("scenario-4-8/deadline", "interactive time limit ends the job", "needs-hardware", message="KWOK"),
            Check("scenario-4-8/skipped", "too small", "skip", message="cluster has 2 idle GPUs, needs 16"),
        ],
        charts=[Chart("allocation", "GPUs per project", list(TIMELINE))] if chart else [],
    )
    return Report(site, "sandbox", "2025-03-04T05:00:00+00:00", "2025-03-04T05:06:07+00:00", [nodes, scenario])


class WellFormed(HTMLParser):
    """Fails on a closing tag that does not match the open one; collects text."""

    VOID = {"meta", "br", "img", "hr", "input", "link", "col", "area", "base", "wbr", "source"}

    def __init__(self):
        super().__init__()
        self.stack: list[str] = []
        self.text: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append(tag)

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes <{self.stack[-1] if self.stack else None}>"
        self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


def parse_html(text: str) -> WellFormed:
    parser = WellFormed()
    parser.feed(text)
    parser.close()
    assert parser.stack == [], parser.stack
    return parser


# --- model ----------------------------------------------------------------------------------------


def test_verdict_fails_only_on_a_failed_check():
    report = sample_report()
    assert report.verdict == "fail"
    assert [check.id for check in report.failed_checks] == ["gpu-nodes/dgx1-2/gpu-count"]
    report.sections[0].checks[1].status = "pass"
    assert report.verdict == "pass"  # warn, skip and needs-hardware do not fail a run
    assert report.counts == {"pass": 3, "fail": 0, "warn": 1, "skip": 1, "needs-hardware": 1, "total": 6}


def test_unknown_status_is_refused():
    with pytest.raises(ValueError, match="status 'ok' is not one of"):
        Check("x", "x", "ok")


def test_empty_report_passes():
    assert Report("s", "sandbox", "", "", []).verdict == "pass"


# --- JSON -----------------------------------------------------------------------------------------


def test_json_round_trips():
    report = sample_report()
    data = json.loads(render.to_json(report))
    assert rp.report_from_dict(data) == report
    assert render.to_json(rp.report_from_dict(data)) == render.to_json(report)


def test_json_has_the_documented_fields():
    data = json.loads(render.to_json(sample_report()))
    assert list(data) == [
        "schema_version", "generator", "site", "cluster_mode", "started", "finished", "verdict", "counts", "sections",
        "site_state", "changes",
    ]  # fmt: skip
    assert data["schema_version"] == rp.SCHEMA_VERSION == 2
    assert data["verdict"] == "fail"
    assert data["counts"]["fail"] == 1
    section = data["sections"][0]
    assert list(section) == ["id", "title", "verdict", "counts", "checks", "tables", "charts"]
    assert list(section["checks"][0]) == ["id", "title", "status", "expected", "observed", "message", "duration_s"]
    assert list(section["checks"][1]) == [
        "id", "title", "status", "expected", "observed", "message", "duration_s", "category", "action",
    ]  # fmt: skip
    assert section["tables"][0]["columns"][:3] == ["Node", "Declared GPUs", "Found GPUs"]
    assert data["sections"][1]["charts"][0]["timeline"][1] == [30.0, {"team-a": 4, "team-b": 4, "team-d": 4}]


def test_newer_schema_is_refused():
    with pytest.raises(ValueError, match="newer than this reader"):
        rp.report_from_dict({"schema_version": 99, "sections": []})


def test_sections_from_module_data_take_a_node_table():
    section = rp.section_from_dict(
        {
            "id": "gpu-nodes",
            "title": "GPU nodes",
            "checks": [{"id": "gpu-nodes/a/present", "title": "a is in the cluster", "status": "fail"}],
            "node_table": [
                {"name": "a", "declared": True, "present": False, "declared_gpus": 8, "found_gpus": None,
                 "declared_product": None, "found_product": None, "ready": None, "status": "fail"},
                {"name": "b", "declared": False, "present": True, "declared_gpus": None, "found_gpus": 2,
                 "declared_product": None, "found_product": "T4", "ready": False, "status": "warn",
                 "gpu_source": "dra", "both_sources": True, "kubelet": "v1.30.2"},
            ],
        }
    )  # fmt: skip
    table = section.tables[0]
    assert table.rows == [
        ["a", 8, None, None, None, None, "not in cluster", None],
        ["b (not declared)", None, 2, "DRA ResourceSlices (both report GPUs)", None, "T4", "no", "v1.30.2"],
    ]
    assert table.row_status == ["fail", "warn"]
    assert section.checks[0].message == ""


def test_a_section_handed_to_the_report_reads_back_as_it_was():
    table = rp.Table(id="t", title="T", columns=["Node"], rows=[["a"]], row_status=["fail"])
    section = Section("s", "S", [Check(id="s/a", title="a", status="fail", message="gone")], [table])
    data = rp.section_to_dict(section)
    assert list(data) == ["id", "title", "checks", "tables"]
    again = rp.section_from_dict(data)
    assert (again.id, again.title, again.checks, again.tables) == (section.id, section.title, section.checks, [table])


def test_a_check_without_an_id_is_refused():
    with pytest.raises(ValueError, match="has no id"):
        rp.section_from_dict({"id": "s", "checks": [{"status": "pass"}]})


# --- JUnit ----------------------------------------------------------------------------------------


def test_junit_has_a_testcase_per_check_and_failures_in_the_right_places():
    report = sample_report()
    root = ET.fromstring(render.to_junit_xml(report))
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("skipped")) == ("6", "1", "2")
    suites = root.findall("testsuite")
    assert [suite.get("id") for suite in suites] == ["gpu-nodes", "scenario-4-8"]
    cases = {case.get("name"): case for case in root.iter("testcase")}
    assert list(cases) == [check.id for check in report.checks]

    failing = cases["gpu-nodes/dgx1-2/gpu-count"]
    failure = failing.find("failure")
    assert failure is not None
    assert "expected 8 allocatable" in failure.get("message")
    assert "observed: 6" in failure.text
    assert failing.get("time") == "0.250"
    assert [case.get("name") for case in root.iter("testcase") if case.find("failure") is not None] == [
        "gpu-nodes/dgx1-2/gpu-count"
    ]

    assert cases["scenario-4-8/deadline"].find("skipped").get("message") == "needs hardware: KWOK"
    assert cases["scenario-4-8/skipped"].find("skipped").get("message") == "cluster has 2 idle GPUs, needs 16"
    warn = cases["cluster/undeclared-gpu-nodes"]
    assert warn.find("failure") is None and warn.find("skipped") is None
    assert warn.find("system-out").text.startswith("WARNING: x")
    assert suites[0].get("failures") == "1"
    assert suites[1].get("skipped") == "2"


def test_junit_survives_characters_xml_cannot_hold():
    report = sample_report(node="bad\x00node<&>")
    root = ET.fromstring(render.to_junit_xml(report))
    names = [case.get("name") for case in root.iter("testcase")]
    assert "gpu-nodes/bad\ufffdnode<&>/gpu-count" in names


# --- HTML -----------------------------------------------------------------------------------------


def test_html_is_well_formed_and_shows_verdict_nodes_and_checks():
    report = sample_report()
    page = render.to_html(report)
    parsed = parse_html(page)
    text = " ".join(parsed.text)
    assert page.startswith("<!DOCTYPE html>")
    assert "FAIL" in text
    assert 'class="banner fail"' in page
    assert 'id="table-node-gpus"' in page
    assert "Declared GPUs" in text and "Found GPUs" in text
    assert "dgx1-2" in text
    assert "expected 8 allocatable nvidia.com/gpu, found 6." in text
    assert 'href="#check-gpu-nodes/dgx1-2/gpu-count"' in page  # failed-checks list links to the row
    assert 'id="check-gpu-nodes/dgx1-2/gpu-count"' in page
    assert "needs-hardware" in text


def test_html_is_self_contained():
    page = render.to_html(sample_report())
    parsed = parse_html(page)
    assert "script" not in parsed.tags
    assert "link" not in parsed.tags
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in page


def test_html_escapes_names():
    report = sample_report(site="evil", node="<script>alert(1)</script>")
    report.cluster_mode = '"><img src=x onerror=alert(1)>'
    page = render.to_html(report)
    parsed = parse_html(page)
    assert "<script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "script" not in parsed.tags
    assert "img" not in parsed.tags


def test_html_contains_the_chart_only_when_there_is_a_timeline():
    with_chart = render.to_html(sample_report(chart=True))
    assert "<svg" in with_chart
    assert 'id="chart-allocation"' in with_chart
    parse_html(with_chart)
    assert "<svg" not in render.to_html(sample_report(chart=False))


def test_pass_banner():
    report = sample_report()
    report.sections[0].checks[1].status = "pass"
    page = render.to_html(report)
    assert 'class="banner pass"' in page
    assert "Failed checks" not in page


# --- chart ----------------------------------------------------------------------------------------


def test_allocation_chart_has_a_line_and_legend_entry_per_project():
    svg = ET.fromstring(render.allocation_chart_svg(TIMELINE))
    ns = {"svg": "http://www.w3.org/2000/svg"}
    paths = svg.findall("svg:path", ns)
    assert [path.get("data-project") for path in paths] == ["team-a", "team-b", "team-d", "team-c"]
    texts = [text.text for text in svg.findall("svg:text", ns)]
    for project in ("team-a", "team-b", "team-c", "team-d", "time (s)", "GPUs allocated"):
        assert project in texts
    # team-c appears at 60.5 s only: before that its line is at 0 (the x axis).
    team_c = paths[3].get("d").split()
    assert team_c[0].startswith("M56")
    assert len(team_c) == 3 + 2 * (len(TIMELINE) - 1)  # "M x y", "H x V y" per later point, "H end"
    assert team_c[3] == "V" + team_c[1]  # still on the axis at 30 s
    assert "8" in texts  # y axis reaches the largest allocation


def test_allocation_chart_escapes_project_names():
    svg = render.allocation_chart_svg([(0, {"<b>&": 1})])
    assert "<b>" not in svg
    root = ET.fromstring(svg)
    assert any(text.text == "<b>&" for text in root.iter("{http://www.w3.org/2000/svg}text"))


def test_allocation_chart_without_data_says_so():
    assert "no allocation recorded" in render.allocation_chart_svg([])
    ET.fromstring(render.allocation_chart_svg([]))


def test_allocation_chart_handles_fractions_and_a_single_point():
    root = ET.fromstring(render.allocation_chart_svg([(5, {"team-b": 0.6})]))
    assert len(root.findall("{http://www.w3.org/2000/svg}path")) == 1


# --- writing --------------------------------------------------------------------------------------


def test_write_report_writes_three_files_and_links_latest(tmp_path):
    paths = render.write_report(sample_report(), tmp_path, NOW)
    run = tmp_path / "netapp-sandbox" / "20250304T050607Z"
    assert paths == {
        "dir": str(run),
        "json": str(run / "report.json"),
        "html": str(run / "report.html"),
        "junit": str(run / "junit.xml"),
        "latest": str(tmp_path / "netapp-sandbox" / "latest"),
    }
    assert json.loads((run / "report.json").read_text())["verdict"] == "fail"
    ET.parse(run / "junit.xml")
    parse_html((run / "report.html").read_text())
    latest = tmp_path / "netapp-sandbox" / "latest"
    assert os.readlink(latest) == "20250304T050607Z"  # relative, so the tree can move
    assert (latest / "report.html").exists()
    assert sorted(p.name for p in run.iterdir()) == ["junit.xml", "report.html", "report.json"]  # no temporaries


def test_write_report_moves_latest_and_never_overwrites_a_run(tmp_path):
    first = render.write_report(sample_report(), tmp_path, NOW)
    second = render.write_report(sample_report(), tmp_path, NOW)
    third = render.write_report(sample_report(), tmp_path, NOW + datetime.timedelta(hours=1))
    assert second["dir"].endswith("20250304T050607Z-2")
    assert first["dir"] != second["dir"]
    assert os.readlink(third["latest"]) == "20250304T060607Z"
    assert sorted(p.name for p in (tmp_path / "netapp-sandbox").iterdir()) == [
        "20250304T050607Z", "20250304T050607Z-2", "20250304T060607Z", "latest",
    ]  # fmt: skip


def test_write_report_takes_local_time_as_utc_stamp(tmp_path):
    local = NOW.astimezone(datetime.timezone(datetime.timedelta(hours=2)))
    paths = render.write_report(sample_report(), tmp_path, local)
    assert paths["dir"].endswith("20250304T050607Z")


@pytest.mark.parametrize("site", ["../escape", "a/b", "", ".hidden"])
def test_write_report_refuses_site_names_that_are_not_one_directory(tmp_path, site):
    with pytest.raises(ValueError, match="cannot name a directory"):
        render.write_report(sample_report(site=site), tmp_path, NOW)


def test_a_stopped_run_is_one_failed_check_that_names_the_task_and_the_cause():
    section = rp.stopped_section(
        "validate_scenarios : Run each fairness scenario\n and judge", "scenario x not started: 1 workload pod(s)"
    )
    (check,) = section.checks
    assert (section.id, check.id, check.status) == ("run", "run/stopped", "fail")
    assert check.observed == "stopped at: validate_scenarios : Run each fairness scenario and judge"
    assert check.message == "scenario x not started: 1 workload pod(s)"
    report = Report("s", "sandbox", "", "", [section])
    assert report.verdict == "fail" and [c.id for c in report.failed_checks] == ["run/stopped"]


def test_a_stopped_check_without_a_task_or_message_still_says_so_and_a_long_message_is_cut():
    (check,) = rp.stopped_section("", "").checks
    assert check.observed == "stopped at: an unnamed task" and check.message == "no message"
    (check,) = rp.stopped_section("t", "x" * 5000).checks
    assert len(check.message) < 2100 and check.message.endswith(" […]")


def test_the_failure_of_a_loop_is_each_failed_item_s_message():
    loop = {
        "msg": "One or more items failed",
        "results": [{"failed": False, "msg": "ok"}, {"failed": True, "msg": "scenario a not started: busy"}],
    }
    assert rp.failure_message(loop) == "scenario a not started: busy"
    assert rp.failure_message({"msg": "the API server at 127.0.0.1:16443 cannot be reached"}) == (
        "the API server at 127.0.0.1:16443 cannot be reached"
    )
    assert rp.failure_message({}) == "failed, with no message"


# --- categories and actions -----------------------------------------------------------------------


def test_a_failed_check_takes_its_section_s_category_and_that_category_s_action():
    report = sample_report()
    failed = report.failed_checks[0]
    assert (failed.category, failed.action) == ("capacity", rp.DEFAULT_ACTIONS["capacity"])
    passing = report.sections[0].checks[0]
    assert (passing.category, passing.action) == (None, None)
    assert "category" not in passing.to_dict()


def test_a_check_s_own_category_and_action_are_kept():
    check = Check("gpu-health/n1/0/ecc", "no uncorrected ECC errors", "fail", 0, 3, category="hardware",
                  action=rp.REPLACE_GPU)  # fmt: skip
    section = Section(id="gpu-nodes", title="x", checks=[check])
    assert (section.checks[0].category, section.checks[0].action) == ("hardware", rp.REPLACE_GPU)


@pytest.mark.parametrize(
    ("section_id", "category"),
    [("gpu-health-n1", "hardware"), ("gpu-benchmark-n1", "performance"), ("scenario-4-8", "fairness"),
     ("quota-tree", "fairness"), ("storage-classes", "configuration"), ("something-new", "configuration")],
)  # fmt: skip
def test_section_categories(section_id, category):
    assert rp.section_category(section_id) == category


def test_an_unknown_category_is_refused():
    with pytest.raises(ValueError, match="category 'disk' is not one of configuration, capacity"):
        Check("x", "x", "fail", category="disk")


def test_a_check_added_after_its_section_was_made_is_classified_in_every_rendering():
    report = sample_report()
    late = Check("scenario-4-8/late", "late", "fail", 1, 2, "late failure")
    report.sections[1].checks.append(late)
    data = json.loads(render.to_json(report))
    late_json = next(c for s in data["sections"] for c in s["checks"] if c["id"] == "scenario-4-8/late")
    assert (late_json["category"], late_json["action"]) == ("fairness", rp.DEFAULT_ACTIONS["fairness"])


def test_junit_carries_category_and_action_of_each_failure():
    root = ET.fromstring(render.to_junit_xml(sample_report()))
    case = next(c for c in root.iter("testcase") if c.get("name") == "gpu-nodes/dgx1-2/gpu-count")
    properties = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert properties == {"category": "capacity", "action": rp.DEFAULT_ACTIONS["capacity"]}
    failure = case.find("failure")
    assert failure.get("type") == "capacity"
    assert "action: " + rp.DEFAULT_ACTIONS["capacity"] in failure.text
    passing = next(c for c in root.iter("testcase") if c.get("name") == "gpu-nodes/dgx1-1/gpu-count")
    assert passing.find("properties") is None


def test_html_says_what_to_do_about_each_failure():
    page = render.to_html(sample_report())
    # the failed list and the failed check's row, and the warning's row
    assert page.count("What to do: " + rp.DEFAULT_ACTIONS["capacity"]) == 3


def test_a_version_1_report_is_read_and_its_failures_classified():
    data = json.loads(render.to_json(sample_report()))
    data["schema_version"] = 1
    for section in data["sections"]:
        for check in section["checks"]:
            check.pop("category", None)
            check.pop("action", None)
    report = rp.report_from_dict(data)
    assert report.failed_checks[0].category == "capacity"
