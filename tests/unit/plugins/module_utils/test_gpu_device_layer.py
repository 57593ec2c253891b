"""The GPU device layer: its settings' checks, and the Helm values each chart gets."""

from __future__ import annotations

import dataclasses
import json

import pytest
import yaml

from ansible_collections.clusterproof.gpu.plugins.module_utils.install import chart_source, gpu_charts
from ansible_collections.clusterproof.gpu.plugins.module_utils.install.gpu_device_layer import (
    DeviceLayerDeclaration,
    TimeSlicing,
    check_declaration,
    declaration_from_dict,
    device_plugin_values,
    operator_values,
    release_for,
)
from tests.conftest import REPO


def errors_of(site, mode="existing"):
    declaration, errors = check_declaration(site, mode)
    assert declaration is None
    return [(error.field, error.expected, error.found) for error in errors]


def test_defaults_are_none_on_the_sandbox_and_the_operator_elsewhere_with_host_software():
    assert check_declaration({}, "sandbox") == (DeviceLayerDeclaration("none"), [])
    for mode in ("existing", "kubeadm"):
        declaration, errors = check_declaration({}, mode)
        assert errors == []
        assert declaration == DeviceLayerDeclaration("gpu_operator", "hosts", "hosts", "none", None)


def test_a_full_declaration_is_read():
    site = {
        "clusterproof_gpu_device_layer": "gpu_operator",
        "clusterproof_gpu_driver_by": "gpu_operator",
        "clusterproof_gpu_toolkit_by": "hosts",
        "clusterproof_gpu_mig_strategy": "mixed",
        "clusterproof_gpu_time_slicing": {"replicas": 4, "resources": ["nvidia.com/gpu", "nvidia.com/mig-1g.5gb"]},
    }
    declaration, errors = check_declaration(site, "existing")
    assert errors == []
    assert declaration == DeviceLayerDeclaration(
        "gpu_operator", "gpu_operator", "hosts", "mixed", TimeSlicing(4, ("nvidia.com/gpu", "nvidia.com/mig-1g.5gb"))
    )


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("clusterproof_gpu_device_layer", "operator", "one of gpu_operator, device_plugin, none"),
        ("clusterproof_gpu_driver_by", "nvidia", "one of hosts, gpu_operator"),
        ("clusterproof_gpu_toolkit_by", True, "one of hosts, gpu_operator"),
        ("clusterproof_gpu_mig_strategy", "both", "one of none, single, mixed"),
    ],
)
def test_a_choice_outside_its_list_is_named(variable, value, expected):
    assert errors_of({variable: value}) == [(variable, expected, value)]


def test_only_the_operator_installs_driver_or_toolkit():
    site = {"clusterproof_gpu_device_layer": "device_plugin", "clusterproof_gpu_driver_by": "gpu_operator"}
    assert errors_of(site) == [
        (
            "clusterproof_gpu_driver_by",
            "hosts (only the GPU operator installs it; clusterproof_gpu_device_layer is device_plugin)",
            "gpu_operator",
        )
    ]


@pytest.mark.parametrize(
    ("value", "field", "expected"),
    [
        (4, "clusterproof_gpu_time_slicing", "a mapping {replicas: N, resources: [...]}"),
        ({"replicas": 1}, "clusterproof_gpu_time_slicing.replicas", "an integer of at least 2"),
        ({"replicas": "4"}, "clusterproof_gpu_time_slicing.replicas", "an integer of at least 2"),
        ({"replicas": 4, "resources": []}, "clusterproof_gpu_time_slicing.resources", "a non-empty list"),
        ({"replicas": 4, "resources": ["gpu"]}, "clusterproof_gpu_time_slicing.resources[0]", "nvidia.com/gpu or"),
        (
            {"replicas": 4, "resources": ["nvidia.com/mig-1g.5gb"]},
            "clusterproof_gpu_time_slicing.resources[0]",
            "nvidia.com/gpu: MIG profiles",
        ),
        ({"replicas": 4, "replica": 2}, "clusterproof_gpu_time_slicing.replica", "only replicas and resources"),
    ],
)
def test_bad_time_slicing_names_the_field(value, field, expected):
    errors = errors_of({"clusterproof_gpu_time_slicing": value})
    assert len(errors) == 1, errors
    assert errors[0][0] == field and errors[0][1].startswith(expected), errors


