"""Prometheus's configuration as clusterproof writes it: the scrape jobs and where the rules are.

Pure: plain data in, the configuration (a dict, dumped as YAML by the caller) out. Touches nothing.
"""

from __future__ import annotations

import dataclasses
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

# The label the rules know the GPU scheduler's own targets by (SchedulerMetricsDown).
ROLE_LABEL = "clusterproof_role"
SCHEDULER_ROLE = "scheduler"
# How often targets are scraped and rules evaluated: the validator's allocation check waits up to
# a few of these for Prometheus to catch up with the pods.
SCRAPE_INTERVAL_SECONDS = 15
# How far back a query looks for a series' last sample. Prometheus writes no stale marker when it
# stops, so after a restart the series of a pod that ended while it was down still answer for this
# long: Prometheus's default, 5 minutes, is longer than the validator waits. Four scrapes: a series
# survives three missed ones.
LOOKBACK_DELTA_SECONDS = 4 * SCRAPE_INTERVAL_SECONDS
# What the validator's allocation check waits at most for Prometheus to agree with the pods: past
# the lookback, plus two evaluations of the rules.
SETTLE_SECONDS = LOOKBACK_DELTA_SECONDS + 2 * SCRAPE_INTERVAL_SECONDS


@dataclasses.dataclass(frozen=True)
class ScrapeTarget:
    """One endpoint and how to reach it: its URL; over TLS, the CA to check its certificate with
    (``ca_file``), or none where the endpoint makes its own certificate at start (``insecure_tls``:
    loopback only); a bearer token file where it asks for one; labels for the rules."""

    job: str
    url: str
    ca_file: str = ""
    insecure_tls: bool = False
    token_file: str = ""
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)


def scrape_job(target: ScrapeTarget, interval_seconds: int = SCRAPE_INTERVAL_SECONDS) -> dict[str, Any]:
    """The ``scrape_configs`` entry of one target."""
    url = urllib.parse.urlsplit(target.url)
    if url.scheme not in ("http", "https") or not url.netloc:
        raise ValueError("scrape target %s: expected an http(s) URL with a host, found %r" % (target.job, target.url))
    job: dict[str, Any] = {
        "job_name": target.job,
        "scrape_interval": "%ds" % interval_seconds,
        "scheme": url.scheme,
        "metrics_path": url.path or "/metrics",
    }
    if url.scheme == "https":
        job["tls_config"] = {"insecure_skip_verify": True} if target.insecure_tls else {"ca_file": target.ca_file}
    if target.token_file:
        job["authorization"] = {"type": "Bearer", "credentials_file": target.token_file}
    static: dict[str, Any] = {"targets": [url.netloc]}
    if target.labels:
        static["labels"] = dict(target.labels)
    job["static_configs"] = [static]
    return job


def prometheus_config(
    targets: Iterable[ScrapeTarget], rule_files: Iterable[str], interval_seconds: int = SCRAPE_INTERVAL_SECONDS
) -> dict[str, Any]:
    """Prometheus's whole configuration: the global intervals, the rule files, a job per target."""
    jobs = [scrape_job(target, interval_seconds) for target in targets]
    names = [job["job_name"] for job in jobs]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError("scrape jobs: expected each name once, found %s more than once" % ", ".join(duplicates))
    return {
        "global": {
            "scrape_interval": "%ds" % interval_seconds,
            "evaluation_interval": "%ds" % interval_seconds,
        },
        "rule_files": list(rule_files),
        "scrape_configs": jobs,
    }
