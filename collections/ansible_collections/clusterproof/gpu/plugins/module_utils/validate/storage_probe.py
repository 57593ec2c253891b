"""The storage probe on the cluster: claims and the pods that mount them, in a namespace of its own,
made, watched and removed; and what earlier probes left, found and removed first.

``validate.storage`` judges what this observes; the module ``validate_storage`` runs the two. The
probe's pods go only to the nodes that were Ready when the run started (``nodes``); while it waits
on a pod it watches that pod's node, and stops waiting when the node goes away (its kubelet cannot
start or report the pod). At the end it deletes the pods of nodes that are not Ready at once (grace
period 0: nobody is there to confirm they stopped, and the namespace and claims wait for them), then
the namespace, and waits for the volumes, except those pinned to a node that is not Ready. A shared
volume's local-path helper pod stuck on a node that is not Ready is made again, kept off such nodes:
the pinned local-path gives it no node and a toleration of every taint, the unreachable one too.

May import: ``kube.client``, ``install.storage`` (the probe's manifests), ``validate.storage``,
``common.wait``, the standard library. Touches: the probe's namespace (``clusterproof-storage-probe-<random>``), its
claims and pods, the volumes of those claims, earlier probes' namespaces and volumes, and local-path's
helper pods that remove those volumes (in ``local-path-storage``), when stuck on a node that is not Ready.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.common.wait import wait_until
from ansible_collections.clusterproof.gpu.plugins.module_utils.install import storage
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import storage as storage_validation

POLL_S = 0.5
# Where the scheduler chose to make a WaitForFirstConsumer claim's volume (set on the claim).
SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"


class Probe:
    """Creates the probe's objects in one namespace, waits on them, and removes them all."""

    def __init__(self, api: Any, namespace: str, params: Mapping[str, Any], nodes: Sequence[str]) -> None:
        self.core = kube.core_v1(api)
        self.api = api
        self.namespace = namespace
        self.image = params["probe_image"]
        self.size = params["claim_size"]
        self.timeout = params["timeout"]
        self.cleanup_timeout = params["cleanup_timeout"]
        # Where pods really run, they keep off simulated nodes and a reader checks what they wrote.
        self.pods_run = params["pods_run"]
        # The nodes Ready and schedulable when the run started: the only ones the pods may go to.
        self.nodes = list(nodes)
        # Those of them that went away during the run: later claims' pods keep off them.
        self.lost: set[str] = set()
        self.volumes: set[str] = set()

    def create_namespace(self) -> None:
        self.core.create_namespace(storage.probe_namespace(self.namespace))
        # Pods are refused (403) until the namespace's default ServiceAccount exists.
        kube.wait_for_default_service_account(self.api, self.namespace)

    def claim(self, name: str, cls: Any, access_mode: str, pods: Sequence[str]) -> storage_validation.ClaimProbe:
        """Claim ``cls`` and start ``pods`` mounting it; wait until it is Bound and they run, or
        until a node they were placed on goes away."""
        probe = storage_validation.ClaimProbe(cls.name, access_mode)
        if pods and not self.nodes:
            probe.error = "no node left to place the probe's pods on: %s went away during the run" % ", ".join(
                sorted(self.lost)
            )
            return probe
        started = time.monotonic()
        try:
            self.core.create_namespaced_persistent_volume_claim(
                self.namespace, storage.probe_claim(self.namespace, name, cls.name, access_mode, self.size)
            )
            # The first pod alone until the claim is Bound: while a WaitForFirstConsumer claim is
            # unbound, the scheduler holds every pod mounting it to the node it chose for the first,
            # and a shared claim is to be shown shared across nodes.
            created = list(pods[:1])
            for pod in created:
                self._start_pod(pod, name)
            deadline = started + self.timeout
            while True:
                self._observe(probe, name, created)
                if probe.phase == "Bound" and probe.bound_after_s is None:
                    probe.bound_after_s = round(time.monotonic() - started, 2)
                if probe.phase == "Bound" and len(created) < len(pods):
                    for pod in pods[len(created) :]:
                        self._start_pod(pod, name)
                    created = list(pods)
                    continue
                running = [pod for pod, (phase, _) in probe.pods.items() if phase in ("Running", "Succeeded")]
                if probe.phase == "Bound" and len(running) == len(pods):
                    if self.pods_run and pods:
                        probe.read_back = self._read_back(probe, name, deadline)
                    break
                # The claim's chosen node too: a WaitForFirstConsumer volume is made there before
                # the pod is bound, and never is while that node's kubelet is gone.
                if self._node_lost(probe, [node for _, node in probe.pods.values()] + [probe.selected_node]):
                    break
                if time.monotonic() > deadline:
                    probe.events = self._events(name)
                    break
                time.sleep(POLL_S)
        except kube.ApiException as error:
            probe.error = kube.api_error_message(error)
        return probe

    def _start_pod(self, pod: str, claim: str, reader: bool = False) -> None:
        manifest = storage.probe_pod(
            self.namespace, pod, claim, self.image, claim, self.pods_run or reader, reader=reader, nodes=self.nodes
        )
        self.core.create_namespaced_pod(self.namespace, manifest)

    def _read_back(self, probe: storage_validation.ClaimProbe, claim: str, deadline: float) -> str | None:
        """What a reader pod on ``claim`` prints of the probe file once it has ended, or None (its
        node went away, or the time ran out)."""
        reader = claim + "-reader"
        self._start_pod(reader, claim, reader=True)

        def ended_or_lost() -> bool:
            found = self.core.read_namespaced_pod(reader, self.namespace)
            if found.status.phase in ("Succeeded", "Failed"):
                return True
            if self._node_lost(probe, [found.spec.node_name or ""]):
                probe.pods[reader] = (found.status.phase or "", found.spec.node_name or "")
                return True
            return False

        if wait_until(ended_or_lost, timeout=deadline - time.monotonic(), interval=POLL_S).held and not probe.node_lost:
            return self.core.read_namespaced_pod_log(reader, self.namespace)
        return None

    def _node_lost(self, probe: storage_validation.ClaimProbe, nodes: Sequence[str]) -> bool:
        """Whether one of ``nodes`` (those the probe's pods were placed on) is no longer Ready; the
        first such node and its reason go into ``probe``."""
        for node in sorted({node for node in nodes if node}):
            try:
                found = self.api.sanitize_for_serialization(self.core.read_node(node))
            except kube.ApiException as error:
                if error.status != 404:
                    raise
                found = {}
            ready, why = storage_validation.ready_condition(found)
            if not ready:
                probe.node_lost, probe.node_lost_why = node, why or "deleted"
                self.lost.add(node)
                self.nodes = [name for name in self.nodes if name != node]
                return True
        return False

    def _observe(self, probe: storage_validation.ClaimProbe, name: str, pods: Sequence[str]) -> None:
        claim = self.core.read_namespaced_persistent_volume_claim(name, self.namespace)
        probe.phase = claim.status.phase or ""
        probe.selected_node = (claim.metadata.annotations or {}).get(SELECTED_NODE_ANNOTATION, "")
        probe.volume = claim.spec.volume_name or ""
        if probe.volume:
            self.volumes.add(probe.volume)
        for pod in pods:
            found = self.core.read_namespaced_pod(pod, self.namespace)
            probe.pods[pod] = (found.status.phase or "", found.spec.node_name or "")

    def _events(self, name: str) -> list[str]:
        try:
            events = self.core.list_namespaced_event(
                self.namespace, field_selector="involvedObject.name=%s" % name
            ).items
        except kube.ApiException:
            return []
        return ["%s: %s" % (event.reason, event.message) for event in events]

    def clean_up(self) -> storage_validation.Cleanup:
        """Delete the namespace (its claims and pods go with it; those of nodes that are not Ready
        at once), then wait for the volumes the claims had to go; a volume its class retains is
        deleted here, the probe made it."""
        cleanup = storage_validation.Cleanup()
        removal = Removal(self.api, self.cleanup_timeout)
        try:
            cleanup.forced_pods = removal.delete_namespaces([self.namespace])
        except kube.ApiException as error:
            cleanup.error = "deleting namespace %s: %s %s" % (self.namespace, error.status, error.reason)
        left = removal.wait_gone([self.namespace], sorted(self.volumes))
        cleanup.namespace_left = bool(left.namespaces)
        cleanup.volumes_left = left.volumes
        cleanup.stranded = {volume: removal.stranded[volume] for volume in left.volumes if volume in removal.stranded}
        cleanup.helpers_moved = dict(removal.helpers_moved)
        return cleanup


