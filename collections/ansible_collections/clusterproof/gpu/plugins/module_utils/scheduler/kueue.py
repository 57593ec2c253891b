"""Kueue as clusterproof's second scheduler backend: what a project, a tree and a workload become. Pure.

The same inventory serves KAI scheduler and Kueue; this is Kueue's adapter (``BACKEND``, see
``scheduler/base.py``; kai.py is KAI's), following Kueue's fair sharing (policy ``kueue``):

- the site: one Cohort (``clusterproof``) that every project's ClusterQueue joins, one
  ResourceFlavor for the site's nodes, and two WorkloadPriorityClasses, training (low, so it is
  what reclaim and preemption take back) and interactive (high, so training never preempts it
  inside its project);
- a project: a ClusterQueue in the cohort (nominal GPU quota = ``gpu_quota``, borrowing limit =
  ``gpu_limit - gpu_quota``, lending limit = ``gpu_lending_limit`` when declared, fair-sharing
  weight = the over-quota weight, which defaults to the quota: the Run:AI split of spare GPUs) that
  admits workloads of the project's namespace only, and a LocalQueue of the same name in that
  namespace;
- a quota tree: an inner node is a Cohort under its parent, a leaf a ClusterQueue in its parent
  cohort admitting the leaf's namespaces, each with a LocalQueue named after the leaf;
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
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.common.fields import Below, PortAt
from ansible_collections.clusterproof.gpu.plugins.module_utils.common.objects import is_subset
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox.control_plane import (
    LOOPBACK,
    Component,
    Layout,
    port_block,
)
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import base
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import (
    admission,
    isolation,
    quota_tree,
    workloads,
)
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy.projects import MANAGED_BY, Project

API_VERSION = "kueue.x-k8s.io/v1beta2"
_GROUP, _VERSION = API_VERSION.split("/")
SYSTEM_NAMESPACE = "kueue-system"
# The chart's metrics Service, as the kueue_scheduler role installs it (release kueue).
CLUSTER_METRICS_SERVICE = "kueue-controller-manager-metrics-service"
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


def _manifest(kind: str, name: str, spec: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
    """A Kueue object of clusterproof's: labelled as managed by it, in ``namespace`` if namespaced."""
    metadata = {"name": name, "namespace": namespace} if namespace else {"name": name}
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": {**metadata, "labels": dict(MANAGED_BY)}, "spec": spec}


def cohort_manifest() -> dict[str, Any]:
    return _manifest("Cohort", COHORT, {})


def resource_flavor_manifest() -> dict[str, Any]:
    """One flavor for every node: the quota is the site's, not a node model's."""
    return _manifest("ResourceFlavor", FLAVOR, {})


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
    """Errors that name the project and the field, for what Kueue cannot express (the project
    rules of tenancy/projects.py)."""
    return BACKEND.check_project(project)


