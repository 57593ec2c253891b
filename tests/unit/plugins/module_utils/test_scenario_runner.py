"""The scenario runner's pure parts: which objects are an earlier run's leftovers, when a node or
the engine keeps a step from settling, and how the cause of a stop reads."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import registry
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import scenario_runner as sr
from tests.conftest import REPO


def obj(name: str, **labels: str) -> dict:
    return {"metadata": {"name": name, "labels": labels}}


def test_leftovers_are_the_labelled_objects_with_the_prefix():
    objects = [
        obj("scn-team-a", **{sr.RUN_LABEL: "20250101T000000Z-12"}),
        obj("scn-scenarios", **{sr.RUN_LABEL: "another-run"}),
        obj("scn-team-b"),  # not a scenario run's: left alone
        obj("team-a", **{sr.RUN_LABEL: "x"}),  # another prefix: left alone
        {"metadata": {"name": "scn-no-labels", "labels": None}},
    ]
    assert sr.leftovers(objects, "scn-") == ["scn-scenarios", "scn-team-a"]
    assert sr.leftovers(objects, "other-") == []


def node(name: str, status: str | None, reason: str = "", message: str = "") -> dict:
    conditions = [] if status is None else [{"type": "Ready", "status": status, "reason": reason, "message": message}]
    return {
        "metadata": {"name": name},
        "status": {"conditions": [{"type": "MemoryPressure", "status": "False"}, *conditions]},
    }


def test_a_node_the_scenario_uses_that_is_missing_or_not_ready_is_named_with_its_condition():
    nodes = [node("dgx1-1", "True"), node("dgx1-2", "False", "KubeletNotReady", "held by a test"), node("x", None)]
    assert sr.node_problem(nodes, ["dgx1-1"]) is None
    assert sr.node_problem(nodes, ["dgx1-1", "dgx1-2"]) == (
        "node dgx1-2 is NotReady (Ready=False; KubeletNotReady: held by a test)"
    )
    assert sr.node_problem(nodes, ["x"]) == "node x is NotReady (Ready=missing)"
    assert sr.node_problem(nodes, ["dgx1-3"]) == "node dgx1-3 is not in the cluster"
    assert sr.node_problem([node("u", "Unknown")], ["u"]) == "node u is NotReady (Ready=Unknown)"


@pytest.mark.parametrize("engine", registry.names())
def test_the_engine_is_healthy_only_when_each_of_its_processes_runs(engine):
    backend = registry.backend(engine)
    assert backend.health_processes, "every engine names the processes its health depends on"
    running = {name: (100 + index, "S") for index, name in enumerate(backend.health_processes)}
    assert backend.health_problem(running) is None
    first = backend.health_processes[0]
    assert backend.health_problem({**running, first: (7, "T")}) == (
        "%s is not responding: its process (pid 7) is stopped (state T) and places nothing" % first
    )
    assert backend.health_problem({**running, first: None}) == (
        "%s is not running (no live process of it on the sandbox)" % first
    )


def pod(name: str, phase: str, *ready: bool, waiting: str = "") -> dict:
    containers = [
        {
            "name": "c%d" % index,
            "ready": flag,
            "state": {"waiting": {"reason": waiting}} if waiting else {"running": {}},
        }
        for index, flag in enumerate(ready)
    ]
    return {"metadata": {"name": name}, "status": {"phase": phase, "containerStatuses": containers}}


@pytest.mark.parametrize("engine", registry.names())
def test_off_the_sandbox_the_engine_is_healthy_only_when_its_pods_are_ready(engine):
    backend = registry.backend(engine)
    namespace = backend.system_namespace
    healthy = [pod("scheduler-0", "Running", True, True), pod("hook", "Succeeded", False)]
    assert backend.cluster_health_problem(healthy) is None
    crashing = [*healthy, pod("binder-1", "Running", True, False, waiting="CrashLoopBackOff")]
    assert backend.cluster_health_problem(crashing) == (
        "%s/binder-1 is not ready (phase Running; CrashLoopBackOff): the engine may place nothing" % namespace
    )
    assert backend.cluster_health_problem([pod("new", "Pending")]) == (
        "%s/new is not ready (phase Pending): the engine may place nothing" % namespace
    )
    # No pod there: the engine runs outside the cluster (the sandbox's processes), not judged here.
    assert backend.cluster_health_problem([pod("hook", "Succeeded", False)]) is None
    assert backend.cluster_health_problem([]) is None


def test_process_state_reads_a_stopped_process_as_t():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        pid, state = sr.process_state(child.pid)
        assert pid == child.pid and state in ("R", "S", "D")  # starting up (reading its files), or asleep
        child.send_signal(signal.SIGSTOP)
        deadline = time.monotonic() + 5
        while sr.process_state(child.pid) != (child.pid, "T") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sr.process_state(child.pid) == (child.pid, "T")
    finally:
        child.kill()
        child.wait()
    assert sr.process_state(child.pid) is None
    assert sr.process_state(None) is None


class Pool:
    host, port = "127.0.0.1", 16443


class MaxRetryError(Exception):
    """What urllib3 raises when the API server refuses connections (its pool and reason)."""

    def __init__(self) -> None:
        super().__init__("HTTPSConnectionPool(host='127.0.0.1', port=16443): Max retries exceeded")
        self.pool = Pool()
        self.reason = Exception(
            "<urllib3.connection.HTTPSConnection object at 0x7f>: Failed to establish a new connection: "
            "[Errno 111] Connection refused"
        )


def test_the_cause_of_a_stop_reads_as_a_sentence():
    assert sr._brief(MaxRetryError()) == (
        "the API server at 127.0.0.1:16443 cannot be reached: [Errno 111] Connection refused"
    )
    assert sr._brief(sr.Unhealthy("node dgx1-2 is NotReady")) == "node dgx1-2 is NotReady"
    assert sr._brief(sr.Interrupted("interrupted by SIGINT")) == "interrupted by SIGINT"
    assert sr._brief(KeyError("spec")) == "KeyError: 'spec'"


def test_an_error_the_runner_did_not_foresee_is_the_scenario_s_failed_check_not_a_traceback():
    def connect():
        raise AssertionError("nothing may be reached once the run stopped")

    scenario = REPO / "scenarios" / "fractional-gpus.yml"
    nodes = [{"name": "dgx1-1", "gpu_count": "eight"}]
    result = sr.run(scenario, nodes, registry.backend("kai"), sr.RunOptions(), connect)
    assert result.error == "ValueError: invalid literal for int() with base 10: 'eight'"
    (check,) = result.section["checks"]
    assert (check["id"], check["status"]) == ("scenario/fractional-gpus/stopped", "fail")
    assert check["message"] == (
        "scenario fractional-gpus stopped: ValueError: invalid literal for int() with base 10: 'eight'; "
        "nothing was changed"
    )
    assert result.to_dict()["failed_checks"] == 1 and result.to_dict()["stopped"] == result.error


def test_a_workload_whose_pods_are_refused_fails_the_step_with_the_refusal():
    # Found on the lab: KAI's admission gives GPU pods runtimeClassName nvidia; without the class
    # every pod is refused and the step would only wait out its timeout.
    events = [
        {
            "reason": "FailedCreate",
            "involvedObject": {"kind": "Job", "namespace": "team-a", "name": "other"},
            "message": "not ours",
        },
        {
            "reason": "FailedCreate",
            "involvedObject": {"kind": "Job", "namespace": "scn-team-a", "name": "a-1-g"},
            "message": 'pods "a-1-g-" is forbidden: pod rejected: RuntimeClass "nvidia" not found',
        },
    ]
    assert sr.refused_pods(events, "scn-") == (
        'the pods of job scn-team-a/a-1-g are refused: pods "a-1-g-" is forbidden: pod rejected: '
        'RuntimeClass "nvidia" not found'
    )
    assert sr.refused_pods(events[:1], "scn-") is None


def _pod(namespace, name, node, cpus, phase="Running", owner=None):
    from types import SimpleNamespace as NS

    owners = [NS(kind=owner)] if owner else None
    container = NS(resources=NS(requests={"cpu": cpus}, limits=None))
    return NS(
        metadata=NS(namespace=namespace, name=name, owner_references=owners),
        spec=NS(node_name=node, containers=[container]),
        status=NS(phase=phase),
    )


def test_only_pods_that_take_from_the_scenario_s_nodes_keep_it_from_starting():
    # Found on the lab: a real cluster's engine, CNI and DNS pods request CPU on its real hosts, and
    # its DaemonSets run on the simulated nodes too; none of that takes from the scenario.
    from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import workloads

    pods = [
        _pod("kai-scheduler", "binder", "lab-worker-1", "100m"),
        _pod("kube-system", "coredns", "lab-cp-1", "100m"),
        _pod("kube-flannel", "flannel-x", "dgx1-1", "100m", owner="DaemonSet"),
        _pod("team-a", "notebook", "dgx1-1", "2"),
        _pod("team-b", "waiting", None, "1", phase="Pending"),
        _pod("team-c", "done", "dgx1-1", "4", phase="Succeeded"),
        _pod("scn-root-a-1", "ours", "dgx1-1", "5"),
    ]
    busy = sr.foreign_pods(pods, {"scn-root-a-1"}, {"dgx1-1"}, workloads.pod_cpus)
    assert busy == ["team-a/notebook", "team-b/waiting"]


def test_a_node_s_daemonsets_are_what_a_cpu_scenario_is_sized_without():
    from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import workloads

    pods = [
        _pod("kube-flannel", "flannel-1", "dgx1-1", "100m", owner="DaemonSet"),
        _pod("kube-system", "proxy-1", "dgx1-1", "0", owner="DaemonSet"),
        _pod("kube-flannel", "flannel-2", "dgx1-2", "100m", owner="DaemonSet"),
        _pod("kube-flannel", "flannel-3", "gone", "100m", phase="Failed", owner="DaemonSet"),
        _pod("team-a", "notebook", "dgx1-1", "2"),
    ]
    assert sr.daemonset_requests(pods, workloads.pod_cpus) == {"dgx1-1": 0.1, "dgx1-2": 0.1}


def test_an_api_refusal_reads_as_the_api_servers_message():
    from kubernetes.client.rest import ApiException

    refused = ApiException(status=403, reason="Forbidden")
    refused.body = json.dumps(
        {
            "message": 'pods "a" is forbidden: error looking up service account scn-x/default: '
            'serviceaccount "default" not found'
        }
    )
    assert sr._brief(refused) == (
        '403 Forbidden: pods "a" is forbidden: error looking up service account scn-x/default: '
        'serviceaccount "default" not found'
    )
    bare = ApiException(status=500, reason="Internal Server Error")
    bare.body = "not json"
    assert sr._brief(bare) == "500 Internal Server Error"


def test_a_step_still_changing_at_its_timeout_fails_saying_so_and_the_bench_counts_it_a_difference():
    from bench.differential_bench import differences

    scenario = sr.load(REPO / "scenarios" / "fractional-gpus.yml")
    check = sr.unsettled_check(scenario, 0, sr.RunOptions(settle_seconds=6, step_timeout=180))
    assert (check["id"], check["status"], check["expected"], check["observed"]) == (
        "scenario/fractional-gpus/1/settled",
        "fail",
        "no change for 6 s",
        "still changing after 180 s",
    )
    assert check["message"].startswith(
        "%s of scenario fractional-gpus did not settle within step_timeout (180 s)" % scenario.steps[0].name
    )
    assert differences({"checks": [check], "tables": []}) == [
        "%s: the allocation settles: engine still changing after 180 s, model no change for 6 s"
        % scenario.steps[0].name
    ]


def test_a_step_that_never_settles_says_what_changed_last():
    before = sr.scenarios.Observation({"q1": 8.0, "q4": 0.0}, ("j1",), ("j5",))
    after = sr.scenarios.Observation({"q1": 4.0, "q4": 4.0}, ("j5",), ("j1",))
    assert sr.change_between(before, after) == "j1 running -> waiting; j5 waiting -> running; q1 8 -> 4; q4 0 -> 4"
    assert sr.change_between(None, after) == "the first observation"
    assert sr.change_between(after, after) == "no change"
    scenario = sr.load(REPO / "scenarios" / "fractional-gpus.yml")
    check = sr.unsettled_check(scenario, 0, sr.RunOptions(step_timeout=180), "at 179 s, j1 running -> waiting")
    assert check["observed"] == "still changing after 180 s; the last change at 179 s, j1 running -> waiting"
