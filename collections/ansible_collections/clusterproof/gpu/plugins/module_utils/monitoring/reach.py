"""How the validator reaches Prometheus: a site's own at the URL the inventory names, the sandbox's on
loopback at its port base, or clusterproof's pods on a kubeadm site through the API server's proxy
(with the kubeconfig's credentials: nothing is exposed, no port forwarded).

May import: ``monitoring.api``, ``monitoring.cluster``, ``monitoring.sandbox`` and the client layer
(``kube.client``). Touches: the kubeconfig (read), nothing else until a query is sent.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.monitoring import api, cluster, config
from ansible_collections.clusterproof.gpu.plugins.module_utils.monitoring.sandbox import prometheus_url


def prometheus_of(params: dict[str, Any]) -> api.Prometheus | str:
    """Prometheus as a module's options name it (``kube.runner.PROMETHEUS_ARG_SPEC``):
    ``prometheus_in_cluster``, clusterproof's on the site through the API server; else
    ``prometheus_url``, or the sandbox's at ``sandbox_port_base`` ("" for none of them)."""
    if params.get("prometheus_in_cluster"):
        address, fetch = kube.service_proxy(
            kube.api_client(params.get("kubeconfig"), params.get("context")),
            config.NAMESPACE,
            config.PROMETHEUS,
            cluster.PROMETHEUS_PORT,
        )
        return api.Endpoint(address, fetch)
    return prometheus_url(params.get("prometheus_url"), params.get("sandbox_port_base"))
