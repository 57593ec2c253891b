"""Kueue as clusterproof's second scheduler backend: what a project and a workload become. Pure.

The same inventory serves KAI scheduler and Kueue; this is Kueue's adapter (kai.py is KAI's):

- the site: one Cohort (``clusterproof``) that every project's ClusterQueue joins, one
  ResourceFlavor for the site's nodes, and two WorkloadPriorityClasses, training (low, so it is
  what reclaim and preemption take back) and interactive (high, so training never preempts it
  inside its project);
- a project: a ClusterQueue in the cohort (nominal GPU quota = ``gpu_quota``, borrowing limit =
  ``gpu_limit - gpu_quota``, lending limit = ``gpu_lending_limit`` when declared, fair-sharing
  weight = the over-quota weight, which defaults to the quota: the Run:AI split of spare GPUs) that
  admits workloads of the project's namespace only, and a LocalQueue of the same name in that
  namespace;
- a workload: a Job labelled with the project's LocalQueue, its priority class and, for
  interactive work under a time limit, Kueue's maximum execution time; created suspended, Kueue
  unsuspends it when it admits it, and the default kube-scheduler places its pods.

On the sandbox Kueue runs as a local process (``components``) with a Configuration of ours
(``configuration``): webhooks on 127.0.0.1 with a certificate of the sandbox CA, the API server
calling them by URL (``webhook_configurations``, ``with_conversion_webhook``), as Kueue's own
integration tests point webhooks at a local server. On a real cluster Kueue's Helm chart installs
the same thing.

What Kueue lacks next to KAI: fractional GPUs (a workload asks for whole ``nvidia.com/gpu``), and
workloads that may not be preempted at all: reclaim takes back any workload that runs on borrowed
GPUs, interactive ones included (``job_manifest`` and docs/scheduler.md say more).
"""

from __future__ import annotations

import base64
import copy
import dataclasses
from collections.abc import Iterable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox.control_plane import LOOPBACK, Component, Layout
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import kai
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import workloads
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy.projects import MANAGED_BY, Project

API_VERSION = "kueue.x-k8s.io/v1beta2"
SYSTEM_NAMESPACE = "kueue-system"
COHORT = "clusterproof"
FLAVOR = "clusterproof-nodes"
GPU = "nvidia.com/gpu"
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
TRAINING_PRIORITY = "clusterproof-training"
INTERACTIVE_PRIORITY = "clusterproof-interactive"
PRIORITY_VALUES = {TRAINING_PRIORITY: 100, INTERACTIVE_PRIORITY: 1000}
# The job integrations clusterproof's workloads use; on the sandbox only their webhooks (and those
# of Kueue's own objects) are registered.
INTEGRATIONS = ("batch/job",)
_WEBHOOK_API_GROUPS = {"kueue.x-k8s.io", "batch"}
# Kueue cannot leave a resource unlimited and refuses a workload that asks for a resource its
# ClusterQueue does not cover; CPU and memory are covered with quotas far above any site's, so
# that, as with KAI, only GPUs are limited.
UNLIMITED = {"cpu": "1M", "memory": "1Ei"}
# Kueue's binary reads its metrics-serving certificate from this fixed path when its internal
# certificate management is off (cmd/kueue/main.go); the sandbox lays a directory of its own over
# /etc for the Kueue process only (see ``components``).
METRICS_CERT_SUBDIR = "kueue/metrics/certs"


class KueueError(ValueError):
    """A project or workload Kueue cannot express; the message names it and the field."""


def quantity(value: float | Decimal) -> str:
    """A Kubernetes quantity in the form the API server returns it: whole numbers plain,
    fractions in thousandths ("500m"), so that a re-applied object compares equal."""
    amount = Decimal(str(value))
    if amount == amount.to_integral_value():
        return str(int(amount))
    return "%dm" % int((amount * 1000).to_integral_value())


