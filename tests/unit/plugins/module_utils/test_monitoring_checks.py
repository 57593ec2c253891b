"""The report's monitoring checks (module_utils/monitoring/checks.py), on Prometheus's answers as its
API gives them and on pods as the API server gives them."""

from __future__ import annotations

import datetime

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.common.pods import held_by_pods
from ansible_collections.clusterproof.gpu.plugins.module_utils.monitoring import checks

BEGAN = datetime.datetime(2026, 11, 28, 7, 0, 0, tzinfo=datetime.UTC)
AFTER = "2026-11-28T07:00:03.123456789Z"
BEFORE = "2026-11-28T06:59:58.5Z"


def target(job, health="up", last_scrape=AFTER, error="", scheduler=False):
    labels = {"job": job, "instance": "127.0.0.1:1"}
    if scheduler:
        labels["clusterproof_role"] = "scheduler"
    return {
        "labels": labels,
        "health": health,
        "lastError": error,
        "lastScrape": last_scrape,
        "scrapeUrl": "http://127.0.0.1:1/metrics",
    }


@pytest.mark.parametrize(
    ("stamp", "after"),
    [
        (AFTER, True),
        (BEFORE, False),
        ("2026-11-28T08:00:01+01:00", True),
        ("2026-11-28T07:59:59+01:00", False),
        ("0001-01-01T00:00:00Z", False),
        ("", False),
        ("yesterday", False),
    ],
)
def test_scraped_since(stamp, after):
    assert checks.scraped_since({"lastScrape": stamp}, BEGAN) is after


def test_every_target_up_passes_one_check_per_job():
    found = checks.target_checks([target("a"), target("b"), target("b")], BEGAN)
    assert [(c.id, c.status, c.observed) for c in found] == [
        ("monitoring/target/a", "pass", "1 target(s) up"),
        ("monitoring/target/b", "pass", "2 target(s) up"),
    ]


def test_a_scheduler_target_down_fails_naming_it_and_the_error():
    down = target("kai-scheduler", "down", error="connect: connection refused", scheduler=True)
    (check,) = checks.target_checks([down], BEGAN)
    assert check.status == "fail"
    assert check.category == "configuration"
    assert check.message == (
        "Prometheus cannot scrape the GPU scheduler's metrics (kai-scheduler): "
        "http://127.0.0.1:1/metrics down: connect: connection refused"
    )
    assert "kai-scheduler" in check.action


def test_a_target_up_before_the_check_but_not_scraped_since_fails():
    (check,) = checks.target_checks([target("kueue", "up", BEFORE, scheduler=True)], BEGAN)
    assert check.status == "fail"
    assert "not scraped since the check began" in check.observed


def test_every_shipped_rule_loaded_passes():
    groups = [{"rules": [{"name": "a", "health": "ok"}, {"name": "b", "health": "unknown"}]}]
    check = checks.rule_check(["a", "b"], groups)
    assert (check.status, check.observed) == ("pass", "2 rules loaded")


def test_a_rule_missing_or_failing_fails_naming_it():
    groups = [{"rules": [{"name": "a", "health": "err", "lastError": "many-to-many matching not allowed"}]}]
    check = checks.rule_check(["a", "b"], groups)
    assert check.status == "fail"
    assert check.observed == "not loaded: b; a: many-to-many matching not allowed"


def pod(namespace, gpus, node="dgx1", phase="Running", requests=True):
    resources = {"requests" if requests else "limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    return {
        "metadata": {"namespace": namespace},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": resources}]},
        "status": {"phase": phase},
    }


def test_the_gpus_pods_hold_per_project():
    pods = [
        pod("team-a", 2),
        pod("team-a", 1, requests=False),  # a limit alone is the request
        pod("team-a", 4, node=None, phase="Pending"),  # waiting: holds nothing
        pod("team-a", 8, phase="Succeeded"),  # finished: holds nothing
        pod("team-b", 0),
        pod("elsewhere", 8),  # not a project
    ]
    assert held_by_pods(pods, ["team-a", "team-b", "team-c"]) == {"team-a": 3.0, "team-b": 0.0, "team-c": 0.0}


def test_allocation_checks_compare_prometheus_with_the_pods():
    found = checks.allocation_checks({"team-a": 6.0, "team-b": 0.0, "team-c": 2.0}, {"team-a": 6.0, "team-b": 1.0})
    assert [(c.id, c.status) for c in found] == [
        ("monitoring/allocation/team-a", "pass"),
        ("monitoring/allocation/team-b", "fail"),
        ("monitoring/allocation/team-c", "fail"),
    ]
    assert found[1].message == "Prometheus records 1 GPUs for team-b, its pods hold 0 GPUs"
    assert found[2].observed == "no project:gpus_allocated:sum series"
    assert found[2].message == "Prometheus records no allocation for team-c, its pods hold 2 GPUs"


def test_the_section_names_prometheus_and_the_queries():
    held = {"team-a": 6.0}
    queried = {checks.QUOTA: {"team-a": 4.0}, checks.ALLOCATED: {"team-a": 6.0}, checks.BORROWED: {"team-a": 2.0}}
    section = checks.section(
        checks.allocation_checks(held, queried[checks.ALLOCATED]),
        "http://127.0.0.1:9",
        checks.project_rows(held, queried),
    )
    assert section["id"] == "monitoring"
    (table,) = section["tables"]
    assert "http://127.0.0.1:9" in table["title"] and checks.ALLOCATED in table["title"]
    assert table["rows"] == [["team-a", 4, 6, "6", "", 2]]
    assert [c["status"] for c in section["checks"]] == ["pass"]


def test_prometheus_not_answering_is_one_failed_check_saying_why():
    check = checks.unreachable_check("http://127.0.0.1:9", "GET http://127.0.0.1:9/api/v1/targets: Connection refused")
    assert (check.id, check.status, check.category) == ("monitoring/prometheus", "fail", "configuration")
    assert check.message == "Prometheus does not answer: GET http://127.0.0.1:9/api/v1/targets: Connection refused"
