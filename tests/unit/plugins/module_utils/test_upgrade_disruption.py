"""What an upgrade's drains took from the projects and whether it came back (maintenance/disruption.py),
and the filters upgrade.yml counts it with."""

from __future__ import annotations

import json
import types

from ansible_collections.clusterproof.gpu.plugins.filter import maintenance as filters
from ansible_collections.clusterproof.gpu.plugins.module_utils.maintenance import disruption
from ansible_collections.clusterproof.gpu.plugins.modules import upgrade_disruption

PROJECTS = ["team-a", "team-b"]


def pod(name, namespace="team-a", node="w-1", gpus=0, owner=("ReplicaSet", "train", "uid-train"), phase="Running"):
    metadata = {"name": name, "namespace": namespace}
    if owner:
        kind, owner_name, uid = owner
        metadata["ownerReferences"] = [{"kind": kind, "name": owner_name, "uid": uid, "controller": True}]
    resources = {"requests": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    return {
        "metadata": metadata,
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": resources}]},
        "status": {"phase": phase},
    }


def test_the_projects_running_work_is_counted_by_controller():
    pods = [
        pod("train-1", gpus=2),
        pod("train-2", node="w-2", gpus=2),
        pod("train-3", node=None, phase="Pending", gpus=2),  # made again, not running yet
        pod("done", owner=("Job", "once", "uid-once"), phase="Succeeded", gpus=4),  # finished: not counted
        pod("lonely", namespace="team-b", owner=None),
        pod("system", namespace="kube-system", gpus=1),  # no project's
    ]
    work = disruption.running_work(pods, PROJECTS)
    assert work == {
        "uid-train": {"project": "team-a", "owner": "ReplicaSet/train", "pods": 2, "gpus": 4.0, "waiting": 1},
        "(bare pod)/lonely": {"project": "team-b", "owner": "(bare pod)/lonely", "pods": 1, "gpus": 0.0, "waiting": 0},
    }
    # A drain evicts what runs there: the pending pod is nobody's loss.
    assert disruption.evicted_from([pods[0], pods[2]], PROJECTS) == {
        "uid-train": {"project": "team-a", "owner": "ReplicaSet/train", "pods": 1, "gpus": 2.0, "waiting": 1}
    }


def test_work_back_on_other_nodes_passes_and_the_table_names_each_drain():
    before = disruption.running_work([pod("train-1", gpus=2), pod("train-2", node="w-2", gpus=2)], PROJECTS)
    drains = {
        "w-1": disruption.evicted_from([pod("train-1", gpus=2)], PROJECTS),
        "w-2": disruption.evicted_from([pod("train-2", node="w-2", gpus=2)], PROJECTS),
    }
    now = disruption.running_work([pod("train-4", node="w-1", gpus=2), pod("train-5", gpus=2)], PROJECTS)
    assert disruption.not_back(drains, before, now) == {}
    section = disruption.section(drains, before, now, 12.0)
    (check,) = section.checks
    assert (check.id, check.status) == ("upgrade-disruption/team-a", "pass")
    assert check.message == "2 pods (4 GPUs) evicted by the drains of w-1, w-2; all running again"
    assert section.tables[0].rows == [["w-1", "team-a", 1, 2.0], ["w-2", "team-a", 1, 2.0]]


def test_work_still_waiting_and_a_bare_pod_fail_their_projects_checks():
    lonely = pod("lonely", namespace="team-b", owner=None)
    before = disruption.running_work([pod("train-1", gpus=2), pod("train-2", gpus=2), lonely], PROJECTS)
    drains = {"w-1": disruption.evicted_from([pod("train-1", gpus=2), pod("train-2", gpus=2), lonely], PROJECTS)}
    # One made again and running, one waiting for GPUs (its quota, a node short).
    now = disruption.running_work(
        [pod("train-3", node="w-2", gpus=2), pod("train-4", node=None, phase="Pending", gpus=2)], PROJECTS
    )
    missing = disruption.not_back(drains, before, now)
    assert missing == {
        "team-a": ["ReplicaSet/train (1 of 2 pods run, 1 waiting)"],
        "team-b": ["(bare pod)/lonely (nothing makes it again)"],
    }
    checks = {check.id: check for check in disruption.section(drains, before, now, 300.0).checks}
    failed = checks["upgrade-disruption/team-a"]
    assert (failed.status, failed.category) == ("fail", "capacity")
    assert failed.message == (
        "2 pods (4 GPUs) evicted by the drains of w-1; not back 300 s after the last node was schedulable: "
        "ReplicaSet/train (1 of 2 pods run, 1 waiting)"
    )
    assert checks["upgrade-disruption/team-b"].status == "fail"


def test_a_job_that_finished_meanwhile_has_nothing_to_come_back():
    job = ("Job", "once", "uid-once")
    before = disruption.running_work([pod("once-1", owner=job, gpus=1)], PROJECTS)
    drains = {"w-1": disruption.evicted_from([pod("once-1", owner=job, gpus=1)], PROJECTS)}
    now = disruption.running_work([pod("once-2", owner=job, phase="Succeeded", gpus=1)], PROJECTS)
    assert disruption.not_back(drains, before, now) == {}


def test_drains_that_evicted_nothing_say_so():
    section = disruption.section({"w-1": {}, "cp-1": {}}, {}, {}, 0.0)
    (check,) = section.checks
    assert (check.id, check.status, check.observed) == ("upgrade-disruption/none", "pass", "drained: cp-1, w-1")
    assert section.tables == []


def test_the_filters_count_the_declared_projects_and_gather_each_host_s_drain():
    site = {"projects": [{"name": "team-a"}, {"name": "team-b"}]}
    pods = [pod("train-1", gpus=2), pod("system", namespace="kube-system", gpus=1)]
    assert list(filters.project_work(pods, site)) == ["uid-train"]
    evicted = filters.drain_evicts(pods, site)
    hostvars = {"worker-1": {"upgrade_evicted": evicted}, "worker-2": {}}
    plan = {"nodes": {"worker-1": "w-1", "worker-2": "w-2"}}
    # worker-2 was not drained in this run (done before an interruption): not listed.
    assert filters.upgrade_drains(hostvars, plan) == {"w-1": evicted}


def test_the_module_hands_the_report_a_plain_section(monkeypatch):
    # The module's own I/O stands in for the API server here: the lab upgrade test runs it for real.
    running = [pod("train-9", node="w-2", gpus=2)]

    class Pods:
        def list_namespaced_pod(self, namespace, **_):
            items = [p for p in running if p["metadata"]["namespace"] == namespace]
            return types.SimpleNamespace(data=json.dumps({"items": items}).encode())

    monkeypatch.setattr(upgrade_disruption.kube, "api_client", lambda *_: None)
    monkeypatch.setattr(upgrade_disruption.kube, "core_v1", lambda _: Pods())
    before = disruption.running_work([pod("train-1", gpus=2)], PROJECTS)
    drains = {"w-1": disruption.evicted_from([pod("train-1", gpus=2)], PROJECTS)}
    params = {"drains": drains, "before": before, "projects": PROJECTS, "timeout": 5}
    params |= {"kubeconfig": None, "context": None, "request_timeout": 10}
    result = upgrade_disruption._work(types.SimpleNamespace(params=params))
    json.dumps(result)  # plain data, as Ansible returns it
    assert result["not_back"] == {}
    assert [check["status"] for check in result["section"]["checks"]] == ["pass"]
    assert result["section"]["tables"][0]["rows"] == [["w-1", "team-a", 1, 2.0]]