# ---------------------------------------------------------------------------------------------
# The site's and the projects' objects


def cohort_manifest() -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "Cohort",
        "metadata": {"name": COHORT, "labels": dict(MANAGED_BY)},
        "spec": {},
    }


def resource_flavor_manifest() -> dict[str, Any]:
    """One flavor for every node: the quota is the site's, not a node model's."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": FLAVOR, "labels": dict(MANAGED_BY)},
        "spec": {},
    }


def priority_class_manifests() -> list[dict[str, Any]]:
    descriptions = {
        TRAINING_PRIORITY: "clusterproof training work: preemptible, reclaimed first",
        INTERACTIVE_PRIORITY: "clusterproof interactive work: not preempted by training in its project",
    }
    return [
        {
            "apiVersion": API_VERSION,
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": name, "labels": dict(MANAGED_BY)},
            "value": value,
            "description": descriptions[name],
        }
        for name, value in PRIORITY_VALUES.items()
    ]


def site_manifests() -> list[dict[str, Any]]:
    """What every project's objects refer to, in the order to create it."""
    return [resource_flavor_manifest(), cohort_manifest(), *priority_class_manifests()]


def check_project(project: Project) -> list[str]:
    """Errors that name the project and the field, for what Kueue cannot express."""
    where = "project %s" % project.name
    errors = []
    lending = project.gpu_lending_limit
    if lending is not None and not 0 <= lending <= project.gpu_quota:
        errors.append(
            "%s: gpu_lending_limit: expected a number of GPUs from 0 to gpu_quota (%g), found %g"
            % (where, project.gpu_quota, lending)
        )
    if project.gpu_limit is not None and project.gpu_limit < project.gpu_quota:
        errors.append(
            "%s: gpu_limit: expected a number not below gpu_quota (%g), found %g"
            % (where, project.gpu_quota, project.gpu_limit)
        )
    return errors


def cluster_queue_manifest(project: Project) -> dict[str, Any]:
    """The project's ClusterQueue. Raises KueueError for what Kueue cannot express."""
    errors = check_project(project)
    if errors:
        raise KueueError("; ".join(errors))
    gpu: dict[str, Any] = {"name": GPU, "nominalQuota": quantity(project.gpu_quota)}
    if project.gpu_limit is not None:
        gpu["borrowingLimit"] = quantity(project.gpu_limit - project.gpu_quota)
    if project.gpu_lending_limit is not None:
        gpu["lendingLimit"] = quantity(project.gpu_lending_limit)
    resources = [{"name": name, "nominalQuota": amount} for name, amount in UNLIMITED.items()] + [gpu]
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": project.name, "labels": dict(MANAGED_BY)},
        "spec": {
            "cohortName": COHORT,
            # Only the project's own namespace submits to its quota.
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": project.name}},
            "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": [
                {
                    "coveredResources": [*UNLIMITED, GPU],
                    "flavors": [{"name": FLAVOR, "resources": resources}],
                }
            ],
            # Quota lent to the cohort comes back (any workload running on it may be reclaimed);
            # inside the project, interactive work may preempt training, not the other way.
            "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
            "fairSharing": {"weight": quantity(project.over_quota_weight)},
        },
    }


def local_queue_manifest(project: Project) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "LocalQueue",
        "metadata": {"name": project.name, "namespace": project.name, "labels": dict(MANAGED_BY)},
        "spec": {"clusterQueue": project.name},
    }


def project_manifests(project: Project) -> list[dict[str, Any]]:
    """The project's scheduler objects (its namespace must exist before the LocalQueue)."""
    return [cluster_queue_manifest(project), local_queue_manifest(project)]


def gpu_amount(text: Any) -> Decimal | None:
    """A GPU quantity as Kueue returns it ("4", "500m", 4) as a number; None when absent."""
    if text is None:
        return None
    text = str(text)
    if text.endswith("m"):
        return Decimal(text[:-1]) / 1000
    return Decimal(text)


