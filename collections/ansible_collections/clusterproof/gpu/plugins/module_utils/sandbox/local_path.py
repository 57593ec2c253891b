"""local-path-provisioner on the sandbox: a local process, as the chart's Deployment is on a cluster.

It watches the sandbox's API server with the admin kubeconfig and provisions the inventory's
local-path classes. To make or remove a volume's directory it creates a helper pod on the
volume's node and waits for it to succeed; the sandbox's nodes are KWOK's, which run nothing, so
the helper pod template carries the annotation on which KWOK completes a pod
(``storage.local_path_helper_pod``). The volume's directory is then never made: on the sandbox
what is proven is everything above the kubelet (provisioning, binding, scheduling by volume).

Files in the sandbox's state directory::

    local-path/config.json      the classes' paths (the chart's ConfigMap holds the same)
    local-path/helperPod.yaml   the helper pod template

The process is recorded like every sandbox process (``run/local-path-provisioner.json``), so the
sandbox's ``down`` stops it. Pure apart from ``write_files`` and ``install``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from ansible_collections.clusterproof.gpu.plugins.module_utils.install import storage
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox.control_plane import Component, Layout
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox.install import InstallStep

COMPONENT = "local-path-provisioner"
# The chart's scripts; on the sandbox no helper pod runs them, but the ConfigMap is as on a cluster.
SETUP_SCRIPT = 'set -eu\nmkdir -m 0777 -p "$VOL_DIR"\n'
TEARDOWN_SCRIPT = 'set -eu\nrm -rf "$VOL_DIR"\n'


def config_path(layout: Layout) -> Path:
    return layout.root / "local-path" / "config.json"


def helper_pod_path(layout: Layout) -> Path:
    return layout.root / "local-path" / "helperPod.yaml"


def files(classes: Iterable[storage.StorageClassDeclaration], helper_image: str) -> dict[str, str]:
    """The two files' contents, by name."""
    helper = yaml.safe_dump(storage.local_path_helper_pod(helper_image, sandbox=True), sort_keys=False)
    return {"config.json": storage.local_path_config_text(classes), "helperPod.yaml": helper}


def write_files(layout: Layout, contents: dict[str, str], check_mode: bool = False) -> list[str]:
    """Write the files that differ; returns their paths."""
    written = []
    for name, text in contents.items():
        path = layout.root / "local-path" / name
        if path.exists() and path.read_text() == text:
            continue
        written.append(str(path))
        if not check_mode:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    return written


def component(layout: Layout, bin_dir: Path) -> Component:
    """The provisioner's process. It has no health endpoint: running is ready."""
    return Component(
        COMPONENT,
        (
            str(bin_dir / COMPONENT),
            "start",
            "--kubeconfig=%s" % layout.kubeconfig,
            "--config=%s" % config_path(layout),
            "--helper-pod-file=%s" % helper_pod_path(layout),
            "--namespace=%s" % storage.LOCAL_PATH_NAMESPACE,
            "--service-account-name=%s" % storage.LOCAL_PATH_SERVICE_ACCOUNT,
            "--configmap-name=%s" % storage.LOCAL_PATH_CONFIGMAP,
            "--provisioner-name=%s" % storage.LOCAL_PATH_PROVISIONER,
        ),
        "",
    )


def cluster_objects(contents: dict[str, str]) -> list[dict[str, Any]]:
    """The namespace the helper pods run in, their service account (admission refuses a pod whose
    service account does not exist) and the ConfigMap the helper pods mount."""
    namespace = storage.LOCAL_PATH_NAMESPACE
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": storage.LOCAL_PATH_SERVICE_ACCOUNT, "namespace": namespace},
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": storage.LOCAL_PATH_CONFIGMAP, "namespace": namespace},
            "data": {"setup": SETUP_SCRIPT, "teardown": TEARDOWN_SCRIPT, **contents},
        },
    ]


def install(
    step: InstallStep,
    classes: Iterable[storage.StorageClassDeclaration],
    bin_dir: Path,
    helper_image: str,
    timeout: float,
) -> None:
    """The provisioner on the sandbox: its objects, its two files and its process, restarted when
    the files changed (it reads its helper pod template only when it starts)."""
    contents = files(classes, helper_image)
    step.apply(cluster_objects(contents))
    written = write_files(step.layout, contents, step.check_mode)
    step.applied += ["file %s" % path for path in written]
    step.start([component(step.layout, bin_dir)], timeout, restart=bool(written))
