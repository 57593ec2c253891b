"""KAI scheduler (the open-source Run:AI scheduler) as clusterproof installs, drives and validates it.

Pure. Its backend (``BACKEND``, see ``scheduler/base.py``): a project is a Queue under the
department queue (its GPUs, and CPU and memory where the project declares their quotas or limits),
a quota tree is Queues under their parent Queues (quota = min, limit = max,
over-quota weight = min unless a weight is given, CPU in millicpus, memory in megabytes; a pod goes
to its leaf's queue by the ``kai.scheduler/queue`` label, as the pinned KAI has no namespace default),
a workload is a Job for ``kai-scheduler`` in its project's queue with KAI's priority classes
(``train`` preemptible, ``build`` not) and, for a fraction of a GPU, KAI's ``gpu-fraction``
annotation; KAI follows the Run:AI fair-share policy. Also the objects a sandbox install applies
(namespaces, service account, department queue), the scheduler's configuration, and the command
lines of the components the sandbox runs as local processes. The Kubernetes calls and the
processes themselves are elsewhere (``kube/``, ``sandbox/``). What is said here of KAI's behaviour
is the pinned release's (``versions.KAI_SCHEDULER``).

On a real cluster KAI's operator, installed by its Helm chart, starts these same components. On
the sandbox there is no container runtime, so they run as processes of this machine with the
sandbox kubeconfig, configured the way the operator configures them (actions and plugins below).
KAI's pod-group controller is not run: at the pinned version it ignores its metrics address flag and always
listens on port 8080 of every interface, which breaks the sandbox's loopback-only rule (and a
second sandbox on the machine). It only keeps PodGroup status (resources allocated) current, for
the queue controller's queue status; scheduling, reclaim and binding do not read it, and
clusterproof measures allocation from the pods themselves.

KAI's admission webhooks are not served either: what clusterproof's workloads need from them (the queue
label, scheduler name, priority class, and for a GPU fraction the name of its GPU-sharing
ConfigMap) is written into the workloads themselves (workloads.py), and the queue/podgroup
validating webhooks only reject malformed objects, which clusterproof's modules never write. The
webhook also adds the ConfigMap's volume and environment to the container, which matter only to a
container that runs: on a real cluster the webhook is installed by the Helm chart.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox.control_plane import (
    LOOPBACK,
    Component,
    Layout,
    port_block,
)
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import base
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import admission, projects, quota_tree, workloads

SCHEDULER_NAME = "kai-scheduler"
QUEUE_LABEL = "kai.scheduler/queue"
# The label KAI's pod grouper also takes a queue from (Run:AI's, kept by KAI for old workloads).
LEGACY_QUEUE_LABEL = "runai/queue"
GPU_FRACTION_ANNOTATION = "gpu-fraction"
# A part of a GPU asked by its memory (MiB): a fraction too.
GPU_MEMORY_ANNOTATION = "gpu-memory"
# Where KAI's binder puts the GPU-sharing configuration of a fractional pod: a ConfigMap name
# prefix that KAI's admission webhook annotates the pod with.
SHARED_GPU_CONFIGMAP_ANNOTATION = "runai/shared-gpu-configmap"
GPU_GROUP_LABEL = "runai-gpu-group"
# The PodGroup a pod belongs to; KAI's pod grouper leaves an ownerless pod that names one in it.
POD_GROUP_ANNOTATION = "pod-group-name"
SYSTEM_NAMESPACE = "kai-scheduler"
RESERVATION_NAMESPACE = "kai-resource-reservation"
RESERVATION_SERVICE_ACCOUNT = "kai-resource-reservation"
RESERVATION_APP_LABEL = "kai-resource-reservation"
RESERVED_GPU_ANNOTATION = "run.ai/reserve_for_gpu_index"
QUEUE_API = ("scheduling.run.ai", "v2", "queues")
# Jobs can be scheduled only to queues that have a parent; every project's queue hangs under this
# department queue (KAI scheduler issue 621).
DEPARTMENT_QUEUE = "clusterproof"

# Priority classes KAI ships: training is preemptible, build (interactive) is not.
TRAIN_PRIORITY = "train"
INTERACTIVE_PRIORITY = "build"
# Every class KAI's chart installs (deployments/kai-scheduler/templates/priorityclasses: train 50,
# build-preemptible 75, build 100, inference 125). KAI holds a non-preemptible one (100 and above)
# within its queue's deserved quota (proportion/capacity_policy/quota_check.go); a class of any
# other name (system-node-critical) KAI would neither hold so nor be the only one to decide on.
PRIORITY_CLASSES = (TRAIN_PRIORITY, "build-preemptible", INTERACTIVE_PRIORITY, "inference")
# From this priority on KAI never preempts nor reclaims a job (common/podgroup/preemptible.go), and
# the label that makes a job so whatever its priority.
NON_PREEMPTIBLE_PRIORITY = 100
PREEMPTIBILITY_LABEL = "kai.scheduler/preemptibility"
# The pod grouper takes a pod's priority from this label of its top owner or itself before its
# spec.priorityClassName (podgrouper/.../defaultgrouper).
PRIORITY_LABEL = "priorityClassName"
# Without a queue label the pod grouper charges the queue named by this label (podgrouper's
# default grouper at the pin): a queue label like the others.
PROJECT_QUEUE_LABEL = "project"
# KAI's binder acts as its service account in KAI's namespace; it writes a fractional pod's
# GPU-sharing ConfigMaps (NVIDIA_VISIBLE_DEVICES) in the pod's namespace.
ENGINE_WRITERS = ("system:serviceaccount:%s:" % SYSTEM_NAMESPACE,)

# The configuration KAI's operator writes for its default shard with GPU bin-packing.
SCHEDULER_ACTIONS = ("allocate", "consolidation", "reclaim", "preempt", "stalegangeviction")
SCHEDULER_PLUGINS = (
    "predicates",
    "proportion",
    "priority",
    "nodeavailability",
    "resourcetype",
    "podaffinity",
    "elastic",
    "kubeflow",
    "ray",
    "subgrouporder",
    "taskorder",
    "nominatednode",
    "dynamicresources",
    "minruntime",
    "topology",
    "snapshot",
    "gpupack",
)


def scheduler_config() -> dict[str, Any]:
    plugins: list[dict[str, Any]] = [{"name": name} for name in SCHEDULER_PLUGINS]
    plugins.append({"name": "nodeplacement", "arguments": {"gpu": "binpack", "cpu": "binpack"}})
    plugins.append({"name": "gpusharingorder"})
    return {"actions": ", ".join(SCHEDULER_ACTIONS), "tiers": [{"plugins": plugins}]}


def _unlimited() -> dict[str, int]:
    return {"quota": -1, "overQuotaWeight": 1, "limit": -1}


def queue_manifest(
    name: str,
    gpu_quota: float,
    over_quota_weight: float,
    gpu_limit: float | None,
    parent: str | None,
    priority: int | None = None,
    cpu_quota: float | None = None,
    cpu_limit: float | None = None,
    memory_quota: float | None = None,
    memory_limit: float | None = None,
) -> dict[str, Any]:
    """A KAI Queue. GPU quota, weight and limit as declared. CPU (cores) and memory (GiB) where a
    quota or limit of theirs is declared: in KAI's units (millicpus, megabytes), with the GPUs'
    over-quota weight, -1 for the one not declared; otherwise not limited by clusterproof (quota
    -1 means unlimited in KAI's API)."""
    spec: dict[str, Any] = {
        "resources": {
            "gpu": {
                "quota": _number(gpu_quota),
                "overQuotaWeight": _number(over_quota_weight),
                "limit": -1 if gpu_limit is None else _number(gpu_limit),
            },
            "cpu": _declared("cpu", cpu_quota, cpu_limit, over_quota_weight),
            "memory": _declared("memory", memory_quota, memory_limit, over_quota_weight),
        }
    }
    if parent:
        spec["parentQueue"] = parent
    if priority is not None:
        spec["priority"] = priority
    return {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "clusterproof"}},
        "spec": spec,
    }


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else float(value)


