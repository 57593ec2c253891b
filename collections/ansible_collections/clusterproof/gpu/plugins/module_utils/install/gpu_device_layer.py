"""The GPU device layer: what makes a node's GPUs schedulable (``nvidia.com/gpu``), and its Helm values.

A site gets its GPUs advertised to Kubernetes by one of two NVIDIA charts: the GPU operator (device
plugin, GPU feature discovery, DCGM exporter, MIG manager, and optionally the driver and the
container toolkit as containers) or the device plugin alone. The sandbox needs neither: its KWOK
nodes advertise their simulated GPUs themselves.

This module holds the inventory's part of it (the ``clusterproof_gpu_*`` variables, checked by
``inventory_schema``) and turns a checked declaration into the release to install: chart, release
name, namespace and values. The time-slicing configuration travels in the values too: both charts
create the device plugin's ConfigMap from them. Either chart's device plugin hands a pod its GPUs as
volume mounts, which the hosts' container toolkit is set to require of unprivileged containers (see
``DEVICE_LIST_STRATEGY``).

Pure: plain mappings in, dataclasses and dicts out; nothing here touches a cluster or a file.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils import versions
from ansible_collections.clusterproof.gpu.plugins.module_utils.common.problems import FieldProblem

LAYERS = ("gpu_operator", "device_plugin", "none")
# Who installs the NVIDIA driver and the container toolkit on the GPU hosts: the host roles
# (playbooks/gpu_nodes.yml: nvidia_driver, nvidia_container_toolkit; or the OS image, as on DGX OS),
# or the GPU operator, as containers. Never both: the operator's driver container fails on a host
# whose driver is loaded.
HOST_SOFTWARE_BY = ("hosts", "gpu_operator")
MIG_STRATEGIES = ("none", "single", "mixed")
# Resources the device plugin advertises and can time-slice: whole GPUs, and MIG devices by profile
# (mixed strategy), e.g. nvidia.com/mig-1g.5gb.
_RESOURCE = re.compile(r"^nvidia\.com/(gpu|mig-\d+g\.\d+gb(\+me)?)$")

SITE_VARIABLES = {
    "clusterproof_gpu_device_layer": "what advertises the GPUs to Kubernetes: %s" % " | ".join(LAYERS),
    "clusterproof_gpu_driver_by": "who installs the NVIDIA driver: %s" % " | ".join(HOST_SOFTWARE_BY),
    "clusterproof_gpu_toolkit_by": "who installs the NVIDIA container toolkit: %s" % " | ".join(HOST_SOFTWARE_BY),
    "clusterproof_gpu_mig_strategy": "how MIG devices are advertised: %s" % " | ".join(MIG_STRATEGIES),
    "clusterproof_gpu_time_slicing": "GPU time-slicing: {replicas: N, resources: [nvidia.com/gpu, ...]}",
}

# The charts, as the Go modules carry them (module_utils/install/gpu_charts.py fetches them). The
# operator's own image, and its validator's, are pinned (versions.GPU_OPERATOR says why that one).
OPERATOR_RELEASE = "gpu-operator"
OPERATOR_IMAGE_VERSION = versions.GPU_OPERATOR.version
DEVICE_PLUGIN_RELEASE = "nvidia-device-plugin"
# Key of the time-slicing config in the device plugin's ConfigMap, and that ConfigMap's name (operator).
TIME_SLICING_CONFIG_KEY = "default"
TIME_SLICING_CONFIGMAP = "clusterproof-time-slicing"


# How the device plugin tells the container toolkit which GPUs a pod was allocated: as volume mounts
# (the host's /dev/null at /var/run/nvidia-container-devices/<GPU>), which a pod gets from the kubelet
# for its allocated devices, rather than NVIDIA_VISIBLE_DEVICES, which any pod can set. With the nvidia
# runtime as containerd's default, a pod that requests no GPU but sets NVIDIA_VISIBLE_DEVICES=all would
# otherwise see every GPU of its node. The toolkit must accept the mounts and ignore the variable from
# unprivileged containers: the nvidia_container_toolkit role sets that on the hosts
# (nvidia_container_toolkit_gpus_only_by_volume_mounts), and the operator's toolkit container gets
# TOOLKIT_VISIBLE_DEVICES_ENV where the operator installs the toolkit. The variable stays accepted
# from unprivileged containers (NVIDIA's default, which KAI's fractions need): the tenant admission
# policies decide who writes it in a project's pods (tenancy/admission.py). The pinned device plugin chart
# then adds CAP_SYS_ADMIN to its own pod, which the toolkit counts as privileged, so the plugin keeps
# seeing every GPU; the operator runs its device plugin privileged anyway.
DEVICE_LIST_STRATEGY = "volume-mounts"
# The toolkit container's settings (nvidia-ctk-installer, toolkit v1.17.8 as the operator pins it),
# the same two the role writes into /etc/nvidia-container-runtime/config.toml.
TOOLKIT_VISIBLE_DEVICES_ENV = (
    {"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", "value": "true"},
    {"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS", "value": "true"},
)


@dataclasses.dataclass(frozen=True)
class TimeSlicing:
    replicas: int
    resources: tuple[str, ...] = ("nvidia.com/gpu",)


@dataclasses.dataclass(frozen=True)
class DeviceLayerDeclaration:
    layer: str
    driver_by: str = "hosts"
    toolkit_by: str = "hosts"
    mig_strategy: str = "none"
    time_slicing: TimeSlicing | None = None


# A device-layer setting that breaks a rule: the variable, what was expected, the value found.
DeviceLayerError = FieldProblem


def default_layer(cluster_mode: str) -> str:
    """The sandbox's nodes are KWOK's, whose GPUs are simulated: nothing to advertise them. A real
    cluster gets the GPU operator, NVIDIA's supported way."""
    return "none" if cluster_mode == "sandbox" else "gpu_operator"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_declaration(
    site: Mapping[str, Any], cluster_mode: str
) -> tuple[DeviceLayerDeclaration | None, list[DeviceLayerError]]:
    """Check the site's ``clusterproof_gpu_*`` variables; return the declaration or every error."""
    errors: list[DeviceLayerError] = []

    def choice(variable: str, choices: tuple[str, ...], default: str) -> str:
        value = site.get(variable, default)
        if value not in choices:
            errors.append(DeviceLayerError(variable, "one of %s" % ", ".join(choices), value))
            return default
        return str(value)

    layer = choice("clusterproof_gpu_device_layer", LAYERS, default_layer(cluster_mode))
    driver_by = choice("clusterproof_gpu_driver_by", HOST_SOFTWARE_BY, "hosts")
    toolkit_by = choice("clusterproof_gpu_toolkit_by", HOST_SOFTWARE_BY, "hosts")
    mig_strategy = choice("clusterproof_gpu_mig_strategy", MIG_STRATEGIES, "none")
    for variable, value in (("clusterproof_gpu_driver_by", driver_by), ("clusterproof_gpu_toolkit_by", toolkit_by)):
        if value == "gpu_operator" and layer != "gpu_operator":
            expected = "hosts (only the GPU operator installs it; clusterproof_gpu_device_layer is %s)" % layer
            errors.append(DeviceLayerError(variable, expected, value))
    time_slicing = _check_time_slicing(site.get("clusterproof_gpu_time_slicing"), mig_strategy, errors)
    if layer == "none":
        # Settings that nothing would apply are a mistake in the inventory, not a preference.
        for variable in ("clusterproof_gpu_mig_strategy", "clusterproof_gpu_time_slicing"):
            if site.get(variable) not in (None, "none"):
                expected = "no setting while clusterproof_gpu_device_layer is none (nothing would apply it)"
                errors.append(DeviceLayerError(variable, expected, site[variable]))
    if errors:
        return None, errors
    return DeviceLayerDeclaration(layer, driver_by, toolkit_by, mig_strategy, time_slicing), []