def test_settings_with_no_device_layer_are_errors():
    site = {"clusterproof_gpu_mig_strategy": "single", "clusterproof_gpu_time_slicing": {"replicas": 2}}
    assert [field for field, _, _ in errors_of(site, "sandbox")] == [
        "clusterproof_gpu_mig_strategy",
        "clusterproof_gpu_time_slicing",
    ]


VOLUME_MOUNTS = {"name": "DEVICE_LIST_STRATEGY", "value": "volume-mounts"}


def test_operator_values_leave_driver_and_toolkit_to_the_hosts_by_default():
    values = operator_values(DeviceLayerDeclaration("gpu_operator"))
    assert values == {
        "operator": {"version": "v25.3.2"},
        "validator": {"version": "v25.3.2"},
        "driver": {"enabled": False},
        # The hosts' toolkit is set by the nvidia_container_toolkit role, not by operator values.
        "toolkit": {"enabled": False},
        "devicePlugin": {"env": [VOLUME_MOUNTS]},
        "mig": {"strategy": "none"},
    }
    values = operator_values(DeviceLayerDeclaration("gpu_operator", "gpu_operator", "gpu_operator", "single"), "v9.9.9")
    assert values["driver"] == {"enabled": True} and values["toolkit"]["enabled"] is True
    assert values["mig"] == {"strategy": "single"} and values["operator"] == {"version": "v9.9.9"}


def test_either_chart_hands_pods_their_gpus_as_volume_mounts():
    """A pod that requests no GPU must not get one by setting NVIDIA_VISIBLE_DEVICES: the device plugin
    passes allocated GPUs as volume mounts, in both charts, with or without time-slicing."""
    for slicing in (None, TimeSlicing(4)):
        operator = operator_values(DeviceLayerDeclaration("gpu_operator", time_slicing=slicing))
        strategies = [env for env in operator["devicePlugin"]["env"] if env["name"] == "DEVICE_LIST_STRATEGY"]
        assert strategies == [VOLUME_MOUNTS]
        assert ("config" in operator["devicePlugin"]) is (slicing is not None)
        plugin = device_plugin_values(DeviceLayerDeclaration("device_plugin", time_slicing=slicing))
        assert plugin["deviceListStrategy"] == "volume-mounts"
    for layer in ("gpu_operator", "device_plugin"):
        release = release_for(DeviceLayerDeclaration(layer))
        assert "volume-mounts" in json.dumps(release.values), layer


def test_the_operators_toolkit_keeps_nvidia_s_default_and_accepts_volume_mounts():
    values = operator_values(DeviceLayerDeclaration("gpu_operator", toolkit_by="gpu_operator"))
    assert values["toolkit"] == {
        "enabled": True,
        "env": [
            {"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", "value": "true"},
            {"name": "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS", "value": "true"},
        ],
    }
    # The env entries are copies: changing one release's values leaves the next one's alone.
    values["toolkit"]["env"][0]["value"] = "false"
    again = operator_values(DeviceLayerDeclaration("gpu_operator", toolkit_by="gpu_operator"))
    assert again["toolkit"]["env"][0]["value"] == "true"


def test_the_operators_toolkit_and_the_host_role_set_the_same_two_settings():
    """The toolkit container's variables are the config keys the nvidia_container_toolkit role writes
    (NVIDIA's installer maps one to the other), with the values the role writes by default."""
    tasks = yaml.safe_load((REPO / "roles/nvidia_container_toolkit/tasks/visible-devices.yml").read_text())
    (task,) = tasks
    settings = task["vars"]["nvidia_container_toolkit_visible_devices_settings"]
    defaults = yaml.safe_load((REPO / "roles/nvidia_container_toolkit/defaults/main.yml").read_text())
    assert defaults["nvidia_container_toolkit_gpus_only_by_volume_mounts"] is False
    role_keys = {key.upper().replace("-", "_") for key in settings}
    env = operator_values(DeviceLayerDeclaration("gpu_operator", toolkit_by="gpu_operator"))["toolkit"]["env"]
    assert role_keys == {variable["name"] for variable in env}
    assert settings["accept-nvidia-visible-devices-as-volume-mounts"] is True


