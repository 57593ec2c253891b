"""What an upgrade's drains took from the projects, and whether their work came back.

Before the upgrade, the projects' running work is counted by controller (the ReplicaSet, Job or
StatefulSet that makes an evicted pod again): ``running_work``. Before each drain, the projects' pods on
the node are what the drain evicts: ``evicted_from``. After the last node is schedulable again, a
controller has its work back when it runs as many pods as before the upgrade (one with no pod left
at all, a Job that finished or a workload deleted, has nothing to come back); a bare pod is never
made again. ``section`` is
the report's ``upgrade-disruption`` section: a check per project that lost pods, pass when all its
evicted work runs again, and a table of what each node's drain took.

Pure: the API's pods as plain dicts in, plain data and the report's section out. May import the
standard library, ``common/`` and ``report.model``. Touches nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.common.pods import (
    TERMINAL_PHASES,
    controller_of,
    holds_a_node,
    pod_whole_gpus,
)
from ansible_collections.clusterproof.gpu.plugins.module_utils.report.model import Check, Section, Table

SECTION_ID = "upgrade-disruption"
TITLE = "What the upgrade's drains took from the projects, and whether it came back"
BARE = "(bare pod)"


def running_work(pods: Iterable[Mapping[str, Any]], projects: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The projects' pods not finished, by controller uid: ``{project, owner, pods, gpus, waiting}`` each
    (``pods`` and ``gpus``: those running on a node; ``waiting``: those not running yet). A bare pod
    is keyed by its own name, as ``(bare pod)/<name>``."""
    wanted = set(projects)
    work: dict[str, dict[str, Any]] = {}
    for pod in pods:
        metadata = pod.get("metadata") or {}
        project = metadata.get("namespace")
        phase = (pod.get("status") or {}).get("phase")
        if project not in wanted or phase in TERMINAL_PHASES:
            continue
        controller = controller_of(pod)
        key = controller["uid"] if controller else "%s/%s" % (BARE, metadata.get("name", ""))
        owner = "%s/%s" % (controller["kind"], controller["name"]) if controller else key
        entry = work.setdefault(key, {"project": project, "owner": owner, "pods": 0, "gpus": 0.0, "waiting": 0})
        if holds_a_node(pod) and phase == "Running":
            entry["pods"] += 1
            entry["gpus"] += pod_whole_gpus(pod)
        else:
            entry["waiting"] += 1
    return work


def evicted_from(pods_on_node: Iterable[Mapping[str, Any]], projects: Iterable[str]) -> dict[str, dict[str, Any]]:
    """What a drain of the node takes from the projects: its projects' running pods there, by
    controller (as ``running_work``, without the pods that were not running)."""
    return {key: entry for key, entry in running_work(pods_on_node, projects).items() if entry["pods"]}


def not_back(
    drains: Mapping[str, Mapping[str, Mapping[str, Any]]],
    before: Mapping[str, Mapping[str, Any]],
    now: Mapping[str, Mapping[str, Any]],
) -> dict[str, list[str]]:
    """Per project, the evicted work that does not run again as before the upgrade: its owners, with
    how many pods run of how many. A controller with no pod left at all (a Job that finished, a
    workload deleted) has nothing to come back; a bare pod is never made again."""
    missing: dict[str, list[str]] = {}
    evicted = {key: entry for node in sorted(drains) for key, entry in drains[node].items()}
    for key, entry in sorted(evicted.items()):
        wanted = (before.get(key) or entry)["pods"]
        found = now.get(key) or {"pods": 0, "waiting": 0}
        if key.startswith(BARE):
            missing.setdefault(entry["project"], []).append("%s (nothing makes it again)" % entry["owner"])
        elif found["pods"] < wanted and (found["pods"] or found["waiting"]):
            missing.setdefault(entry["project"], []).append(
                "%s (%d of %d pods run, %d waiting)" % (entry["owner"], found["pods"], wanted, found["waiting"])
            )
    return missing


def section(
    drains: Mapping[str, Mapping[str, Mapping[str, Any]]],
    before: Mapping[str, Mapping[str, Any]],
    now: Mapping[str, Mapping[str, Any]],
    waited_s: float,
) -> Section:
    """The report's section: ``drains`` node -> what its drain evicted (``evicted_from``); ``before``
    and ``now``: ``running_work`` before the upgrade and once it waited ``waited_s`` after it."""
    lost: dict[str, dict[str, Any]] = {}
    rows = []
    for node in sorted(drains):
        by_project: dict[str, dict[str, Any]] = {}
        for entry in drains[node].values():
            counted = by_project.setdefault(entry["project"], {"pods": 0, "gpus": 0.0})
            counted["pods"] += entry["pods"]
            counted["gpus"] += entry["gpus"]
        for project, counted in sorted(by_project.items()):
            rows.append([node, project, counted["pods"], counted["gpus"]])
            total = lost.setdefault(project, {"pods": 0, "gpus": 0.0, "nodes": []})
            total["pods"] += counted["pods"]
            total["gpus"] += counted["gpus"]
            total["nodes"].append(node)
    missing = not_back(drains, before, now)
    checks = []
    for project, total in sorted(lost.items()):
        nodes = ", ".join(total["nodes"])
        taken = "%d pods (%g GPUs) evicted by the drains of %s" % (total["pods"], total["gpus"], nodes)
        back = project not in missing
        checks.append(
            Check(
                "%s/%s" % (SECTION_ID, project),
                "%s's evicted work runs again" % project,
                "pass" if back else "fail",
                expected="every evicted pod made again and running",
                observed="%d pods (%g GPUs) back" % (total["pods"], total["gpus"])
                if back
                else "; ".join(missing[project]),
                message="%s; all running again" % taken
                if back
                else "%s; not back %.0f s after the last node was schedulable: %s"
                % (taken, waited_s, "; ".join(missing[project])),
                category=None if back else "capacity",
                action=None
                if back
                else "look at why the pods do not run (kubectl -n %s get pods; the queue's quota and the nodes' "
                "GPUs); a bare pod must be started again by whoever started it" % project,
            )
        )
    if not checks:
        checks.append(
            Check(
                "%s/none" % SECTION_ID,
                "No project's pod was evicted",
                "pass",
                observed="drained: %s" % (", ".join(sorted(drains)) or "no node"),
                message="the drains evicted no project's running pod",
            )
        )
    table = Table(
        SECTION_ID + "/by-node",
        "What each node's drain evicted",
        ["Node", "Project", "Pods evicted", "GPUs evicted"],
        rows,
    )
    return Section(SECTION_ID, TITLE, checks, [table] if rows else [])
