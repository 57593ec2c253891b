"""The one waiter (common/wait.py): until what is looked at holds, or the time runs out."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import types

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.bundle import serve
from ansible_collections.clusterproof.gpu.plugins.module_utils.common import wait
from ansible_collections.clusterproof.gpu.plugins.module_utils.install import storage as install_storage
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.lab import machines
from ansible_collections.clusterproof.gpu.plugins.module_utils.lab.plan import LabHost
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import control_plane, lifecycle
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import scenario_runner as sr
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import storage as storage_validation
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import storage_probe


class FakeTime:
    """A clock that only moves when the waiter sleeps; records each sleep."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def counting(values):
    """A look that returns ``values`` in turn (the last one from then on), counting its calls."""
    seen = list(values)
    calls = []

    def look():
        calls.append(len(calls))
        return seen[min(len(calls) - 1, len(seen) - 1)]

    return look, calls


def test_a_value_that_holds_at_once_returns_without_sleeping():
    fake = FakeTime()
    look, calls = counting([True])
    waited = wait.wait_until(look, timeout=10, interval=1, clock=fake.clock, sleep=fake.sleep)
    assert waited == wait.Waited(True, True, 0.0)
    assert not waited.timed_out
    assert (len(calls), fake.sleeps) == (1, [])


def test_looks_every_interval_until_it_holds_and_returns_the_value_that_held():
    fake = FakeTime()
    look, calls = counting([1, 2, 3, 5, 8])
    waited = wait.wait_until(look, lambda n: n >= 5, timeout=10, interval=0.5, clock=fake.clock, sleep=fake.sleep)
    assert (waited.value, waited.held, waited.waited_s) == (5, True, 1.5)
    assert fake.sleeps == [0.5, 0.5, 0.5]
    assert len(calls) == 4


def test_the_time_running_out_returns_the_last_value_seen_as_the_reason():
    fake = FakeTime()
    look, calls = counting(["starting", "starting", "still starting", "ready"])
    waited = wait.wait_until(look, lambda s: s == "ready", timeout=2, interval=1, clock=fake.clock, sleep=fake.sleep)
    assert (waited.value, waited.held, waited.timed_out) == ("still starting", False, True)
    # Looked at 0 and 1 s, then once more when the time is up: the reason is what was seen last.
    assert len(calls) == 3 and fake.sleeps == [1, 1]
    assert waited.waited_s == 2


def test_no_time_at_all_still_looks_once():
    fake = FakeTime()
    look, calls = counting([False])
    waited = wait.wait_until(look, timeout=0, interval=1, clock=fake.clock, sleep=fake.sleep)
    assert (waited.held, len(calls)) == (False, 1)
    fake.now = 0.0
    look, calls = counting([False, True])
    fake.sleeps.clear()
    waited = wait.wait_until(look, timeout=-5, interval=1, clock=fake.clock, sleep=fake.sleep)
    assert (waited.held, len(calls), fake.sleeps) == (False, 1, [])


def test_a_look_that_raises_ends_the_wait():
    fake = FakeTime()

    def look():
        if fake.now >= 101:
            raise RuntimeError("the process exited while starting")
        return False

    with pytest.raises(RuntimeError, match="exited while starting"):
        wait.wait_until(look, timeout=10, interval=1, clock=fake.clock, sleep=fake.sleep)
    assert fake.sleeps == [1]


def test_by_default_the_real_clock_is_used():
    looks = []
    waited = wait.wait_until(lambda: looks.append(1) or len(looks) >= 2, timeout=5, interval=0.001)
    assert waited.held and len(looks) == 2 and 0 <= waited.waited_s < 5


# --- the waiter's users ---------------------------------------------------------------------------


class ServiceAccounts:
    """A CoreV1Api whose default ServiceAccount answers each status of ``answers`` in turn (200: found)."""

    def __init__(self, answers):
        self.answers = list(answers)

    def read_namespaced_service_account(self, name, namespace):
        status = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if status != 200:
            raise kube.ApiException(status=status, reason="Not Found" if status == 404 else "Forbidden")


