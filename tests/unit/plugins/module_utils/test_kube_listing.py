"""kube.client's listing: pages read as the API's JSON, and a cluster without the DRA API."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from kubernetes.client.rest import ApiException

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube


class Pages:
    """An ApiClient's call_api with ``_preload_content`` off: raw JSON pages, then an error if given."""

    def __init__(self, pages, error=None):
        self.pages, self.error, self.calls = list(pages), error, []

    def call_api(self, path, method, **options):
        self.calls.append({"path": path, "method": method, **options, "query": dict(options["query_params"])})
        if self.error is not None:
            raise self.error
        return SimpleNamespace(data=json.dumps(self.pages.pop(0)).encode())


def test_slices_are_listed_by_driver_page_by_page():
    pages = Pages(
        [
            {"metadata": {"continue": "next"}, "items": [{"metadata": {"name": "a"}}]},
            {"metadata": {}, "items": [{"metadata": {"name": "b"}}]},
        ]
    )
    found = kube.list_resource_slices(pages, "gpu.nvidia.com", request_timeout=7)
    assert [item["metadata"]["name"] for item in found] == ["a", "b"]
    # By path (the client of Debian 12 has no ResourceV1Api), page by page, the raw JSON.
    assert {(call["method"], call["path"]) for call in pages.calls} == {
        ("GET", "/apis/resource.k8s.io/v1/resourceslices")
    }
    assert [call["query"].get("continue") for call in pages.calls] == [None, "next"]
    assert {call["query"]["fieldSelector"] for call in pages.calls} == {"spec.driver=gpu.nvidia.com"}
    assert {call["_preload_content"] for call in pages.calls} == {False}
    assert {call["_request_timeout"] for call in pages.calls} == {7}


def test_a_cluster_without_the_resource_api_has_no_slices():
    assert kube.list_resource_slices(Pages([], ApiException(status=404)), "gpu.nvidia.com") is None


def test_any_other_error_is_a_kube_error_saying_what_was_listed():
    with pytest.raises(kube.KubeError, match="listing the ResourceSlices of gpu.nvidia.com failed: .*403"):
        kube.list_resource_slices(Pages([], ApiException(status=403, reason="Forbidden")), "gpu.nvidia.com")
