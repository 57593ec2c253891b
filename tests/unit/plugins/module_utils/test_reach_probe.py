"""The connection probe between projects (validate.reach_probe) against a fake CoreV1Api: what the
clients found, and pods whose container the runtime could not start made again.

Stop 42's CI run failed a lab check because the project's own client pod never ran: containerd
could not make its systemd scope ("unable to apply cgroup configuration"), and the pod, with
restartPolicy Never, ended Failed. That said nothing about the network.
"""

from __future__ import annotations

import time
import types

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import isolation as checks
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import reach_probe

SCOPE_REFUSED = (
    "failed to create containerd task: failed to create shim task: OCI runtime create failed: unable to apply "
    "cgroup configuration: error creating systemd unit `cri-containerd-77d7.scope`: got `failed`: unknown"
)


def _not_found() -> kube.ApiException:
    return kube.ApiException(status=404, reason="Not Found")


class ProbeCluster:
    """Pods that end at once: a server runs; a client connects from its target's namespace and is
    refused from any other; the first ``start_failures[(namespace, name)]`` starts of a pod end
    Failed with the kubelet's StartError."""

    def __init__(self, start_failures=None):
        self.start_failures = dict(start_failures or {})
        self.pods, self.services, self.made, self.deleted = {}, set(), [], []

    def sanitize_for_serialization(self, value):
        return value

    def create_namespaced_pod(self, namespace, manifest):
        key = (namespace, manifest["metadata"]["name"])
        assert key not in self.pods, "a pod's name is taken until it is gone"
        assert manifest["spec"]["restartPolicy"] == "Never"
        self.made.append(key)
        if self.start_failures.get(key, 0) > 0:
            self.start_failures[key] -= 1
            terminated = {"reason": "StartError", "exitCode": 128, "message": SCOPE_REFUSED}
            self.pods[key] = {
                "status": {"phase": "Failed", "containerStatuses": [{"state": {"terminated": terminated}}]}
            }
        elif key[1] == checks.REACH_SERVER:
            self.pods[key] = {"status": {"phase": "Running"}}
        elif key[1] == checks.reach_client_name(namespace):
            terminated = {"reason": "Completed", "exitCode": 0}
            self.pods[key] = {
                "status": {"phase": "Succeeded", "containerStatuses": [{"state": {"terminated": terminated}}]}
            }
        else:
            terminated = {"reason": "Error", "exitCode": 1, "message": "nc: timed out\n"}
            self.pods[key] = {
                "status": {"phase": "Failed", "containerStatuses": [{"state": {"terminated": terminated}}]}
            }

    def read_namespaced_pod(self, name, namespace):
        if (namespace, name) not in self.pods:
            raise _not_found()
        return self.pods[(namespace, name)]

    def delete_namespaced_pod(self, name, namespace, grace_period_seconds=None):
        assert grace_period_seconds == 0
        if self.pods.pop((namespace, name), None) is None:
            raise _not_found()
        self.deleted.append((namespace, name))

    def list_namespaced_pod(self, namespace, label_selector):
        assert label_selector == reach_probe.SELECTOR
        names = [name for pod_namespace, name in self.pods if pod_namespace == namespace]
        return types.SimpleNamespace(
            items=[types.SimpleNamespace(metadata=types.SimpleNamespace(name=n)) for n in names]
        )

    def create_namespaced_service(self, namespace, manifest):
        self.services.add((namespace, manifest["metadata"]["name"]))

    def list_namespaced_service(self, namespace, label_selector):
        names = [name for service_namespace, name in self.services if service_namespace == namespace]
        return types.SimpleNamespace(
            items=[types.SimpleNamespace(metadata=types.SimpleNamespace(name=n)) for n in names]
        )

    def delete_namespaced_service(self, name, namespace):
        self.services.discard((namespace, name))


@pytest.fixture
def probe(monkeypatch):
    """try_reach for team-b (from team-a) on a ProbeCluster, and the cluster."""
    monkeypatch.setattr(reach_probe, "POLL_S", 0.0)
    monkeypatch.setattr(reach_probe.kube, "core_v1", lambda api: api)

    def run(cluster, timeout=30.0):
        return reach_probe.try_reach(cluster, ["team-b"], {"team-b": "team-a"}, "busybox", ["w-1"], timeout)["team-b"]

    return run


def test_a_pod_whose_container_did_not_start_is_not_read_as_refused():
    failed = {"reason": "StartError", "exitCode": 128, "message": SCOPE_REFUSED + "\n"}
    pod = {"status": {"phase": "Failed", "containerStatuses": [{"state": {"terminated": failed}}]}}
    assert checks.start_error(pod) == SCOPE_REFUSED
    assert checks.connection_of(pod) == checks.Connection(None, "its container did not start: " + SCOPE_REFUSED)
    refused = {"status": {"phase": "Failed", "containerStatuses": [{"state": {"terminated": {"reason": "Error"}}}]}}
    assert checks.start_error(refused) == "" and checks.connection_of(refused).connected is False
    assert checks.start_error(None) == "" and checks.start_error({"status": {"phase": "Pending"}}) == ""


def test_the_own_and_the_other_project_s_clients_are_read_back_and_everything_made_is_removed(probe):
    cluster = ProbeCluster()
    reach = probe(cluster)
    assert reach == checks.Reach(
        checks.Connection(True, "Completed"), "team-a", checks.Connection(False, "nc: timed out")
    )
    assert (cluster.pods, cluster.services) == ({}, set())
    assert checks.reach_check("team-b", True, reach).status == "pass"


def test_a_server_or_client_whose_container_did_not_start_is_made_again_and_named_in_the_check(probe):
    own = ("team-b", checks.reach_client_name("team-b"))
    cluster = ProbeCluster({("team-b", checks.REACH_SERVER): 1, own: 2})
    reach = probe(cluster)
    assert (reach.own.connected, reach.other.connected) == (True, False)
    assert cluster.made.count(own) == 3 and cluster.made.count(("team-b", checks.REACH_SERVER)) == 2
    assert reach.made_again == (
        "team-b/%s: %s" % (checks.REACH_SERVER, SCOPE_REFUSED),
        "team-b/%s: %s" % (own[1], SCOPE_REFUSED),
        "team-b/%s: %s" % (own[1], SCOPE_REFUSED),
    )
    check = checks.reach_check("team-b", True, reach)
    assert check.status == "pass"
    assert check.observed["pods made again after their container did not start"] == list(reach.made_again)
    assert cluster.pods == {}


def test_a_client_that_never_starts_ends_the_wait_and_fails_the_check_with_the_runtime_s_words(probe):
    own = ("team-b", checks.reach_client_name("team-b"))
    cluster = ProbeCluster({own: reach_probe.START_TRIES})
    started = time.monotonic()
    reach = probe(cluster, timeout=60.0)
    # Not waited out: the last start ended Failed, nothing more will come of it.
    assert time.monotonic() - started < 10
    assert cluster.made.count(own) == reach_probe.START_TRIES
    assert reach.own == checks.Connection(None, "its container did not start: " + SCOPE_REFUSED)
    check = checks.reach_check("team-b", True, reach)
    assert check.status == "fail" and "its container did not start" in check.message
