"""kube.client's listing: pages read as the API's JSON, and a cluster without the DRA API."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from kubernetes.client.rest import ApiException

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube


class Pages:
    """A list call of the client with ``_preload_content`` off (ResourceV1Api's, or an old client's
    call_api): raw JSON pages, then an error if given."""

    def __init__(self, pages, error=None):
        self.pages, self.error, self.calls = list(pages), error, []

    def _page(self, options):
        self.calls.append(options)
        if self.error is not None:
            raise self.error
        return SimpleNamespace(data=json.dumps(self.pages.pop(0)).encode())

    def list_resource_slice(self, **options):
        return self._page(options)

    def call_api(self, path, method, **options):
        return self._page({"path": path, "method": method, **options, "query": dict(options["query_params"])})


PAGES = [
    {"metadata": {"continue": "next"}, "items": [{"metadata": {"name": "a"}}]},
    {"metadata": {}, "items": [{"metadata": {"name": "b"}}]},
]


def test_slices_are_listed_by_driver_page_by_page(monkeypatch):
    pages = Pages(PAGES)
    monkeypatch.setattr(kube.k8s_client, "ResourceV1Api", lambda api: pages)
    found = kube.list_resource_slices(object(), "gpu.nvidia.com", request_timeout=7)
    assert [item["metadata"]["name"] for item in found] == ["a", "b"]
    assert [call["_continue"] for call in pages.calls] == [None, "next"]
    assert {call["field_selector"] for call in pages.calls} == {"spec.driver=gpu.nvidia.com"}
    assert {call["_preload_content"] for call in pages.calls} == {False}


def test_a_client_without_the_resource_api_class_lists_them_by_path(monkeypatch):
    # Debian 12's python3-kubernetes (22), on a kubeadm site's control-plane host, has no ResourceV1Api.
    monkeypatch.setattr(kube.k8s_client, "ResourceV1Api", None)
    pages = Pages(PAGES)
    found = kube.list_resource_slices(pages, "gpu.nvidia.com", request_timeout=7)
    assert [item["metadata"]["name"] for item in found] == ["a", "b"]
    assert {(call["method"], call["path"]) for call in pages.calls} == {
        ("GET", "/apis/resource.k8s.io/v1/resourceslices")
    }
    assert [call["query"].get("continue") for call in pages.calls] == [None, "next"]
    assert {call["query"]["fieldSelector"] for call in pages.calls} == {"spec.driver=gpu.nvidia.com"}
    assert {(call["_preload_content"], call["_request_timeout"]) for call in pages.calls} == {(False, 7)}


def test_a_cluster_without_the_resource_api_has_no_slices(monkeypatch):
    monkeypatch.setattr(kube.k8s_client, "ResourceV1Api", lambda api: Pages([], ApiException(status=404)))
    assert kube.list_resource_slices(object(), "gpu.nvidia.com") is None


def test_any_other_error_is_a_kube_error_saying_what_was_listed(monkeypatch):
    monkeypatch.setattr(
        kube.k8s_client, "ResourceV1Api", lambda api: Pages([], ApiException(status=403, reason="Forbidden"))
    )
    with pytest.raises(kube.KubeError, match="listing the ResourceSlices of gpu.nvidia.com failed: .*403"):
        kube.list_resource_slices(object(), "gpu.nvidia.com")
