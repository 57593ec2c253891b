"""The monitoring stage on the sandbox: Prometheus and kube-state-metrics as local processes.

Like the engines and local-path-provisioner, they go onto the sandbox through its one install step
(``sandbox.install.InstallStep``): a few objects (a namespace, Prometheus's service account with a
token, the read-only role that lets it read metrics endpoints), files in the sandbox's state
directory, and the processes, recorded like every sandbox process so that ``down`` stops them and
``up`` heals them. Everything listens on loopback only.

Files in the sandbox's state directory::

    monitoring/prometheus.yml     the scrape configuration (``config.prometheus_config``)
    monitoring/rules/*.yml        the rules (roles/monitoring/files/rules), as shipped
    monitoring/token              Prometheus's bearer token (mode 0600)
    monitoring/data/              Prometheus's samples, kept for the retention the inventory sets

What Prometheus scrapes: the API server; kube-scheduler's /metrics/resources (every pod's requests
and node, whoever schedules it); kube-state-metrics (nodes and pods); the GPU scheduler's own
metrics, where its backend serves them (``Backend.sandbox_metrics``), labelled as the scheduler's;
itself.

Touches: the sandbox's API server, its state directory and the processes it starts.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ansible_collections.clusterproof.gpu.plugins.module_utils.common.fields import Below, PortAt
from ansible_collections.clusterproof.gpu.plugins.module_utils.common.wait import wait_until
from ansible_collections.clusterproof.gpu.plugins.module_utils.monitoring import config
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import control_plane
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox.control_plane import (
    LOOPBACK,
    Component,
    Layout,
    port_block,
)
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox.install import InstallStep
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import registry
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import isolation

PROMETHEUS = config.PROMETHEUS
KUBE_STATE_METRICS = config.KUBE_STATE_METRICS
PROCESSES = (KUBE_STATE_METRICS, PROMETHEUS)
NAMESPACE = config.NAMESPACE
SERVICE_ACCOUNT = config.SERVICE_ACCOUNT
TOKEN_SECRET = "prometheus-token"
READER_ROLE = "clusterproof:metrics-reader"
KUBE_STATE_METRICS_RESOURCES = config.KUBE_STATE_METRICS_RESOURCES
# The namespace labels it exports (kube_namespace_labels{label_clusterproof_io_project}): the rules
# know every project from it, whether or not the engine's metrics are there.
KUBE_STATE_METRICS_LABELS = "namespaces=[%s]" % isolation.PROJECT_LABEL


@dataclasses.dataclass(frozen=True)
class MonitoringPorts:
    """Loopback ports of the monitoring processes (their block of ``control_plane.PORT_TABLE``)."""

    base: int

    prometheus = PortAt(port_block("monitoring"), 0)
    kube_state_metrics = PortAt(port_block("monitoring"), 1)
    # kube-state-metrics serves its own telemetry on a second port, on every interface unless told.
    kube_state_metrics_telemetry = PortAt(port_block("monitoring"), 2)

    @property
    def prometheus_url(self) -> str:
        return "http://%s:%d" % (LOOPBACK, self.prometheus)


def prometheus_url(url: str | None, port_base: int | None) -> str:
    """Where Prometheus answers: ``url`` when given, else the sandbox's at ``port_base``; "" for neither."""
    if url:
        return url
    return "" if port_base is None else MonitoringPorts(port_base).prometheus_url


@dataclasses.dataclass(frozen=True)
class MonitoringPaths:
    """The monitoring files in the sandbox's state directory."""

    root: Path

    @classmethod
    def of(cls, layout: Layout) -> MonitoringPaths:
        return cls(layout.root / "monitoring")

    config = Below("root", "prometheus.yml")
    rules = Below("root", "rules")
    token = Below("root", "token")
    data = Below("root", "data")


def cluster_objects() -> list[dict[str, Any]]:
    """Prometheus's identity: a service account with a long-lived token (filled in by the
    controller-manager), allowed to read metrics endpoints and nothing else."""
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SERVICE_ACCOUNT, "namespace": NAMESPACE}},
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/service-account-token",
            "metadata": {
                "name": TOKEN_SECRET,
                "namespace": NAMESPACE,
                "annotations": {"kubernetes.io/service-account.name": SERVICE_ACCOUNT},
            },
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": READER_ROLE},
            "rules": [{"nonResourceURLs": ["/metrics", "/metrics/resources"], "verbs": ["get"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": READER_ROLE},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": READER_ROLE},
            "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}],
        },
    ]