def kai_amount(resource: str, amount: float) -> int | float:
    """CPU cores as KAI's millicpus, memory GiB as its megabytes (10^6 bytes), GPUs as they are;
    to a millionth, so that a MiB (1.048576 megabytes) is written exactly."""
    return _number(round(amount * _TREE_SCALE[resource], 6))


def _declared(resource: str, quota: float | None, limit: float | None, weight: float) -> dict[str, Any]:
    """A queue's CPU or memory resource: the declared quota and limit in KAI's units (-1 for the one
    not declared) with the GPUs' over-quota weight, or unlimited when neither is declared."""
    if quota is None and limit is None:
        return _unlimited()
    return {
        "quota": -1 if quota is None else kai_amount(resource, quota),
        "overQuotaWeight": _number(weight),
        "limit": -1 if limit is None else kai_amount(resource, limit),
    }


def cpu_queue_manifest(
    name: str, cpu_quota: float, over_quota_weight: float, cpu_limit: float | None, parent: str | None
) -> dict[str, Any]:
    """A KAI Queue that divides CPU cores (KAI counts them in millicpus); GPUs and memory unlimited.
    The elastic quota tree's nodes become such queues, its tree their parent queues."""
    manifest = queue_manifest(name, 0, 0, None, parent)
    manifest["spec"]["resources"] = {
        "gpu": _unlimited(),
        "cpu": {
            "quota": _number(cpu_quota * 1000),
            "overQuotaWeight": _number(over_quota_weight),
            "limit": -1 if cpu_limit is None else _number(cpu_limit * 1000),
        },
        "memory": _unlimited(),
    }
    return manifest


