"""The scenario runs over time as Prometheus recorded them: windows read, queries made, charts, the
check, and the extras merged into the report's sections (module_utils/monitoring/timeline.py)."""

from __future__ import annotations

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.monitoring import checks, timeline
from ansible_collections.clusterproof.gpu.plugins.module_utils.report import model

START = 1_800_000_000.0


def run(window=None, section_id="scenario-netapp-4-8"):
    result = {"section": {"id": section_id, "checks": [], "tables": [], "charts": []}}
    if window is not None:
        result["window"] = window
    return result


def netapp_window(**changes):
    window = {
        "start": START,
        "end": START + 120.5,
        "projects": {"team-a": "scn-team-a", "team-b": "scn-team-b"},
        "resource": "gpu",
    }
    window.update(changes)
    return timeline.window_of(run(window), "runs[0]")


def test_a_run_s_window_is_read_from_what_validate_scenario_returns_and_one_that_did_not_run_has_none():
    window = netapp_window()
    assert (window.section_id, window.scenario, window.start, window.end) == (
        "scenario-netapp-4-8",
        "netapp-4-8",
        START,
        START + 120.5,
    )
    assert window.projects == {"team-a": "scn-team-a", "team-b": "scn-team-b"}
    # A step of whole seconds: at least 5, at most 400 points over the run.
    assert window.step == 5 and netapp_window(end=START + 4000).step == 10
    assert timeline.window_of(run(), "runs[1]") is None


@pytest.mark.parametrize(
    ("result", "said"),
    [
        (run({"start": START, "end": START + 1, "projects": {}}, section_id="monitoring"), "runs[0].section.id"),
        (run({"start": "soon", "end": START, "projects": {}}), "runs[0].window: expected start and end"),
        (run({"start": START + 9, "end": START, "projects": {}}), "expected start <= end"),
        (run({"start": START, "end": START + 1, "projects": ["team-a"]}), "runs[0].window.projects"),
    ],
)
def test_a_window_that_is_not_validate_scenario_s_is_refused_naming_the_field(result, said):
    with pytest.raises(timeline.WindowError, match=said.replace("[", r"\[").replace("]", r"\]")):
        timeline.window_of(result, "runs[0]")


def test_the_queries_select_the_run_s_projects_by_their_label_on_the_cluster():
    assert timeline.selector("project:gpus_allocated:sum", netapp_window()) == (
        'project:gpus_allocated:sum{project=~"scn-team-a|scn-team-b"}'
    )
    answer = [({"project": "scn-team-a"}, [(START, 1.0)]), ({"job": "x"}, [(START, 9.0)])]
    assert timeline.by_project(answer) == {"scn-team-a": [(START, 1.0)]}


def test_a_project_s_chart_holds_each_line_at_its_last_value_in_seconds_since_the_run_began():
    recorded = {
        "allocated": {"scn-team-a": [(START + 10, 0.0), (START + 25, 4.0), (START + 40, 6.0)]},
        "quota": {"scn-team-a": [(START + 10, 4.0), (START + 40, 4.0)]},
        "fair share": {},
    }
    chart = timeline.project_chart(netapp_window(), "team-a", recorded)
    assert chart.id == "scenario-netapp-4-8-prometheus-team-a" and chart.y_label == "GPUs"
    assert chart.timeline == [
        (10.0, {"allocated": 0.0, "quota": 4.0}),
        (25.0, {"allocated": 4.0, "quota": 4.0}),
        (40.0, {"allocated": 6.0, "quota": 4.0}),
    ]
    # Nothing recorded of team-b: no chart rather than an empty one.
    assert timeline.project_chart(netapp_window(), "team-b", recorded) is None