def cluster_queue_manifest(project: Project, cohort: str = COHORT) -> dict[str, Any]:
    """The project's ClusterQueue in ``cohort``. Raises KueueError for what Kueue cannot express."""
    errors = check_project(project)
    if errors:
        raise KueueError("; ".join(errors))
    gpu: dict[str, Any] = {"name": GPU, "nominalQuota": quantity(project.gpu_quota)}
    if project.gpu_limit is not None:
        gpu["borrowingLimit"] = quantity(project.gpu_limit - project.gpu_quota)
    if project.gpu_lending_limit is not None:
        gpu["lendingLimit"] = quantity(project.gpu_lending_limit)
    resources = [{"name": name, "nominalQuota": amount} for name, amount in UNLIMITED.items()] + [gpu]
    return _manifest(
        "ClusterQueue",
        project.name,
        {
            "cohortName": cohort,
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
    )


def local_queue_manifest(project: Project) -> dict[str, Any]:
    return _manifest("LocalQueue", project.name, {"clusterQueue": project.name}, namespace=project.name)


def project_manifests(project: Project, cohort: str = COHORT) -> list[dict[str, Any]]:
    """The project's scheduler objects (its namespace must exist before the LocalQueue)."""
    return [cluster_queue_manifest(project, cohort), local_queue_manifest(project)]


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


def project_readback(wanted: Project, queue: Mapping[str, Any] | None) -> base.ProjectReadback:
    """The declared project against its ClusterQueue: one check naming every field that differs."""
    name = wanted.name
    differences = queue_differences(wanted, queue)
    check = base.ConfigCheck(
        "cluster-queue",
        "%s: ClusterQueue as declared (quota, limits, weight, cohort)" % name,
        "ClusterQueue %s as declared" % name,
        "; ".join("%s %s, not %s" % (field, found, want) for field, want, found in differences) or "as declared",
        not differences,
        "re-run playbooks/scheduler.yml" if differences else "",
    )
    spec = (queue or {}).get("spec") or {}
    nominal = next(
        (
            resource.get("nominalQuota")
            for group in spec.get("resourceGroups") or []
            for flavor in group.get("flavors") or []
            for resource in flavor.get("resources") or []
            if resource.get("name") == GPU
        ),
        None,
    )
    if queue is None:
        return base.ProjectReadback((check,), "missing", "missing")
    return base.ProjectReadback(
        (check,), base.shown(nominal), base.shown((spec.get("fairSharing") or {}).get("weight"))
    )


# What a member may see of Kueue in the project's namespace, next to projects.MEMBER_RULES.
MEMBER_RULES = (
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads", "localqueues"], "verbs": ["get", "list", "watch"]},
)


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

    The Job is the neutral one of workloads.base_job (kind, node affinity, GPUs, the sandbox's
    completion annotation) with Kueue's labels; the default scheduler places the pods once Kueue
    admits the Job. The time limit is Kueue's maximum execution time (counted while
    admitted) instead of activeDeadlineSeconds.
    """
    gpus = workloads.check_gpus(workload.name, workload.gpus)
    if gpus < 1:
        raise KueueError(
            "workload %s: gpus: expected whole GPUs (Kueue has no GPU fractions), found %s" % (workload.name, gpus)
        )
    job = workloads.base_job(workload, settings)
    job["metadata"]["labels"].update(
        job_labels(workload.project, workload.kind, settings.interactive_time_limit_seconds)
    )
    job["spec"].pop("activeDeadlineSeconds", None)
    # Created suspended, as Kueue's webhook would make it: Kueue unsuspends it on admission.
    job["spec"]["suspend"] = True
    return job


def pod_gpus(pod: Any) -> float:
    """GPUs a pod (a kubernetes client V1Pod) holds: whole nvidia.com/gpu only under Kueue."""
    return workloads.pod_whole_gpus(pod)


# ---------------------------------------------------------------------------------------------
# The sandbox: Kueue as a local process


@dataclasses.dataclass(frozen=True)
class KueuePorts:
    """Loopback ports of Kueue on the sandbox (its block of ``control_plane.PORT_TABLE``)."""

    base: int

    webhook = PortAt(port_block("kueue"), 0)
    health = PortAt(port_block("kueue"), 1)
    metrics = PortAt(port_block("kueue"), 2)


@dataclasses.dataclass(frozen=True)
class SandboxPaths:
    """Kueue's files in the sandbox's state directory."""

    root: Path

    @classmethod
    def of(cls, layout: Layout) -> SandboxPaths:
        return cls(layout.root / "kueue")

    config = Below("root", "config.yaml")
    cert_dir = Below("root", "webhook-certs")
    # Laid over /etc for the Kueue process: holds ``METRICS_CERT_SUBDIR``.
    etc_overlay = Below("root", "etc")
    metrics_cert_dir = Below("etc_overlay", METRICS_CERT_SUBDIR)


# A Job without a LocalQueue in a project namespace (one labelled with its queue) is still Kueue's:
# it waits, suspended, instead of running outside every quota. Elsewhere Kueue leaves Jobs alone
# (a site's own system Jobs, the validator's storage probe).
MANAGED_JOBS = {
    "manageJobsWithoutQueueName": True,
    "managedJobsNamespaceSelector": {
        "matchExpressions": [{"key": isolation.QUEUE_NAMESPACE_LABEL, "operator": "Exists"}]
    },
}


def configuration(ports: KueuePorts, cert_dir: Path) -> dict[str, Any]:
    """Kueue's Configuration on the sandbox: loopback only, certificates of ours, fair sharing."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": SYSTEM_NAMESPACE,
        "health": {"healthProbeBindAddress": "%s:%d" % (LOOPBACK, ports.health)},
        # The ClusterQueues' quota, usage and borrowing limits as metrics, which the monitoring
        # stage's rules read (kueue_cluster_queue_nominal_quota, ..._resource_usage).
        "metrics": {"bindAddress": "%s:%d" % (LOOPBACK, ports.metrics), "enableClusterQueueResources": True},
        "webhook": {"host": LOOPBACK, "port": ports.webhook, "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        **MANAGED_JOBS,
        "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]},
        "integrations": {"frameworks": list(INTEGRATIONS)},
        # The on-demand visibility API server listens on every interface (port 8082): not on the sandbox.
        "featureGates": {"VisibilityOnDemand": False},
    }