def department_queue(total_gpus: float) -> dict[str, Any]:
    return queue_manifest(DEPARTMENT_QUEUE, total_gpus, 1, None, None)


def system_objects() -> list[dict[str, Any]]:
    """Namespaces and the service account KAI's components expect to exist."""
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NAMESPACE}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": RESERVATION_NAMESPACE}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": RESERVATION_SERVICE_ACCOUNT, "namespace": RESERVATION_NAMESPACE},
        },
    ]


@dataclasses.dataclass(frozen=True)
class KaiPorts:
    """Loopback ports of KAI's components on the sandbox (their block of ``control_plane.PORT_TABLE``)."""

    base: int

    def port(self, offset: int) -> int:
        return self.base + port_block("kai").start + offset


# The offsets (in KAI's port block) of the metrics the monitoring stage scrapes, as ``components`` sets them.
METRICS_OFFSETS = {"kai-scheduler": 0, "kai-queuecontroller": 8}
# On a kubeadm site, the Services KAI's operator (at the pin) makes with its defaults, and their metrics
# ports' names, under the same jobs.
CLUSTER_METRICS = {
    "kai-scheduler": ("kai-scheduler-default", "http-metrics"),
    "kai-queuecontroller": ("queue-controller", "metrics"),
}

# KAI's processes on the sandbox (``components``), which must not run while another engine schedules.
SANDBOX_PROCESSES = ("kai-scheduler", "kai-binder", "kai-podgrouper", "kai-queuecontroller", "sandbox-gpu-agent")