def test_the_check_passes_when_every_project_has_allocation_samples_and_fails_naming_those_without():
    recorded = {"allocated": {"scn-team-a": [(START, 0.0)], "scn-team-b": [(START, 2.0), (START + 5, 2.0)]}}
    check = timeline.timeline_check(netapp_window(), recorded)
    assert (check.id, check.status, check.observed) == (
        "monitoring/timeline/netapp-4-8",
        "pass",
        {"team-a": 1, "team-b": 2},
    )
    check = timeline.timeline_check(netapp_window(), {"allocated": {"scn-team-a": [(START, 0.0)]}})
    assert check.status == "fail" and "no allocation of team-b" in check.message, check
    assert 'project:gpus_allocated:sum{project=~"scn-team-a|scn-team-b"}' in check.message
    cpu = timeline.timeline_check(netapp_window(resource="cpu"), {})
    assert cpu.status == "skip" and "shares cpu" in cpu.message


def test_the_extras_go_into_their_scenario_s_section_and_every_other_section_is_left_as_it_is():
    recorded = {"allocated": {"scn-team-a": [(START, 1.0)], "scn-team-b": [(START, 2.0)]}}
    added = timeline.extras(netapp_window(), recorded, "http://127.0.0.1:30024/")
    assert [chart["id"] for chart in added["charts"]] == [
        "scenario-netapp-4-8-prometheus-team-a",
        "scenario-netapp-4-8-prometheus-team-b",
    ]
    (table,) = added["tables"]
    assert table["title"].endswith("(http://127.0.0.1:30024/graph)")
    assert [row[0] for row in table["rows"]] == ["allocated", "quota", "fair share"]
    step = {
        "id": "scenario-netapp-4-8",
        "checks": [{"id": "scenario/netapp-4-8/step-1", "status": "pass"}],
        "tables": [],
        "charts": [],
    }
    other = {"id": "gpu-nodes", "checks": [{"id": "gpu-nodes/n1/ready"}]}
    merged = timeline.merge([other, step], {"scenario-netapp-4-8": added})
    assert merged[0] == other
    assert [check["id"] for check in merged[1]["checks"]] == [
        "scenario/netapp-4-8/step-1",
        "monitoring/timeline/netapp-4-8",
    ]
    assert len(merged[1]["charts"]) == 2 and len(merged[1]["tables"]) == 1
    # The report reads the merged section back: the charts and the check are the report's own.
    section = model.section_from_dict(merged[1])
    assert [chart.kind for chart in section.charts] == ["prometheus", "prometheus"]
    assert section.checks[-1].status == "pass"


def test_prometheus_not_answering_fails_each_run_s_check_saying_why():
    check = timeline.unanswered_check(netapp_window(), "http://127.0.0.1:30024", "connection refused")
    assert check.status == "fail" and "connection refused" in check.message and "30024" in check.message


def test_a_step_s_check_passes_when_prometheus_records_what_the_pods_hold_and_names_the_difference():
    held = {"scn-team-a": 4.0, "scn-team-b": 0.0}
    check = checks.step_allocation_check("two-steps", 0, held, {"scn-team-a": 4.0, "scn-team-b": 0.0}, 17.2)
    assert (check.id, check.status, check.message) == ("monitoring/step/two-steps/1", "pass", "recorded after 17 s")
    check = checks.step_allocation_check("two-steps", 1, held, {"scn-team-a": 2.0}, 45.0)
    assert check.status == "fail" and check.category == "configuration" and check.action
    assert check.message == (
        "after 45 s Prometheus records scn-team-a: 2, scn-team-b: nothing, where the pods hold scn-team-a: 4, scn-team-b: 0"
    )
    assert check.observed == {"scn-team-a": 2.0, "scn-team-b": None}
    # PromQL's string literal refuses an escaped "-" (what re.escape writes); a regular expression's
    # own characters are escaped, the backslash kept by the literal.
    assert checks.of_projects("project:gpus_allocated:sum", ["scn-b", "scn-a"]) == (
        'project:gpus_allocated:sum{project=~"scn-a|scn-b"}'
    )
    assert checks.of_projects("r", ["a.b"]) == 'r{project=~"a\\\\.b"}'
    down = checks.unanswered_step_check("two-steps", 0, "http://127.0.0.1:30024", "connection refused")
    assert down.status == "fail" and "connection refused" in down.message
