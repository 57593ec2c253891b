"""kube.client's listing: pages read as the API's JSON, and a cluster without the DRA API."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from kubernetes.client.rest import ApiException

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube


class Pages:
    """A list call of the client with ``_preload_content`` off: raw JSON pages, then an error if given."""

    def __init__(self, pages, error=None):
        self.pages, self.error, self.calls = list(pages), error, []

    def list_resource_slice(self, **options):
        self.calls.append(options)
        if self.error is not None:
            raise self.error
        return SimpleNamespace(data=json.dumps(self.pages.pop(0)).encode())


def test_slices_are_listed_by_driver_page_by_page(monkeypatch):
    pages = Pages(
        [
            {"metadata": {"continue": "next"}, "items": [{"metadata": {"name": "a"}}]},
            {"metadata": {}, "items": [{"metadata": {"name": "b"}}]},
        ]
    )
    monkeypatch.setattr(kube.k8s_client, "ResourceV1Api", lambda api: pages)
    found = kube.list_resource_slices(object(), "gpu.nvidia.com", request_timeout=7)
    assert [item["metadata"]["name"] for item in found] == ["a", "b"]
    assert [call["_continue"] for call in pages.calls] == [None, "next"]
    assert {call["field_selector"] for call in pages.calls} == {"spec.driver=gpu.nvidia.com"}
    assert {call["_preload_content"] for call in pages.calls} == {False}


def test_a_cluster_without_the_resource_api_has_no_slices(monkeypatch):
    monkeypatch.setattr(kube.k8s_client, "ResourceV1Api", lambda api: Pages([], ApiException(status=404)))
    assert kube.list_resource_slices(object(), "gpu.nvidia.com") is None


def test_any_other_error_is_a_kube_error_saying_what_was_listed(monkeypatch):
    monkeypatch.setattr(
        kube.k8s_client, "ResourceV1Api", lambda api: Pages([], ApiException(status=403, reason="Forbidden"))
    )
    with pytest.raises(kube.KubeError, match="listing the ResourceSlices of gpu.nvidia.com failed: .*403"):
        kube.list_resource_slices(object(), "gpu.nvidia.com")
