"""What a pod holds, as the API server lists it: its whole GPUs, whether it runs on a node, what
controls it.

Pure: the API's pods as plain dicts (``metadata``, ``spec``, ``status``) in, numbers and names out.
Touches nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

GPU_RESOURCE = "nvidia.com/gpu"
TERMINAL_PHASES = ("Succeeded", "Failed")


def pod_whole_gpus(pod: Mapping[str, Any]) -> float:
    """Whole GPUs a pod requests (``nvidia.com/gpu``; a limit alone is its request), as kube-scheduler
    counts them."""
    total = 0.0
    for container in (pod.get("spec") or {}).get("containers") or ():
        resources = container.get("resources") or {}
        amount = (resources.get("requests") or {}).get(GPU_RESOURCE) or (resources.get("limits") or {}).get(
            GPU_RESOURCE
        )
        if amount is not None:
            total += float(amount)
    return total


def holds_a_node(pod: Mapping[str, Any]) -> bool:
    """Bound to a node and not finished: what it requests is taken there."""
    phase = (pod.get("status") or {}).get("phase")
    return bool((pod.get("spec") or {}).get("nodeName")) and phase not in TERMINAL_PHASES


def held_by_pods(pods: Iterable[Mapping[str, Any]], projects: Iterable[str]) -> dict[str, float]:
    """Whole GPUs the pods bound to a node, and not finished, hold in each project's namespace."""
    held = {project: 0.0 for project in projects}
    for pod in pods:
        namespace = (pod.get("metadata") or {}).get("namespace")
        if namespace in held and holds_a_node(pod):
            held[namespace] += pod_whole_gpus(pod)
    return held


def controller_of(pod: Mapping[str, Any]) -> dict[str, str] | None:
    """The pod's controller (``kind``, ``name``, ``uid``), which makes it again when it is evicted;
    None for a bare pod, which nothing makes again."""
    for owner in (pod.get("metadata") or {}).get("ownerReferences") or ():
        if owner.get("controller"):
            return {"kind": str(owner.get("kind", "")), "name": str(owner.get("name", "")), "uid": str(owner["uid"])}
    return None
