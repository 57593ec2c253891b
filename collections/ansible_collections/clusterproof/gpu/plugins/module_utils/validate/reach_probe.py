"""Connections between projects tried with real pods: a server and its Service in each isolated
project's namespace, a client in the same namespace (the control) and one in another project's.

``validate.isolation`` makes the manifests and judges; this runs them where pods really run (not on
the sandbox). The pods go only to real nodes Ready when the run starts, are made by the caller's
credentials (an admin's: what is tried is the network, not admission), and are removed at the end,
with grace period 0; what an earlier run left (by the label ``clusterproof.io/probe=network``) is
removed first.

May import: ``kube.client``, ``common.wait``, ``validate.isolation``, the standard library. Touches: pods and
Services labelled ``clusterproof.io/probe=network`` in the projects' namespaces.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.common.wait import wait_until
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import isolation as isolation_validation

POLL_S = 1.0
# A container the runtime could not start (a systemd scope refused on a loaded host, say) is the
# node's trouble, not the network's: its pod is made again, up to this many starts in all.
START_TRIES = 3
GONE_TIMEOUT_S = 30.0
SELECTOR = "%s=%s" % (isolation_validation.REACH_LABEL, isolation_validation.REACH_LABEL_VALUE)


def _read_pod(core: Any, api: Any, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        return api.sanitize_for_serialization(core.read_namespaced_pod(name, namespace))
    except kube.ApiException as error:
        if error.status == 404:
            return None
        raise


def _phase_of(pod: dict[str, Any] | None) -> str | None:
    return ((pod or {}).get("status") or {}).get("phase")


def remove(api: Any, namespaces: Sequence[str]) -> None:
    """Delete the probe's pods and Services in ``namespaces`` (this run's, or an earlier run's)."""
    core = kube.core_v1(api)
    for namespace in namespaces:
        for pod in core.list_namespaced_pod(namespace, label_selector=SELECTOR).items:
            try:
                core.delete_namespaced_pod(pod.metadata.name, namespace, grace_period_seconds=0)
            except kube.ApiException as error:
                if error.status != 404:
                    raise
        for service in core.list_namespaced_service(namespace, label_selector=SELECTOR).items:
            try:
                core.delete_namespaced_service(service.metadata.name, namespace)
            except kube.ApiException as error:
                if error.status != 404:
                    raise


def _made_again(core: Any, api: Any, namespace: str, manifest: dict[str, Any]) -> bool:
    """Delete the pod ``manifest`` names (grace period 0) and make it anew once its name is free;
    False when the old one is still there after ``GONE_TIMEOUT_S``."""
    name = manifest["metadata"]["name"]
    try:
        core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    except kube.ApiException as error:
        if error.status != 404:
            raise
    if wait_until(
        lambda: _read_pod(core, api, namespace, name) is None, timeout=GONE_TIMEOUT_S, interval=POLL_S
    ).timed_out:
        return False
    core.create_namespaced_pod(namespace, manifest)
    return True


class _Pods:
    """The probe's pods by (namespace, name), each made again when the runtime could not start its
    container, up to ``START_TRIES`` starts in all."""

    def __init__(self, core: Any, api: Any) -> None:
        self.core, self.api = core, api
        self.manifests: dict[tuple[str, str], dict[str, Any]] = {}
        self.starts: dict[tuple[str, str], int] = {}
        self.made_again: dict[str, list[str]] = {}

    def make(self, namespace: str, manifest: dict[str, Any]) -> None:
        self.manifests[(namespace, manifest["metadata"]["name"])] = manifest
        self.starts[(namespace, manifest["metadata"]["name"])] = 1
        self.core.create_namespaced_pod(namespace, manifest)

    def read(self, namespace: str, name: str, target: str) -> dict[str, Any] | None:
        """The pod as it is; one that did not start is made again while it has starts left (and read
        as Pending), and noted under ``target``."""
        pod = _read_pod(self.core, self.api, namespace, name)
        said = isolation_validation.start_error(pod)
        if not said or self.starts[(namespace, name)] >= START_TRIES:
            return pod
        self.starts[(namespace, name)] += 1
        self.made_again.setdefault(target, []).append("%s/%s: %s" % (namespace, name, said))
        if not _made_again(self.core, self.api, namespace, self.manifests[(namespace, name)]):
            return pod
        return {"metadata": {"name": name}, "status": {"phase": "Pending", "reason": "made again"}}


def try_reach(
    api: Any, targets: Sequence[str], sources: dict[str, str], image: str, nodes: Sequence[str], timeout: float
) -> dict[str, isolation_validation.Reach]:
    """For each project in ``targets``: its server, then a client in its own namespace and one in
    ``sources[target]``'s; what each client found. A pod whose container the runtime could not
    start is made again (the network was not tried). Everything made is removed before returning."""
    core = kube.core_v1(api)
    pods = _Pods(core, api)
    namespaces = sorted(set(targets) | set(sources.values()))
    remove(api, namespaces)
    try:
        for target in targets:
            for manifest in isolation_validation.reach_server(target, image, nodes):
                if manifest["kind"] == "Pod":
                    pods.make(target, manifest)
                else:
                    core.create_namespaced_service(target, manifest)
        deadline = time.monotonic() + timeout
        servers = wait_until(
            lambda: {target: pods.read(target, isolation_validation.REACH_SERVER, target) for target in targets},
            lambda read: all(_phase_of(server) != "Pending" for server in read.values()),
            timeout=timeout,
            interval=POLL_S,
        ).value
        clients = [(namespace, target) for target in targets for namespace in (target, sources[target])]
        for namespace, target in clients:
            pods.make(namespace, isolation_validation.reach_client(namespace, target, image, nodes))
        # Until every client has ended (connected, refused, or its last start failed).
        read = wait_until(
            lambda: {
                (namespace, target): pods.read(namespace, isolation_validation.reach_client_name(target), target)
                for namespace, target in clients
            },
            lambda read: all(_phase_of(client) in ("Succeeded", "Failed") for client in read.values()),
            timeout=max(0.0, deadline - time.monotonic()),
            interval=POLL_S,
        ).value
        found = {key: isolation_validation.connection_of(client) for key, client in read.items()}
        results = {}
        for target in targets:
            own = found.get((target, target), isolation_validation.Connection(None, "not tried"))
            phase = _phase_of(servers.get(target)) or "missing"
            if own.connected is not True and phase != "Running":
                own = isolation_validation.Connection(own.connected, "%s; the server pod is %s" % (own.said, phase))
            results[target] = isolation_validation.Reach(
                own,
                sources[target],
                found.get((sources[target], target), isolation_validation.Connection(None, "not tried")),
                tuple(pods.made_again.get(target, ())),
            )
        return results
    finally:
        remove(api, namespaces)
