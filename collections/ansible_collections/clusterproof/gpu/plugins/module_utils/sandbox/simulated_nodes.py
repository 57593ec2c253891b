"""Simulated GPU nodes for a real cluster without GPUs: KWOK nodes attached to its API server.

TEST BEDS ONLY (the lab, docs/lab.md). A cluster installed on hosts without GPUs can still run the
fairness scenarios on its real, Helm-installed scheduler when it has GPU nodes to schedule on: as in
the sandbox, KWOK simulates Node objects that advertise GPUs and fakes the pods bound to them. Here
KWOK runs *beside* the cluster, as a process of the machine Ansible runs on, with a copy of the
cluster's admin kubeconfig, and for KAI's GPU fractions the sandbox GPU agent answers the
reservation pods (``sandbox.gpu_agent``). The nodes carry the sandbox's label, so the report says
they are simulated, and only they are ever deleted.

State directory layout (default ``~/.local/state/clusterproof/simulated/<site>``)::

    kubeconfig            the cluster's admin kubeconfig (mode 0600)
    kwok.yaml             the KWOK stages in force (the sandbox's)
    logs/<process>.log    each process's output
    run/<process>.json    pid, start time, command line of each process started

May import: ``kube.base``, ``kube.client``, ``sandbox.control_plane``, ``sandbox.lifecycle``. Touches: the state
directory, the processes it starts, and the cluster's Node objects labelled as simulated.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import base as kube_base
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import control_plane, lifecycle
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox.control_plane import (
    Component,
    Layout,
    SandboxError,
)

KWOK = "kwok"
GPU_AGENT = "gpu-agent"
PROCESSES = (KWOK, GPU_AGENT)
AGENT_MODULE = "ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox.gpu_agent"
# Where KAI's binder puts the reservation pods of GPU fractions (its chart's default).
RESERVATION_NAMESPACE = "kai-resource-reservation"
# Every simulated node of a real cluster carries this taint (KWOK's own convention): the cluster's
# real workloads (a chart's Deployment, a probe pod) never land where no container would run; the
# validator's workloads tolerate it (tenancy.workloads.SIMULATED_NODE_TOLERATION).
SIMULATED_TAINT = {"key": control_plane.KWOK_NODE_ANNOTATION, "value": "fake", "effect": "NoSchedule"}
# Pod addresses KWOK gives the simulated pods on a node without a pod CIDR: apart from the
# cluster's own pod network (flannel's 10.244.0.0/16), so no Service ever reaches a fake address
# that a real pod holds.
SIMULATED_POD_CIDR = "10.254.0.0/16"
# What present writes in its state directory (the module docstring's layout), and absent removes.
STATE_ENTRIES = ("kubeconfig", "kubeconfig.tmp", "kwok.yaml", "kwok.yaml.tmp", "logs", "run")


def components(layout: Layout, kwok_binary: Path, port: int, gpu_agent: bool, agent_pythonpath: str) -> list[Component]:
    """KWOK (and the GPU agent) pointed at the cluster through ``layout.kubeconfig``. Pure."""
    kubeconfig = str(layout.kubeconfig)
    wanted = [
        Component(
            KWOK,
            (
                str(kwok_binary),
                "--kubeconfig=%s" % kubeconfig,
                "--config=%s" % layout.kwok_config,
                "--manage-all-nodes=false",
                "--manage-nodes-with-annotation-selector=%s=fake" % control_plane.KWOK_NODE_ANNOTATION,
                "--cidr=%s" % SIMULATED_POD_CIDR,
                "--node-ip=10.0.0.1",
                "--node-lease-duration-seconds=40",
                "--server-address=%s:%d" % (control_plane.LOOPBACK, port),
            ),
            "http://%s:%d/healthz" % (control_plane.LOOPBACK, port),
        )
    ]
    if gpu_agent:
        argv = (
            sys.executable,
            "-m",
            AGENT_MODULE,
            "--kubeconfig=%s" % kubeconfig,
            "--namespace=%s" % RESERVATION_NAMESPACE,
        )
        wanted.append(Component(GPU_AGENT, argv, "", env=(("PYTHONPATH", agent_pythonpath),)))
    return wanted


def node_manifest(node: Mapping[str, Any]) -> dict[str, Any]:
    """The sandbox's Node for a declared node, without the ``kubernetes.io/os`` label: a simulated
    node runs no operating system, and a real cluster's DaemonSets (its CNI, kube-proxy), which
    select Linux nodes, stay off it instead of taking a share of its CPU that the scenarios count on.
    Pure."""
    manifest = control_plane.node_manifest(node)
    del manifest["metadata"]["labels"]["kubernetes.io/os"]
    return manifest


def tainted(node: Mapping[str, Any]) -> dict[str, Any]:
    """A declared node with the simulated-node taint after its own taints. Pure."""
    taints = [dict(taint) for taint in node.get("taints") or [] if taint.get("key") != SIMULATED_TAINT["key"]]
    return {**node, "taints": [*taints, dict(SIMULATED_TAINT)]}


def _write(path: Path, text: str, mode: int) -> bool:
    """Write ``text`` to ``path`` with ``mode`` unless it holds that already; whether it wrote."""
    if path.exists() and path.read_text() == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(str(path) + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(text)
    os.replace(str(path) + ".tmp", path)
    return True


def present(
    layout: Layout,
    kubeconfig: str,
    stages: str,
    kwok_binary: Path,
    nodes: Sequence[Mapping[str, Any]],
    port: int,
    gpu_agent: bool,
    agent_pythonpath: str,
    timeout: float,
    check_mode: bool,
) -> dict[str, Any]:
    """Make the declared simulated nodes exist and Ready, with KWOK (and the agent) running."""
    nodes = [tainted(node) for node in nodes]
    wanted = components(layout, kwok_binary, port, gpu_agent, agent_pythonpath)
    running = [c.name for c in wanted if control_plane.runs_as_declared(layout, c)]
    unwanted = [name for name in PROCESSES if name not in {c.name for c in wanted}]
    stale = [name for name in unwanted if control_plane.running_pid(layout, name) is not None]
    files_differ = not (
        layout.kubeconfig.exists()
        and layout.kubeconfig.read_text() == kubeconfig
        and layout.kwok_config.exists()
        and layout.kwok_config.read_text() == stages
    )
    if check_mode:
        # Nothing is written: the cluster's nodes are read through a passing copy of the kubeconfig.
        with tempfile.TemporaryDirectory(prefix="clusterproof-simulated-") as scratch:
            _write(Path(scratch) / "kubeconfig", kubeconfig, 0o600)
            core = kube.core_v1(kube.api_client(str(Path(scratch) / "kubeconfig")))
            plan = control_plane.plan_nodes(nodes, lifecycle.existing_nodes(core), node_manifest)
        changed = files_differ or plan.changed or bool(stale) or len(running) < len(wanted)
        return {"changed": changed, "started": [], "nodes": _summary(plan)}
    changed = _write(layout.kubeconfig, kubeconfig, 0o600)
    changed = _write(layout.kwok_config, stages, 0o644) or changed
    for name in stale:
        control_plane.stop(layout, name)
    if changed:
        # KWOK reads its kubeconfig and stages once: it starts again with the new ones.
        for component in wanted:
            control_plane.stop(layout, component.name)
    started = control_plane.run_components(layout, wanted, timeout)
    core = lifecycle.node_api(layout)
    plan = control_plane.plan_nodes(nodes, lifecycle.existing_nodes(core), node_manifest)
    lifecycle.apply_node_plan(core, plan)
    ready = lifecycle.wait_nodes_ready(core, len(nodes), timeout)
    if ready < len(nodes):
        raise SandboxError(
            "%d of %d simulated nodes are Ready after %.0f s; KWOK's log: %s"
            % (ready, len(nodes), timeout, layout.log(KWOK))
        )
    return {
        "changed": changed or bool(started) or bool(stale) or plan.changed,
        "started": started,
        "nodes": _summary(plan),
    }


def absent(layout: Layout, check_mode: bool) -> dict[str, Any]:
    """Delete the simulated nodes (while the cluster answers), stop the processes, and remove what
    ``present`` wrote in the state directory (``lab down`` runs it before the lab goes)."""
    running = [name for name in PROCESSES if control_plane.running_pid(layout, name) is not None]
    deleted: list[str] = []
    # A cluster already gone (its hosts taken down) holds no nodes to delete.
    if layout.kubeconfig.exists() and _answers(layout.kubeconfig):
        core = lifecycle.node_api(layout)
        try:
            deleted = [node["metadata"]["name"] for node in lifecycle.existing_nodes(core)]
        except Exception as error:
            # Something took the connection that is not the cluster's API server: with the lab's
            # bridge gone its address routes to the default gateway, where a transparent proxy
            # accepts any port (its certificate is not the cluster's). The cluster is gone as well.
            if kube_base.unreachable_message(error) is None:
                raise
        if deleted and not check_mode:
            lifecycle.apply_node_plan(core, control_plane.NodePlan([], [], deleted))
    if not check_mode:
        for name in running:
            control_plane.stop(layout, name)
    removed = _remove_state(layout, check_mode)
    return {"changed": bool(running or deleted or removed), "stopped": running, "deleted": deleted}


def _remove_state(layout: Layout, check_mode: bool) -> bool:
    """Remove the state ``present`` wrote (the gone cluster's admin kubeconfig, the KWOK stages, the
    logs and process records), then the directory when nothing else is in it: a directory given
    that holds other files keeps them. Whether there was any."""
    found = [layout.root / name for name in STATE_ENTRIES if (layout.root / name).exists()]
    if check_mode:
        return bool(found)
    for path in found:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    if layout.root.is_dir() and not any(layout.root.iterdir()):
        layout.root.rmdir()
    return bool(found)


def _answers(kubeconfig: Path, timeout: float = 3.0) -> bool:
    """Whether the API server the kubeconfig names accepts a connection."""
    try:
        config = yaml.safe_load(kubeconfig.read_text())
        server = urllib.parse.urlsplit(config["clusters"][0]["cluster"]["server"])
        socket.create_connection((server.hostname, server.port or 443), timeout=timeout).close()
    except (OSError, ValueError, KeyError, IndexError, TypeError, yaml.YAMLError):
        return False
    return True


def _summary(plan: control_plane.NodePlan) -> dict[str, list[str]]:
    return {
        "created": [node["metadata"]["name"] for node in plan.create],
        "updated": [node["metadata"]["name"] for node in plan.replace],
        "deleted": list(plan.delete),
    }