def test_the_default_service_account_is_waited_for_and_its_absence_named(monkeypatch):
    accounts = ServiceAccounts([404, 404, 200])
    monkeypatch.setattr(kube, "core_v1", lambda api: accounts)
    kube.wait_for_default_service_account(None, "probe", timeout_s=30)
    assert accounts.answers == [200]
    monkeypatch.setattr(kube, "core_v1", lambda api: ServiceAccounts([404]))
    with pytest.raises(kube.KubeError, match="namespace probe has no default ServiceAccount after 0 s"):
        kube.wait_for_default_service_account(None, "probe", timeout_s=0)
    monkeypatch.setattr(kube, "core_v1", lambda api: ServiceAccounts([403]))
    with pytest.raises(kube.KubeError, match="reading the default ServiceAccount of namespace probe failed: 403"):
        kube.wait_for_default_service_account(None, "probe", timeout_s=30)


class CRDs:
    """An Applier's get: each CRD named in ``established`` is Established after ``polls`` reads."""

    def __init__(self, established, polls=1):
        self.established, self.polls, self.reads = set(established), polls, []

    def get(self, manifest):
        name = manifest["metadata"]["name"]
        self.reads.append(name)
        ready = name in self.established and self.reads.count(name) >= self.polls
        return {"status": {"conditions": [{"type": "Established", "status": "True" if ready else "False"}]}}


def test_crds_are_waited_for_in_turn_and_the_one_not_established_is_named():
    crds = CRDs({"a.x", "b.x"}, polls=2)
    kube.Applier.wait_established(crds, ["a.x", "b.x"], timeout=30)
    assert crds.reads == ["a.x", "a.x", "b.x", "b.x"]
    with pytest.raises(kube.KubeError, match="CRD c.x was not established within 0 s"):
        kube.Applier.wait_established(CRDs({"a.x"}), ["a.x", "c.x"], timeout=0)


def test_a_sandbox_component_is_ready_exited_or_late_and_answers_or_not(tmp_path, monkeypatch):
    layout = control_plane.Layout(tmp_path)
    component = control_plane.Component("etcd", ("etcd",), "https://127.0.0.1:1/readyz")
    looks = {"ready": [False, True], "pid": 7}
    monkeypatch.setattr(control_plane, "is_ready", lambda layout, component: looks["ready"].pop(0))
    monkeypatch.setattr(control_plane, "running_pid", lambda layout, name, argv=None: looks["pid"])
    control_plane.wait_ready(layout, component, timeout=30)
    looks["ready"] = [False, True]
    assert control_plane.answers(layout, component, grace=30)
    looks["ready"] = [False] * 3
    with pytest.raises(control_plane.SandboxError, match="etcd did not become ready at https://127.0.0.1:1/readyz"):
        control_plane.wait_ready(layout, component, timeout=0)
    looks["ready"] = [False] * 3
    assert not control_plane.answers(layout, component, grace=0)
    looks.update(ready=[False] * 3, pid=None)
    with pytest.raises(control_plane.SandboxError, match="etcd exited while starting"):
        control_plane.wait_ready(layout, component, timeout=30)
    looks["ready"] = [False] * 3
    assert not control_plane.answers(layout, component, grace=30)


class Nodes:
    """A CoreV1Api listing simulated nodes, one more Ready at each listing."""

    def __init__(self):
        self.ready = 0

    def list_node(self, **_):
        self.ready += 1
        conditions = [{"type": "Ready", "status": "True"}]
        return {
            "items": [{"metadata": {"name": f"n{i}"}, "status": {"conditions": conditions}} for i in range(self.ready)]
        }


def test_simulated_nodes_are_waited_for_and_the_number_ready_returned_either_way(monkeypatch):
    monkeypatch.setattr(lifecycle, "existing_nodes", lambda core: core.list_node()["items"])
    assert lifecycle.wait_nodes_ready(Nodes(), 2, timeout=30) == 2
    assert lifecycle.wait_nodes_ready(Nodes(), 5, timeout=0) == 1


