"""The monitoring stage's pure parts: the inventory's settings, the scrape configuration, what the
sandbox's Prometheus scrapes and how its processes are started."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.clusterproof.gpu.plugins.module_utils.monitoring import config, settings
from ansible_collections.clusterproof.gpu.plugins.module_utils.monitoring import sandbox as monitoring
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import control_plane
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox.control_plane import Layout

ROOT = Path(__file__).resolve().parents[4]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("15d", 15 * 86400), ("12h", 43200), ("1w2d", 9 * 86400), ("90m", 5400), ("1h30m", 5400), ("500ms", 0.5)],
)
def test_prometheus_durations(text, seconds):
    assert settings.duration_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "15", "15 d", "d", "2d1w", "1.5h", "15D", "-1h"])
def test_what_is_no_prometheus_duration(text):
    assert settings.duration_seconds(text) is None


@pytest.mark.parametrize("value", ["1h", "15d", "2w", "1y"])
def test_retentions_accepted(value):
    assert settings.retention_problem(value) is None


@pytest.mark.parametrize("value", ["59m", "30s", "15 days", 15, None, ["15d"]])
def test_retentions_refused_say_what_was_expected(value):
    assert settings.retention_problem(value) == settings.RETENTION_EXPECTED


def test_a_job_over_tls_with_a_token():
    target = config.ScrapeTarget("kueue", "https://127.0.0.1:20021/metrics", "/ca.crt", token_file="/token")
    assert config.scrape_job(target, 15) == {
        "job_name": "kueue",
        "scrape_interval": "15s",
        "scheme": "https",
        "metrics_path": "/metrics",
        "tls_config": {"ca_file": "/ca.crt"},
        "authorization": {"type": "Bearer", "credentials_file": "/token"},
        "static_configs": [{"targets": ["127.0.0.1:20021"]}],
    }


def test_a_plain_job_with_labels_and_a_path():
    target = config.ScrapeTarget("s", "http://127.0.0.1:1/metrics/resources", labels={"clusterproof_role": "scheduler"})
    job = config.scrape_job(target)
    assert job["metrics_path"] == "/metrics/resources"
    assert "tls_config" not in job and "authorization" not in job
    assert job["static_configs"] == [{"targets": ["127.0.0.1:1"], "labels": {"clusterproof_role": "scheduler"}}]


def test_a_target_whose_certificate_is_not_checked():
    job = config.scrape_job(config.ScrapeTarget("s", "https://127.0.0.1:1/metrics", insecure_tls=True))
    assert job["tls_config"] == {"insecure_skip_verify": True}


@pytest.mark.parametrize("url", ["127.0.0.1:1/metrics", "ftp://host/metrics", "http:///metrics"])
def test_a_target_that_is_no_url_is_refused_by_name(url):
    with pytest.raises(ValueError, match="scrape target job: expected an http\\(s\\) URL with a host, found"):
        config.scrape_job(config.ScrapeTarget("job", url))


def test_two_jobs_of_one_name_are_refused():
    target = config.ScrapeTarget("twice", "http://127.0.0.1:1/metrics")
    with pytest.raises(ValueError, match="found twice more than once"):
        config.prometheus_config([target, target], [])


def _jobs(scheduler: str, tmp_path: Path) -> dict[str, dict]:
    layout = Layout(tmp_path)
    configuration = config.prometheus_config(monitoring.targets(layout, 20000, scheduler), ["/r/a.yml"])
    assert configuration["rule_files"] == ["/r/a.yml"]
    return {job["job_name"]: job for job in configuration["scrape_configs"]}


def test_the_sandbox_scrapes_the_control_plane_and_kai(tmp_path):
    jobs = _jobs("kai", tmp_path)
    assert set(jobs) == {
        "kubernetes-apiserver",
        "kube-scheduler-resources",
        "kube-state-metrics",
        "prometheus",
        "kai-scheduler",
        "kai-queuecontroller",
    }
    ports = control_plane.Ports(20000)
    assert jobs["kubernetes-apiserver"]["static_configs"] == [{"targets": ["127.0.0.1:%d" % ports.apiserver]}]
    assert jobs["kubernetes-apiserver"]["tls_config"] == {"ca_file": str(tmp_path / "pki/ca.crt")}
    assert jobs["kube-scheduler-resources"]["metrics_path"] == "/metrics/resources"
    token = str(tmp_path / "monitoring/token")
    assert jobs["kube-scheduler-resources"]["authorization"]["credentials_file"] == token
    for name in ("kai-scheduler", "kai-queuecontroller"):
        assert jobs[name]["static_configs"][0]["labels"] == {"clusterproof_role": "scheduler"}
        assert "authorization" not in jobs[name]
    assert jobs["kai-scheduler"]["static_configs"][0]["targets"] == ["127.0.0.1:20010"]
    assert jobs["kai-queuecontroller"]["static_configs"][0]["targets"] == ["127.0.0.1:20018"]


def test_the_sandbox_scrapes_kueue_over_tls_with_the_token(tmp_path):
    jobs = _jobs("kueue", tmp_path)
    assert "kai-scheduler" not in jobs
    kueue = jobs["kueue"]
    assert kueue["scheme"] == "https"
    assert kueue["tls_config"] == {"ca_file": str(tmp_path / "pki/ca.crt")}
    assert kueue["authorization"]["credentials_file"] == str(tmp_path / "monitoring/token")
    assert kueue["static_configs"] == [{"targets": ["127.0.0.1:20021"], "labels": {"clusterproof_role": "scheduler"}}]


def test_without_a_scheduler_no_scheduler_target(tmp_path):
    jobs = _jobs("none", tmp_path)
    assert not [job for job in jobs.values() if job["static_configs"][0].get("labels")]


def test_the_processes_listen_on_loopback_only_in_their_port_block(tmp_path):
    layout = Layout(tmp_path)
    prometheus_bin, ksm_bin = tmp_path / "bin/prometheus", tmp_path / "bin/kube-state-metrics"
    ksm, prometheus = monitoring.components(layout, 20000, prometheus_bin, ksm_bin, "15d")
    block = control_plane.port_block("monitoring")
    assert (ksm.name, prometheus.name) == ("kube-state-metrics", "prometheus")
    assert "--web.listen-address=127.0.0.1:%d" % (20000 + block.start) in prometheus.argv
    assert "--storage.tsdb.retention.time=15d" in prometheus.argv
    assert "--host=127.0.0.1" in ksm.argv and "--telemetry-host=127.0.0.1" in ksm.argv
    # The rules know a project by its namespace's label, whether or not the engine's metrics are there.
    assert "--metric-labels-allowlist=namespaces=[clusterproof.io/project]" in ksm.argv
    assert "--resources=namespaces,nodes,pods" in ksm.argv
    ports = {arg.split("=")[1] for arg in ksm.argv if arg.startswith(("--port=", "--telemetry-port="))}
    assert ports == {str(20000 + block.start + 1), str(20000 + block.start + 2)}
    assert prometheus.ready_url == "http://127.0.0.1:%d/-/ready" % (20000 + block.start)
    # A pod ended while Prometheus was down answers for the lookback after a restart: one minute,
    # within what the validator waits (its default settle timeout, as the role says it too).
    assert "--query.lookback-delta=60s" in prometheus.argv


def test_the_validator_waits_past_the_lookback_by_two_evaluations():
    defaults = yaml.safe_load((ROOT / "roles/validate_monitoring/defaults/main.yml").read_text())
    assert defaults["validate_monitoring_settle_timeout"] == config.SETTLE_SECONDS == 90
    assert config.SETTLE_SECONDS - config.LOOKBACK_DELTA_SECONDS == 2 * config.SCRAPE_INTERVAL_SECONDS


def test_prometheus_may_read_metrics_and_nothing_else():
    (role,) = [o for o in monitoring.cluster_objects() if o["kind"] == "ClusterRole"]
    assert role["rules"] == [{"nonResourceURLs": ["/metrics", "/metrics/resources"], "verbs": ["get"]}]
