"""The pure half of the entry point: runner events in, a live line and structured results out."""

from __future__ import annotations

from cli import progress


def play(name: str) -> dict:
    return {"event": "playbook_on_play_start", "event_data": {"play": name}}


def task(name: str) -> dict:
    return {"event": "playbook_on_task_start", "event_data": {"task": name}}


def result(kind: str, host: str, task_name: str, changed: bool = False, **data) -> dict:
    return {
        "event": "runner_on_" + kind,
        "event_data": {"host": host, "task": task_name, "res": {"changed": changed, **data.pop("res", {})}, **data},
    }


STATS = {
    "event": "playbook_on_stats",
    "event_data": {
        "processed": {"localhost": 1, "dgx1-1": 1},
        "ok": {"localhost": 5},
        "changed": {"localhost": 2},
        "failures": {"dgx1-1": 1},
        "dark": {},
        "skipped": {"localhost": 1},
    },
}


def test_the_live_line_names_stage_task_hosts_and_elapsed_time():
    view = progress.Progress(started=100.0)
    assert view.line(100.0) == "[00:00] starting › … · 0 hosts, 0 failed · task 0"
    for event in (
        play("Bring up the cluster"),
        task("Start etcd"),
        result("ok", "localhost", "Start etcd"),
        task("Start kube-apiserver"),
        result("failed", "dgx1-1", "Start kube-apiserver", res={"msg": "port in use"}),
    ):
        assert view.update(event)
    assert view.line(100.0 + 125) == (
        "[02:05] Bring up the cluster › Start kube-apiserver · 2 hosts, 1 failed · task 2"
    )


def test_a_new_stage_resets_the_task_and_other_events_change_nothing():
    view = progress.Progress(started=0.0)
    view.update(task("Old task"))
    view.update(play("Validate and report"))
    assert not view.update({"event": "verbose", "event_data": {}})
    assert not view.update({"event": "runner_item_on_ok", "event_data": {"host": "localhost"}})
    assert view.line(1.0) == "[00:01] Validate and report › … · 0 hosts, 0 failed · task 1"


def test_the_line_is_cut_to_the_terminal_width():
    view = progress.Progress(started=0.0, stage="A long stage name", task="a long task name")
    line = view.line(0.0, width=20)
    assert len(line) == 20 and line.endswith("…")


def test_an_ignored_failure_neither_counts_nor_prints():
    view = progress.Progress(started=0.0)
    ignored = result("failed", "localhost", "Probe", ignore_errors=True)
    view.update(ignored)
    assert view.hosts_failed == set() and view.hosts_done == {"localhost"}
    assert progress.failure_line(ignored) == ""


def test_a_failure_line_says_host_task_and_the_first_line_of_the_message():
    event = result("failed", "dgx1-1", "Start kube-apiserver", res={"msg": "port in use\nmore detail"})
    assert progress.failure_line(event) == "FAILED dgx1-1: Start kube-apiserver: port in use"
    unreachable = result("unreachable", "gpu-9", "Gathering Facts", res={"msg": "no route"})
    assert progress.failure_line(unreachable) == "UNREACHABLE gpu-9: Gathering Facts: no route"
    assert progress.failure_line(result("ok", "localhost", "x")) == ""


def test_changed_tasks_per_host_in_the_order_they_ran():
    events = [
        result("ok", "localhost", "Write kubeconfig", changed=True),
        result("ok", "dgx1-1", "Label node", changed=False),
        result("skipped", "dgx1-1", "Skip me"),
        result("ok", "dgx1-1", "Taint node", changed=True),
        result("ok", "localhost", "Start etcd", changed=True),
        result("failed", "localhost", "Broken", changed=True),
    ]
    assert progress.changed_tasks(events) == {
        "localhost": ["Write kubeconfig", "Start etcd"],
        "dgx1-1": ["Taint node"],
    }


def test_recap_from_the_stats_event_with_every_counter_present():
    table = progress.recap([task("x"), STATS])
    assert table["localhost"] == {
        "ok": 5, "changed": 2, "unreachable": 0, "failed": 0, "skipped": 1, "rescued": 0, "ignored": 0,
    }  # fmt: skip
    assert table["dgx1-1"]["failed"] == 1 and table["dgx1-1"]["ok"] == 0
    assert progress.recap([]) == {}


def test_report_paths_come_from_the_site_report_task():
    paths = {"dir": "/r/site/1", "html": "/r/site/1/report.html"}
    events = [
        result("ok", "localhost", "Other", res={"paths": {"dir": "/nope"}}, resolved_action="ansible.builtin.debug"),
        result("ok", "localhost", "Write the site validation report", res={"paths": paths},
               resolved_action="clusterproof.gpu.site_report"),
    ]  # fmt: skip
    assert progress.report_paths(events) == paths
    assert progress.report_paths(events[:1]) == {}