IGNORES_TERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(60)"
)


def test_the_bundle_s_servers_are_stopped_and_one_that_ignores_sigterm_killed(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    polite = subprocess.Popen(["sleep", "60"], start_new_session=True)
    stubborn = subprocess.Popen([sys.executable, "-c", IGNORES_TERM], start_new_session=True, stdout=subprocess.PIPE)
    assert stubborn.stdout.readline()  # its handler is in place
    processes = [{"pid": p.pid, "start": serve._start_time(p.pid), "command": "x"} for p in (polite, stubborn)]
    (state / "serve.json").write_text(json.dumps({"processes": processes}))
    began = time.monotonic()
    assert serve.stop(state, timeout=0.5)
    took = time.monotonic() - began
    # Both end, the stubborn one killed once its 0.5 s were up (stop may have reaped them already).
    polite.wait(timeout=5)
    stubborn.wait(timeout=5)
    assert [serve._start_time(p["pid"]) for p in processes] == [None, None]
    assert 0.5 <= took < 10
    assert not (state / "serve.json").exists()


def test_lab_machines_are_powered_off_and_one_that_does_not_stop_is_killed():
    polite = subprocess.Popen(["sleep", "60"])
    stubborn = subprocess.Popen([sys.executable, "-c", IGNORES_TERM], stdout=subprocess.PIPE)
    assert stubborn.stdout.readline()
    try:
        began = time.monotonic()
        assert machines.stop({"lab-1": polite.pid, "lab-2": stubborn.pid}, seconds=0.5) == ["lab-2"]
        assert 0.5 <= time.monotonic() - began < 10
    finally:
        for process in (polite, stubborn):
            process.kill()
            process.wait()


def test_lab_hosts_are_waited_for_and_a_degraded_one_s_failed_units_restarted_once(monkeypatch):
    answers = {"lab-1": ["starting", "running"], "lab-2": ["degraded", "degraded", "running"]}
    commands = []
    monkeypatch.setattr(machines, "system_state", lambda layout, host: answers[host.name].pop(0))
    monkeypatch.setattr(machines, "failed_units", lambda layout, host: ["kubelet.service"])
    monkeypatch.setattr(machines, "ssh", lambda layout, address, command, timeout: commands.append(command))
    hosts = [LabHost("lab-1", "10.0.0.2"), LabHost("lab-2", "10.0.0.3")]
    states, restarted = machines.wait_running(None, hosts, timeout=30)
    assert states == {"lab-1": "running", "lab-2": "running"}
    assert restarted == {"lab-2": ["kubelet.service"]}
    assert commands == ["systemctl reset-failed kubelet.service; systemctl restart kubelet.service"]
    answers.update({"lab-1": ["starting"] * 3, "lab-2": ["running"]})
    states, _ = machines.wait_running(None, hosts, timeout=0)
    assert states == {"lab-1": "starting", "lab-2": "running"}


def listed(*items):
    return types.SimpleNamespace(items=list(items))


def ns(*names):
    return listed(*(types.SimpleNamespace(metadata=types.SimpleNamespace(name=name)) for name in names))


def pod(phase, node, unschedulable=False, deleted=False):
    conditions = [types.SimpleNamespace(type="PodScheduled", status="False")] if unschedulable else None
    return types.SimpleNamespace(
        metadata=types.SimpleNamespace(deletion_timestamp="2026-12-02T18:00:00Z" if deleted else None),
        status=types.SimpleNamespace(phase=phase, conditions=conditions),
        spec=types.SimpleNamespace(node_name=node),
    )


class Cluster:
    """A CoreV1Api whose listings answer each of the given lists in turn (the last from then on)."""

    def __init__(self, namespaces=(), pods=()):
        self.namespaces, self.pods, self.selectors = list(namespaces), list(pods), []

    def list_namespace(self):
        return self.namespaces.pop(0) if len(self.namespaces) > 1 else self.namespaces[0]

    def list_namespaced_pod(self, namespace, label_selector):
        self.selectors.append((namespace, label_selector))
        return self.pods.pop(0) if len(self.pods) > 1 else self.pods[0]


def test_a_scenario_s_namespaces_are_waited_for_until_gone(monkeypatch):
    run = types.SimpleNamespace(core=Cluster([ns("cp-a", "default"), ns("default")]))
    assert sr._Run._namespaces_gone(run, {"cp-a", "cp-b"})
    monkeypatch.setattr(sr, "CLEANUP_SECONDS", 0)
    run = types.SimpleNamespace(core=Cluster([ns("cp-a")]))
    assert not sr._Run._namespaces_gone(run, {"cp-a"})


def run_of(cluster, pods_first=True, shared=None, settle=0.0, **options):
    backend = types.SimpleNamespace(
        waiting_workloads_have_pods=pods_first,
        shared_gpu_group=lambda _pod: shared,
        shared_gpu_settle_seconds=settle,
    )
    return types.SimpleNamespace(core=cluster, backend=backend, options=sr.RunOptions(**options))


def test_the_engine_has_decided_about_a_workload_when_each_pod_runs_or_was_marked_unschedulable():
    assert sr.engine_decided([pod("Running", "n1"), pod("Pending", None, unschedulable=True)], 2)
    # Not yet looked at by the engine (no condition), or bound and not running yet: not decided.
    assert not sr.engine_decided([pod("Running", "n1"), pod("Pending", None)], 2)
    assert not sr.engine_decided([pod("Pending", "n1")], 1)
    # The controller has not made every pod yet; a pod on its way out does not count.
    assert not sr.engine_decided([pod("Running", "n1")], 2)
    assert not sr.engine_decided([pod("Running", "n1"), pod("Running", "n2", deleted=True)], 2)
    assert not sr.engine_decided([], 1)


def test_a_submitted_workload_is_waited_for_until_the_engine_decided_or_the_time_is_up():
    running = pod("Running", "n1"), pod("Running", "n2")
    cluster = Cluster(pods=[listed(), listed(pod("Pending", None), running[0]), listed(*running)])
    sr._Run._placed_or_waiting(run_of(cluster, decision_seconds=30), "cp-a", "train", pods_wanted=2)
    assert len(cluster.selectors) == 3 and cluster.selectors[0][0] == "cp-a"
    # Marked unschedulable: decided, the next may come (the step judges what runs).
    cluster = Cluster(pods=[listed(pod("Pending", None)), listed(pod("Pending", None, unschedulable=True))])
    sr._Run._placed_or_waiting(run_of(cluster, decision_seconds=30), "cp-a", "train")
    assert len(cluster.selectors) == 2
    # Never decided: it returns all the same once the time is up.
    cluster = Cluster(pods=[listed(pod("Pending", None))])
    sr._Run._placed_or_waiting(run_of(cluster, decision_seconds=0), "cp-a", "train")
    assert len(cluster.selectors) == 1


def test_after_a_fraction_runs_on_a_shared_gpu_the_next_arrival_waits_for_the_engine_s_cache():
    cluster = Cluster(pods=[listed(pod("Running", "n1"))])
    began = time.monotonic()
    sr._Run._placed_or_waiting(run_of(cluster, shared="gpu-group-1", settle=0.5, decision_seconds=30), "cp-a", "f")
    assert time.monotonic() - began >= 0.5
    # A whole-GPU pod, or a fraction not running yet (marked unschedulable), goes on at once.
    for shared, waiting in ((None, pod("Running", "n1")), ("gpu-group-1", pod("Pending", None, unschedulable=True))):
        began = time.monotonic()
        sr._Run._placed_or_waiting(
            run_of(Cluster(pods=[listed(waiting)]), shared=shared, settle=30, decision_seconds=30), "cp-a", "f"
        )
        assert time.monotonic() - began < 5


def test_after_a_fraction_runs_the_wait_is_as_long_as_the_engine_took_to_decide_within_its_floor_and_cap():
    assert sr.shared_gpu_settle(0.8, 2.0) == 2.0  # a quiet machine: the engine's floor
    assert sr.shared_gpu_settle(7.5, 2.0) == 7.5  # under load: as long as the decision took
    assert sr.shared_gpu_settle(400.0, 2.0) == sr.SHARED_GPU_SETTLE_CAP
    assert sr.shared_gpu_settle(7.5, 0.0) == 0.0  # an engine without shared GPUs never waits
    # Measured from the submission: a fraction that took a second to run waits a second at least.
    cluster = Cluster(pods=[listed(pod("Running", "n1"))])
    began = time.monotonic()
    sr._Run._placed_or_waiting(
        run_of(cluster, shared="gpu-group-1", settle=0.2, decision_seconds=30), "cp-a", "f", submitted=began - 1.0
    )
    assert time.monotonic() - began >= 0.9


def test_where_a_waiting_workload_has_no_pod_the_wait_is_for_it_to_run_at_most_arrival_seconds():
    cluster = Cluster(pods=[listed(), listed(pod("Running", "n1"))])
    sr._Run._placed_or_waiting(run_of(cluster, pods_first=False, arrival_seconds=30), "cp-a", "train")
    assert len(cluster.selectors) == 2
    # A suspended Job has no pod to mark: the bound is arrival_seconds, not decision_seconds.
    cluster = Cluster(pods=[listed()])
    began = time.monotonic()
    sr._Run._placed_or_waiting(
        run_of(cluster, pods_first=False, arrival_seconds=0, decision_seconds=30), "cp-a", "train"
    )
    assert time.monotonic() - began < 5 and len(cluster.selectors) == 1


class StorageCluster:
    """A CoreV1Api (and API client) for the storage probe: the namespace goes after
    ``namespace_reads`` reads; the retained volume is released at once and goes once deleted; the
    reader pod runs on ``node``, Ready unless ``node_ready`` is False."""

    def __init__(
        self,
        namespace_reads=2,
        reader_phases=("Pending", "Running", "Succeeded"),
        pinned="",
        node_ready=True,
        helpers=None,
        reclaim="",
    ):
        self.namespace_reads, self.reader_phases = namespace_reads, list(reader_phases)
        self.pinned, self.node_ready = pinned, node_ready
        self.deleted, self.created = [], []
        # local-path's helper pods (name -> JSON); the volume goes once one is made again (placed anew).
        self.helpers, self.helpers_deleted, self.helpers_made = dict(helpers or {}), [], []
        self.reclaim = reclaim or ("Delete" if self.pinned else "Retain")

    def sanitize_for_serialization(self, value):
        return value if isinstance(value, dict) else getattr(value, "as_json", {})

    def read_namespace(self, name):
        self.namespace_reads -= 1
        if self.namespace_reads < 0:
            raise kube.ApiException(status=404, reason="Not Found")

    def read_persistent_volume(self, name):
        if name in self.deleted or self.helpers_made:
            raise kube.ApiException(status=404, reason="Not Found")
        affinity = {}
        if self.pinned:
            term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [self.pinned]}]}
            affinity = {"nodeAffinity": {"required": {"nodeSelectorTerms": [term]}}}
        return types.SimpleNamespace(
            status=types.SimpleNamespace(phase="Released"),
            spec=types.SimpleNamespace(persistent_volume_reclaim_policy=self.reclaim),
            as_json={"spec": affinity},
        )

    def delete_persistent_volume(self, name):
        self.deleted.append(name)

    def create_namespaced_pod(self, namespace, manifest):
        if namespace == install_storage.LOCAL_PATH_NAMESPACE:
            assert manifest["metadata"]["name"] in self.helpers_deleted
            self.helpers_made.append(manifest)
            return
        self.created.append(manifest["metadata"]["name"])

    def read_namespaced_pod(self, name, namespace):
        if namespace == install_storage.LOCAL_PATH_NAMESPACE:
            if name not in self.helpers:
                raise kube.ApiException(status=404, reason="Not Found")
            return types.SimpleNamespace(as_json=self.helpers[name])
        phase = self.reader_phases.pop(0) if len(self.reader_phases) > 1 else self.reader_phases[0]
        return types.SimpleNamespace(
            status=types.SimpleNamespace(phase=phase), spec=types.SimpleNamespace(node_name="w-1")
        )

    def delete_namespaced_pod(self, name, namespace, grace_period_seconds=None):
        assert (namespace, grace_period_seconds) == (install_storage.LOCAL_PATH_NAMESPACE, 0)
        del self.helpers[name]
        self.helpers_deleted.append(name)

    def read_namespaced_pod_log(self, name, namespace):
        return "written by probe-0\n"

    def read_node(self, name):
        status = "True" if self.node_ready else "Unknown"
        return {"metadata": {"name": name}, "status": {"conditions": [{"type": "Ready", "status": status}]}}


