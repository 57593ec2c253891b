"""The monitoring stage's rules (roles/monitoring/files/rules) under ``promtool test rules``, with the
pinned promtool: Debian's package, fetched into the monitoring cache by the same code the stage uses
(``monitoring.prometheus_package``). Where it cannot be had, these tests fail saying why; they do
not skip.

The cases (tests/unit/fixtures/monitoring/clusterproof.rules.test.yml) give each alert a time where
it fires and one where it does not; ``test_every_alert_fires_and_stays_quiet`` holds them to that,
and ``test_a_broken_rule_fails_its_case`` shows the cases catch a rule that changes.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from ansible_collections.clusterproof.gpu.plugins.module_utils.monitoring import prometheus_package
from tests.conftest import REPO

RULES = REPO / "roles/monitoring/files/rules/clusterproof.rules.yml"
CASES = REPO / "tests/unit/fixtures/monitoring/clusterproof.rules.test.yml"


def _alerts(rules_file: Path) -> set[str]:
    groups = yaml.safe_load(rules_file.read_text())["groups"]
    return {rule["alert"] for group in groups for rule in group["rules"] if "alert" in rule}


def test_promtool_is_the_pinned_version(promtool):
    done = subprocess.run([str(promtool), "--version"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert prometheus_package.versions.PROMETHEUS.package_version in done.stdout + done.stderr


def test_rules_are_valid(promtool):
    done = subprocess.run([str(promtool), "check", "rules", str(RULES)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_rule_cases_pass(promtool):
    done = subprocess.run(
        [str(promtool), "test", "rules", CASES.name], cwd=CASES.parent, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_every_alert_fires_and_stays_quiet():
    cases = yaml.safe_load(CASES.read_text())["tests"]
    fires: set[str] = set()
    quiet: set[str] = set()
    for case in cases:
        for check in case.get("alert_rule_test", ()):
            (fires if check.get("exp_alerts") else quiet).add(check["alertname"])
    alerts = _alerts(RULES)
    assert alerts == {"GPULost", "ClusterGPUsLost", "GPUXidError", "GPUUncorrectableECC"} | {
        "ProjectStarvedBelowQuota",
        "SchedulerMetricsDown",
        "NodeNotReady",
    }
    assert alerts - fires == set(), "alerts without a case where they fire"
    assert alerts - quiet == set(), "alerts without a case where they stay quiet"
    assert (fires | quiet) - alerts == set(), "cases of alerts the rules do not have"


@pytest.mark.parametrize(
    ("alert", "before", "after"),
    [
        ("ProjectStarvedBelowQuota", "for: 10m", "for: 5m"),
        ("SchedulerMetricsDown", 'up{clusterproof_role="scheduler"} == 0', "up == 0"),
        ("GPULost", "node:gpus_allocatable:sum < max_over_time", "node:gpus_allocatable:sum <= max_over_time"),
    ],
)
def test_a_broken_rule_fails_its_case(promtool, tmp_path, alert, before, after):
    """A copy of the rules with one alert changed, under the same cases: promtool must fail on it."""
    text = RULES.read_text()
    assert text.count(before) == 1, before
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules/clusterproof.rules.yml").write_text(text.replace(before, after))
    cases = yaml.safe_load(CASES.read_text())
    cases["rule_files"] = ["rules/clusterproof.rules.yml"]
    (tmp_path / CASES.name).write_text(yaml.safe_dump(cases, sort_keys=False))
    done = subprocess.run(
        [str(promtool), "test", "rules", CASES.name], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode != 0
    assert "alertname: %s" % alert in done.stdout + done.stderr


def test_fetch_fails_loudly_without_apt(tmp_path, monkeypatch):
    """No apt (not a Debian machine): the fetch says what it needs, it does not return nothing."""
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(prometheus_package.PrometheusFetchError, match="needs apt-get and dpkg-deb"):
        prometheus_package.fetch(tmp_path)


def test_a_cache_of_another_version_is_not_used(tmp_path):
    programs = prometheus_package.PrometheusPrograms.under(tmp_path)
    programs.bin.mkdir(parents=True)
    for name in prometheus_package.PROGRAMS:
        (programs.bin / name).write_text("")
    programs.stamp.write_text("0.0.0-1\n")
    assert not programs.present()
    programs.stamp.write_text(programs.pin.package_version + "\n")
    assert programs.present()
