"""The kubernetes_gpu_nodes role against the sandbox's nodes: a GPU node joined before the inventory
changed gets the declared labels and the GPU taint, keeps its other taints, and a second run changes
nothing."""

from __future__ import annotations

import json

import pytest

from .conftest import Sandbox, role_after_inventory_check, run_playbook

PLAYBOOK = role_after_inventory_check("Label and taint the GPU nodes", "kubernetes_gpu_nodes")
NODES = ("dgx1-1", "dgx1-2")
OTHER_TAINT = {"key": "site.example/maintenance", "value": "planned", "effect": "PreferNoSchedule"}


@pytest.mark.sandbox
def test_gpu_nodes_get_the_declared_labels_and_taint(sandbox: Sandbox, api_client, tmp_path):
    from kubernetes import client

    core = client.CoreV1Api(api_client)
    before = {name: core.read_node(name) for name in NODES}
    playbook = tmp_path / "gpu-nodes.yml"
    playbook.write_text(PLAYBOOK)
    args = [
        *sandbox.vars(),
        "-e",
        json.dumps(
            {
                "clusterproof_cluster_mode": "kubeadm",
                "clusterproof_gpu_node_taint": True,
                "kubernetes_gpu_nodes_kubeconfig": str(sandbox.kubeconfig),
                "node_labels": {"site.example/rack": "r7"},
            }
        ),
    ]
    try:
        # A taint the inventory does not declare (an admin's), which the role must keep.
        core.patch_node("dgx1-1", {"spec": {"taints": [OTHER_TAINT]}})
        first = run_playbook(str(playbook), *args)
        assert first.returncode == 0, first.tail(4000)
        assert first.recap()["changed"] == 1
        for name in NODES:
            node = core.read_node(name)
            assert node.metadata.labels["site.example/rack"] == "r7"
            assert node.metadata.labels["nvidia.com/gpu.present"] == "true"
            taints = [(t.key, t.value, t.effect) for t in node.spec.taints or []]
            assert ("nvidia.com/gpu", "present", "NoSchedule") in taints
        assert ("site.example/maintenance", "planned", "PreferNoSchedule") in [
            (t.key, t.value, t.effect) for t in core.read_node("dgx1-1").spec.taints
        ]
        second = run_playbook(str(playbook), *args)
        assert second.returncode == 0, second.tail(4000)
        assert second.recap()["changed"] == 0, second.changed_tasks()
    finally:
        # The session's sandbox is shared: give the nodes back their labels and taints.
        for name, node in before.items():
            taints = [api_client.sanitize_for_serialization(taint) for taint in node.spec.taints or []]
            core.patch_node(name, {"metadata": {"labels": {"site.example/rack": None}}, "spec": {"taints": taints}})
