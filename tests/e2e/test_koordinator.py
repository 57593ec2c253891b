"""Koordinator's elastic quota tree on a sandbox of its own: the Alibaba guide's four Deployments
added one by one under koord-scheduler, the running replicas counted after each settles.

The guide expects 4 -> 4,4 -> 3,3,2 -> 2,2,2,2 (reclaim only up to the preemptor's min). What
Koordinator v1.7.0 does is what its runtime quota says (module_utils/scheduler/koordinator.py): the test
holds it to that prediction, computed from the tree and the pods' requests, and prints the tuples.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import build as sandbox_build
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import koordinator
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import quota_tree

from ..conftest import ALIBABA_QUOTA_TREE as TREE
from .conftest import ad_hoc, free_port_base, module_result, run_playbook, sandbox_down, sandbox_vars, wait_for
from .listeners import off_loopback, sandbox_listeners

pytestmark = pytest.mark.sandbox

NAMESPACES = ("namespace1", "namespace2", "namespace3", "namespace4")
REPLICAS, CPUS = 5, 5
NODE_CPUS = 40
# How long the counts must hold still to call a step settled: longer than the eviction delay plus a
# ReplicaSet's re-creation and a scheduling cycle.
DELAY_EVICT_SECONDS = 5
SETTLED_FOR = 15
# Koordinator's own root quota, the parent of a tree's root.
ROOT_QUOTA = "koordinator-root-quota"


def _inventory(directory: Path) -> Path:
    inventory = directory / "hosts.yml"
    control = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}
    inventory.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "children": {
                        "kube_control_plane": {"hosts": {"localhost": control}},
                        # One node with the guide's 40 cores.
                        "gpu_nodes": {"hosts": {"pool-1": {"gpu_count": 8, "node_cpu_cores": NODE_CPUS}}},
                    },
                    "vars": {"clusterproof_site_name": "koordinator-test"},
                }
            }
        )
    )
    return inventory


def _module(args: dict, *flags: str) -> tuple[int, dict]:
    """Run koordinator_scheduler on localhost, as an admin would ad hoc; its exit status and result."""
    done = ad_hoc("clusterproof.gpu.koordinator_scheduler", args, *flags)
    return done.returncode, module_result(done)


def _deployment(namespace: str) -> dict:
    """The guide's Deployment: 5 replicas of 5 cores (requests = limits) under koord-scheduler."""
    labels = {"app": namespace}
    resources = {"cpu": str(CPUS), "memory": "64Mi"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": namespace, "namespace": namespace},
        "spec": {
            "replicas": REPLICAS,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "schedulerName": koordinator.SCHEDULER_NAME,
                    "terminationGracePeriodSeconds": 0,
                    "containers": [
                        {"name": "main", "image": "busybox", "resources": {"requests": resources, "limits": resources}}
                    ],
                },
            },
        },
    }


def _quota(ports: koordinator.KoordinatorPorts, name: str) -> dict:
    """koord-scheduler's own view of a quota; empty until it knows it."""
    try:
        with urllib.request.urlopen(koordinator.quota_url(ports, name), timeout=5) as response:
            return json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError):
        return {}


def _running(core: client.CoreV1Api, namespaces: tuple[str, ...]) -> tuple[int, ...]:
    counts = []
    for namespace in namespaces:
        pods = core.list_namespaced_pod(namespace).items
        counts.append(
            sum(
                1
                for pod in pods
                if pod.spec.node_name and pod.status.phase == "Running" and pod.metadata.deletion_timestamp is None
            )
        )
    return tuple(counts)


def _settle(core: client.CoreV1Api, namespaces: tuple[str, ...], timeout: float = 180) -> tuple[int, ...]:
    """The running replicas once they have not changed for SETTLED_FOR seconds."""
    deadline = time.monotonic() + timeout
    last, since = _running(core, namespaces), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(1)
        now = _running(core, namespaces)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= SETTLED_FOR and sum(now) > 0:
            return now
    raise AssertionError("running replicas did not settle within %d s; last %s" % (timeout, last))