def queue_differences(project: Project, cluster_queue: Mapping[str, Any] | None) -> list[tuple[str, str, str]]:
    """Where the cluster's ClusterQueue differs from the declared project, as (field, declared,
    found); for the validator's configuration checks on a Kueue site. Pure."""
    if cluster_queue is None:
        return [("ClusterQueue", project.name, "nothing")]
    wanted = cluster_queue_manifest(project)
    spec = cluster_queue.get("spec") or {}
    found_gpu: Mapping[str, Any] = {}
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for resource in flavor.get("resources") or []:
                if resource.get("name") == GPU:
                    found_gpu = resource
    declared_gpu = wanted["spec"]["resourceGroups"][0]["flavors"][0]["resources"][-1]
    differences = []
    for field in ("nominalQuota", "borrowingLimit", "lendingLimit"):
        declared, found = gpu_amount(declared_gpu.get(field)), gpu_amount(found_gpu.get(field))
        if declared != found:
            differences.append((field, _shown(declared), _shown(found)))
    weight = gpu_amount((spec.get("fairSharing") or {}).get("weight"))
    if weight != gpu_amount(wanted["spec"]["fairSharing"]["weight"]):
        differences.append(("fairSharing.weight", wanted["spec"]["fairSharing"]["weight"], _shown(weight)))
    if spec.get("cohortName") != COHORT:
        differences.append(("cohortName", COHORT, str(spec.get("cohortName") or "none")))
    return differences


def _shown(amount: Decimal | None) -> str:
    return "none" if amount is None else quantity(amount)


# What a member may see of Kueue in the project's namespace, next to projects.MEMBER_RULES.
MEMBER_RULES = [
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads", "localqueues"], "verbs": ["get", "list", "watch"]}
]


# ---------------------------------------------------------------------------------------------
# Workloads


def job_labels(project: str, kind: str, time_limit_seconds: int | None) -> dict[str, str]:
    """The labels that put a Job in its project's LocalQueue with its kind's priority and, for
    interactive work of a project with a time limit, Kueue's maximum execution time."""
    labels = {
        QUEUE_NAME_LABEL: project,
        PRIORITY_CLASS_LABEL: TRAINING_PRIORITY if kind == workloads.TRAINING else INTERACTIVE_PRIORITY,
    }
    if kind == workloads.INTERACTIVE and time_limit_seconds:
        labels[MAX_EXEC_TIME_LABEL] = str(time_limit_seconds)
    return labels


def job_manifest(workload: workloads.Workload, settings: workloads.ProjectSettings) -> dict[str, Any]:
    """The Job that runs ``workload`` in its project under Kueue. Pure.

    The Job is the one workloads.job_manifest writes for KAI (kind, node affinity, GPUs, the
    sandbox's completion annotation), with KAI's scheduler name, queue label, priority classes and
    fraction annotations replaced by Kueue's labels; the default scheduler places the pods once
    Kueue admits the Job. The time limit is Kueue's maximum execution time (counted while
    admitted) instead of activeDeadlineSeconds.
    """
    gpus = workloads.check_gpus(workload.name, workload.gpus)
    if gpus < 1:
        raise KueueError(
            "workload %s: gpus: expected whole GPUs (Kueue has no GPU fractions), found %s" % (workload.name, gpus)
        )
    job = copy.deepcopy(workloads.job_manifest(workload, settings))
    labels = job_labels(workload.project, workload.kind, settings.interactive_time_limit_seconds)
    job["metadata"]["labels"].pop(kai.QUEUE_LABEL, None)
    job["metadata"]["labels"].update(labels)
    template = job["spec"]["template"]
    template["metadata"]["labels"].pop(kai.QUEUE_LABEL, None)
    template["spec"].pop("schedulerName", None)
    template["spec"].pop("priorityClassName", None)
    job["spec"].pop("activeDeadlineSeconds", None)
    # Created suspended, as Kueue's webhook would make it: Kueue unsuspends it on admission.
    job["spec"]["suspend"] = True
    return job