def removal(cluster, timeout=30):
    done = storage_probe.Removal.__new__(storage_probe.Removal)
    done.api, done.core, done.timeout, done.stranded, done.helpers_moved = cluster, cluster, timeout, {}, {}
    return done


def ready_nodes(*names):
    return [
        {"metadata": {"name": name}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}} for name in names
    ]


def test_the_storage_probe_waits_for_its_namespace_and_volumes_to_go_and_names_what_is_left(monkeypatch):
    monkeypatch.setattr(storage_probe.kube, "list_nodes", lambda api: ready_nodes("w-1"))
    cluster = StorageCluster(namespace_reads=2)
    left = removal(cluster).wait_gone(["cp-storage"], ["pv-1"])
    assert (left.namespaces, left.volumes, cluster.deleted) == ([], [], ["pv-1"])
    left = removal(StorageCluster(namespace_reads=99), timeout=0).wait_gone(["cp-storage"], ["pv-1"])
    assert (left.namespaces, left.volumes) == (["cp-storage"], ["pv-1"])


def test_a_volume_pinned_to_a_node_that_is_not_ready_is_not_waited_for(monkeypatch):
    monkeypatch.setattr(storage_probe.kube, "list_nodes", lambda api: [])
    cluster = StorageCluster(namespace_reads=0, pinned="w-1")
    started = time.monotonic()
    gone = removal(cluster, timeout=30)
    left = gone.wait_gone(["cp-storage"], ["pv-1"])
    assert time.monotonic() - started < 5
    assert (left.namespaces, left.volumes, gone.stranded) == ([], ["pv-1"], {"pv-1": "w-1"})


