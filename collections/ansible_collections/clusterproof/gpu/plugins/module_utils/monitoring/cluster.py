"""The monitoring stage on a kubeadm site: Prometheus and kube-state-metrics as pods, from the
bundle's images (``versions.PROMETHEUS_IMAGE``: Debian's Prometheus; ``versions.KUBE_STATE_METRICS_IMAGE``:
the pinned Go module, as the sandbox builds it), in the namespace the sandbox's processes use.

What it makes: the namespace (Pod Security "restricted": both run as nobody, read-only, with no
privilege); a service account for each, with a cluster role that reads what it needs and nothing
else (Prometheus: the metrics endpoints; kube-state-metrics: namespaces, nodes and pods); the
configuration and the shipped rules as ConfigMaps; Prometheus's samples on a claim of the site's
default storage class, kept for the retention the inventory sets; a Deployment and a Service of
each. A changed configuration or rule file changes the pod template's checksum, so Prometheus
restarts with it; the same files, nothing.

What Prometheus scrapes, from inside the cluster: the API server (``kubernetes.default.svc``);
each control plane's kube-scheduler, port 10259 (``/metrics/resources``, every pod's requests and
node; kubeadm's scheduler listens on every address for it, ``install.kubeadm_config``);
kube-state-metrics by its Service; the GPU scheduler's own metrics by the Services its chart makes
(``Backend.cluster_metrics``), labelled as the scheduler's; NVIDIA's DCGM exporter where the GPU
operator runs one (real GPUs only: no target elsewhere); itself. Debian's Prometheus has no
Kubernetes discovery: targets are found by DNS (``config.DnsTarget``), and where no headless Service
names each pod, the stage makes one: ``clusterproof-kube-scheduler`` in kube-system (kubeadm's
static pods), ``clusterproof-dcgm-exporter`` beside the GPU operator's exporter (where it runs).

The validator reaches it through the API server's proxy (``reach``): nothing is exposed outside
the cluster.

Pure: settings in, the objects (dicts) out. Touches nothing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from typing import Any

import yaml

from ansible_collections.clusterproof.gpu.plugins.module_utils import versions
from ansible_collections.clusterproof.gpu.plugins.module_utils.monitoring import config
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import registry
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import isolation

PROMETHEUS_PORT = 9090
KUBE_STATE_METRICS_PORT = 8080
KUBE_STATE_METRICS_TELEMETRY_PORT = 8081
# kube-scheduler's secure port, on every control plane (kubeadm's static pod, host network).
KUBE_SCHEDULER_PORT = 10259
# The headless Services that give each kube-scheduler, and each DCGM exporter, an SRV record.
KUBE_SCHEDULER_SERVICE = "clusterproof-kube-scheduler"
KUBE_SCHEDULER_PORT_NAME = "https-metrics"
PROMETHEUS_ROLE = "clusterproof:prometheus"
KUBE_STATE_METRICS_ROLE = "clusterproof:kube-state-metrics"
CONFIG_MAP = "prometheus-config"
RULES_CONFIG_MAP = "prometheus-rules"
DATA_CLAIM = "prometheus-data"
CONFIG_DIR = "/etc/prometheus/config"
RULES_DIR = "/etc/prometheus/rules"
DATA_DIR = "/prometheus"
# The pod template's annotation that carries the checksum of the configuration and the rules.
CHECKSUM_ANNOTATION = "clusterproof.io/config-sha256"
# Where the GPU operator (real GPUs) runs DCGM's exporter: its pods' label and port.
DCGM_JOB = "dcgm-exporter"
DCGM_SERVICE = "clusterproof-dcgm-exporter"
DCGM_SELECTOR = {"app": "nvidia-dcgm-exporter"}
DCGM_PORT = 9400
DCGM_PORT_NAME = "gpu-metrics"
# nobody: as upstream's images run both.
NOBODY = 65534
# What each pod asks for; Prometheus's memory grows with the series (figures in docs/monitoring.md).
PROMETHEUS_RESOURCES = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "2Gi"}}
KUBE_STATE_METRICS_RESOURCES = {"requests": {"cpu": "20m", "memory": "64Mi"}, "limits": {"memory": "512Mi"}}


@dataclasses.dataclass(frozen=True)
class ClusterMonitoring:
    """The settings of the stage on a kubeadm site: the GPU scheduler (whose metrics are scraped),
    the rule files (name: parsed, ``operator.rule_files``), how long samples are kept, the size of
    Prometheus's claim, and the GPU operator's namespace (where DCGM's exporter is looked for)."""

    scheduler: str
    rule_files: Mapping[str, Mapping[str, Any]]
    retention: str = "15d"
    storage_size: str = "10Gi"
    gpu_operator_namespace: str = "gpu-operator"
    prometheus_image: str = versions.PROMETHEUS_IMAGE
    kube_state_metrics_image: str = versions.KUBE_STATE_METRICS_IMAGE


def targets(settings: ClusterMonitoring) -> list[config.ScrapeTarget | config.DnsTarget]:
    """What Prometheus scrapes on a kubeadm site (the module's docstring). Pure."""
    found: list[config.ScrapeTarget | config.DnsTarget] = [
        config.ScrapeTarget(
            config.APISERVER_JOB,
            "https://kubernetes.default.svc/metrics",
            config.IN_POD_CA,
            token_file=config.IN_POD_TOKEN,
        ),
        # kube-scheduler serves with a certificate it makes itself at start, which no CA vouches for.
        config.DnsTarget(
            config.SCHEDULER_RESOURCES_JOB,
            "kube-system",
            KUBE_SCHEDULER_SERVICE,
            KUBE_SCHEDULER_PORT_NAME,
            path="/metrics/resources",
            tls=True,
            insecure_tls=True,
            token=True,
        ),
        config.ScrapeTarget(
            config.KUBE_STATE_METRICS,
            "http://%s.%s.svc:%d/metrics" % (config.KUBE_STATE_METRICS, config.NAMESPACE, KUBE_STATE_METRICS_PORT),
        ),
        config.ScrapeTarget(config.PROMETHEUS, "http://localhost:%d/metrics" % PROMETHEUS_PORT),
    ]
    scheduler_label = {config.ROLE_LABEL: config.SCHEDULER_ROLE}
    for endpoint in (
        registry.backend(settings.scheduler).cluster_metrics() if settings.scheduler != registry.NONE else ()
    ):
        found.append(
            config.DnsTarget(
                endpoint.job,
                endpoint.namespace,
                endpoint.service,
                endpoint.port,
                tls=endpoint.tls,
                insecure_tls=endpoint.tls,
                token=endpoint.token,
                labels=scheduler_label,
            )
        )
    found.append(config.DnsTarget(DCGM_JOB, settings.gpu_operator_namespace, DCGM_SERVICE, DCGM_PORT_NAME))
    return found


def expected_jobs(settings: ClusterMonitoring) -> list[str]:
    """The jobs that must have a target on every site (DCGM's, on real GPUs only, need not)."""
    return [target.job for target in targets(settings) if target.job != DCGM_JOB]


def prometheus_yaml(settings: ClusterMonitoring) -> str:
    rule_files = ["%s/%s" % (RULES_DIR, name) for name in sorted(settings.rule_files)]
    return yaml.safe_dump(config.prometheus_config(targets(settings), rule_files), sort_keys=False)


def rule_data(settings: ClusterMonitoring) -> dict[str, str]:
    """The rules ConfigMap's data: each rule file under its name."""
    return {name: yaml.safe_dump(rules, sort_keys=False) for name, rules in sorted(settings.rule_files.items())}


def checksum(settings: ClusterMonitoring) -> str:
    """Of the configuration and the rules: what a restart of Prometheus must follow."""
    text = json.dumps({"config": prometheus_yaml(settings), "rules": rule_data(settings)}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _metadata(name: str, namespaced: bool = True) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": {"app.kubernetes.io/managed-by": "clusterproof"}}
    if namespaced:
        metadata["namespace"] = config.NAMESPACE
    return metadata


def _cluster_role(name: str, rules: list[dict[str, Any]], account: str) -> list[dict[str, Any]]:
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _metadata(account)},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": _metadata(name, namespaced=False),
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": _metadata(name, namespaced=False),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": config.NAMESPACE}],
        },
    ]


_RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}


def _pod_security(fs_group: bool) -> dict[str, Any]:
    security: dict[str, Any] = {
        "runAsNonRoot": True,
        "runAsUser": NOBODY,
        "runAsGroup": NOBODY,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    if fs_group:
        security["fsGroup"] = NOBODY
    return security


def _deployment(name: str, pod_spec: dict[str, Any], annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    selector = {"app.kubernetes.io/name": name}
    template_metadata: dict[str, Any] = {"labels": dict(selector)}
    if annotations:
        template_metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(name),
        "spec": {
            "replicas": 1,
            # One pod at a time: Prometheus's claim is ReadWriteOnce, and its data folder takes one.
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": selector},
            "template": {"metadata": template_metadata, "spec": pod_spec},
        },
    }


def _service(name: str, port: int, port_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(name),
        "spec": {
            "selector": {"app.kubernetes.io/name": name},
            "ports": [{"name": port_name, "port": port, "targetPort": port, "protocol": "TCP"}],
        },
    }


def kube_state_metrics_objects(settings: ClusterMonitoring) -> list[dict[str, Any]]:
    rules = [{"apiGroups": [""], "resources": list(config.KUBE_STATE_METRICS_RESOURCES), "verbs": ["list", "watch"]}]
    container = {
        "name": config.KUBE_STATE_METRICS,
        "image": settings.kube_state_metrics_image,
        "args": [
            "--port=%d" % KUBE_STATE_METRICS_PORT,
            "--telemetry-port=%d" % KUBE_STATE_METRICS_TELEMETRY_PORT,
            "--resources=%s" % ",".join(config.KUBE_STATE_METRICS_RESOURCES),
            "--metric-labels-allowlist=namespaces=[%s]" % isolation.PROJECT_LABEL,
        ],
        "ports": [{"name": "http-metrics", "containerPort": KUBE_STATE_METRICS_PORT}],
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": KUBE_STATE_METRICS_PORT}, "periodSeconds": 5},
        "resources": KUBE_STATE_METRICS_RESOURCES,
        "securityContext": _RESTRICTED_CONTAINER,
    }
    pod = {
        "serviceAccountName": config.KUBE_STATE_METRICS,
        "securityContext": _pod_security(fs_group=False),
        "containers": [container],
    }
    return [
        *_cluster_role(KUBE_STATE_METRICS_ROLE, rules, config.KUBE_STATE_METRICS),
        _deployment(config.KUBE_STATE_METRICS, pod),
        _service(config.KUBE_STATE_METRICS, KUBE_STATE_METRICS_PORT, "http-metrics"),
    ]


def prometheus_objects(settings: ClusterMonitoring) -> list[dict[str, Any]]:
    rules = [{"nonResourceURLs": ["/metrics", "/metrics/resources"], "verbs": ["get"]}]
    container = {
        "name": config.PROMETHEUS,
        "image": settings.prometheus_image,
        "args": [
            "--config.file=%s/prometheus.yml" % CONFIG_DIR,
            "--storage.tsdb.path=%s" % DATA_DIR,
            "--storage.tsdb.retention.time=%s" % settings.retention,
            "--query.lookback-delta=%ds" % config.LOOKBACK_DELTA_SECONDS,
            "--web.listen-address=:%d" % PROMETHEUS_PORT,
        ],
        "ports": [{"name": "web", "containerPort": PROMETHEUS_PORT}],
        "readinessProbe": {"httpGet": {"path": "/-/ready", "port": PROMETHEUS_PORT}, "periodSeconds": 5},
        "resources": PROMETHEUS_RESOURCES,
        "securityContext": _RESTRICTED_CONTAINER,
        "volumeMounts": [
            {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
            {"name": "rules", "mountPath": RULES_DIR, "readOnly": True},
            {"name": "data", "mountPath": DATA_DIR},
        ],
    }
    pod = {
        "serviceAccountName": config.SERVICE_ACCOUNT,
        "securityContext": _pod_security(fs_group=True),
        "containers": [container],
        "volumes": [
            {"name": "config", "configMap": {"name": CONFIG_MAP}},
            {"name": "rules", "configMap": {"name": RULES_CONFIG_MAP}},
            {"name": "data", "persistentVolumeClaim": {"claimName": DATA_CLAIM}},
        ],
    }
    return [
        *_cluster_role(PROMETHEUS_ROLE, rules, config.SERVICE_ACCOUNT),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _metadata(CONFIG_MAP),
            "data": {"prometheus.yml": prometheus_yaml(settings)},
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _metadata(RULES_CONFIG_MAP),
            "data": rule_data(settings),
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": _metadata(DATA_CLAIM),
            # No class named: the site's default.
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": settings.storage_size}}},
        },
        _deployment(config.PROMETHEUS, pod, {CHECKSUM_ANNOTATION: checksum(settings)}),
        _service(config.PROMETHEUS, PROMETHEUS_PORT, "web"),
    ]


def namespace_object() -> dict[str, Any]:
    metadata = _metadata(config.NAMESPACE, namespaced=False)
    metadata["labels"].update({"pod-security.kubernetes.io/enforce": "restricted"})
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}


