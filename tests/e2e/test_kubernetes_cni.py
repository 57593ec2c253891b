"""The kubernetes_cni role against the sandbox's real API server: flannel's pinned manifest, taken from
its Go module and fitted to the inventory's pod network, applied once, and a second time with no change."""

from __future__ import annotations

import json

import pytest

from .conftest import Sandbox, role_after_inventory_check, run_playbook

PLAYBOOK = role_after_inventory_check("Apply the pinned CNI", "kubernetes_cni")
POD_SUBNET = "10.48.0.0/16"


@pytest.mark.sandbox
def test_flannel_is_applied_with_the_pod_network_and_reapplied_without_change(sandbox: Sandbox, api_client, tmp_path):
    from kubernetes import client

    playbook = tmp_path / "cni.yml"
    playbook.write_text(PLAYBOOK)
    args = [
        *sandbox.vars(),
        "-e",
        "clusterproof_cluster_mode=kubeadm clusterproof_pod_subnet=%s kubernetes_cni_kubeconfig=%s"
        % (POD_SUBNET, sandbox.kubeconfig),
    ]
    core = client.CoreV1Api(api_client)
    rbac = client.RbacAuthorizationV1Api(api_client)
    try:
        first = run_playbook(str(playbook), *args)
        assert first.returncode == 0, first.tail(4000)
        assert first.recap()["changed"] == 1
        config_map = core.read_namespaced_config_map("kube-flannel-cfg", "kube-flannel")
        assert json.loads(config_map.data["net-conf.json"])["Network"] == POD_SUBNET
        daemon_set = client.AppsV1Api(api_client).read_namespaced_daemon_set("kube-flannel-ds", "kube-flannel")
        assert daemon_set.spec.template.spec.containers[0].image.endswith("flannel:v0.28.4")
        second = run_playbook(str(playbook), *args)
        assert second.returncode == 0, second.tail(4000)
        assert second.recap()["changed"] == 0, second.changed_tasks()
    finally:
        # The session's sandbox is shared: leave it as it was.
        _delete_if_present(rbac.read_cluster_role_binding, rbac.delete_cluster_role_binding, "flannel")
        _delete_if_present(rbac.read_cluster_role, rbac.delete_cluster_role, "flannel")
        _delete_if_present(core.read_namespace, core.delete_namespace, "kube-flannel")


def _delete_if_present(read, delete, name: str) -> None:
    from kubernetes.client.exceptions import ApiException

    try:
        read(name)
    except ApiException as error:
        if error.status == 404:
            return
        raise
    delete(name)
