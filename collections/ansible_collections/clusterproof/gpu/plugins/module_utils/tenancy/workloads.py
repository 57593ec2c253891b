"""What a workload is, scheduler-neutral, and the Job every engine builds on. Pure.

Two kinds, as in the Run:AI documents:

- training (unattended, preemptible): reclaimed when its project is over quota and another
  project claims its quota;
- interactive (build sessions): the project's time limit ends it.

Every workload is a Job in its project's namespace (``base_job``): its kind and name as labels,
whole GPUs as ``nvidia.com/gpu``, CPU cores and memory (GiB) per pod, where the workload asks
for them, as ``cpu`` (millicores) and ``memory`` (Mi) requests and the same limits, the project's
node affinity for the workload's kind as a
required node affinity on ``kubernetes.io/hostname``, the time limit of interactive work as
``activeDeadlineSeconds``. A fraction of a GPU (0 < gpus < 1) gets no GPU resource here: an engine
that shares GPUs says so its own way (KAI's ``gpu-fraction`` annotation), one that cannot refuses
it. How a Job is put in its project's queue, with which priority, is the engine's
(``Backend.workload_manifests`` in ``scheduler/``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils import versions
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import projects

TRAINING = "train"
INTERACTIVE = "interactive"
KINDS = (TRAINING, INTERACTIVE)
WORKLOAD_KIND_LABEL = "clusterproof.io/workload-type"
WORKLOAD_NAME_LABEL = "clusterproof.io/workload"
# KWOK in the sandbox completes a pod that carries this annotation after the duration it names.
COMPLETE_AFTER_ANNOTATION = "clusterproof.io/complete-after"
# GPU fractions are given in hundredths.
FRACTION_STEP = Decimal("0.01")
# A pod's CPU is written in millicores, its memory in MiB: the steps a workload's cpu (cores) and
# memory (GiB) are given in.
CPU_STEP = Decimal(1) / 1000
MEMORY_STEP = Decimal(1) / 1024
DEFAULT_IMAGE = versions.WORKLOAD_IMAGE.image
GPU_RESOURCE = "nvidia.com/gpu"
# A test bed's simulated GPU nodes (KWOK beside a real cluster, sandbox.simulated_nodes) are tainted so
# that only the validator's workloads land there; every workload tolerates it (nowhere else is a node
# tainted so, and the sandbox's nodes are not).
SIMULATED_NODE_TOLERATION = {"key": "kwok.x-k8s.io/node", "operator": "Equal", "value": "fake", "effect": "NoSchedule"}


class WorkloadError(ValueError):
    """A workload that cannot be expressed; the message names the workload and the field."""


@dataclasses.dataclass(frozen=True)
class ProjectSettings:
    """A project's workload settings, as its namespace carries them."""

    name: str
    training_nodes: tuple[str, ...] = ()
    interactive_nodes: tuple[str, ...] = ()
    interactive_time_limit_seconds: int | None = None

    @classmethod
    def from_namespace(cls, namespace: Mapping[str, Any]) -> ProjectSettings:
        metadata = namespace["metadata"]
        annotations = metadata.get("annotations") or {}

        def nodes(key: str) -> tuple[str, ...]:
            return tuple(node for node in (annotations.get(key) or "").split(",") if node)

        limit = annotations.get(projects.INTERACTIVE_LIMIT_ANNOTATION) or ""
        return cls(
            metadata["name"],
            nodes(projects.TRAINING_NODES_ANNOTATION),
            nodes(projects.INTERACTIVE_NODES_ANNOTATION),
            int(limit) if limit.isdigit() else None,
        )


@dataclasses.dataclass(frozen=True)
class Workload:
    name: str
    project: str
    kind: str
    gpus: float
    # Sandbox only: how long the workload runs before it completes (a Go duration, e.g. "90s").
    complete_after: str | None = None
    image: str = DEFAULT_IMAGE
    # What each pod asks beside its GPUs: CPU cores and memory in GiB (0: nothing written).
    cpu: float = 0.0
    memory: float = 0.0