def test_a_shared_volume_s_helper_pod_stuck_on_a_node_that_is_not_ready_is_removed_so_that_it_is_placed_anew(
    monkeypatch,
):
    # local-path v0.0.30 gives a shared volume's delete helper no node and a toleration of every
    # taint: the scheduler may bind it to a node whose kubelet is gone, where it never runs.
    down = {"metadata": {"name": "w-1"}, "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}
    monkeypatch.setattr(storage_probe.kube, "list_nodes", lambda api: [*ready_nodes("w-2"), down])
    name = install_storage.local_path_helper_pod_name("delete", "pv-1")
    stuck = {"metadata": {"name": name}, "spec": {"nodeName": "w-1"}, "status": {"phase": "Pending"}}
    cluster = StorageCluster(namespace_reads=0, helpers={name: stuck}, reclaim="Delete")
    gone = removal(cluster, timeout=30)
    left = gone.wait_gone(["cp-storage"], ["pv-1"])
    assert (left.volumes, cluster.helpers_deleted) == ([], [name])
    assert gone.helpers_moved == {"local-path-storage/" + name: "w-1"}
    # Made again under its name (the provisioner waits for that name), kept off the node not Ready.
    (made,) = cluster.helpers_made
    assert made["metadata"]["name"] == name and "nodeName" not in made["spec"]
    (term,) = made["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term["matchFields"] == [{"key": "metadata.name", "operator": "NotIn", "values": ["w-1"]}]
    # One on a Ready node is left to run; the wait names the volume when the time is up.
    running = {"metadata": {"name": name}, "spec": {"nodeName": "w-2"}, "status": {"phase": "Running"}}
    cluster = StorageCluster(namespace_reads=0, helpers={name: running}, reclaim="Delete")
    left = removal(cluster, timeout=0).wait_gone(["cp-storage"], ["pv-1"])
    assert (left.volumes, cluster.helpers_deleted) == (["pv-1"], [])


def test_a_helper_pod_is_stuck_only_when_bound_to_a_node_that_is_not_ready_and_not_ended():
    def helper(node, phase):
        return {"spec": {"nodeName": node}, "status": {"phase": phase}}

    assert storage_validation.helper_stuck_on(helper("w-1", "Pending"), ["w-2"]) == "w-1"
    assert storage_validation.helper_stuck_on(helper("w-1", "Running"), ["w-2"]) == "w-1"
    assert storage_validation.helper_stuck_on(helper("w-1", "Pending"), ["w-1"]) == ""
    assert storage_validation.helper_stuck_on(helper(None, "Pending"), []) == ""
    assert storage_validation.helper_stuck_on(helper("w-1", "Succeeded"), []) == ""
    assert storage_validation.helper_stuck_on({}, []) == ""
    # local-path's own naming, cut at 128 characters.
    assert install_storage.local_path_helper_pod_name("delete", "pvc-1") == "helper-pod-delete-pvc-1"
    assert len(install_storage.local_path_helper_pod_name("delete", "v" * 200)) == 128


def test_a_helper_pod_made_again_keeps_its_spec_and_affinity_without_its_node_token_or_status():
    # As the API server returns local-path's helper pod from clusterproof's template: bound, with the
    # service account token's volume the API server added.
    stuck = {
        "metadata": {
            "name": "helper-pod-delete-pv-1",
            "namespace": "local-path-storage",
            "uid": "u-1",
            "resourceVersion": "7",
            "labels": {"app": "helper"},
        },
        "spec": {
            "nodeName": "w-1",
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "clusterproof.io/sandbox-node", "operator": "DoesNotExist"}]}
                        ]
                    }
                }
            },
            "tolerations": [{"operator": "Exists"}],
            "volumes": [{"name": "data", "hostPath": {"path": "/srv/shared"}}, {"name": "kube-api-access-x1"}],
            "containers": [
                {
                    "name": "helper-pod",
                    "volumeMounts": [
                        {"name": "data", "mountPath": "/srv/shared"},
                        {"name": "kube-api-access-x1", "mountPath": "/var/run"},
                    ],
                }
            ],
        },
        "status": {"phase": "Pending"},
    }
    made = storage_validation.helper_placed_anew(stuck, ["w-3", "w-1"])
    assert made["metadata"] == {
        "name": "helper-pod-delete-pv-1",
        "namespace": "local-path-storage",
        "labels": {"app": "helper"},
    }
    assert "nodeName" not in made["spec"] and "status" not in made
    assert [volume["name"] for volume in made["spec"]["volumes"]] == ["data"]
    assert [mount["name"] for mount in made["spec"]["containers"][0]["volumeMounts"]] == ["data"]
    (term,) = made["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term == {
        "matchExpressions": [{"key": "clusterproof.io/sandbox-node", "operator": "DoesNotExist"}],
        "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["w-1", "w-3"]}],
    }
    assert made["spec"]["tolerations"] == [{"operator": "Exists"}]
    # The pod read is left as it was.
    assert stuck["spec"]["nodeName"] == "w-1" and len(stuck["spec"]["volumes"]) == 2


