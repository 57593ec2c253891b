"""How a workload is expressed for KAI scheduler. Pure; reused by the validator's scenarios.

Two kinds, as in the Run:AI documents:

- training (unattended, preemptible): KAI's ``train`` priority class, so it can be reclaimed when
  its project is over quota and another project claims its quota;
- interactive (build sessions, not preempted): KAI's ``build`` priority class; the project's time
  limit becomes the Job's ``activeDeadlineSeconds``, which the Job controller enforces.

Every workload is a Job in its project's namespace, scheduled by ``kai-scheduler`` in the
project's queue (the ``kai.scheduler/queue`` label). Whole GPUs are requested as
``nvidia.com/gpu``; a fraction (0 < gpus < 1) is KAI's ``gpu-fraction`` annotation instead, and
KAI packs fractions onto shared GPUs. The project's node affinity for the workload's kind becomes a
required node affinity on ``kubernetes.io/hostname``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import kai
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
DEFAULT_IMAGE = "nvcr.io/nvidia/pytorch:24.01-py3"


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


def job_manifest(workload: Workload, settings: ProjectSettings) -> dict[str, Any]:
    """The Job that runs ``workload`` in its project under KAI scheduler. Pure."""
    if workload.kind not in KINDS:
        raise WorkloadError(
            "workload %s: kind: expected one of %s, found %r" % (workload.name, ", ".join(KINDS), workload.kind)
        )
    if workload.project != settings.name:
        raise WorkloadError(
            "workload %s: project: settings are for %s, not %s" % (workload.name, settings.name, workload.project)
        )
    gpus = check_gpus(workload.name, workload.gpus)
    labels = {
        kai.QUEUE_LABEL: workload.project,
        WORKLOAD_KIND_LABEL: workload.kind,
        WORKLOAD_NAME_LABEL: workload.name,
    }
    annotations = {}
    resources: dict[str, Any] = {}
    if gpus < 1:
        annotations[kai.GPU_FRACTION_ANNOTATION] = str(gpus)
        # What KAI's admission webhook would write (kai.py says why the sandbox runs none).
        annotations[kai.SHARED_GPU_CONFIGMAP_ANNOTATION] = "%s-shared-gpu" % workload.name[:40]
    else:
        resources = {"limits": {"nvidia.com/gpu": str(int(gpus))}}
    if workload.complete_after:
        annotations[COMPLETE_AFTER_ANNOTATION] = workload.complete_after
    pod_spec: dict[str, Any] = {
        "schedulerName": kai.SCHEDULER_NAME,
        "priorityClassName": kai.TRAIN_PRIORITY if workload.kind == TRAINING else kai.INTERACTIVE_PRIORITY,
        "restartPolicy": "Never",
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


def deployment_manifest(
    workload: Workload, settings: ProjectSettings, replicas: int, resource: str = "gpu"
) -> dict[str, Any]:
    """A Deployment of ``replicas`` pods, each the size of ``workload`` in ``resource`` (GPUs, or CPU
    cores when ``resource`` is cpu: the elastic quota tree's example), under KAI scheduler. Pure."""
    job = job_manifest(dataclasses.replace(workload, gpus=1), settings)
    template = job["spec"]["template"]
    template["spec"].pop("restartPolicy")  # a Deployment's pods always restart
    size = check_gpus(workload.name, workload.gpus)
    container = template["spec"]["containers"][0]
    if resource == "cpu":
        amount = str(size.normalize()) if size >= 1 else "%dm" % int(size * 1000)
        container["resources"] = {"requests": {"cpu": amount}, "limits": {"cpu": amount}}
    elif size < 1:
        raise WorkloadError("workload %s: gpus: a Deployment's pods take whole GPUs, found %s" % (workload.name, size))
    else:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(int(size))}}
    selector = {WORKLOAD_NAME_LABEL: workload.name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": workload.name, "namespace": workload.project, "labels": job["metadata"]["labels"]},
        "spec": {"replicas": replicas, "selector": {"matchLabels": selector}, "template": template},
    }