def helm_manager_config(integrations: Iterable[str] = INTEGRATIONS) -> dict[str, Any]:
    """The part of Kueue's Configuration clusterproof sets on a real cluster (Helm chart values)."""
    return {
        **MANAGED_JOBS,
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


# A CRD template of Kueue's chart whose versions Kueue converts: the chart's templates/crd carry the
# conversion stanza for exactly those (its kustomization patches them in: ClusterQueue, Cohort,
# LocalQueue, Workload, MultiKueueCluster); the others' versions are converted by the API server.
_CHART_CRD_NAME = re.compile(r"^  name: (\S+)$", re.MULTILINE)
_CHART_WEBHOOK_CONVERSION = re.compile(r"^  conversion:\n    strategy: Webhook$", re.MULTILINE)


def webhook_converted_crds(chart_crd_templates: Iterable[str]) -> frozenset[str]:
    """The names of the CRDs whose versions Kueue itself converts, read from the texts of its chart's
    CRD templates (templates/crd/*.yaml). Pure."""
    names = set()
    for text in chart_crd_templates:
        name = _CHART_CRD_NAME.search(text)
        if name and _CHART_WEBHOOK_CONVERSION.search(text):
            names.add(name.group(1))
    return frozenset(names)


def with_conversion_webhook(
    crd: Mapping[str, Any], ports: KueuePorts, ca_pem: bytes, converted: Collection[str]
) -> dict[str, Any]:
    """A Kueue CRD as the sandbox applies it: one whose versions Kueue converts (``converted``, as its
    chart says: ``webhook_converted_crds``) has the API server call Kueue on 127.0.0.1 for that, as
    the chart has it call Kueue's service; any other is converted by the API server (strategy None).
    Asking Kueue to convert a kind it has no conversion for fails every read at the other version:
    Kueue v0.16.2 logged "*v1beta2.ResourceFlavor is not convertible to *v1beta1.ResourceFlavor"
    about 250 times a minute on a sandbox, for the garbage collector's lists."""
    out = copy.deepcopy(dict(crd))
    if out["metadata"]["name"] in converted:
        out["spec"]["conversion"] = {
            "strategy": "Webhook",
            "webhook": {
                "clientConfig": {"url": webhook_url(ports, "/convert"), "caBundle": base64.b64encode(ca_pem).decode()},
                "conversionReviewVersions": ["v1"],
            },
        }
    else:
        out["spec"]["conversion"] = {"strategy": "None"}
    return out


def sandbox_crds(
    upstream: Iterable[Mapping[str, Any]], chart_crd_templates: Iterable[str], ports: KueuePorts, ca_pem: bytes
) -> list[dict[str, Any]]:
    """Kueue's CRDs (config/components/crd/bases) as the sandbox applies them, each converted where
    the chart's CRD templates (their texts) say: ``webhook_converted_crds``, ``with_conversion_webhook``."""
    converted = webhook_converted_crds(chart_crd_templates)
    return [with_conversion_webhook(crd, ports, ca_pem, converted) for crd in upstream]


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


# Kueue's process on the sandbox; the registry hands out every engine's, so that installing one
# stops the others (``registry.sandbox_processes``).
SANDBOX_PROCESSES = ("kueue",)


# ---------------------------------------------------------------------------------------------
# Quota trees (the inventory's and a scenario's): Cohorts for inner nodes, ClusterQueues for leaves

_TREE_NAMES = {"cpu": "cpu", "memory": "memory", "gpu": GPU}


def _tree_quantity(resource: str, amount: float) -> str:
    if resource == "memory":
        return "%dMi" % round(amount * 1024)
    return quantity(amount)


def _tree_groups(
    node: quota_tree.TreeNode, declared: Iterable[str], own_min: Mapping[str, float], top: bool
) -> list[dict[str, Any]]:
    """One flavor covering what the tree declares. A tree that divides GPUs also covers CPU and
    memory it leaves undeclared, with ``UNLIMITED`` quotas (Kueue refuses a pod asking for a
    resource its ClusterQueue does not cover): only GPUs are limited, as with KAI."""
    resources: list[dict[str, Any]] = []
    covered = []
    for resource in quota_tree.RESOURCES:
        if resource not in declared:
            if "gpu" in declared and resource in UNLIMITED:
                resources.append({"name": resource, "nominalQuota": UNLIMITED[resource]})
                covered.append(resource)
            continue
        quota: dict[str, Any] = {
            "name": _TREE_NAMES[resource],
            "nominalQuota": _tree_quantity(resource, own_min.get(resource, 0.0)),
        }
        if not top and resource in node.max:
            # Kueue bounds what a subtree takes from its parent beyond its own quota; a top node
            # has nothing to borrow from (Kueue refuses a borrowing limit there).
            quota["borrowingLimit"] = _tree_quantity(resource, node.max[resource] - node.min.get(resource, 0.0))
        resources.append(quota)
        covered.append(_TREE_NAMES[resource])
    return [{"coveredResources": covered, "flavors": [{"name": FLAVOR, "resources": resources}]}]


def tree_manifests(
    nodes: Sequence[quota_tree.TreeNode], weights: Mapping[str, float] | None = None
) -> list[dict[str, Any]]:
    """The tree on Kueue, parents first: a Cohort per inner node (its own nominal quota = its min less
    its children's; borrowing limit = max − min), a ClusterQueue per leaf in its parent cohort
    (nominal = min, borrowing limit = max − min; admitting the leaf's namespaces), then each leaf
    namespace with a LocalQueue named after the leaf. A node's weight (``weights``) is its
    fair-sharing weight; Kueue's default where it has none."""
    declared = quota_tree.declared_resources(nodes)
    inner = quota_tree.parents(nodes)
    manifests: list[dict[str, Any]] = []
    for node in nodes:
        spec: dict[str, Any]
        if node.name in inner:
            below = quota_tree.children(node, nodes)
            own = {
                resource: max(node.min.get(resource, 0.0) - sum(c.min.get(resource, 0.0) for c in below), 0.0)
                for resource in declared
            }
            kind, spec = "Cohort", {"resourceGroups": _tree_groups(node, declared, own, node.parent is None)}
            if node.parent:
                spec["parentName"] = node.parent
        else:
            kind, spec = (
                "ClusterQueue",
                {
                    **({"cohortName": node.parent} if node.parent else {}),
                    "namespaceSelector": {"matchLabels": {quota_tree.LEAF_LABEL: node.name}},
                    "queueingStrategy": "BestEffortFIFO",
                    "resourceGroups": _tree_groups(node, declared, node.min, node.parent is None),
                    "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
                },
            )
        if weights and node.name in weights:
            spec["fairSharing"] = {"weight": quantity(weights[node.name])}
        manifests.append(
            {
                "apiVersion": API_VERSION,
                "kind": kind,
                "metadata": {"name": node.name, "labels": dict(MANAGED_BY)},
                "spec": spec,
            }
        )
    for node in nodes:
        for namespace in node.namespaces:
            manifests.append(quota_tree.namespace_manifest(namespace, node.name))
            manifests.append(
                {
                    "apiVersion": API_VERSION,
                    "kind": "LocalQueue",
                    "metadata": {"name": node.name, "namespace": namespace, "labels": dict(MANAGED_BY)},
                    "spec": {"clusterQueue": node.name},
                }
            )
    return manifests


def tree_object_differences(
    node: quota_tree.TreeNode, found: Mapping[str, Any] | None, wanted: Mapping[str, Any]
) -> str | None:
    """None when the node's Cohort or ClusterQueue is as the tree declares it, else what differs."""
    if found is None:
        return "no Kueue %s %s" % (wanted["kind"], node.name)
    have = found.get("spec") or {}
    differences = []
    for key in ("parentName", "cohortName"):
        if wanted["spec"].get(key) != have.get(key):
            differences.append("%s %s, not %s" % (key, have.get(key), wanted["spec"].get(key)))
    if not is_subset(wanted["spec"]["resourceGroups"], have.get("resourceGroups")):
        differences.append("resourceGroups differ from the declared min/max")
    return "; ".join(differences) or None


# ---------------------------------------------------------------------------------------------
# Workloads of the fairness scenarios (validate/scenario_runner.py)


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
            # The GPUs with the workload's CPU and memory beside them, as its Job's pod has them.
            gpus = workloads.check_gpus(workload.name, workload.gpus)
            container["resources"] = workloads.pod_resources(workload, gpus)
        jobs.append(job)
    return jobs


# ---------------------------------------------------------------------------------------------
# The backend


class KueueBackend(base.Backend):
    name = "kueue"
    display_name = "Kueue"
    policy = "kueue"
    fractions = False
    lends_quota = True
    # A waiting Job is suspended: it has no pod until Kueue admits it.
    waiting_workloads_have_pods = False
    # Kueue orders preemption candidates by admission time, kept to the second: arrivals a second
    # apart keep that order the order of submission, as the model reads it.
    arrival_gap_seconds = 1.05
    project_apis = ((_GROUP, _VERSION, "clusterqueues"),)
    tree_apis = ((_GROUP, _VERSION, "cohorts"), (_GROUP, _VERSION, "clusterqueues"))
    removed_kinds = ("ClusterQueue",)
    member_rules = MEMBER_RULES
    own_namespaces = (SYSTEM_NAMESPACE,)
    # Kueue admits (the control plane's kube-scheduler then binds): its one process on the sandbox.
    health_processes = SANDBOX_PROCESSES
    system_namespace = SYSTEM_NAMESPACE
    sandbox_processes = SANDBOX_PROCESSES
    install_role = "kueue_scheduler"
    # Its webhook registrations outlive its process and would hold every Job for a Kueue that is gone.
    sandbox_leftovers = True
    # Kueue gates the Jobs that name a LocalQueue and leaves every other pod to kube-scheduler: the
    # admission policy holds GPU work in a project namespace to a Job (or CronJob) that names the
    # project's LocalQueue, and a GPU pod to one the Job controller made.
    admission_rules = admission.AdmissionRules(
        engine="Kueue",
        queue_labels=(QUEUE_NAME_LABEL,),
        scheduler_name=None,
        queue_required=True,
        gpu_kinds=("Pod", "Job", "CronJob"),
        gpu_pods_from_controllers_only=True,
        # A pod's PriorityClass would be Kueue's priority for its workload and the default
        # scheduler's for preemption: a member names Kueue's workload priority classes instead.
        priority_classes=(),
        priority_labels=((PRIORITY_CLASS_LABEL, tuple(PRIORITY_VALUES)),),
        # What members may read of the engine they may not write.
        engine_objects=base.read_only_objects(MEMBER_RULES),
        # Kueue's controller, in its namespace, resumes (unsuspends) the Jobs it admits.
        engine_writers=("system:serviceaccount:%s:" % SYSTEM_NAMESPACE,),
        resumed_by_engine_only=True,
        interactive_labels=((PRIORITY_CLASS_LABEL, (INTERACTIVE_PRIORITY,)),),
        time_limit_label=MAX_EXEC_TIME_LABEL,
    )
    quota_table = base.QuotaTable(
        "GPU quota per project: declared, configured in Kueue, held now",
        "Nominal quota (configured)",
        "Fair-sharing weight (configured)",
    )

    def sandbox_metrics(self, port_base: int) -> tuple[base.MetricsEndpoint, ...]:
        """Kueue's metrics: HTTPS with the sandbox CA's certificate (``SandboxPaths.metrics_cert_dir``),
        a bearer token the API server authorizes (controller-runtime's secure serving)."""
        url = "https://%s:%d/metrics" % (LOOPBACK, KueuePorts(port_base).metrics)
        return (base.MetricsEndpoint("kueue", url, tls=True, token=True),)

    def cluster_metrics(self) -> tuple[base.ClusterMetrics, ...]:
        """The chart's metrics Service (release kueue): HTTPS with the certificate Kueue makes
        itself, and a bearer token the API server authorizes."""
        return (base.ClusterMetrics("kueue", SYSTEM_NAMESPACE, CLUSTER_METRICS_SERVICE, "https", tls=True, token=True),)

    def group_objects(self, name: str, total_gpus: float) -> list[dict[str, Any]]:
        return [
            {
                "apiVersion": API_VERSION,
                "kind": "Cohort",
                "metadata": {"name": name, "labels": dict(MANAGED_BY)},
                "spec": {},
            }
        ]

    def project_objects(self, project: Project, group: str | None = None) -> list[dict[str, Any]]:
        return project_manifests(project, group or COHORT)

    # The module's functions are the backend's methods.
    project_readback = staticmethod(project_readback)
    tree_objects = staticmethod(tree_manifests)
    job_manifest = staticmethod(job_manifest)
    pod_gpus = staticmethod(pod_gpus)

    def tree_differences(
        self, nodes: Sequence[quota_tree.TreeNode], found: Iterable[Mapping[str, Any]]
    ) -> dict[str, str | None]:
        have = {(item["kind"], item["metadata"]["name"]): item for item in found}
        wanted = {m["metadata"]["name"]: m for m in tree_manifests(nodes) if m["kind"] in ("Cohort", "ClusterQueue")}
        return {
            node.name: tree_object_differences(
                node, have.get((wanted[node.name]["kind"], node.name)), wanted[node.name]
            )
            for node in nodes
        }

    def site_objects(self) -> list[dict[str, Any]]:
        return [resource_flavor_manifest(), *priority_class_manifests()]

    def replica_manifests(
        self, workload: workloads.Workload, settings: workloads.ProjectSettings, replicas: int, resource: str
    ) -> list[dict[str, Any]]:
        return replica_jobs(workload, settings, replicas, resource)


BACKEND = KueueBackend()
