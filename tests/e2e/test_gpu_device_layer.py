"""The GPU operator and device plugin charts, rendered with the values the gpu_device_layer role
installs them with, are accepted by a real API server; wrong values are refused.

No chart repository is reachable here, but both charts travel inside their Go modules; the
clusterproof.gpu.gpu_device_layer module copies them into the build cache and works out the
values, exactly as the role does. helm renders them (``helm template``, helm built from its Go
module) and the sandbox's API server takes every object server-side: CRDs for real, the rest as a
dry run. So a value the chart or the API rejects fails here, not at a site.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from ansible_collections.clusterproof.gpu.plugins.module_utils import versions
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import build as sandbox_build

from .conftest import ad_hoc, dynamic_client, helm_render, run_playbook, wait_for

pytestmark = pytest.mark.sandbox

FIELD_MANAGER = "clusterproof-chart-check"


def release_of(**settings) -> dict:
    """What the role's module returns for these settings: chart directory, release and values."""
    done = ad_hoc("clusterproof.gpu.gpu_device_layer", settings)
    result = json.loads(done.stdout.split("=>", 1)[1])
    return {"returncode": done.returncode, **result}


def render(release: dict, values: dict) -> list[dict]:
    """``helm template`` of the release's chart with ``values``, CRDs included."""
    return helm_render(release["chart_ref"], release["release_name"], release["release_namespace"], values)


def apply(api_client, objects: list[dict], namespace: str) -> None:
    """CRDs for real (the custom resources need them), then every other object as a server-side dry run."""
    crds = [obj for obj in objects if obj["kind"] == "CustomResourceDefinition"]
    client = dynamic_client(api_client)
    crd_api = client.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    for crd in crds:
        crd_api.server_side_apply(body=crd, name=crd["metadata"]["name"], field_manager=FIELD_MANAGER)
    extensions = k8s.ApiextensionsV1Api(api_client)

    def established() -> bool:
        for crd in crds:
            status = extensions.read_custom_resource_definition(crd["metadata"]["name"]).status
            if not any(c.type == "Established" and c.status == "True" for c in status.conditions or []):
                return False
        return True

    assert wait_for(established, timeout=60), "the charts' CRDs did not become established"
    ensure_namespace(api_client, namespace)
    # A fresh client: discovery must see the kinds the CRDs just added.
    client = dynamic_client(api_client)
    for obj in objects:
        if obj["kind"] == "CustomResourceDefinition":
            continue
        resource = client.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        resource.server_side_apply(
            body=obj,
            name=obj["metadata"]["name"],
            namespace=(obj["metadata"].get("namespace") or namespace) if resource.namespaced else None,
            field_manager=FIELD_MANAGER,
            dry_run="All",
            # The dry run asks the API server to validate the object, not to take it over: where a
            # release of the same chart is installed (the site test's gpu_stack.yml on a shared
            # sandbox), helm owns its fields, and without force the apply is refused as a conflict.
            force_conflicts=True,
        )


def ensure_namespace(api_client, name: str) -> None:
    # helm creates the release namespace (create_namespace in the role); the dry run needs it to exist.
    core = k8s.CoreV1Api(api_client)
    try:
        core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))
    except ApiException as error:
        if error.status != 409:
            raise


@pytest.fixture(scope="module")
def charts_cleanup(api_client):
    """The CRDs and namespaces these tests make real go again, so other tests see a plain sandbox."""
    yield
    extensions = k8s.ApiextensionsV1Api(api_client)
    for crd in extensions.list_custom_resource_definition().items:
        if crd.metadata.managed_fields and any(f.manager == FIELD_MANAGER for f in crd.metadata.managed_fields):
            extensions.delete_custom_resource_definition(crd.metadata.name)
    core = k8s.CoreV1Api(api_client)
    for name in ("gpu-operator", "nvidia-device-plugin"):
        try:
            core.delete_namespace(name)
        except ApiException as error:
            if error.status != 404:
                raise


