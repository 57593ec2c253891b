"""Each real node's kubelet as it runs: its configuration (``/configz``, defaults applied) and its
version, for the checks that judge what a kubelet decides (``validate.isolation``'s cached images'
pull credentials). Simulated nodes (the sandbox's, the lab's KWOK GPU nodes) have no kubelet and
are left out.

May import: ``kube.client``, ``install.storage`` (the simulated nodes' label), ``validate.isolation``,
the standard library. Touches: reads the nodes and, through the API server's node proxy, each real
kubelet's configuration; changes nothing.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.install import storage
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate.isolation import Kubelet


def real_kubelets(api: Any) -> dict[str, Kubelet]:
    """Each real node's kubelet: node name -> its version and configuration, or why that could not be read."""
    found = {}
    for node in kube.list_nodes(api):
        metadata = node.get("metadata") or {}
        if storage.SIMULATED_NODE_LABEL in (metadata.get("labels") or {}):
            continue
        version = ((node.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion", "")
        try:
            found[metadata["name"]] = Kubelet(version, kube.kubelet_configuration(api, metadata["name"]))
        except kube.KubeError as error:
            found[metadata["name"]] = Kubelet(version, unread=str(error))
    return found
