"""Sandbox-only GPU agent: answers KAI's GPU reservation pods with a GPU, as a node's agent would.

SANDBOX ONLY. Real sites never run this. It reaches the API server through the client layer
(``kube.client``), as every module does.

For GPU fractions, KAI's binder places a "reservation pod" on the chosen node and waits until it
carries the annotation ``run.ai/reserve_for_gpu_index``: on real hardware the pod's own container
reads the GPU it was given from NVML and writes that GPU's UUID there. KWOK's simulated nodes run
no container, so this process does that part: it gives each reservation pod the lowest-numbered
simulated GPU of its node that no other reservation pod holds, and writes a UUID for it
(``GPU-sandbox-<node>-<index>``). run-ai's fake-gpu-operator does the same with a status updater
running in the cluster, which the sandbox cannot run (it needs a container runtime).

Run as a process::

    python -m ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox.gpu_agent \\
        --kubeconfig KUBECONFIG [--namespace kai-resource-reservation]
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube

RESERVED_GPU_ANNOTATION = "run.ai/reserve_for_gpu_index"
UUID_PREFIX = "GPU-sandbox-"


def gpu_uuid(node: str, index: int) -> str:
    return "%s%s-%d" % (UUID_PREFIX, node, index)


def index_of(uuid: str, node: str) -> int | None:
    prefix = "%s%s-" % (UUID_PREFIX, node)
    if uuid.startswith(prefix) and uuid[len(prefix) :].isdigit():
        return int(uuid[len(prefix) :])
    return None


def assign(pods: Iterable[Mapping[str, Any]], gpus_per_node: Mapping[str, int]) -> dict[str, str]:
    """Which reservation pods get which GPU UUID. Pure.

    ``pods`` are reservation pods as API dicts (metadata.name, metadata.annotations,
    spec.nodeName, metadata.deletionTimestamp). A pod already answered keeps its GPU; a pod on a
    node with no free GPU gets none (KAI's binder times out and tries again).
    """
    held: dict[str, set[int]] = {}
    waiting: list[tuple[str, str]] = []
    for pod in sorted(pods, key=lambda item: item["metadata"].get("creationTimestamp") or ""):
        metadata = pod["metadata"]
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or metadata.get("deletionTimestamp"):
            continue
        uuid = (metadata.get("annotations") or {}).get(RESERVED_GPU_ANNOTATION)
        if uuid:
            index = index_of(uuid, node)
            if index is not None:
                held.setdefault(node, set()).add(index)
        else:
            waiting.append((metadata["name"], node))
    answers = {}
    for name, node in waiting:
        taken = held.setdefault(node, set())
        free = [index for index in range(gpus_per_node.get(node, 0)) if index not in taken]
        if free:
            taken.add(free[0])
            answers[name] = gpu_uuid(node, free[0])
    return answers


def _gpus_per_node(core: Any) -> dict[str, int]:
    counts = {}
    for node in core.list_node(_request_timeout=10).items:
        allocatable = node.status.allocatable or {}
        counts[node.metadata.name] = int(allocatable.get("nvidia.com/gpu", "0"))
    return counts


# Waits between tries while the API server does not answer: doubling from the first, at most the last.
BACKOFF_FIRST = 0.5
BACKOFF_MAX = 10.0


def backoff(failures: int) -> float:
    """Seconds to wait after ``failures`` failed rounds in a row. Pure."""
    return min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** max(0, failures - 1))


def run(kubeconfig: str, namespace: str, interval: float) -> None:
    """Answer reservation pods until SIGTERM. The API server going away (restarted, shutting down)
    is waited out with backoff, as a node's agent would, rather than ending the agent."""
    api = kube.api_client(kubeconfig)
    core = kube.core_v1(api)
    stopping: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    failures = 0
    while not stopping:
        try:
            answer_once(api, core, namespace, interval)
        except kube.SERVER_AWAY_ERRORS as error:  # anything else is a bug, and ends the agent
            failures += 1
            wait = backoff(failures)
            print("API server not answering (%s); trying again in %.1f s" % (type(error).__name__, wait), flush=True)
            _sleep_unless(stopping, wait)
            continue
        if failures:
            print("API server answers again", flush=True)
        failures = 0
        time.sleep(0.05)


def answer_once(api: Any, core: Any, namespace: str, interval: float) -> None:
    """One round: give every waiting reservation pod a GPU, then wait until a reservation pod
    changes after that listing, or for ``interval`` seconds."""
    listing = core.list_namespaced_pod(namespace, _request_timeout=10)
    pods = [api.sanitize_for_serialization(pod) for pod in listing.items]
    for name, uuid in assign(pods, _gpus_per_node(core)).items():
        patch = {"metadata": {"annotations": {RESERVED_GPU_ANNOTATION: uuid}}}
        core.patch_namespaced_pod(name, namespace, patch, _request_timeout=10)
        print("gave %s the GPU %s" % (name, uuid), flush=True)
    kube.wait_for_change(core.list_namespaced_pod, namespace, listing.metadata.resource_version, max(1, int(interval)))


def _sleep_unless(stopping: list[bool], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not stopping and time.monotonic() < deadline:
        time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", default="kai-resource-reservation")
    parser.add_argument("--interval", type=float, default=5.0)
    args = parser.parse_args(argv)
    run(args.kubeconfig, args.namespace, args.interval)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