def test_the_cleanup_check_names_the_helper_pods_it_moved_and_passes():
    cleanup = storage_validation.Cleanup(helpers_moved={"local-path-storage/helper-pod-delete-pv-1": "w-1"})
    check = storage_validation.cleanup_check("cp-storage", cleanup)
    assert check.status == "pass", check
    assert "helper-pod-delete-pv-1 on w-1" in check.message
    assert check.observed["helper pods moved"] == {"local-path-storage/helper-pod-delete-pv-1": "w-1"}


def storage_probe_of(cluster):
    probe = storage_probe.Probe.__new__(storage_probe.Probe)
    probe.api, probe.core, probe.namespace, probe.volumes = cluster, cluster, "cp-storage", {"pv-1"}
    probe.image, probe.pods_run, probe.nodes, probe.lost = "busybox", True, ["w-1"], set()
    return probe


def test_the_storage_probe_reads_back_what_its_reader_printed_or_none_when_its_time_is_up_or_its_node_went():
    cluster = StorageCluster()
    claim = storage_validation.ClaimProbe("local-path", "ReadWriteOnce")
    assert storage_probe_of(cluster)._read_back(claim, "claim-a", time.monotonic() + 30) == "written by probe-0\n"
    assert cluster.created == ["claim-a-reader"]
    late = storage_probe_of(StorageCluster(reader_phases=["Pending"]))
    assert late._read_back(claim, "claim-a", time.monotonic()) is None and not claim.node_lost
    gone = storage_probe_of(StorageCluster(reader_phases=["Pending"], node_ready=False))
    assert gone._read_back(claim, "claim-a", time.monotonic() + 30) is None
    assert (claim.node_lost, claim.node_lost_why, gone.nodes) == ("w-1", "Ready=Unknown", [])