def components(
    layout: Layout,
    bin_dir: Path,
    ports: KaiPorts,
    config_path: Path,
    agent_argv: tuple[str, ...],
    agent_pythonpath: str = "",
) -> list[Component]:
    """KAI's components on the sandbox, in start order, plus the sandbox GPU agent. Pure."""
    kubeconfig = str(layout.kubeconfig)
    env = (("KUBECONFIG", kubeconfig),)

    def address(offset: int) -> str:
        return "%s:%d" % (LOOPBACK, ports.port(offset))

    # Not every component registers a health check; each serves metrics once its manager runs.
    def url(offset: int, path: str) -> str:
        return "http://%s%s" % (address(offset), path)

    return [
        Component(
            "kai-queuecontroller",
            (
                str(bin_dir / "kai-queuecontroller"),
                "--kubeconfig=%s" % kubeconfig,
                "--enable-webhook=false",
                "--metrics-listen-address=%s" % address(METRICS_OFFSETS["kai-queuecontroller"]),
            ),
            url(METRICS_OFFSETS["kai-queuecontroller"], "/metrics"),
            env=env,
        ),
        Component(
            "kai-podgrouper",
            (
                str(bin_dir / "kai-podgrouper"),
                "-kubeconfig=%s" % kubeconfig,
                "-health-probe-bind-address=%s" % address(4),
                "-metrics-bind-address=%s" % address(5),
            ),
            url(5, "/metrics"),
            env=env,
        ),
        Component(
            "kai-binder",
            (
                str(bin_dir / "kai-binder"),
                "--kubeconfig=%s" % kubeconfig,
                # Reservation pods for GPU fractions run a sleep instead of the NVML probe, and
                # the sandbox GPU agent answers for the GPU index the probe would report.
                "--fake-gpu-nodes",
                "--health-probe-bind-address=%s" % address(2),
                "--metrics-bind-address=%s" % address(3),
            ),
            url(3, "/metrics"),
            env=env,
        ),
        Component(
            "kai-scheduler",
            (
                str(bin_dir / "kai-scheduler"),
                "--scheduler-conf=%s" % config_path,
                "--namespace=%s" % SYSTEM_NAMESPACE,
                "--listen-address=%s" % address(METRICS_OFFSETS["kai-scheduler"]),
                # The plugins' debug server (KAI's snapshot tool reads it) has no address flag at
                # the pin: it listens on ":<port>", every interface. An out-of-range port makes
                # its ListenAndServe fail at once (KAI ignores the error), so it does not listen
                # at all; nothing on the sandbox uses it. Offset 1 of KAI's block stays unused.
                "--plugin-server-port=-1",
            ),
            url(METRICS_OFFSETS["kai-scheduler"], "/metrics"),
            env=env,
        ),
        # The agent is a Python module of this collection: it runs from the collection's folder.
        Component("sandbox-gpu-agent", agent_argv, "", env=env + (("PYTHONPATH", agent_pythonpath),)),
    ]


def pod_gpus(pod: Any) -> float:
    """GPUs a pod (a kubernetes client V1Pod) asks for: its KAI fraction, or its whole nvidia.com/gpu."""
    fraction = (pod.metadata.annotations or {}).get(GPU_FRACTION_ANNOTATION)
    if fraction:
        return float(fraction)
    return workloads.pod_whole_gpus(pod)


def pod_cpus(pod: Any) -> float:
    """CPU cores a pod (a kubernetes client V1Pod) requests (its limits where it requests none)."""
    return workloads.pod_cpus(pod)


# ---------------------------------------------------------------------------------------------
# Projects


# What a project's members may read of KAI in their namespace, next to projects.MEMBER_RULES.
MEMBER_RULES = ({"apiGroups": ["scheduling.run.ai"], "resources": ["podgroups"], "verbs": ["get", "list", "watch"]},)


def project_queue_manifest(project: projects.Project, department: str = DEPARTMENT_QUEUE) -> dict[str, Any]:
    """The project's Queue under ``department``."""
    return queue_manifest(
        project.name,
        project.gpu_quota,
        project.over_quota_weight,
        project.gpu_limit,
        department,
        project.priority,
        cpu_quota=project.cpu_quota,
        cpu_limit=project.cpu_limit,
        memory_quota=project.memory_quota,
        memory_limit=project.memory_limit,
    )


def project_queue(project: Mapping[str, Any]) -> dict[str, Any]:
    return project_queue_manifest(projects.Project.from_dict(project))


