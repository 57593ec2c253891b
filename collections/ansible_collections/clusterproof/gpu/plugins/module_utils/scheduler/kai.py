"""KAI scheduler (the open-source Run:AI scheduler) as clusterproof installs and drives it.

Pure: the objects a sandbox install applies (namespaces, service account, department queue), the
scheduler's configuration, and the command lines of the components the sandbox runs as local
processes. The Kubernetes calls and the processes themselves are elsewhere (kube.py, sandbox.py).

On a real cluster KAI's operator, installed by its Helm chart, starts these same components. On
the sandbox there is no container runtime, so they run as processes of this machine with the
sandbox kubeconfig, configured the way the operator configures them (actions and plugins below).
KAI's pod-group controller is not run: in v0.12.0 it ignores its metrics address flag and always
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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox.control_plane import LOOPBACK, Component, Layout

SCHEDULER_NAME = "kai-scheduler"
QUEUE_LABEL = "kai.scheduler/queue"
GPU_FRACTION_ANNOTATION = "gpu-fraction"
# Where KAI's binder puts the GPU-sharing configuration of a fractional pod: a ConfigMap name
# prefix that KAI's admission webhook annotates the pod with.
SHARED_GPU_CONFIGMAP_ANNOTATION = "runai/shared-gpu-configmap"
GPU_GROUP_LABEL = "runai-gpu-group"
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
) -> dict[str, Any]:
    """A KAI Queue. GPU quota, weight and limit as declared; CPU and memory are not limited by
    clusterproof (quota -1 means unlimited in KAI's API)."""
    spec: dict[str, Any] = {
        "resources": {
            "gpu": {
                "quota": _number(gpu_quota),
                "overQuotaWeight": _number(over_quota_weight),
                "limit": -1 if gpu_limit is None else _number(gpu_limit),
            },
            "cpu": _unlimited(),
            "memory": _unlimited(),
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
    """Loopback ports of KAI's components on the sandbox, after the control plane's."""

    base: int

    def port(self, offset: int) -> int:
        return self.base + 10 + offset


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
                "--metrics-listen-address=%s" % address(8),
            ),
            url(8, "/metrics"),
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
                "--listen-address=%s" % address(0),
                "--plugin-server-port=%d" % ports.port(1),
            ),
            url(0, "/metrics"),
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
    total = 0.0
    for container in pod.spec.containers:
        resources = container.resources
        amount = (resources.limits or {}).get("nvidia.com/gpu") or (resources.requests or {}).get("nvidia.com/gpu")
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


def project_queue(project: Mapping[str, Any]) -> dict[str, Any]:
    return queue_manifest(
        project["name"],
        project["gpu_quota"],
        project["over_quota_weight"],
        project.get("gpu_limit"),
        DEPARTMENT_QUEUE,
        project.get("priority"),
    )