def test_each_served_version_of_a_crd_is_a_kind_to_wait_for_and_one_not_served_is_not():
    crd = {
        "spec": {
            "group": "scheduling.run.ai",
            "names": {"kind": "Queue"},
            "versions": [{"name": "v2", "served": True}, {"name": "v1", "served": False}, {"name": "v2alpha2"}],
        }
    }
    assert kube.served_kinds([crd]) == [("scheduling.run.ai/v2", "Queue"), ("scheduling.run.ai/v2alpha2", "Queue")]


class Discovery:
    """An Applier's serves: each kind is listed after ``polls`` asks (a group version served late)."""

    def __init__(self, served, polls=1):
        self.served, self.polls, self.asked = set(served), polls, []

    def serves(self, api_version, kind):
        self.asked.append(kind)
        return (api_version, kind) in self.served and self.asked.count(kind) >= self.polls


def test_kinds_are_waited_for_until_discovery_lists_them_and_the_one_never_served_is_named():
    discovery = Discovery({("x/v1", "Queue"), ("x/v1", "Topology")}, polls=2)
    kube.Applier.wait_served(discovery, [("x/v1", "Queue"), ("x/v1", "Topology")], timeout=30)
    assert discovery.asked == ["Queue", "Queue", "Topology", "Topology"]
    with pytest.raises(kube.KubeError, match="the API server did not serve BindRequest in x/v1 within 0 s"):
        kube.Applier.wait_served(Discovery(set()), [("x/v1", "BindRequest")], timeout=0)


def test_an_object_of_a_kind_not_served_fails_naming_the_kind_not_bare():
    # The client raises ResourceNotFoundError with no message; a module ended on it said only "Module failed.".
    from kubernetes.dynamic.exceptions import ResourceNotFoundError

    class Resources:
        def get(self, api_version, kind):
            raise ResourceNotFoundError

    applier = kube.Applier.__new__(kube.Applier)
    applier.dynamic = type("Dynamic", (), {"resources": Resources()})()
    with pytest.raises(kube.KubeError, match="the API server serves no Queue in scheduling.run.ai/v2: is its Cus"):
        applier.get({"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "root"}})
