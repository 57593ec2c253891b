"""The engine and storage modules on a real cluster apply only objects, through kube.Changes."""

from __future__ import annotations

import hashlib
import types

import pytest
import yaml

from ansible_collections.clusterproof.gpu.plugins.module_utils.install import storage
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.modules import (
    kai_scheduler,
    kueue_scheduler,
    storage_classes,
    storage_releases,
)

CLASS = {
    "name": "fast",
    "provisioner": "local-path",
    "default": True,
    "reclaim_policy": "Delete",
    "access_modes": ["ReadWriteOnce"],
    "volume_binding_mode": "WaitForFirstConsumer",
}


class FakeApplier:
    check_mode = False

    def __init__(self) -> None:
        self.applied: list[str] = []
        self.dynamic = types.SimpleNamespace(
            resources=types.SimpleNamespace(
                get=lambda **kind: types.SimpleNamespace(get=lambda: types.SimpleNamespace(items=[]))
            )
        )

    def apply(self, manifest):
        self.applied.append(kube.name_of(manifest))
        return True, None, manifest


@pytest.fixture
def applier(monkeypatch):
    fake = FakeApplier()
    monkeypatch.setattr(kube.Changes, "connect", classmethod(lambda cls, *args, **kwargs: cls(fake)))
    return fake


def module(**params):
    return types.SimpleNamespace(params=params, check_mode=False)


def test_kai_on_a_cluster_makes_the_department_queue_only(applier):
    result = kai_scheduler.run(module(mode="cluster", kubeconfig=None, department_gpu_quota=8.0))
    assert result == {"changed": True, "applied": ["Queue/clusterproof"], "started": [], "config": ""}


def test_kueue_on_a_cluster_makes_the_site_wide_objects_and_absent_touches_nothing(applier):
    result = kueue_scheduler.run(module(mode="cluster", state="present", kubeconfig=None, bin_dir=None, share_dir=None))
    assert result["changed"] and result["started"] == [] and result["stopped"] == []
    assert "Cohort/clusterproof" in result["applied"]
    applier.applied.clear()
    result = kueue_scheduler.run(module(mode="cluster", state="absent", kubeconfig=None, bin_dir=None, share_dir=None))
    assert (result, applier.applied) == ({"applied": [], "started": [], "stopped": []}, [])


def test_storage_classes_on_a_cluster_apply_the_classes(applier):
    params = {
        "mode": "cluster",
        "classes": [CLASS],
        "credentials": {},
        "trident_namespace": "trident",
        "kubeconfig": None,
        "context": None,
    }
    result = storage_classes.run(module(**params))
    assert result == {
        "changed": True,
        "applied": ["StorageClass/fast"],
        "undefaulted": [],
        "started": [],
        "default_class": "fast",
    }


def test_the_local_path_release_carries_its_helper_pod_template_and_that_template_s_digest():
    result = storage_releases.run(
        module(
            classes=[CLASS], charts={"local-path": "/charts/local-path.tgz"}, namespaces={}, helper_image="busybox:1.36"
        )
    )
    (release,) = result["releases"]
    assert (release["chart_ref"], release["configmap"]) == ("/charts/local-path.tgz", "local-path-config")
    # The ConfigMap's helperPod.yaml as the provisioner reads it, and the digest the role restarts it by.
    assert yaml.safe_load(release["helper_pod"]) == storage.local_path_helper_pod("busybox:1.36", sandbox=False)
    assert release["helper_pod_digest"] == hashlib.sha256(release["helper_pod"].encode()).hexdigest()
    assert release["digest_annotation"] == "clusterproof.io/helper-pod-sha256"