def pod_gpus(pod: Any) -> float:
    """GPUs a pod (a kubernetes client V1Pod) holds: whole nvidia.com/gpu only under Kueue."""
    return kai.pod_gpus(pod)


# ---------------------------------------------------------------------------------------------
# The sandbox: Kueue as a local process


@dataclasses.dataclass(frozen=True)
class KueuePorts:
    """Loopback ports of Kueue on the sandbox, after KAI's (base+10..18)."""

    base: int

    @property
    def webhook(self) -> int:
        return self.base + 19

    @property
    def health(self) -> int:
        return self.base + 20

    @property
    def metrics(self) -> int:
        return self.base + 21


@dataclasses.dataclass(frozen=True)
class SandboxPaths:
    """Kueue's files in the sandbox's state directory."""

    root: Path

    @classmethod
    def of(cls, layout: Layout) -> SandboxPaths:
        return cls(layout.root / "kueue")

    @property
    def config(self) -> Path:
        return self.root / "config.yaml"

    @property
    def cert_dir(self) -> Path:
        return self.root / "webhook-certs"

    @property
    def etc_overlay(self) -> Path:
        """Laid over /etc for the Kueue process: holds ``METRICS_CERT_SUBDIR``."""
        return self.root / "etc"

    @property
    def metrics_cert_dir(self) -> Path:
        return self.etc_overlay / METRICS_CERT_SUBDIR


def configuration(ports: KueuePorts, cert_dir: Path) -> dict[str, Any]:
    """Kueue's Configuration on the sandbox: loopback only, certificates of ours, fair sharing."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": SYSTEM_NAMESPACE,
        "health": {"healthProbeBindAddress": "%s:%d" % (LOOPBACK, ports.health)},
        "metrics": {"bindAddress": "%s:%d" % (LOOPBACK, ports.metrics)},
        "webhook": {"host": LOOPBACK, "port": ports.webhook, "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        # Only Jobs labelled with a LocalQueue are Kueue's: KAI's and anyone else's are left alone.
        "manageJobsWithoutQueueName": False,
        "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]},
        "integrations": {"frameworks": list(INTEGRATIONS)},
        # The on-demand visibility API server listens on every interface (port 8082): not on the sandbox.
        "featureGates": {"VisibilityOnDemand": False},
    }


def helm_manager_config(integrations: Iterable[str] = INTEGRATIONS) -> dict[str, Any]:
    """The part of Kueue's Configuration clusterproof sets on a real cluster (Helm chart values)."""
    return {
        "manageJobsWithoutQueueName": False,
        "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]},
        "integrations": {"frameworks": list(integrations)},
    }


def webhook_url(ports: KueuePorts, path: str) -> str:
    return "https://%s:%d%s" % (LOOPBACK, ports.webhook, path)


def _wanted_webhook(webhook: Mapping[str, Any]) -> bool:
    """A webhook for Kueue's own objects or an enabled integration. Kueue answers the others with
    a no-op, but each registered webhook is a call on its kind's path (the pod one on every pod of
    the sandbox) and a failure point while Kueue is down: only what clusterproof uses is registered."""
    groups = {group for rule in webhook.get("rules") or [] for group in rule.get("apiGroups") or []}
    return bool(groups) and groups <= _WEBHOOK_API_GROUPS