def headless_service(
    name: str, namespace: str, selector: Mapping[str, str], port: int, port_name: str
) -> dict[str, Any]:
    """A Service without a cluster address, for DNS alone: an SRV record per ready pod it selects."""
    metadata = _metadata(name)
    metadata["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": {
            "clusterIP": "None",
            "selector": dict(selector),
            "ports": [{"name": port_name, "port": port, "targetPort": port, "protocol": "TCP"}],
        },
    }


def scheduler_service() -> dict[str, Any]:
    """Each control plane's kube-scheduler (kubeadm's static pods, on the host's network)."""
    selector = {"component": "kube-scheduler", "tier": "control-plane"}
    return headless_service(
        KUBE_SCHEDULER_SERVICE, "kube-system", selector, KUBE_SCHEDULER_PORT, KUBE_SCHEDULER_PORT_NAME
    )


def gpu_operator_namespace(settings: ClusterMonitoring) -> dict[str, Any]:
    """The GPU operator's namespace, to ask whether it exists (DCGM's Service goes into it only then)."""
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": settings.gpu_operator_namespace}}


def dcgm_service(settings: ClusterMonitoring) -> dict[str, Any]:
    """Each DCGM exporter of the GPU operator (made only where its namespace is)."""
    return headless_service(DCGM_SERVICE, settings.gpu_operator_namespace, DCGM_SELECTOR, DCGM_PORT, DCGM_PORT_NAME)