def test_time_slicing_becomes_the_device_plugin_config_in_either_chart():
    declaration = DeviceLayerDeclaration("gpu_operator", mig_strategy="mixed", time_slicing=TimeSlicing(4))
    config = operator_values(declaration)["devicePlugin"]["config"]
    assert (config["create"], config["name"], config["default"]) == (True, "clusterproof-time-slicing", "default")
    expected = {
        "version": "v1",
        "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}},
    }
    assert json.loads(config["data"]["default"]) == expected
    plugin = device_plugin_values(
        DeviceLayerDeclaration("device_plugin", mig_strategy="mixed", time_slicing=TimeSlicing(4))
    )
    assert plugin["migStrategy"] == "mixed"
    assert json.loads(plugin["config"]["map"]["default"]) == expected
    assert device_plugin_values(DeviceLayerDeclaration("device_plugin")) == {
        "migStrategy": "none",
        "deviceListStrategy": "volume-mounts",
    }


def test_release_per_layer_and_back_from_the_site_fact():
    assert release_for(DeviceLayerDeclaration("none")) is None
    operator = release_for(DeviceLayerDeclaration("gpu_operator"))
    assert (operator.chart, operator.name, operator.namespace) == ("gpu-operator", "gpu-operator", "gpu-operator")
    plugin = release_for(DeviceLayerDeclaration("device_plugin"))
    assert (plugin.chart, plugin.namespace) == ("nvidia-device-plugin", "nvidia-device-plugin")
    for chart in (operator.chart, plugin.chart):
        assert chart in gpu_charts.CHARTS
    declaration = DeviceLayerDeclaration("gpu_operator", "hosts", "gpu_operator", "single", TimeSlicing(3))
    assert declaration_from_dict(dataclasses.asdict(declaration)) == declaration


def test_vouched_sums_takes_the_two_lines_of_the_pinned_version():
    go_sum = "\n".join(
        [
            "example.com/a v1.0.0 h1:zip=",
            "example.com/a v1.0.0/go.mod h1:mod=",
            "example.com/a v1.1.0/go.mod h1:other=",
            "example.com/b v1.0.0 h1:b=",
        ]
    )
    assert chart_source.vouched_sums(go_sum, "example.com/a", "v1.0.0") == (
        "example.com/a v1.0.0 h1:zip=\nexample.com/a v1.0.0/go.mod h1:mod=\n"
    )
    with pytest.raises(RuntimeError, match="example.com/a v2.0.0's two checksums"):
        chart_source.vouched_sums(go_sum, "example.com/a", "v2.0.0")


def test_a_cached_chart_is_current_only_for_the_pinned_module_version(tmp_path):
    source = gpu_charts.CHARTS["nvidia-device-plugin"]
    chart = gpu_charts.chart_dir(tmp_path, source.name)
    assert not gpu_charts.is_current(tmp_path, source)
    chart.mkdir(parents=True)
    (chart / "Chart.yaml").write_text('apiVersion: v2\nname: nvidia-device-plugin\nversion: "0.18.2"\n')
    assert not gpu_charts.is_current(tmp_path, source)  # no stamp: copied by something else
    (chart.parent / ".version").write_text("%s@v0.17.4\n" % source.module)
    assert not gpu_charts.is_current(tmp_path, source)  # an older pin
    (chart.parent / ".version").write_text("%s@%s\n" % (source.module, source.version))
    assert gpu_charts.is_current(tmp_path, source)
    assert gpu_charts.chart_version(chart) == "0.18.2"
