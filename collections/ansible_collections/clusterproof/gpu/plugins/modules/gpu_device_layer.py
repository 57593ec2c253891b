#!/usr/bin/python
"""Work out the GPU device layer's Helm release: its chart in the cache, and the values for the site."""

DOCUMENTATION = r"""
module: gpu_device_layer
short_description: The Helm release (chart directory and values) of NVIDIA's GPU operator or device plugin
version_added: 0.1.0
author:
  - clusterproof developers
description:
  - Turns the site's GPU device layer settings into the Helm release that installs it, for
    kubernetes.core.helm to install; installs nothing itself.
  - The chart comes from its Go module at a pinned version (the GPU operator's from
    C(github.com/NVIDIA/gpu-operator), the device plugin's from C(github.com/NVIDIA/k8s-device-plugin))
    and is copied into the sandbox build cache's share directory; a chart already there is reused.
  - Reports C(changed) only when it copies a chart; in check mode it copies nothing.
  - Bad settings fail naming the option, what was expected and what was found.
options:
  device_layer:
    description: What advertises the GPUs; C(none) returns no release.
    type: str
    required: true
    choices: [gpu_operator, device_plugin, none]
  driver_by:
    description: Who installs the NVIDIA driver; C(gpu_operator) turns the operator's driver containers on.
    type: str
    default: hosts
  toolkit_by:
    description: Who installs the NVIDIA container toolkit; C(gpu_operator) turns the operator's toolkit containers on.
    type: str
    default: hosts
  mig_strategy:
    description: How MIG devices are advertised (none, single, mixed).
    type: str
    default: none
  time_slicing:
    description: "GPU time-slicing, C({replicas: N, resources: [nvidia.com/gpu]}); omitted for none."
    type: dict
  operator_version:
    description:
      - Image version of the GPU operator and its validator.
      - Left out, the pin, from C(plugins/module_utils/versions.py).
    type: str
  cache_dir:
    description: Root of the sandbox build cache; empty for the default.
    type: path
"""

EXAMPLES = r"""
- name: Work out the GPU operator's release, driver and toolkit left to the hosts
  clusterproof.gpu.gpu_device_layer:
    device_layer: gpu_operator
    mig_strategy: mixed
    time_slicing:
      replicas: 4
  register: release

- name: Install it
  kubernetes.core.helm:
    name: "{{ release.release_name }}"
    chart_ref: "{{ release.chart_ref }}"
    chart_version: "{{ release.chart_version }}"
    release_namespace: "{{ release.release_namespace }}"
    release_values: "{{ release.release_values }}"
"""

RETURN = r"""
release:
  description: Whether there is a release to install (false for device_layer none).
  returned: always
  type: bool
chart_ref:
  description: Directory of the chart in the cache.
  returned: when release
  type: str
chart_version:
  description: The chart's version, as its Chart.yaml gives it.
  returned: when release
  type: str
chart_module:
  description: The Go module and version the chart was taken from.
  returned: when release
  type: str
release_name:
  description: Name of the Helm release.
  returned: when release
  type: str
release_namespace:
  description: Namespace of the Helm release.
  returned: when release
  type: str
release_values:
  description: Values for the chart.
  returned: when release
  type: dict
"""

from pathlib import Path

from ansible_collections.clusterproof.gpu.plugins.module_utils.install import gpu_charts, gpu_device_layer
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import build as sandbox_build

# Option names are the inventory variables' without the clusterproof_gpu_ prefix.
_PREFIX = "clusterproof_gpu_"
_SETTINGS = ("device_layer", "driver_by", "toolkit_by", "mig_strategy", "time_slicing")

ARGUMENT_SPEC = {
    "device_layer": {"type": "str", "required": True, "choices": list(gpu_device_layer.LAYERS)},
    "driver_by": {"type": "str", "default": "hosts"},
    "toolkit_by": {"type": "str", "default": "hosts"},
    "mig_strategy": {"type": "str", "default": "none"},
    "time_slicing": {"type": "dict"},
    # Left out: the pin (gpu_device_layer.OPERATOR_IMAGE_VERSION, from module_utils/versions.py).
    "operator_version": {"type": "str"},
    "cache_dir": {"type": "path"},
}


def _chart(release, cache_dir, check_mode):
    """The release's chart in the build cache (fetched unless check mode), and whether it was (or would be) fetched."""
    try:
        plan = sandbox_build.plan(cache_root=Path(cache_dir) if cache_dir else None)
        if gpu_charts.is_current(plan.share_dir, gpu_charts.CHARTS[release.chart]):
            return gpu_charts.chart_dir(plan.share_dir, release.chart), False
        if check_mode:
            return gpu_charts.chart_dir(plan.share_dir, release.chart), True
        return gpu_charts.ensure_chart(plan.share_dir, plan.src_dir, release.chart, lambda message: None)
    except (RuntimeError, OSError) as error:
        raise runner.ModuleError("cannot fetch the %s chart from its Go module: %s" % (release.chart, error)) from error


def run(module):
    params = module.params
    settings = {_PREFIX + name: params[name] for name in _SETTINGS if params[name] is not None}
    # The same checks as the inventory's, so a role called with other variables is held to them too.
    declaration, errors = gpu_device_layer.check_declaration(settings, cluster_mode="existing")
    if errors:
        messages = [
            "%s: expected %s, found %r" % (error.field.removeprefix(_PREFIX), error.expected, error.found)
            for error in errors
        ]
        raise runner.ModuleError("; ".join(messages), errors=messages)
    release = gpu_device_layer.release_for(
        declaration, params["operator_version"] or gpu_device_layer.OPERATOR_IMAGE_VERSION
    )
    if release is None:
        return {"release": False}
    chart, fetched = _chart(release, params["cache_dir"], module.check_mode)
    return {
        "changed": fetched,
        "release": True,
        "chart_ref": str(chart),
        # In check mode a chart not yet fetched has no Chart.yaml to read; the pin stands for it.
        "chart_version": gpu_charts.chart_version(chart) if (chart / "Chart.yaml").is_file() else None,
        "chart_module": gpu_charts.CHARTS[release.chart].pin,
        "release_name": release.name,
        "release_namespace": release.namespace,
        "release_values": release.values,
    }


def main():
    runner.run_module(ARGUMENT_SPEC, run, doing="planning the GPU device layer")


if __name__ == "__main__":
    main()