def project_readback(wanted: projects.Project, queue: Mapping[str, Any] | None) -> base.ProjectReadback:
    """The declared project against its Queue: quota, over-quota weight, limit, parent, one check
    each; and where the project declares a CPU or memory quota or limit, that resource's quota and
    limit (in cores and GiB, read back from KAI's millicpus and megabytes; none for -1)."""
    name = wanted.name
    if queue is None:
        missing = base.ConfigCheck(
            "queue",
            "%s has a KAI queue" % name,
            "Queue %s" % name,
            "missing",
            False,
            "run playbooks/scheduler.yml to create it",
        )
        return base.ProjectReadback((missing,), "missing", "missing", complete=False)
    gpu = ((queue.get("spec") or {}).get("resources") or {}).get("gpu") or {}
    configured = {
        "quota": gpu.get("quota"),
        "over-quota weight": gpu.get("overQuotaWeight"),
        "limit": None if gpu.get("limit") in (None, -1) else gpu.get("limit"),
        "parent queue": (queue.get("spec") or {}).get("parentQueue"),
    }
    expected = {
        "quota": wanted.gpu_quota,
        "over-quota weight": wanted.over_quota_weight,
        "limit": wanted.gpu_limit,
        "parent queue": DEPARTMENT_QUEUE,
    }
    checks = []
    for field, value in expected.items():
        seen = configured[field]
        ok = (
            seen == value
            if isinstance(value, str) or value is None
            else (seen is not None and float(seen) == float(value))
        )
        checks.append(
            base.ConfigCheck(
                field.replace(" ", "-"),
                "%s: queue %s is %s" % (name, field, base.shown(value)),
                base.shown(value),
                base.shown(seen),
                ok,
                "" if ok else "queue %s differs from the inventory; re-run playbooks/scheduler.yml" % name,
            )
        )
    resources = (queue.get("spec") or {}).get("resources") or {}
    for resource in ("cpu", "memory"):
        if getattr(wanted, resource + "_quota") is None and getattr(wanted, resource + "_limit") is None:
            continue
        held = resources.get(resource) or {}
        for key in ("quota", "limit"):
            value = getattr(wanted, "%s_%s" % (resource, key))
            raw = held.get(key)
            seen = _declared_units(resource, raw)
            want = None if value is None else kai_amount(resource, value)
            ok = (
                raw is not None
                and _is_amount(raw)
                and (float(raw) == -1 if want is None else abs(float(raw) - want) <= _KAI_TOLERANCE)
            )
            field = "%s %s" % (resource, key)
            unit = " cores" if resource == "cpu" else " GiB"
            checks.append(
                base.ConfigCheck(
                    field.replace(" ", "-"),
                    "%s: queue %s is %s%s" % (name, field, base.shown(value), "" if value is None else unit),
                    base.shown(value),
                    "missing" if raw is None else (base.shown(seen) if _is_amount(raw) else repr(raw)),
                    ok,
                    "" if ok else "queue %s differs from the inventory; re-run playbooks/scheduler.yml" % name,
                )
            )
    return base.ProjectReadback(
        tuple(checks), base.shown(configured["quota"]), base.shown(configured["over-quota weight"])
    )


# How far a queue's CPU or memory amount (KAI's units) may be from the declared one: the
# rounding of a megabyte written to a millionth.
_KAI_TOLERANCE = 1e-6