def report_written(verdict: str) -> dict:
    return result(
        "ok",
        "localhost",
        "site_report : Write the site validation report",
        resolved_action="clusterproof.gpu.site_report",
        res={"verdict": verdict, "paths": {"dir": "/r/s/1", "json": "/r/s/1/report.json"}},
    )


def test_exit_status_passed_failed_or_bad_input():
    inventory_failed = result(
        "failed", "localhost", "Check the inventory", resolved_action="clusterproof.gpu.site_inventory"
    )
    assert progress.exit_status(0, [report_written("pass")]) == progress.EXIT_PASSED
    assert progress.exit_status(0, []) == progress.EXIT_PASSED  # down: no report, nothing failed
    assert progress.exit_status(2, [report_written("fail")]) == progress.EXIT_FAILED
    assert progress.exit_status(2, [result("failed", "localhost", "Start kube-apiserver")]) == progress.EXIT_FAILED
    assert progress.exit_status(99, [task("Run each fairness scenario")]) == progress.EXIT_FAILED  # interrupted
    assert progress.exit_status(2, [inventory_failed]) == progress.EXIT_BAD_INPUT
    assert progress.exit_status(4, []) == progress.EXIT_BAD_INPUT  # ansible-playbook could not parse its input
    assert progress.exit_status(5, []) == progress.EXIT_BAD_INPUT  # bad options
    ignored = result("failed", "localhost", "x", resolved_action="clusterproof.gpu.site_inventory", ignore_errors=True)
    assert progress.exit_status(0, [ignored, report_written("pass")]) == progress.EXIT_PASSED


def test_the_stop_cause_is_the_last_failed_task_or_the_interrupt_and_its_task():
    events = [
        task("Check the nodes"),
        result("failed", "localhost", "Check the nodes", ignore_errors=True, res={"msg": "ignored"}),
        task("Run each fairness scenario"),
        result("failed", "localhost", "Run each fairness scenario", res={"msg": "scenario x not started"}),
    ]
    assert progress.stop_cause(events) == (
        "Run each fairness scenario",
        {"changed": False, "msg": "scenario x not started"},
    )
    task_name, stopped = progress.stop_cause(events[:3], "SIGINT")
    assert task_name == "Run each fairness scenario" and stopped["msg"].startswith("interrupted by SIGINT")
    assert progress.stop_cause([])[1]["msg"].startswith("ansible-playbook ended before the report was written")


def test_gathered_sections_and_facts_come_from_the_results_in_order():
    events = [
        result("ok", "localhost", "site", res={"ansible_facts": {"clusterproof_site": {"site_name": "a"}}}),
        result("ok", "localhost", "nodes", res={"section": {"id": "gpu-nodes", "checks": []}}),
        {"event": "runner_item_on_ok", "event_data": {"res": {"section": {"id": "scenario-x", "checks": []}}}},
        result("ok", "localhost", "nodes again", res={"section": {"id": "gpu-nodes", "checks": [{"id": "c"}]}}),
        result("ok", "localhost", "dir", res={"ansible_facts": {"clusterproof_reports_dir": "/r"}}),
    ]
    assert [section["id"] for section in progress.gathered_sections(events)] == ["scenario-x", "gpu-nodes"]
    assert progress.gathered_sections(events)[1]["checks"] == [{"id": "c"}]
    assert progress.run_facts(events) == {"clusterproof_site": {"site_name": "a"}, "clusterproof_reports_dir": "/r"}
    assert progress.playbook_pid([{"event": "x"}, {"event": "y", "pid": 42}]) == 42


def test_the_failure_messages_keep_every_line_of_each_message_and_leave_ignored_ones_out():
    events = [
        result("ok", "localhost", "Read"),
        result("failed", "localhost", "Run KAI scheduler on the sandbox", res={"msg": "first line\nsecond line"}),
        result("failed", "localhost", "Probe", ignore_errors=True, res={"msg": "ignored"}),
        result("unreachable", "gpu-9", "Gathering Facts", res={"msg": "x" * 50}),
    ]
    assert progress.failure_messages(events, limit=10) == [
        "FAILED localhost: Run KAI scheduler on the sandbox: first line…",
        "UNREACHABLE gpu-9: Gathering Facts: " + "x" * 10 + "…",
    ]
    assert progress.failure_messages(events)[0].endswith("first line\nsecond line")
