"""Simulated GPU nodes beside a real cluster (the lab): KWOK's command line, the taint that keeps the
cluster's own workloads off them, and that the validator's workloads tolerate it."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import control_plane, simulated_nodes
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import workloads
from tests.unit.plugins.module_utils.helpers import write_kubeconfig

NODE = {"name": "dgx1-1", "gpu_count": 8, "cpu_cores": 80, "memory_gib": 512, "labels": {}, "taints": []}


def test_kwok_runs_beside_the_cluster_with_its_kubeconfig_and_pod_addresses_apart_from_flannel():
    layout = control_plane.Layout(Path("/state"))
    kwok, agent = simulated_nodes.components(layout, Path("/bin/kwok"), 16479, True, "/repo/collections")
    assert kwok.argv[:3] == ("/bin/kwok", "--kubeconfig=/state/kubeconfig", "--config=/state/kwok.yaml")
    assert "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake" in kwok.argv
    assert "--cidr=10.254.0.0/16" in kwok.argv  # flannel's pods are in 10.244.0.0/16
    assert kwok.ready_url == "http://127.0.0.1:16479/healthz"
    assert "--kubeconfig=/state/kubeconfig" in agent.argv and "--namespace=kai-resource-reservation" in agent.argv
    assert dict(agent.env) == {"PYTHONPATH": "/repo/collections"}
    # Kueue schedules whole GPUs only: no agent.
    assert [c.name for c in simulated_nodes.components(layout, Path("/bin/kwok"), 16479, False, "")] == ["kwok"]


def test_a_simulated_node_is_tainted_after_its_own_taints_once():
    own = {"key": "team", "value": "a", "effect": "NoSchedule"}
    node = simulated_nodes.tainted({**NODE, "taints": [own]})
    assert node["taints"] == [own, {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}]
    assert simulated_nodes.tainted(node)["taints"] == node["taints"]
    manifest = simulated_nodes.node_manifest(node)
    assert manifest["spec"]["taints"][-1] == simulated_nodes.SIMULATED_TAINT
    assert manifest["metadata"]["labels"][control_plane.SANDBOX_NODE_LABEL] == "true"
    # No OS: DaemonSets that select Linux nodes (flannel, kube-proxy) stay off it.
    assert "kubernetes.io/os" not in manifest["metadata"]["labels"]
    assert control_plane.node_manifest(node)["metadata"]["labels"]["kubernetes.io/os"] == "linux"
    plan = control_plane.plan_nodes([node], [], simulated_nodes.node_manifest)
    assert [m["metadata"]["name"] for m in plan.create] == ["dgx1-1"] and "kubernetes.io/os" not in str(plan.create)


def test_the_validator_s_workloads_tolerate_the_simulated_node_taint():
    toleration = workloads.SIMULATED_NODE_TOLERATION
    taint = simulated_nodes.SIMULATED_TAINT
    assert (toleration["key"], toleration["value"], toleration["effect"]) == (
        taint["key"],
        taint["value"],
        taint["effect"],
    )
    job = workloads.base_job(
        workloads.Workload("w", "team-a", workloads.TRAINING, 1), workloads.ProjectSettings("team-a")
    )
    assert job["spec"]["template"]["spec"]["tolerations"] == [toleration]


def test_absent_with_the_cluster_gone_and_something_else_at_its_address_deletes_nothing_and_succeeds(tmp_path):
    # The lab's bridge gone, the API server's address routes to the default gateway, where a
    # transparent proxy accepts any port and then is not the cluster (here: a port that accepts
    # and closes). absent has nothing to delete there and must not fail (`clusterproof lab down`).
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def accept_and_close():
        while True:
            try:
                listener.accept()[0].close()
            except OSError:
                return

    threading.Thread(target=accept_and_close, daemon=True).start()
    layout = control_plane.Layout(tmp_path)
    port = listener.getsockname()[1]
    write_kubeconfig(layout.kubeconfig, f"https://127.0.0.1:{port}")
    try:
        # Nothing deleted, nothing stopped; the state directory (the kubeconfig copy) goes.
        assert simulated_nodes.absent(layout, check_mode=False) == {"changed": True, "stopped": [], "deleted": []}
        assert not tmp_path.exists()
    finally:
        listener.close()


def test_absent_leaves_no_state_directory_behind_and_a_second_absent_changes_nothing(tmp_path):
    """lab down: the gone cluster's admin kubeconfig, the KWOK stages, logs and records go, and the
    directory with them (~/.local/state/clusterproof/simulated/lab)."""
    state = tmp_path / "simulated" / "lab"
    layout = control_plane.Layout(state)
    state.mkdir(parents=True)
    write_kubeconfig(layout.kubeconfig, "https://127.0.0.1:1")  # a cluster that does not answer
    layout.kwok_config.write_text("kind: Stage\n")
    layout.log(simulated_nodes.KWOK).parent.mkdir(parents=True)
    layout.log(simulated_nodes.KWOK).write_text("kwok's output\n")
    layout.record(simulated_nodes.KWOK).parent.mkdir(parents=True)
    layout.record(simulated_nodes.KWOK).write_text('{"pid": 999999999, "start_time": 1}\n')
    assert simulated_nodes.absent(layout, check_mode=True)["changed"] is True
    assert layout.kubeconfig.exists()  # check mode removes nothing
    assert simulated_nodes.absent(layout, check_mode=False) == {"changed": True, "stopped": [], "deleted": []}
    assert not state.exists() and (tmp_path / "simulated").is_dir()
    assert simulated_nodes.absent(layout, check_mode=False) == {"changed": False, "stopped": [], "deleted": []}


def test_absent_keeps_what_it_did_not_write_in_a_state_directory_it_was_given(tmp_path):
    layout = control_plane.Layout(tmp_path)
    write_kubeconfig(layout.kubeconfig, "https://127.0.0.1:1")
    (tmp_path / "notes.txt").write_text("the admin's\n")
    assert simulated_nodes.absent(layout, check_mode=False)["changed"] is True
    assert sorted(path.name for path in tmp_path.iterdir()) == ["notes.txt"]
