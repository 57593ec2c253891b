"""The one Kubernetes client layer of the collection.

Every module that talks to a cluster gets its client here, so that authentication, timeouts and
the error a missing client library gives are the same everywhere. Pure logic never imports this.
"""

from __future__ import annotations

import os
from typing import Any

KUBERNETES_IMPORT_ERROR: str | None
try:
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config
    from kubernetes.client.rest import ApiException

    KUBERNETES_IMPORT_ERROR = None
except ImportError as error:  # the module reports this through fail_json
    k8s_client = None  # type: ignore[assignment]
    k8s_config = None  # type: ignore[assignment]
    ApiException = Exception  # type: ignore[assignment,misc]
    KUBERNETES_IMPORT_ERROR = str(error)

# Shared module arguments for anything that reaches a cluster (copied into each module's spec).
AUTH_ARG_SPEC: dict[str, dict[str, Any]] = {
    "kubeconfig": {"type": "path", "required": False},
    "context": {"type": "str", "required": False},
    "request_timeout": {"type": "int", "default": 30},
}


class KubeError(RuntimeError):
    """A cluster could not be reached or answered with an error; the message says which."""


def api_client(kubeconfig: str | None = None, context: str | None = None) -> Any:
    """An ApiClient for the kubeconfig given (or $KUBECONFIG, or ~/.kube/config)."""
    if KUBERNETES_IMPORT_ERROR is not None:
        raise KubeError(f"the Python 'kubernetes' package is needed on the controller: {KUBERNETES_IMPORT_ERROR}")
    path = kubeconfig or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    if not os.path.exists(path):
        raise KubeError(f"kubeconfig {path} does not exist")
    configuration = k8s_client.Configuration()
    k8s_config.load_kube_config(config_file=path, context=context, client_configuration=configuration)
    return k8s_client.ApiClient(configuration)


def core_v1(api: Any) -> Any:
    return k8s_client.CoreV1Api(api)


def batch_v1(api: Any) -> Any:
    return k8s_client.BatchV1Api(api)


def apps_v1(api: Any) -> Any:
    return k8s_client.AppsV1Api(api)


def list_nodes(api: Any, request_timeout: int = 30) -> list[dict[str, Any]]:
    """Every Node as a plain dict (the API's JSON field names), paging through large clusters."""
    core = core_v1(api)
    nodes: list[dict[str, Any]] = []
    token = None
    while True:
        try:
            page = core.list_node(limit=500, _continue=token, _request_timeout=request_timeout)
        except ApiException as error:
            raise KubeError(f"listing nodes failed: {error}") from error
        nodes.extend(api.sanitize_for_serialization(item) for item in page.items)
        token = page.metadata._continue
        if not token:
            return nodes