def webhook_configurations(
    upstream: Iterable[Mapping[str, Any]], ports: KueuePorts, ca_pem: bytes
) -> list[dict[str, Any]]:
    """Kueue's Mutating/ValidatingWebhookConfigurations (from its config/components/webhook),
    named as its chart names them, calling Kueue on 127.0.0.1 by URL with the sandbox CA."""
    ca_bundle = base64.b64encode(ca_pem).decode()
    configurations = []
    for document in upstream:
        if document.get("kind") not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            continue
        hooks = []
        for webhook in document.get("webhooks") or []:
            if not _wanted_webhook(webhook):
                continue
            hook = copy.deepcopy(dict(webhook))
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": webhook_url(ports, path), "caBundle": ca_bundle}
            hooks.append(hook)
        configurations.append(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": document["kind"],
                "metadata": {"name": "kueue-" + document["metadata"]["name"], "labels": dict(MANAGED_BY)},
                "webhooks": hooks,
            }
        )
    return configurations


def with_conversion_webhook(crd: Mapping[str, Any], ports: KueuePorts, ca_pem: bytes) -> dict[str, Any]:
    """A Kueue CRD whose versions (v1beta1, v1beta2) Kueue converts on 127.0.0.1, as its chart
    has the API server call Kueue's service for that."""
    out = copy.deepcopy(dict(crd))
    if len(out["spec"].get("versions") or []) > 1:
        out["spec"]["conversion"] = {
            "strategy": "Webhook",
            "webhook": {
                "clientConfig": {"url": webhook_url(ports, "/convert"), "caBundle": base64.b64encode(ca_pem).decode()},
                "conversionReviewVersions": ["v1"],
            },
        }
    return out


def system_objects() -> list[dict[str, Any]]:
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NAMESPACE}}]


def components(layout: Layout, kueue_binary: Path, unshare: str, ports: KueuePorts) -> list[Component]:
    """Kueue on the sandbox, as one local process. Pure.

    The process runs in a user and mount namespace of its own, where a read-only overlay puts the
    sandbox's ``etc`` folder over /etc: Kueue then finds its metrics certificate at the path it
    insists on, and nothing outside the sandbox's state is written.
    """
    paths = SandboxPaths.of(layout)
    script = 'mount -t overlay overlay -o "lowerdir=$1:/etc" /etc && exec "$2" --config="$3" --zap-log-level=info'
    return [
        Component(
            "kueue",
            (
                unshare,
                "--user",
                "--map-root-user",
                "--mount",
                "sh",
                "-c",
                script,
                "kueue",
                str(paths.etc_overlay),
                str(kueue_binary),
                str(paths.config),
            ),
            "http://%s:%d/readyz" % (LOOPBACK, ports.health),
            env=(("KUBECONFIG", str(layout.kubeconfig)),),
        )
    ]


# The sandbox processes of the other backend; they must not run while Kueue schedules.
KAI_PROCESSES = ("kai-scheduler", "kai-binder", "kai-podgrouper", "kai-queuecontroller", "sandbox-gpu-agent")


# ---------------------------------------------------------------------------------------------
# Fairness scenarios (modules/validate_scenario.py): a scenario's projects and workloads on Kueue


def _resource_quota(resource: str, nominal: float, borrowing: float | None) -> dict[str, Any]:
    quota: dict[str, Any] = {"name": resource, "nominalQuota": quantity(nominal)}
    if borrowing is not None:
        quota["borrowingLimit"] = quantity(borrowing)
    return quota


def _resource_groups(resource: str, nominal: float, borrowing: float | None) -> list[dict[str, Any]]:
    """One flavor covering the scenario's resource: ``GPU`` with CPU and memory unlimited (pods of
    GPU scenarios ask for GPUs only, as with KAI), or ``cpu`` alone."""
    if resource == GPU:
        resources = [{"name": name, "nominalQuota": amount} for name, amount in UNLIMITED.items()]
        resources.append(_resource_quota(GPU, nominal, borrowing))
        covered = [*UNLIMITED, GPU]
    else:
        resources, covered = [_resource_quota(resource, nominal, borrowing)], [resource]
    return [{"coveredResources": covered, "flavors": [{"name": FLAVOR, "resources": resources}]}]