def _check_time_slicing(value: Any, mig_strategy: str, errors: list[DeviceLayerError]) -> TimeSlicing | None:
    field = "clusterproof_gpu_time_slicing"
    if value is None:
        return None
    if not isinstance(value, Mapping):
        errors.append(DeviceLayerError(field, "a mapping {replicas: N, resources: [...]}", value))
        return None
    before = len(errors)
    for key in sorted(set(value) - {"replicas", "resources"}, key=str):
        errors.append(DeviceLayerError("%s.%s" % (field, key), "only replicas and resources", "an unknown key"))
    replicas = value.get("replicas")
    if not (_is_int(replicas) and replicas >= 2):
        expected = "an integer of at least 2 (pods sharing one GPU; leave time-slicing out for none)"
        errors.append(DeviceLayerError(field + ".replicas", expected, replicas))
    resources = value.get("resources", ["nvidia.com/gpu"])
    if not isinstance(resources, list) or not resources:
        errors.append(DeviceLayerError(field + ".resources", "a non-empty list of resource names", resources))
        return None
    for index, resource in enumerate(resources):
        where = "%s.resources[%d]" % (field, index)
        if not isinstance(resource, str) or not _RESOURCE.match(resource):
            errors.append(
                DeviceLayerError(where, "nvidia.com/gpu or a MIG profile nvidia.com/mig-<N>g.<M>gb", resource)
            )
        elif resource.startswith("nvidia.com/mig-") and mig_strategy != "mixed":
            expected = "nvidia.com/gpu: MIG profiles are resources of their own only with mig strategy mixed"
            errors.append(DeviceLayerError(where, expected, resource))
    if len(resources) != len(set(map(str, resources))):
        errors.append(DeviceLayerError(field + ".resources", "each resource once", resources))
    if len(errors) > before:
        return None
    return TimeSlicing(int(replicas), tuple(str(resource) for resource in resources))


