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