def targets(layout: Layout, port_base: int, scheduler: str) -> list[config.ScrapeTarget]:
    """What the sandbox's Prometheus scrapes (the module's docstring). Pure."""
    ports = control_plane.Ports(port_base)
    monitoring = MonitoringPorts(port_base)
    paths = MonitoringPaths.of(layout)
    ca, token = str(layout.pki.ca_cert), str(paths.token)
    found = [
        config.ScrapeTarget(
            config.APISERVER_JOB, "https://%s:%d/metrics" % (LOOPBACK, ports.apiserver), ca, token_file=token
        ),
        # kube-scheduler serves with a certificate it makes itself at start, which no CA vouches for.
        config.ScrapeTarget(
            config.SCHEDULER_RESOURCES_JOB,
            "https://%s:%d/metrics/resources" % (LOOPBACK, ports.scheduler),
            insecure_tls=True,
            token_file=token,
        ),
        config.ScrapeTarget(KUBE_STATE_METRICS, "http://%s:%d/metrics" % (LOOPBACK, monitoring.kube_state_metrics)),
        config.ScrapeTarget(PROMETHEUS, "%s/metrics" % monitoring.prometheus_url),
    ]
    scheduler_label = {config.ROLE_LABEL: config.SCHEDULER_ROLE}
    for endpoint in registry.backend(scheduler).sandbox_metrics(port_base) if scheduler != registry.NONE else ():
        found.append(
            config.ScrapeTarget(
                endpoint.job,
                endpoint.url,
                ca if endpoint.tls else "",
                token_file=token if endpoint.token else "",
                labels=scheduler_label,
            )
        )
    return found


def components(
    layout: Layout, port_base: int, prometheus_bin: Path, kube_state_metrics_bin: Path, retention: str
) -> list[Component]:
    """kube-state-metrics, then Prometheus. Pure."""
    ports = MonitoringPorts(port_base)
    paths = MonitoringPaths.of(layout)
    return [
        Component(
            KUBE_STATE_METRICS,
            (
                str(kube_state_metrics_bin),
                "--kubeconfig=%s" % layout.kubeconfig,
                "--host=%s" % LOOPBACK,
                "--port=%d" % ports.kube_state_metrics,
                "--telemetry-host=%s" % LOOPBACK,
                "--telemetry-port=%d" % ports.kube_state_metrics_telemetry,
                "--resources=%s" % ",".join(KUBE_STATE_METRICS_RESOURCES),
                "--metric-labels-allowlist=%s" % KUBE_STATE_METRICS_LABELS,
            ),
            "http://%s:%d/healthz" % (LOOPBACK, ports.kube_state_metrics),
        ),
        Component(
            PROMETHEUS,
            (
                str(prometheus_bin),
                "--config.file=%s" % paths.config,
                "--storage.tsdb.path=%s" % paths.data,
                "--storage.tsdb.retention.time=%s" % retention,
                "--query.lookback-delta=%ds" % config.LOOKBACK_DELTA_SECONDS,
                "--web.listen-address=%s:%d" % (LOOPBACK, ports.prometheus),
            ),
            "%s/-/ready" % ports.prometheus_url,
        ),
    ]


def _token(step: InstallStep, timeout: float) -> str | None:
    """The service account's token, once the controller-manager has filled the Secret in."""
    wanted = next(manifest for manifest in cluster_objects() if manifest["kind"] == "Secret")

    def look() -> str | None:
        found = step.applier.get(wanted) or {}
        return (found.get("data") or {}).get("token")

    waited = wait_until(look, timeout=timeout, interval=0.5)
    return waited.value


def install(
    step: InstallStep,
    *,
    port_base: int,
    scheduler: str,
    prometheus_bin: Path,
    kube_state_metrics_bin: Path,
    rules: Mapping[str, str],
    retention: str,
    timeout: float,
) -> str:
    """Prometheus and kube-state-metrics on the sandbox: the objects, the files, the processes
    (Prometheus restarted when its configuration, rules or token changed: it reads them at start).
    Returns Prometheus's URL."""
    layout = step.layout
    paths = MonitoringPaths.of(layout)
    step.apply(cluster_objects())
    changed = False
    if not step.check_mode:
        token = _token(step, timeout)
        if token is None:
            raise control_plane.SandboxError(
                "Secret %s/%s: expected the controller-manager to fill in the service account's token within "
                "%.0f s, found none (logs/kube-controller-manager.log)" % (NAMESPACE, TOKEN_SECRET, timeout)
            )
        changed |= step.write(paths.token, base64.b64decode(token), private=True)
    elif not paths.token.exists():
        step.applied.append("file %s" % paths.token)
    rule_paths = []
    for name, text in sorted(rules.items()):
        changed |= step.write(paths.rules / name, text)
        rule_paths.append(str(paths.rules / name))
    stale = sorted(p for p in paths.rules.glob("*") if p.name not in rules) if paths.rules.is_dir() else []
    for path in stale:
        step.applied.append("removed %s" % path)
        changed = True
        if not step.check_mode:
            path.unlink()
    configuration = config.prometheus_config(targets(layout, port_base, scheduler), rule_paths)
    changed |= step.write(paths.config, yaml.safe_dump(configuration, sort_keys=False))
    wanted = components(layout, port_base, prometheus_bin, kube_state_metrics_bin, retention)
    step.start(wanted[:1], timeout)
    step.start(wanted[1:], timeout, restart=changed)
    return MonitoringPorts(port_base).prometheus_url


def uninstall(step: InstallStep) -> None:
    """Stop the monitoring processes (their files stay until the sandbox goes ``down``)."""
    step.stop(PROCESSES)