def _is_amount(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _declared_units(resource: str, raw: Any) -> float | None:
    """A queue's CPU or memory amount (millicpus, megabytes) in cores or GiB; None for -1 (none)
    or a missing or unreadable one."""
    if not _is_amount(raw) or float(raw) == -1:
        return None
    return round(float(raw) / _TREE_SCALE[resource], 6)


# ---------------------------------------------------------------------------------------------
# Quota trees: Queues under their parent Queues

# KAI's units: CPU in millicpus, memory in megabytes (10^6 bytes).
_TREE_SCALE = {"cpu": 1000.0, "memory": 1024**3 / 10**6, "gpu": 1.0}


def _tree_number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else round(float(value), 3)


def tree_queue(node: quota_tree.TreeNode, declared: Iterable[str], weight: float | None = None) -> dict[str, Any]:
    """The KAI Queue of one tree node. A resource the tree declares nowhere is left unlimited; one
    it declares elsewhere is guaranteed nothing here unless this node's min says so. The over-quota
    weight is ``weight``, else the node's min of each resource."""
    resources: dict[str, Any] = {}
    for resource in quota_tree.RESOURCES:
        if resource not in declared:
            resources[resource] = _unlimited()
            continue
        scale = _TREE_SCALE[resource]
        minimum = node.min.get(resource, 0.0)
        maximum = node.max.get(resource)
        resources[resource] = {
            "quota": _tree_number(minimum * scale),
            "overQuotaWeight": _tree_number(minimum if weight is None else weight),
            "limit": -1 if maximum is None else _tree_number(maximum * scale),
        }
    manifest = queue_manifest(node.name, 0, 0, None, node.parent)
    manifest["spec"]["resources"] = resources
    manifest["metadata"]["labels"] = dict(quota_tree.MANAGED_BY)
    return manifest


def tree_manifests(
    nodes: Sequence[quota_tree.TreeNode], weights: Mapping[str, float] | None = None
) -> list[dict[str, Any]]:
    """Queues, parents first, then the leaves' namespaces (labelled with their leaf's queue)."""
    declared = quota_tree.declared_resources(nodes)
    manifests = [tree_queue(node, declared, (weights or {}).get(node.name)) for node in nodes]
    manifests += [
        quota_tree.namespace_manifest(namespace, node.name, {QUEUE_LABEL: node.name})
        for node in nodes
        for namespace in node.namespaces
    ]
    return manifests


def tree_queue_differences(
    node: quota_tree.TreeNode, queue: Mapping[str, Any] | None, declared: Iterable[str]
) -> str | None:
    """None when the queue is as the tree declares it, else what differs (a sentence)."""
    if queue is None:
        return "no KAI queue %s" % node.name
    want = tree_queue(node, declared)["spec"]
    have = queue.get("spec") or {}
    differences = []
    if have.get("parentQueue") != want.get("parentQueue"):
        differences.append("parent %s, not %s" % (have.get("parentQueue"), want.get("parentQueue")))
    for name, values in want["resources"].items():
        got = (have.get("resources") or {}).get(name) or {}
        for key, value in values.items():
            if float(got.get(key, -2)) != float(value):
                differences.append("%s.%s %s, not %s" % (name, key, got.get(key), value))
    return "; ".join(differences) or None


# ---------------------------------------------------------------------------------------------
# Workloads


def job_manifest(workload: workloads.Workload, settings: workloads.ProjectSettings) -> dict[str, Any]:
    """The Job that runs ``workload`` in its project's queue under KAI scheduler. Pure.

    A fraction of a GPU is KAI's ``gpu-fraction`` annotation (KAI packs fractions onto shared
    GPUs), with the GPU-sharing ConfigMap name KAI's admission webhook would write (this file's
    docstring says why the sandbox runs none)."""
    job = workloads.label_job(workloads.base_job(workload, settings), {QUEUE_LABEL: workload.project})
    template = job["spec"]["template"]
    gpus = workloads.check_gpus(workload.name, workload.gpus)
    if gpus < 1:
        template["metadata"]["annotations"][GPU_FRACTION_ANNOTATION] = str(gpus)
        template["metadata"]["annotations"][SHARED_GPU_CONFIGMAP_ANNOTATION] = "%s-shared-gpu" % workload.name[:40]
    template["spec"]["schedulerName"] = SCHEDULER_NAME
    template["spec"]["priorityClassName"] = (
        TRAIN_PRIORITY if workload.kind == workloads.TRAINING else INTERACTIVE_PRIORITY
    )
    return job


def gang_manifests(
    workload: workloads.Workload, settings: workloads.ProjectSettings, replicas: int, min_replicas: int
) -> list[dict[str, Any]]:
    """A gang under KAI scheduler: a PodGroup of ``min_replicas`` (its ``minMember``) in the
    project's queue, and ``replicas`` pods named ``<name>-<index>`` that name it in KAI's
    ``pod-group-name`` annotation. The pods have no owner, so KAI's pod grouper leaves them in
    this group (a Job's or Deployment's pods get a group of their own each). Pure."""
    job = job_manifest(workload, settings)
    if workloads.check_gpus(workload.name, workload.gpus) < 1:
        raise workloads.WorkloadError(
            "workload %s: gpus: a gang's pods take whole GPUs, found %s" % (workload.name, workload.gpus)
        )
    if not 0 < min_replicas <= replicas:
        raise workloads.WorkloadError(
            "workload %s: min_replicas: expected 1 to replicas (%d), found %s" % (workload.name, replicas, min_replicas)
        )
    template = job["spec"]["template"]
    labels = dict(job["metadata"]["labels"])
    group = {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": workload.name, "namespace": workload.project, "labels": labels},
        "spec": {
            "minMember": min_replicas,
            "queue": labels[QUEUE_LABEL],
            "priorityClassName": template["spec"]["priorityClassName"],
        },
    }
    pod_spec = dict(template["spec"])
    if "activeDeadlineSeconds" in job["spec"]:
        pod_spec["activeDeadlineSeconds"] = job["spec"]["activeDeadlineSeconds"]
    annotations = {**template["metadata"]["annotations"], POD_GROUP_ANNOTATION: workload.name}
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "%s-%d" % (workload.name, index),
                "namespace": workload.project,
                "labels": dict(template["metadata"]["labels"]),
                "annotations": dict(annotations),
            },
            "spec": pod_spec,
        }
        for index in range(replicas)
    ]
    return [group, *pods]


