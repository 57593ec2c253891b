"""The sandbox's up, status and down, as the sandbox_cluster module runs them.

``control_plane`` starts and stops the processes and plans the simulated nodes; this file puts
the plan through the sandbox's API server, waits for the nodes to be Ready, and says what a run
changed. May import: ``kube.client``, ``sandbox.control_plane``. Touches: the sandbox's state
directory, its processes and its Node objects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.common.wait import wait_until
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import control_plane
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox.control_plane import Layout, Ports, SandboxError


def node_api(layout: Layout) -> Any:
    return kube.core_v1(kube.api_client(str(layout.kubeconfig)))


def existing_nodes(core: Any) -> list[dict[str, Any]]:
    """The sandbox's simulated nodes, as JSON."""
    items = core.list_node(label_selector=f"{control_plane.SANDBOX_NODE_LABEL}=true").items
    return [core.api_client.sanitize_for_serialization(item) for item in items]


def apply_node_plan(core: Any, plan: control_plane.NodePlan) -> None:
    for manifest in plan.create:
        core.create_node(manifest)
    for manifest in plan.replace:
        name = manifest["metadata"]["name"]
        core.patch_node(name, {"metadata": {"labels": manifest["metadata"]["labels"]}, "spec": manifest["spec"]})
        core.patch_node_status(name, {"status": manifest["status"]})
    for name in plan.delete:
        core.delete_node(name)


def ready_count(nodes: Sequence[Mapping[str, Any]]) -> int:
    ready = 0
    for node in nodes:
        for condition in (node.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "Ready" and condition.get("status") == "True":
                ready += 1
    return ready


def wait_nodes_ready(core: Any, expected: int, timeout: float) -> int:
    """Wait until ``expected`` simulated nodes are Ready, or ``timeout``; the number Ready."""
    return wait_until(
        lambda: ready_count(existing_nodes(core)), lambda ready: ready >= expected, timeout=timeout, interval=0.5
    ).value


def missing(layout: Layout) -> str | None:
    """Why there is no sandbox at ``layout.root`` (no such directory, or one that an ``up`` did not
    make); None when there is one, running or not."""
    if not layout.root.is_dir():
        return "no sandbox in %s: the directory does not exist" % layout.root
    if not (layout.root / control_plane.MARKER).exists():
        return "no sandbox in %s: the directory holds no sandbox (no %s file)" % (layout.root, control_plane.MARKER)
    return None


def node_status(layout: Layout, bin_dir: Path, ports: Ports) -> dict[str, int]:
    """How many simulated nodes there are and how many are Ready; nothing when the API server does
    not answer (stopped, or shutting down)."""
    api_server = next(c for c in control_plane.components(layout, bin_dir, ports) if c.name == "kube-apiserver")
    if not _runs(layout, api_server.name) or not control_plane.is_ready(layout, api_server):
        return {}
    nodes = existing_nodes(node_api(layout))
    return {"simulated": len(nodes), "ready": ready_count(nodes)}


def _runs(layout: Layout, name: str) -> bool:
    return control_plane.running_pid(layout, name) is not None


def down(layout: Layout, names: Sequence[str], check_mode: bool) -> dict[str, Any]:
    """Stop every process the sandbox recorded and remove its state."""
    every = list(names) + [name for name in control_plane.recorded_components(layout) if name not in names]
    running = [name for name in every if control_plane.running_pid(layout, name) is not None]
    changed = bool(running) or layout.root.exists()
    stopped = running if check_mode else control_plane.tear_down(layout, names)
    return {"changed": changed, "stopped": stopped}


def up(
    layout: Layout,
    bin_dir: Path,
    ports: Ports,
    nodes: Sequence[Mapping[str, Any]],
    kwok_stages: str,
    timeout: float,
    check_mode: bool,
) -> dict[str, Any]:
    """The sandbox running as declared: its processes, then exactly the declared simulated nodes,
    Ready, then every process started into it since (an engine's, the GPU agent) that has died."""
    wanted = control_plane.components(layout, bin_dir, ports)
    core_names = [c.name for c in wanted]
    not_running = [c.name for c in wanted if not control_plane.runs_as_declared(layout, c)]
    not_running += [name for name in control_plane.recorded_addons(layout, core_names) if not _runs(layout, name)]
    if check_mode:
        changed = bool(not_running) or control_plane.plan_nodes(nodes, existing_nodes(node_api(layout))).changed
        return {"changed": changed, "started": not_running}
    busy = control_plane.ports_taken_by_others(layout, ports)
    if busy:
        raise SandboxError(
            "ports %s on 127.0.0.1 are in use by another program; "
            "set clusterproof_sandbox_port_base to a free range" % ", ".join(str(port) for port in busy)
        )
    changed = control_plane.prepare_state(layout, kwok_stages, ports)
    started = control_plane.bring_up(layout, bin_dir, ports, timeout)
    core = node_api(layout)
    plan = control_plane.plan_nodes(nodes, existing_nodes(core))
    apply_node_plan(core, plan)
    ready = wait_nodes_ready(core, len(nodes), timeout)
    if ready < len(nodes):
        raise SandboxError(
            "%d of %d simulated nodes became Ready within %d s; see %s"
            % (ready, len(nodes), timeout, layout.log("kwok"))
        )
    started += control_plane.restart_recorded(layout, core_names, timeout)
    return {
        "not_restarted": control_plane.not_restartable(layout, core_names),
        "changed": changed or bool(started) or plan.changed,
        "started": started,
        "nodes": {
            "created": [m["metadata"]["name"] for m in plan.create],
            "updated": [m["metadata"]["name"] for m in plan.replace],
            "deleted": plan.delete,
            "ready": ready,
        },
    }