def check_gpus(name: str, gpus: Any) -> Decimal:
    """The GPUs a workload asks for: a whole number, or a fraction of one GPU in hundredths."""
    where = "workload %s: gpus" % name
    if isinstance(gpus, bool):
        raise WorkloadError("%s: expected a number of GPUs, found %r" % (where, gpus))
    try:
        amount = Decimal(str(gpus))
    except InvalidOperation:
        raise WorkloadError("%s: expected a number of GPUs, found %r" % (where, gpus)) from None
    if not amount.is_finite() or amount <= 0:
        raise WorkloadError("%s: expected a positive number of GPUs, found %r" % (where, gpus))
    if amount < 1:
        if amount % FRACTION_STEP:
            raise WorkloadError("%s: expected a fraction in hundredths (KAI's gpu-fraction), found %s" % (where, gpus))
        return amount
    if amount != amount.to_integral_value():
        raise WorkloadError("%s: expected whole GPUs, or a fraction of one GPU below 1, found %s" % (where, gpus))
    return amount


def check_amount(name: str, field: str, value: Any) -> Decimal:
    """A workload's ``cpu`` (cores, in thousandths) or ``memory`` (GiB, in MiB: 1/1024 GiB) per pod:
    a non-negative number in those steps."""
    step, unit = (CPU_STEP, "CPU cores in thousandths (millicores)") if field == "cpu" else (MEMORY_STEP, "GiB in MiB")
    where = "workload %s: %s" % (name, field)
    if isinstance(value, bool):
        raise WorkloadError("%s: expected a non-negative number of %s, found %r" % (where, unit, value))
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        raise WorkloadError("%s: expected a non-negative number of %s, found %r" % (where, unit, value)) from None
    if not amount.is_finite() or amount < 0:
        raise WorkloadError("%s: expected a non-negative number of %s, found %r" % (where, unit, value))
    # A MiB is 0.0009765625 GiB, exactly: the amount is a whole number of steps, or it is not.
    if (amount / step) % 1 != 0:
        raise WorkloadError("%s: expected a number of %s, found %s" % (where, unit, value))
    return amount


def pod_resources(workload: Workload, gpus: Decimal | None) -> dict[str, Any]:
    """A container's resources: ``gpus`` whole GPUs as the ``nvidia.com/gpu`` limit (none for None
    or a fraction), and the workload's CPU (``"1500m"``) and memory (``"16384Mi"``) as requests and
    the same limits, where it asks for them; empty when it asks for nothing."""
    limits: dict[str, str] = {}
    if gpus is not None and gpus >= 1:
        limits[GPU_RESOURCE] = str(int(gpus))
    requests: dict[str, str] = {}
    cpu = check_amount(workload.name, "cpu", workload.cpu)
    memory = check_amount(workload.name, "memory", workload.memory)
    if cpu > 0:
        requests["cpu"] = "%dm" % (cpu / CPU_STEP).to_integral_value()
    if memory > 0:
        requests["memory"] = "%dMi" % (memory / MEMORY_STEP).to_integral_value()
    limits.update(requests)
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return resources


