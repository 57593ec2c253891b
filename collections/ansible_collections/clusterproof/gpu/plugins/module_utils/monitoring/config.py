"""Prometheus's configuration as clusterproof writes it: the scrape jobs and where the rules are,
and the names the monitoring stage gives what it makes, on the sandbox and on a kubeadm site alike.

A job scrapes fixed addresses (``ScrapeTarget``: the sandbox's processes, a service's DNS name) or
what DNS finds (``DnsTarget``: the SRV records of a Service's named port, a pod each for a headless
Service), as Prometheus in a pod finds the GPU scheduler's pods and each control plane's
kube-scheduler.

Pure: plain data in, the configuration (a dict, dumped as YAML by the caller) out. Touches nothing.
"""

from __future__ import annotations

import dataclasses
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

# What the monitoring stage makes in the cluster, the same on the sandbox and on a kubeadm site.
NAMESPACE = "clusterproof-monitoring"
SERVICE_ACCOUNT = "prometheus"
PROMETHEUS = "prometheus"
KUBE_STATE_METRICS = "kube-state-metrics"
# What kube-state-metrics lists: the namespaces (a project's carries its label), the nodes
# (allocatable GPUs, conditions) and the pods.
KUBE_STATE_METRICS_RESOURCES = ("namespaces", "nodes", "pods")
# The scrape jobs every site has, whoever runs Prometheus (their targets differ).
APISERVER_JOB = "kubernetes-apiserver"
SCHEDULER_RESOURCES_JOB = "kube-scheduler-resources"

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


@dataclasses.dataclass(frozen=True)
class DnsTarget:
    """Targets found by DNS: the SRV records of the port named ``port`` of the Service ``service`` in
    ``namespace`` (``_<port>._tcp.<service>.<namespace>.svc``, the pod's search path completing the
    cluster's domain): every ready pod of a headless Service, or the Service itself. Prometheus as
    Debian builds it has no Kubernetes discovery, and DNS needs no permission to read the API. TLS,
    the token and labels as for a ``ScrapeTarget``, with the service account's own CA and token
    inside the pod."""

    job: str
    namespace: str
    service: str
    port: str
    path: str = "/metrics"
    tls: bool = False
    insecure_tls: bool = False
    token: bool = False
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @property
    def name(self) -> str:
        return "_%s._tcp.%s.%s.svc" % (self.port, self.service, self.namespace)


# The service account's CA and token, as every pod has them.
IN_POD_CA = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
IN_POD_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"
# How often the SRV records are asked again (a scheduler's pod replaced, a control plane added).
DNS_REFRESH_SECONDS = 30


def _job(
    name: str, interval_seconds: int, scheme: str, path: str, tls: dict[str, Any] | None, token_file: str
) -> dict[str, Any]:
    """What every ``scrape_configs`` entry says: its name, interval, scheme and path; over TLS, how
    the certificate is checked; the bearer token's file where one is sent."""
    job: dict[str, Any] = {
        "job_name": name,
        "scrape_interval": "%ds" % interval_seconds,
        "scheme": scheme,
        "metrics_path": path,
    }
    if scheme == "https":
        job["tls_config"] = tls
    if token_file:
        job["authorization"] = {"type": "Bearer", "credentials_file": token_file}
    return job


def dns_job(target: DnsTarget, interval_seconds: int = SCRAPE_INTERVAL_SECONDS) -> dict[str, Any]:
    """The ``scrape_configs`` entry of targets found by DNS. The only labels added are the
    target's own: kube-scheduler's series carry ``node``, ``namespace`` and ``pod`` (the pod a
    request is of), which a label of the target's would rename."""
    tls = {"insecure_skip_verify": True} if target.insecure_tls else {"ca_file": IN_POD_CA}
    job = _job(
        target.job,
        interval_seconds,
        "https" if target.tls else "http",
        target.path,
        tls,
        IN_POD_TOKEN if target.token else "",
    )
    job["dns_sd_configs"] = [{"names": [target.name], "type": "SRV", "refresh_interval": "%ds" % DNS_REFRESH_SECONDS}]
    if target.labels:
        job["relabel_configs"] = [
            {"target_label": name, "replacement": value} for name, value in sorted(target.labels.items())
        ]
    return job


def scrape_job(target: ScrapeTarget, interval_seconds: int = SCRAPE_INTERVAL_SECONDS) -> dict[str, Any]:
    """The ``scrape_configs`` entry of one target."""
    url = urllib.parse.urlsplit(target.url)
    if url.scheme not in ("http", "https") or not url.netloc:
        raise ValueError("scrape target %s: expected an http(s) URL with a host, found %r" % (target.job, target.url))
    tls = {"insecure_skip_verify": True} if target.insecure_tls else {"ca_file": target.ca_file}
    job = _job(target.job, interval_seconds, url.scheme, url.path or "/metrics", tls, target.token_file)
    static: dict[str, Any] = {"targets": [url.netloc]}
    if target.labels:
        static["labels"] = dict(target.labels)
    job["static_configs"] = [static]
    return job


def prometheus_config(
    targets: Iterable[ScrapeTarget | DnsTarget],
    rule_files: Iterable[str],
    interval_seconds: int = SCRAPE_INTERVAL_SECONDS,
) -> dict[str, Any]:
    """Prometheus's whole configuration: the global intervals, the rule files, a job per target."""
    jobs = [
        dns_job(target, interval_seconds) if isinstance(target, DnsTarget) else scrape_job(target, interval_seconds)
        for target in targets
    ]
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