def objects(settings: ClusterMonitoring, gpu_operator: bool = False) -> list[dict[str, Any]]:
    """Everything the stage makes on a kubeadm site, in the order to make it; ``gpu_operator``:
    whether the GPU operator's namespace is there (DCGM's Service goes into it). Pure."""
    return [
        namespace_object(),
        scheduler_service(),
        *([dcgm_service(settings)] if gpu_operator else []),
        *kube_state_metrics_objects(settings),
        *prometheus_objects(settings),
    ]


def deployments() -> list[str]:
    """The Deployments whose rollout the stage waits for."""
    return [config.KUBE_STATE_METRICS, config.PROMETHEUS]


def rollout_problem(
    deployment: Mapping[str, Any] | None, pods: list[Mapping[str, Any]], claim: Mapping[str, Any] | None = None
) -> str | None:
    """None when ``deployment`` runs its current pod template, ready; else why not, from its pods
    (``pods``: those its selector selects) and, for Prometheus, its claim: the claim unbound, the pod
    not scheduled (the scheduler's words), a container waiting (ImagePullBackOff: the image is not in
    the site's registry mirror) or not ready. Pure."""
    if deployment is None:
        return "the Deployment is missing"
    name = deployment["metadata"]["name"]
    spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
    wanted = spec.get("replicas", 1)
    if (
        status.get("observedGeneration", 0) >= deployment["metadata"].get("generation", 0)
        and status.get("updatedReplicas", 0) >= wanted
        and status.get("availableReplicas", 0) >= wanted
        and status.get("replicas", 0) == wanted
    ):
        return None
    reasons = []
    claim_phase = ((claim or {}).get("status") or {}).get("phase")
    if claim is not None and claim_phase != "Bound":
        reasons.append(
            "its claim %s is %s (is there a default storage class?)" % (claim["metadata"]["name"], claim_phase or "new")
        )
    for pod in pods:
        pod_status = pod.get("status") or {}
        pod_name = pod["metadata"]["name"]
        unscheduled = [
            c.get("message") or c.get("reason") or "not scheduled"
            for c in pod_status.get("conditions") or ()
            if c.get("type") == "PodScheduled" and c.get("status") == "False"
        ]
        if unscheduled:
            reasons.append("pod %s is not scheduled: %s" % (pod_name, unscheduled[0]))
            continue
        for container in pod_status.get("containerStatuses") or ():
            waiting = (container.get("state") or {}).get("waiting")
            if waiting:
                reasons.append(
                    "pod %s: container %s is waiting, %s%s"
                    % (
                        pod_name,
                        container.get("name"),
                        waiting.get("reason", "?"),
                        ": %s" % waiting["message"] if waiting.get("message") else "",
                    )
                )
            elif not container.get("ready"):
                reasons.append("pod %s: container %s is not ready" % (pod_name, container.get("name")))
    detail = "; ".join(reasons) or "%s of %d pod(s) available" % (status.get("availableReplicas", 0), wanted)
    return "%s/%s is not rolled out: %s" % (config.NAMESPACE, name, detail)