def base_job(workload: Workload, settings: ProjectSettings) -> dict[str, Any]:
    """The Job that runs ``workload`` in its project, before an engine labels it. Pure."""
    if workload.kind not in KINDS:
        raise WorkloadError(
            "workload %s: kind: expected one of %s, found %r" % (workload.name, ", ".join(KINDS), workload.kind)
        )
    if workload.project != settings.name:
        raise WorkloadError(
            "workload %s: project: settings are for %s, not %s" % (workload.name, settings.name, workload.project)
        )
    gpus = check_gpus(workload.name, workload.gpus)
    labels = {WORKLOAD_KIND_LABEL: workload.kind, WORKLOAD_NAME_LABEL: workload.name}
    annotations = {}
    resources = pod_resources(workload, gpus)
    if workload.complete_after:
        annotations[COMPLETE_AFTER_ANNOTATION] = workload.complete_after
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "tolerations": [dict(SIMULATED_NODE_TOLERATION)],
        "containers": [{"name": "main", "image": workload.image, "resources": resources}],
    }
    nodes = settings.training_nodes if workload.kind == TRAINING else settings.interactive_nodes
    if nodes:
        pod_spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "In", "values": list(nodes)}
                            ]
                        }
                    ]
                }
            }
        }
    job_spec: dict[str, Any] = {
        # A reclaimed training pod is deleted by the scheduler, not failed: the Job makes a new
        # pod, which waits in the queue. A pod that fails for real ends the Job.
        "backoffLimit": 0,
        "template": {"metadata": {"labels": labels, "annotations": annotations}, "spec": pod_spec},
    }
    if workload.kind == INTERACTIVE and settings.interactive_time_limit_seconds:
        job_spec["activeDeadlineSeconds"] = settings.interactive_time_limit_seconds
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": workload.name, "namespace": workload.project, "labels": dict(labels)},
        "spec": job_spec,
    }


def label_job(job: dict[str, Any], labels: Mapping[str, str]) -> dict[str, Any]:
    """``job`` with ``labels`` on the Job and on its pods (an engine's queue label)."""
    job["metadata"]["labels"].update(labels)
    job["spec"]["template"]["metadata"]["labels"].update(labels)
    return job


def deployment_from_job(
    job: Mapping[str, Any], workload: Workload, replicas: int, resource: str = "gpu"
) -> dict[str, Any]:
    """A Deployment of ``replicas`` pods like the pod of ``job`` (an engine's Job of ``workload``
    at one GPU), each the size of ``workload`` in ``resource`` (GPUs, or CPU cores when
    ``resource`` is cpu: the elastic quota tree's example), with the workload's CPU and memory
    beside its GPUs (``pod_resources``). Pure."""
    template = job["spec"]["template"]
    template["spec"].pop("restartPolicy")  # a Deployment's pods always restart
    size = check_gpus(workload.name, workload.gpus)
    container = template["spec"]["containers"][0]
    if resource == "cpu":
        if workload.cpu or workload.memory:
            raise WorkloadError(
                "workload %s: cpu and memory: pods sized in CPU cores (resource cpu) take nothing beside them, "
                "found cpu %s, memory %s" % (workload.name, workload.cpu, workload.memory)
            )
        amount = str(size.normalize()) if size >= 1 else "%dm" % int(size * 1000)
        container["resources"] = {"requests": {"cpu": amount}, "limits": {"cpu": amount}}
    elif size < 1:
        raise WorkloadError("workload %s: gpus: a Deployment's pods take whole GPUs, found %s" % (workload.name, size))
    else:
        container["resources"] = pod_resources(workload, size)
    selector = {WORKLOAD_NAME_LABEL: workload.name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": workload.name, "namespace": workload.project, "labels": job["metadata"]["labels"]},
        "spec": {"replicas": replicas, "selector": {"matchLabels": selector}, "template": template},
    }


def pod_whole_gpus(pod: Any) -> float:
    """Whole GPUs a pod (a kubernetes client V1Pod) asks for: its containers' nvidia.com/gpu."""
    total = 0.0
    for container in pod.spec.containers:
        resources = container.resources
        amount = (resources.limits or {}).get(GPU_RESOURCE) or (resources.requests or {}).get(GPU_RESOURCE)
        total += float(amount or 0)
    return total


def pod_cpus(pod: Any) -> float:
    """CPU cores a pod (a kubernetes client V1Pod) requests (its limits where it requests none)."""
    total = 0.0
    for container in pod.spec.containers:
        resources = container.resources
        amount = str((resources.requests or {}).get("cpu") or (resources.limits or {}).get("cpu") or "0")
        total += float(amount[:-1]) / 1000 if amount.endswith("m") else float(amount)
    return total