def by_kind(objects: list[dict], kind: str) -> list[dict]:
    return [obj for obj in objects if obj["kind"] == kind]


def test_operator_with_driver_and_toolkit_on_the_hosts(api_client, charts_cleanup):
    release = release_of(device_layer="gpu_operator")
    assert release["returncode"] == 0, release
    assert release["chart_module"].startswith("github.com/NVIDIA/gpu-operator@")
    objects = render(release, release["release_values"])
    (policy,) = by_kind(objects, "ClusterPolicy")
    assert policy["spec"]["driver"]["enabled"] is False
    assert policy["spec"]["toolkit"]["enabled"] is False
    assert policy["spec"]["mig"]["strategy"] == "none"
    images = [
        container["image"]
        for deployment in by_kind(objects, "Deployment")
        for container in deployment["spec"]["template"]["spec"]["containers"]
    ]
    assert "nvcr.io/nvidia/gpu-operator:v25.3.2" in images, images
    # Its node-feature-discovery subchart comes with it (the operator schedules by NFD's labels).
    assert any("node-feature-discovery" in image for image in images), images
    assert {"clusterpolicies.nvidia.com", "nodefeatures.nfd.k8s-sigs.io"} <= {
        crd["metadata"]["name"] for crd in by_kind(objects, "CustomResourceDefinition")
    }
    apply(api_client, objects, release["release_namespace"])


def test_operator_with_mig_mixed_and_time_slicing(api_client, charts_cleanup):
    release = release_of(
        device_layer="gpu_operator",
        driver_by="gpu_operator",
        mig_strategy="mixed",
        time_slicing={"replicas": 4, "resources": ["nvidia.com/gpu", "nvidia.com/mig-1g.10gb"]},
    )
    assert release["returncode"] == 0, release
    objects = render(release, release["release_values"])
    (policy,) = by_kind(objects, "ClusterPolicy")
    assert policy["spec"]["driver"]["enabled"] is True and policy["spec"]["toolkit"]["enabled"] is False
    assert policy["spec"]["mig"]["strategy"] == "mixed"
    assert policy["spec"]["devicePlugin"]["config"] == {"name": "clusterproof-time-slicing", "default": "default"}
    (config,) = [obj for obj in by_kind(objects, "ConfigMap") if obj["metadata"]["name"] == "clusterproof-time-slicing"]
    sharing = yaml.safe_load(config["data"]["default"])["sharing"]["timeSlicing"]["resources"]
    assert sharing == [{"name": "nvidia.com/gpu", "replicas": 4}, {"name": "nvidia.com/mig-1g.10gb", "replicas": 4}]
    apply(api_client, objects, release["release_namespace"])


def test_device_plugin_alone_with_time_slicing(api_client, charts_cleanup):
    release = release_of(device_layer="device_plugin", mig_strategy="single", time_slicing={"replicas": 4})
    assert release["returncode"] == 0, release
    assert release["chart_version"] == versions.NVIDIA_DEVICE_PLUGIN.bare
    objects = render(release, release["release_values"])
    # The chart's other DaemonSet, the MPS control daemon, runs only on nodes labelled for MPS.
    (daemonset,) = [obj for obj in by_kind(objects, "DaemonSet") if obj["metadata"]["name"] == "nvidia-device-plugin"]
    plugin = next(
        c for c in daemonset["spec"]["template"]["spec"]["containers"] if c["name"] == "nvidia-device-plugin-ctr"
    )
    assert plugin["image"] == "nvcr.io/nvidia/k8s-device-plugin:" + versions.NVIDIA_DEVICE_PLUGIN.version
    assert {"name": "MIG_STRATEGY", "value": "single"} in plugin["env"]
    (config,) = by_kind(objects, "ConfigMap")
    sharing = yaml.safe_load(config["data"]["default"])["sharing"]["timeSlicing"]["resources"]
    assert sharing == [{"name": "nvidia.com/gpu", "replicas": 4}]
    apply(api_client, objects, release["release_namespace"])


