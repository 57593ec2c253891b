"""The pinned CNI manifest of mode kubeadm: taken from the CNI's own Go module, fitted to the site.

Flannel publishes its manifest inside its Go module (``Documentation/kube-flannel.yml``), so a
pinned version comes through the Go module proxy, checksummed by Go's sum database, like every
other binary and chart clusterproof builds; nothing is copied into the repository. The only
change made to it is the site's pod network in flannel's ``net-conf.json``.

``manifest_file`` needs Go on the controller; an air-gapped controller without Go hands the role a
copy of the manifest instead (kubernetes_cni_manifest_file). The rest is pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.install import go_modules
from ansible_collections.clusterproof.gpu.plugins.module_utils.install.kubeadm_config import CNI_MANIFESTS

FLANNEL_CONFIG_MAP = "kube-flannel-cfg"
# The DaemonSet's hostPath volume its init container copies the flannel plugin into (/opt/cni/bin).
FLANNEL_PLUGIN_VOLUME = "cni-plugin"


def manifest_file(cni: str, version: str) -> Path:
    """The manifest of ``cni`` at ``version`` in Go's module cache (downloaded if it is not there)."""
    if cni not in CNI_MANIFESTS:
        raise ValueError("no manifest is known for CNI %r; known: %s" % (cni, ", ".join(CNI_MANIFESTS)))
    module, path = CNI_MANIFESTS[cni]
    return go_modules.download(module, version).dir / path


def fit_flannel(documents: list[Mapping[str, Any]], pod_subnet: str, cni_bin_dir: str = "") -> list[dict[str, Any]]:
    """Flannel's manifest with the site's pod network in its net-conf.json (kubeadm's podSubnet:
    the two must agree, or pods get addresses the nodes do not route), and, given ``cni_bin_dir``, its
    plugin installed where the nodes' containerd looks for CNI plugins (Debian's: /usr/lib/cni)."""
    fitted = []
    found = False
    for document in documents:
        document = json.loads(json.dumps(document))
        if document.get("kind") == "ConfigMap" and document["metadata"]["name"] == FLANNEL_CONFIG_MAP:
            net_conf = json.loads(document["data"]["net-conf.json"])
            net_conf["Network"] = pod_subnet
            document["data"]["net-conf.json"] = json.dumps(net_conf, indent=2) + "\n"
            found = True
        if cni_bin_dir and document.get("kind") == "DaemonSet":
            for volume in document["spec"]["template"]["spec"].get("volumes", []):
                if volume.get("name") == FLANNEL_PLUGIN_VOLUME and "hostPath" in volume:
                    volume["hostPath"]["path"] = cni_bin_dir
        fitted.append(document)
    if not found:
        raise ValueError(
            "the manifest has no ConfigMap %s with a net-conf.json to set the pod network in" % FLANNEL_CONFIG_MAP
        )
    return fitted
