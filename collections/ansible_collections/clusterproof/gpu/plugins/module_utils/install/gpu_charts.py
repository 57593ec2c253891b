"""NVIDIA's GPU operator and device plugin charts, taken out of their Go modules into the chart cache.

Helm chart repositories are out of reach on the machines this runs on, but both charts travel
inside their projects' Go modules, which the Go module proxy serves. Each chart is copied from the
module cache into the sandbox build cache's share directory (next to KAI scheduler's chart) and
stamped with the module version it came from, so a new pin replaces it and an unchanged one is
reused. Both charts bring their node-feature-discovery subchart with them (the operator's as a
directory, the device plugin's as an archive), so nothing is fetched at install time.

What it touches: ``<share_dir>/<chart>/`` and ``<src_dir>/charts/<chart>/`` of the build cache, and
the Go module cache. The repository never holds a chart.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from ansible_collections.clusterproof.gpu.plugins.module_utils import versions
from ansible_collections.clusterproof.gpu.plugins.module_utils.install import go_modules
from ansible_collections.clusterproof.gpu.plugins.module_utils.install.chart_source import ChartSource, chart_in_module

# The two charts, pinned: the operator's at a pseudo-version whose checksums the voucher's go.sum holds
# (module_utils/versions.py says why), the device plugin's at a release.
_OPERATOR, _VOUCHER = versions.GPU_OPERATOR_CHART, versions.GPU_OPERATOR_CHART_VOUCHER
CHARTS = {
    "gpu-operator": ChartSource(
        _OPERATOR.source, _OPERATOR.version, _OPERATOR.path, vouched_by=(_VOUCHER.source, _VOUCHER.version)
    ),
    "nvidia-device-plugin": ChartSource(
        versions.NVIDIA_DEVICE_PLUGIN.source, versions.NVIDIA_DEVICE_PLUGIN.version, versions.NVIDIA_DEVICE_PLUGIN.path
    ),
}

Progress = Callable[[str], None]


def chart_dir(share_dir: Path, name: str) -> Path:
    return share_dir / name / "chart"


def _stamp(share_dir: Path, source: ChartSource) -> Path:
    return share_dir / source.name / ".version"


def is_current(share_dir: Path, source: ChartSource) -> bool:
    """The chart is in the cache, copied from the pinned module version."""
    stamp = _stamp(share_dir, source)
    return (
        (chart_dir(share_dir, source.name) / "Chart.yaml").is_file()
        and stamp.is_file()
        and stamp.read_text().strip() == source.pin
    )


def fetch_chart(share_dir: Path, src_dir: Path, source: ChartSource, progress: Progress = print) -> Path:
    """Copy ``source``'s chart out of the Go module cache into the share directory; return its directory."""
    work = src_dir / "charts" / source.name
    progress("copying the %s chart from %s" % (source.name, source.pin))
    chart = chart_in_module(source, work)
    target = go_modules.copy_out(chart, chart_dir(share_dir, source.name))
    _stamp(share_dir, source).write_text(source.pin + "\n")
    return target


def chart_version(chart: Path) -> str:
    """The version a chart's Chart.yaml gives (what Helm records for the release)."""
    for line in (chart / "Chart.yaml").read_text().splitlines():
        if line.startswith("version:"):
            return line.split(":", 1)[1].strip().strip("\"'")
    raise RuntimeError("%s/Chart.yaml has no version" % chart)


def ensure_chart(share_dir: Path, src_dir: Path, name: str, progress: Progress = print) -> tuple[Path, bool]:
    """The chart ``name`` in the cache (the sandbox build's ``share_dir`` and ``src_dir``), fetched if
    missing or of another pin; and whether it was fetched."""
    source = CHARTS[name]
    if is_current(share_dir, source):
        return chart_dir(share_dir, name), False
    if shutil.which("go") is None:
        raise RuntimeError("the %s chart comes from its Go module; 'go' is not on PATH" % name)
    return fetch_chart(share_dir, src_dir, source, progress), True