def declaration_from_dict(data: Mapping[str, Any]) -> DeviceLayerDeclaration:
    """The declaration back from its ``dataclasses.asdict`` form (the clusterproof_site fact)."""
    slicing = data.get("time_slicing")
    return DeviceLayerDeclaration(
        layer=data["layer"],
        driver_by=data.get("driver_by", "hosts"),
        toolkit_by=data.get("toolkit_by", "hosts"),
        mig_strategy=data.get("mig_strategy", "none"),
        time_slicing=None if slicing is None else TimeSlicing(int(slicing["replicas"]), tuple(slicing["resources"])),
    )


def time_slicing_config(slicing: TimeSlicing) -> str:
    """The device plugin's config file (its v1 format) sharing each resource ``replicas`` ways.

    JSON, which the device plugin reads as the YAML it is."""
    config = {
        "version": "v1",
        "sharing": {
            "timeSlicing": {"resources": [{"name": name, "replicas": slicing.replicas} for name in slicing.resources]}
        },
    }
    return json.dumps(config, indent=2, sort_keys=True)


def operator_values(declaration: DeviceLayerDeclaration, operator_version: str = OPERATOR_IMAGE_VERSION) -> dict:
    """Values for the GPU operator chart: driver and toolkit only where the operator installs them, and
    GPUs handed to pods as volume mounts."""
    toolkit: dict[str, Any] = {"enabled": declaration.toolkit_by == "gpu_operator"}
    if toolkit["enabled"]:
        toolkit["env"] = [dict(variable) for variable in TOOLKIT_VISIBLE_DEVICES_ENV]
    # Helm replaces the chart's env list (PASS_DEVICE_SPECS, FAIL_ON_INIT_ERROR, DEVICE_ID_STRATEGY and
    # the rest) with this one; the operator's device plugin DaemonSet carries those same defaults and
    # sets the ClusterPolicy's entries over them, so only the strategy changes.
    device_plugin: dict[str, Any] = {"env": [{"name": "DEVICE_LIST_STRATEGY", "value": DEVICE_LIST_STRATEGY}]}
    if declaration.time_slicing is not None:
        device_plugin["config"] = {
            "create": True,
            "name": TIME_SLICING_CONFIGMAP,
            "default": TIME_SLICING_CONFIG_KEY,
            "data": {TIME_SLICING_CONFIG_KEY: time_slicing_config(declaration.time_slicing)},
        }
    return {
        "operator": {"version": operator_version},
        "validator": {"version": operator_version},
        "driver": {"enabled": declaration.driver_by == "gpu_operator"},
        "toolkit": toolkit,
        "devicePlugin": device_plugin,
        "mig": {"strategy": declaration.mig_strategy},
    }


def device_plugin_values(declaration: DeviceLayerDeclaration) -> dict:
    """Values for the device plugin chart alone (its image is the chart's own version)."""
    values: dict[str, Any] = {"migStrategy": declaration.mig_strategy, "deviceListStrategy": DEVICE_LIST_STRATEGY}
    if declaration.time_slicing is not None:
        # One config named "default": the chart's "named" fallback picks it on every node.
        values["config"] = {"map": {TIME_SLICING_CONFIG_KEY: time_slicing_config(declaration.time_slicing)}}
    return values


@dataclasses.dataclass(frozen=True)
class Release:
    """A Helm release to install: the chart (by its name in the chart cache) and the values."""

    chart: str
    name: str
    namespace: str
    values: dict


def release_for(declaration: DeviceLayerDeclaration, operator_version: str = OPERATOR_IMAGE_VERSION) -> Release | None:
    """The release that gives the site its device layer; None for layer none."""
    if declaration.layer == "gpu_operator":
        return Release(
            "gpu-operator", OPERATOR_RELEASE, OPERATOR_RELEASE, operator_values(declaration, operator_version)
        )
    if declaration.layer == "device_plugin":
        return Release(
            "nvidia-device-plugin", DEVICE_PLUGIN_RELEASE, DEVICE_PLUGIN_RELEASE, device_plugin_values(declaration)
        )
    return None
