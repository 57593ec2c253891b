"""Flannel's manifest fitted to the site's pod network."""

from __future__ import annotations

import json

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.install import kubernetes_cni

NET_CONF = {"Network": "10.244.0.0/16", "EnableNFTables": False, "Backend": {"Type": "vxlan"}}
MANIFEST = [
    {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "kube-flannel"}},
    {
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {"name": "kube-flannel-cfg", "namespace": "kube-flannel"},
        "data": {"cni-conf.json": "{}", "net-conf.json": json.dumps(NET_CONF)},
    },
]


def test_the_pod_network_is_set_and_the_rest_kept():
    fitted = kubernetes_cni.fit_flannel(MANIFEST, "10.32.0.0/16")
    net_conf = json.loads(fitted[1]["data"]["net-conf.json"])
    assert net_conf == {**NET_CONF, "Network": "10.32.0.0/16"}
    assert fitted[0] == MANIFEST[0] and fitted[1]["data"]["cni-conf.json"] == "{}"
    # The input is left as it was.
    assert json.loads(MANIFEST[1]["data"]["net-conf.json"])["Network"] == "10.244.0.0/16"


def test_a_manifest_without_flannels_config_is_refused():
    with pytest.raises(ValueError, match="no ConfigMap kube-flannel-cfg"):
        kubernetes_cni.fit_flannel(MANIFEST[:1], "10.32.0.0/16")


def test_an_unknown_cni_is_refused():
    with pytest.raises(ValueError, match="no manifest is known for CNI 'calico'"):
        kubernetes_cni.manifest_file("calico", "v3.30.0")


def test_flannel_installs_its_plugin_where_the_nodes_containerd_looks():
    # The DaemonSet's volumes as flannel's manifest declares them.
    daemon_set = {
        "kind": "DaemonSet",
        "apiVersion": "apps/v1",
        "metadata": {"name": "kube-flannel-ds", "namespace": "kube-flannel"},
        "spec": {
            "template": {
                "spec": {
                    "volumes": [
                        {"name": "cni-plugin", "hostPath": {"path": "/opt/cni/bin"}},
                        {"name": "cni", "hostPath": {"path": "/etc/cni/net.d"}},
                    ]
                }
            }
        },
    }
    fitted = kubernetes_cni.fit_flannel([*MANIFEST, daemon_set], "10.32.0.0/16", cni_bin_dir="/usr/lib/cni")
    (fitted_set,) = [document for document in fitted if document["kind"] == "DaemonSet"]
    volumes = {volume["name"]: volume for volume in fitted_set["spec"]["template"]["spec"]["volumes"]}
    assert volumes["cni-plugin"]["hostPath"]["path"] == "/usr/lib/cni"
    # The network config directory is containerd's conf_dir on every distribution: left as it is.
    assert volumes["cni"]["hostPath"]["path"] == "/etc/cni/net.d"
    # Without a directory given, the manifest's own stays.
    (kept,) = [
        d for d in kubernetes_cni.fit_flannel([*MANIFEST, daemon_set], "10.32.0.0/16") if d["kind"] == "DaemonSet"
    ]
    assert kept["spec"]["template"]["spec"]["volumes"][0]["hostPath"]["path"] == "/opt/cni/bin"