class Removal:
    """Deletes probe namespaces and waits for them and their volumes to go, sparing the wait for
    volumes pinned to a node that is not Ready (``stranded``: volume -> node), and moving the helper
    pod that removes a shared volume off a node that is not Ready (``helpers_moved``: pod -> node)."""

    def __init__(self, api: Any, timeout: float) -> None:
        self.api = api
        self.core = kube.core_v1(api)
        self.timeout = timeout
        self.stranded: dict[str, str] = {}
        self.helpers_moved: dict[str, str] = {}

    def _ready_nodes(self) -> list[str]:
        return self._readiness()[0]

    def _readiness(self) -> tuple[list[str], list[str]]:
        """The nodes' names, from one listing: those Ready, and those not."""
        ready: list[str] = []
        not_ready: list[str] = []
        for node in kube.list_nodes(self.api):
            (ready if storage_validation.ready_condition(node)[0] else not_ready).append(node["metadata"]["name"])
        return ready, not_ready

    def delete_namespaces(self, namespaces: Sequence[str]) -> dict[str, str]:
        """Delete each namespace, its pods on nodes that are not Ready first with grace period 0:
        the pods so removed, pod -> node."""
        forced: dict[str, str] = {}
        if not namespaces:
            return forced
        ready = self._ready_nodes()
        for namespace in namespaces:
            pods = [self.api.sanitize_for_serialization(pod) for pod in self.core.list_namespaced_pod(namespace).items]
            for pod, node in storage_validation.stranded_pods(pods, ready).items():
                try:
                    self.core.delete_namespaced_pod(pod, namespace, grace_period_seconds=0)
                except kube.ApiException as error:
                    if error.status != 404:
                        raise
                forced["%s/%s" % (namespace, pod)] = node
            try:
                self.core.delete_namespace(namespace, propagation_policy="Foreground")
            except kube.ApiException as error:
                if error.status != 404:
                    raise
        return forced

    def wait_gone(self, namespaces: Sequence[str], volumes: Sequence[str]) -> storage_validation.Leftovers:
        """Wait up to the timeout for ``namespaces`` and ``volumes`` to go (deleting a Released volume
        its class retains); a volume pinned to a node that is not Ready is not waited for. What is
        still there at the end."""

        def look() -> tuple[storage_validation.Leftovers, bool]:
            left = storage_validation.Leftovers(
                [namespace for namespace in namespaces if self._exists(self.core.read_namespace, namespace)]
            )
            waiting = False
            readiness: tuple[list[str], list[str]] | None = None
            for volume in volumes:
                found = self._read_volume(volume)
                if found is None:
                    continue
                left.volumes.append(volume)
                if found.status.phase == "Released" and found.spec.persistent_volume_reclaim_policy == "Retain":
                    self.core.delete_persistent_volume(volume)
                node = storage_validation.volume_node(self.api.sanitize_for_serialization(found))
                readiness = self._readiness() if readiness is None else readiness
                ready, not_ready = readiness
                if node and node not in ready:
                    self.stranded[volume] = node
                    continue
                # A helper pod can only be stuck where a node is not Ready: else it is not looked for.
                if not node and not_ready:
                    self._move_stuck_helper(volume, ready, not_ready)
                self.stranded.pop(volume, None)
                waiting = True
            return left, waiting

        waited = wait_until(
            look, lambda seen: not seen[0].namespaces and not seen[1], timeout=self.timeout, interval=POLL_S
        )
        return waited.value[0]

    def _move_stuck_helper(self, volume: str, ready: Sequence[str], not_ready: Sequence[str]) -> None:
        """Place anew local-path's helper pod removing ``volume`` when it is bound to a node that is
        not Ready, where it never runs: delete it at once (grace period 0) and make it again, the same
        pod under the same name, kept off the nodes that are not Ready. The provisioner, which waits
        for a pod of that name to succeed, takes the new one for its own. A shared volume's helper pod
        has no node of its own and tolerates every taint (the pinned local-path, the newest the module
        proxy serves); left to the provisioner's retries, the scheduler puts it back on the dead node,
        which holds the fewest pods (CI's lab runs saw it twice)."""
        name = storage.local_path_helper_pod_name("delete", volume)
        try:
            pod = self.api.sanitize_for_serialization(self.core.read_namespaced_pod(name, storage.LOCAL_PATH_NAMESPACE))
        except kube.ApiException as error:
            if error.status == 404:
                return
            raise
        node = storage_validation.helper_stuck_on(pod, ready)
        if not node:
            return
        try:
            self.core.delete_namespaced_pod(name, storage.LOCAL_PATH_NAMESPACE, grace_period_seconds=0)
        except kube.ApiException as error:
            if error.status != 404:
                raise
        try:
            self.core.create_namespaced_pod(
                storage.LOCAL_PATH_NAMESPACE, storage_validation.helper_placed_anew(pod, not_ready)
            )
        except kube.ApiException as error:
            if error.status != 409:  # the provisioner has made it again already: the scheduler places that one
                raise
        self.helpers_moved["%s/%s" % (storage.LOCAL_PATH_NAMESPACE, name)] = node

    def _read_volume(self, name: str) -> Any:
        try:
            return self.core.read_persistent_volume(name)
        except kube.ApiException as error:
            if error.status == 404:
                return None
            raise

    @staticmethod
    def _exists(read: Any, name: str) -> bool:
        try:
            read(name)
        except kube.ApiException as error:
            if error.status == 404:
                return False
            raise
        return True


def remove_leftovers(
    api: Any, current: str, timeout: float
) -> tuple[storage_validation.Leftovers, storage_validation.Leftovers, dict[str, str]]:
    """What earlier probes left (found by label and by their claims' namespace), removed: (found,
    still there after the wait, volumes still pinned to a node that is not Ready)."""
    core = kube.core_v1(api)
    namespaces = [
        api.sanitize_for_serialization(item)
        for item in core.list_namespace(label_selector="%s=%s" % (storage.PROBE_LABEL, storage.PROBE_LABEL_VALUE)).items
    ]
    volumes = [api.sanitize_for_serialization(item) for item in core.list_persistent_volume().items]
    found = storage_validation.find_leftovers(namespaces, volumes, current)
    if not found:
        return found, storage_validation.Leftovers(), {}
    removal = Removal(api, timeout)
    removal.delete_namespaces(found.namespaces)
    # wait_gone deletes the Released volumes a class retains: the probe made them.
    remaining = removal.wait_gone(found.namespaces, found.volumes)
    return found, remaining, dict(removal.stranded)