def test_wrong_values_are_refused(api_client, charts_cleanup):
    # A MIG strategy pushed past the inventory schema: the ClusterPolicy CRD refuses it.
    release = release_of(device_layer="gpu_operator")
    values = {**release["release_values"], "mig": {"strategy": "both"}}
    with pytest.raises(ApiException) as refused:
        apply(api_client, render(release, values), release["release_namespace"])
    assert refused.value.status == 422 and "spec.mig.strategy" in refused.value.body
    # An update strategy the device plugin's DaemonSet cannot have: the API's validation refuses it.
    release = release_of(device_layer="device_plugin")
    values = {**release["release_values"], "updateStrategy": {"type": "AllAtOnce"}}
    with pytest.raises(ApiException) as refused:
        apply(api_client, render(release, values), release["release_namespace"])
    assert refused.value.status == 422 and "spec.updateStrategy" in refused.value.body


def test_the_module_names_a_bad_setting():
    release = release_of(device_layer="device_plugin", driver_by="gpu_operator", mig_strategy="both")
    assert release["returncode"] != 0
    assert release["msg"] == (
        "mig_strategy: expected one of none, single, mixed, found 'both'; driver_by: expected hosts (only the GPU "
        "operator installs it; clusterproof_gpu_device_layer is device_plugin), found 'gpu_operator'"
    )


def test_the_role_installs_the_device_plugin_on_the_sandbox_once(sandbox, api_client):
    """The playbook with the device plugin: check mode changes nothing, an install is idempotent.

    The sandbox's KWOK nodes carry nvidia.com/gpu.present, so the DaemonSet's pods land on them
    (KWOK reports them running) and Helm's wait is met."""
    settings = {"clusterproof_gpu_device_layer": "device_plugin", "clusterproof_gpu_time_slicing": {"replicas": 3}}
    layer = ["-e", json.dumps(settings)]
    apps = k8s.AppsV1Api(api_client)
    core = k8s.CoreV1Api(api_client)
    helm = str(sandbox_build.plan().binary("helm"))
    try:
        checked = run_playbook("playbooks/gpu_stack.yml", "--check", *layer, *sandbox.vars())
        assert checked.returncode == 0, checked.tail(5000)
        assert checked.recap()["changed"] >= 1
        assert apps.list_namespaced_daemon_set("nvidia-device-plugin").items == []

        first = run_playbook("playbooks/gpu_stack.yml", *layer, *sandbox.vars())
        assert first.returncode == 0, first.tail(5000)
        plugin = apps.read_namespaced_daemon_set("nvidia-device-plugin", "nvidia-device-plugin")
        assert plugin.status.desired_number_scheduled == 2  # the inventory's two GPU nodes
        # The inventory's time-slicing reached the chart through the site fact and the role.
        configs = core.list_namespaced_config_map("nvidia-device-plugin", label_selector="app.kubernetes.io/name")
        slicing = [yaml.safe_load(c.data["default"]) for c in configs.items if "default" in (c.data or {})]
        assert [s["sharing"]["timeSlicing"]["resources"] for s in slicing] == [
            [{"name": "nvidia.com/gpu", "replicas": 3}]
        ]

        again = run_playbook("playbooks/gpu_stack.yml", *layer, *sandbox.vars())
        assert again.returncode == 0, again.tail(5000)
        assert again.recap()["changed"] == 0, again.changed_tasks()
    finally:
        subprocess.run(
            [helm, "uninstall", "nvidia-device-plugin", "--namespace", "nvidia-device-plugin", "--wait"],
            env=dict(os.environ, KUBECONFIG=str(sandbox.kubeconfig)),
            capture_output=True,
            timeout=120,
        )
        try:
            core.delete_namespace("nvidia-device-plugin")
        except ApiException as error:
            if error.status != 404:
                raise