def test_koordinator_runs_the_guides_quota_tree(tmp_path):
    nodes, problems = quota_tree.check_tree(TREE)
    assert problems == []
    inventory = _inventory(tmp_path)
    state_dir, port_base = tmp_path / "state", free_port_base()
    build = sandbox_build.plan()
    scheduler = {
        "state_dir": str(state_dir),
        "bin_dir": str(build.bin_dir),
        "share_dir": str(build.share_dir),
        "port_base": port_base,
        "delay_evict_seconds": DELAY_EVICT_SECONDS,
    }
    try:
        up = run_playbook("playbooks/sandbox.yml", *sandbox_vars(state_dir, port_base), inventory=inventory)
        assert up.returncode == 0, up.tail(3000)
        rc, bad = _module({**scheduler, "delay_evict_seconds": -1})
        assert rc != 0 and "delay_evict_seconds" in bad["msg"] and "found -1" in bad["msg"], bad
        rc, planned = _module(scheduler, "--check")
        assert rc == 0 and planned["changed"] and planned["started"] == [koordinator.SCHEDULER_NAME], planned
        ports = koordinator.KoordinatorPorts(port_base)
        assert _quota(ports, "koordinator-root-quota") == {}, "check mode started koord-scheduler"
        rc, first = _module(scheduler)
        assert rc == 0 and first["started"] == [koordinator.SCHEDULER_NAME], first
        rc, again = _module(scheduler)
        assert rc == 0 and again["changed"] is False, again
        listeners = sandbox_listeners(state_dir)
        assert listeners.get(koordinator.SCHEDULER_NAME) and off_loopback(listeners) == {}, listeners
        rc, checked = _module(scheduler, "--check")
        assert rc == 0 and checked["changed"] is False, checked

        api = config.new_client_from_config(config_file=str(state_dir / "kubeconfig"))
        core = client.CoreV1Api(api)
        applier = kube.Applier(api)
        for namespace in NAMESPACES:
            applier.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        applier.refresh_discovery()
        for manifest in koordinator.tree_manifests(nodes):
            applier.apply(manifest)
        # koord-scheduler has taken the tree in once it answers for every node with its parent.

        def tree_known():
            return all(_quota(ports, node.name).get("parentName") == (node.parent or ROOT_QUOTA) for node in nodes)

        assert wait_for(tree_known, timeout=60), "koord-scheduler did not take in the quota tree"

        observed, predicted = [], []
        leaves = [node.name for node in quota_tree.leaves(nodes)]
        for step, namespace in enumerate(NAMESPACES, start=1):
            client.AppsV1Api(api).create_namespaced_deployment(namespace, _deployment(namespace))
            observed.append(_settle(core, NAMESPACES[:step]))
            # Every replica counts in its quota's request, pending or not.
            runtime = koordinator.runtime_quotas(nodes, {leaf: REPLICAS * CPUS for leaf in leaves[:step]}, NODE_CPUS)
            predicted.append(tuple(min(REPLICAS, int(runtime[leaf] // CPUS)) for leaf in leaves[:step]))
        print("koordinator: running replicas after each step:", observed, "predicted:", predicted)
        api.close()
        assert observed == predicted
        rc, stopped = _module({"state": "absent", "state_dir": str(state_dir)})
        assert rc == 0 and stopped["stopped"] == [koordinator.SCHEDULER_NAME], stopped
        assert _quota(ports, "root") == {}
        rc, stopped = _module({"state": "absent", "state_dir": str(state_dir)})
        assert rc == 0 and stopped["changed"] is False, stopped
    finally:
        _module({"state": "absent", "state_dir": str(state_dir)})
        down = sandbox_down(state_dir, port_base, inventory)
        assert down.returncode == 0, down.tail(3000)