def deployment_manifest(
    workload: workloads.Workload, settings: workloads.ProjectSettings, replicas: int, resource: str = "gpu"
) -> dict[str, Any]:
    """A Deployment of ``replicas`` pods, each the size of ``workload`` in ``resource`` (GPUs, or CPU
    cores when ``resource`` is cpu: the elastic quota tree's example), under KAI scheduler. Pure."""
    job = job_manifest(dataclasses.replace(workload, gpus=1), settings)
    return workloads.deployment_from_job(job, workload, replicas, resource)


# ---------------------------------------------------------------------------------------------
# The backend


class KaiBackend(base.Backend):
    name = "kai"
    display_name = "KAI scheduler"
    policy = "runai"
    fractions = True
    gangs = True
    lends_quota = False
    cpu_memory_quotas = True
    project_apis = (QUEUE_API,)
    tree_apis = (QUEUE_API,)
    removed_kinds = ("Queue",)
    member_rules = MEMBER_RULES
    own_namespaces = (RESERVATION_NAMESPACE,)
    # The scheduler places and the binder binds; the pod grouper makes the pod groups KAI schedules.
    health_processes = ("kai-scheduler", "kai-binder", "kai-podgrouper")
    system_namespace = SYSTEM_NAMESPACE
    sandbox_processes = SANDBOX_PROCESSES
    install_role = "kai_scheduler"
    # A fractional pod's GPU is held by a reservation pod in RESERVATION_NAMESPACE.
    gpu_agent = True
    # KAI charges a pod to the queue its label names, whatever its namespace: the admission policy
    # holds a project's work to its own queue, and GPU work to KAI's scheduler name.
    # KAI picks a fraction's GPU from its cache (the GPUs its snapshot holds shares of); under load its
    # informers lag the API server. Seen once in 17 runs of fractional-gpus on a fresh sandbox beside
    # the bundle build (and once in a CI rehearsal): c-g05 ran on its own GPU with 0.5 free, and c-g03,
    # arriving after, was placed on a new GPU. Two of KAI's one-second cycles.
    shared_gpu_settle_seconds = 2.0
    admission_rules = admission.AdmissionRules(
        engine="KAI scheduler",
        queue_labels=(QUEUE_LABEL, LEGACY_QUEUE_LABEL, PROJECT_QUEUE_LABEL),
        scheduler_name=SCHEDULER_NAME,
        queue_required=False,
        gpu_kinds=("Pod", "Job", "CronJob", "Deployment", "StatefulSet", "ReplicaSet"),
        fraction_annotations=(GPU_FRACTION_ANNOTATION, GPU_MEMORY_ANNOTATION),
        priority_classes=PRIORITY_CLASSES,
        priority_labels=((PRIORITY_LABEL, PRIORITY_CLASSES),),
        engine_writers=ENGINE_WRITERS,
        shared_device_configmap_annotation=SHARED_GPU_CONFIGMAP_ANNOTATION,
        # What members may read of the engine they may not write.
        engine_objects=base.read_only_objects(MEMBER_RULES),
        non_preemptible_priority=NON_PREEMPTIBLE_PRIORITY,
        preemptibility_label=(PREEMPTIBILITY_LABEL, "non-preemptible"),
        # Interactive work is KAI's non-preemptible classes; a Deployment naming none gets inference.
        interactive_classes=(INTERACTIVE_PRIORITY, "inference"),
        interactive_kinds_by_default=("Deployment", "StatefulSet", "ReplicaSet"),
        # A project's interactive time limit holds its build work (Run:AI's interactive jobs), not inference.
        time_limited_classes=(INTERACTIVE_PRIORITY,),
    )
    quota_table = base.QuotaTable(
        "GPU quota per project: declared, configured in the scheduler, held now",
        "Quota (configured)",
        "Weight (configured)",
    )

    def namespace_labels(self, project: projects.Project) -> dict[str, str]:
        return {QUEUE_LABEL: project.name}

    def sandbox_metrics(self, port_base: int) -> tuple[base.MetricsEndpoint, ...]:
        """The scheduler's (queues' fair share) and the queue controller's (queues' quota and
        allocation) metrics, plain HTTP on loopback as ``components`` starts them."""
        ports = KaiPorts(port_base)
        return tuple(
            base.MetricsEndpoint(name, "http://%s:%d/metrics" % (LOOPBACK, ports.port(offset)))
            for name, offset in METRICS_OFFSETS.items()
        )

    def cluster_metrics(self) -> tuple[base.ClusterMetrics, ...]:
        """The Services KAI's operator makes for them: the scheduler's shard (<scheduler
        name>-<shard>, port http-metrics) and the queue controller's (port metrics), plain HTTP."""
        return tuple(
            base.ClusterMetrics(job, SYSTEM_NAMESPACE, service, port)
            for job, (service, port) in CLUSTER_METRICS.items()
        )

    def group_objects(self, name: str, total_gpus: float) -> list[dict[str, Any]]:
        return [queue_manifest(name, total_gpus, 1, None, None)]

    def project_objects(self, project: projects.Project, group: str | None = None) -> list[dict[str, Any]]:
        return [project_queue_manifest(project, group or DEPARTMENT_QUEUE)]

    # The module's functions are the backend's methods.
    project_readback = staticmethod(project_readback)
    tree_objects = staticmethod(tree_manifests)
    job_manifest = staticmethod(job_manifest)
    gang_manifests = staticmethod(gang_manifests)
    pod_gpus = staticmethod(pod_gpus)

    def tree_differences(
        self, nodes: Sequence[quota_tree.TreeNode], found: Iterable[Mapping[str, Any]]
    ) -> dict[str, str | None]:
        queues = {item["metadata"]["name"]: item for item in found}
        declared = quota_tree.declared_resources(nodes)
        return {node.name: tree_queue_differences(node, queues.get(node.name), declared) for node in nodes}

    def replica_manifests(
        self, workload: workloads.Workload, settings: workloads.ProjectSettings, replicas: int, resource: str
    ) -> list[dict[str, Any]]:
        return [deployment_manifest(workload, settings, replicas, resource)]

    def shared_gpu_group(self, pod: Any) -> str | None:
        group = (pod.metadata.labels or {}).get(GPU_GROUP_LABEL)
        return group if group and (pod.metadata.annotations or {}).get(GPU_FRACTION_ANNOTATION) else None


BACKEND = KaiBackend()
