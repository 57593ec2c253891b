"""Connections between projects tried with real pods: a server and its Service in each isolated
project's namespace, a client in the same namespace (the control) and one in another project's.

``validate.isolation`` makes the manifests and judges; this runs them where pods really run (not on
the sandbox). The pods go only to real nodes Ready when the run starts, are made by the caller's
credentials (an admin's: what is tried is the network, not admission), and are removed at the end,
with grace period 0; what an earlier run left (by the label ``clusterproof.io/probe=network``) is
removed first.

May import: ``kube.client``, ``validate.isolation``, the standard library. Touches: pods and
Services labelled ``clusterproof.io/probe=network`` in the projects' namespaces.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import isolation as isolation_validation

POLL_S = 1.0
SELECTOR = "%s=%s" % (isolation_validation.REACH_LABEL, isolation_validation.REACH_LABEL_VALUE)


def _phase(core: Any, api: Any, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        return api.sanitize_for_serialization(core.read_namespaced_pod(name, namespace))
    except kube.ApiException as error:
        if error.status == 404:
            return None
        raise


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


def try_reach(
    api: Any, targets: Sequence[str], sources: dict[str, str], image: str, nodes: Sequence[str], timeout: float
) -> dict[str, isolation_validation.Reach]:
    """For each project in ``targets``: its server, then a client in its own namespace and one in
    ``sources[target]``'s; what each client found. Everything made is removed before returning."""
    core = kube.core_v1(api)
    namespaces = sorted(set(targets) | set(sources.values()))
    remove(api, namespaces)
    try:
        for target in targets:
            for manifest in isolation_validation.reach_server(target, image, nodes):
                if manifest["kind"] == "Pod":
                    core.create_namespaced_pod(target, manifest)
                else:
                    core.create_namespaced_service(target, manifest)
        deadline = time.monotonic() + timeout
        waiting = set(targets)
        servers: dict[str, dict[str, Any] | None] = {}
        while waiting and time.monotonic() < deadline:
            for target in sorted(waiting):
                servers[target] = _phase(core, api, target, isolation_validation.REACH_SERVER)
                if ((servers[target] or {}).get("status") or {}).get("phase") != "Pending":
                    waiting.discard(target)
            if waiting:
                time.sleep(POLL_S)
        for target in targets:
            for namespace in (target, sources[target]):
                core.create_namespaced_pod(
                    namespace, isolation_validation.reach_client(namespace, target, image, nodes)
                )
        clients = [(namespace, target) for target in targets for namespace in (target, sources[target])]
        found: dict[tuple[str, str], isolation_validation.Connection] = {}
        while time.monotonic() < deadline:
            for namespace, target in clients:
                pod = _phase(core, api, namespace, isolation_validation.reach_client_name(target))
                found[(namespace, target)] = isolation_validation.connection_of(pod)
            if all(connection.connected is not None for connection in found.values()):
                break
            time.sleep(POLL_S)
        results = {}
        for target in targets:
            own = found.get((target, target), isolation_validation.Connection(None, "not tried"))
            server = servers.get(target)
            phase = ((server or {}).get("status") or {}).get("phase") or "missing"
            if own.connected is not True and phase != "Running":
                own = isolation_validation.Connection(own.connected, "%s; the server pod is %s" % (own.said, phase))
            results[target] = isolation_validation.Reach(
                own,
                sources[target],
                found.get((sources[target], target), isolation_validation.Connection(None, "not tried")),
            )
        return results
    finally:
        remove(api, namespaces)