def scenario_manifests(
    scenario_projects: Iterable[Any], prefix: str, resource: str, cohort: str
) -> list[dict[str, Any]]:
    """A scenario's projects on Kueue, in creation order. ``scenario_projects`` are the fair-share
    model's projects (name, quota, limit, weight, parent); ``resource`` is ``GPU`` or ``cpu``.

    Flat (no parents): a cohort ``cohort`` of the scenario's own, a ClusterQueue per project in it
    (nominal quota = quota, borrowing limit = limit − quota, fair-sharing weight = the over-quota
    weight), a namespace and LocalQueue per project. A quota tree: an inner node is a Cohort under
    its parent (its own nominal quota = its min less its children's, borrowing limit = max − min),
    a leaf a ClusterQueue in its parent cohort, with a namespace and LocalQueue."""
    items = list(scenario_projects)
    parents = {item.parent for item in items if item.parent}
    manifests: list[dict[str, Any]] = []
    if not parents:
        manifests.append(
            {
                "apiVersion": API_VERSION,
                "kind": "Cohort",
                "metadata": {"name": cohort, "labels": dict(MANAGED_BY)},
                "spec": {},
            }
        )
    for item in items:
        name = prefix + item.name
        borrowing = None if item.limit is None else item.limit - item.quota
        weight = item.quota if item.weight is None else item.weight
        if item.name in parents:
            children = sum(child.quota for child in items if child.parent == item.name)
            # A top cohort has nothing to borrow from: Kueue refuses a borrowing limit there.
            spec: dict[str, Any] = {
                "resourceGroups": _resource_groups(
                    resource, max(item.quota - children, 0.0), borrowing if item.parent else None
                ),
                "fairSharing": {"weight": quantity(weight)},
            }
            if item.parent:
                spec["parentName"] = prefix + item.parent
            manifests.append(
                {
                    "apiVersion": API_VERSION,
                    "kind": "Cohort",
                    "metadata": {"name": name, "labels": dict(MANAGED_BY)},
                    "spec": spec,
                }
            )
            continue
        manifests.append(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(MANAGED_BY)}}
        )
        manifests.append(
            {
                "apiVersion": API_VERSION,
                "kind": "ClusterQueue",
                "metadata": {"name": name, "labels": dict(MANAGED_BY)},
                "spec": {
                    "cohortName": prefix + item.parent if item.parent else cohort,
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": name}},
                    "queueingStrategy": "BestEffortFIFO",
                    "resourceGroups": _resource_groups(resource, item.quota, borrowing),
                    "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
                    "fairSharing": {"weight": quantity(weight)},
                },
            }
        )
        manifests.append(
            {
                "apiVersion": API_VERSION,
                "kind": "LocalQueue",
                "metadata": {"name": name, "namespace": name, "labels": dict(MANAGED_BY)},
                "spec": {"clusterQueue": name},
            }
        )
    return manifests


def replica_jobs(
    workload: workloads.Workload, settings: workloads.ProjectSettings, replicas: int, resource: str
) -> list[dict[str, Any]]:
    """A Deployment's replicas on Kueue: one single-pod Job each (``name-0`` ...), so that each
    replica is admitted and preempted on its own, as Deployment pods are. Each carries the
    Deployment's name as its workload label; ``resource`` cpu sizes the pods in cores."""
    jobs = []
    for index in range(replicas):
        job = job_manifest(dataclasses.replace(workload, name="%s-%d" % (workload.name, index), gpus=1), settings)
        template = job["spec"]["template"]
        for labels in (job["metadata"]["labels"], template["metadata"]["labels"]):
            labels[workloads.WORKLOAD_NAME_LABEL] = workload.name
        container = template["spec"]["containers"][0]
        if resource == "cpu":
            amount = quantity(workload.gpus)
            container["resources"] = {"requests": {"cpu": amount}, "limits": {"cpu": amount}}
        else:
            container["resources"] = {"limits": {GPU: quantity(workloads.check_gpus(workload.name, workload.gpus))}}
        jobs.append(job)
    return jobs
