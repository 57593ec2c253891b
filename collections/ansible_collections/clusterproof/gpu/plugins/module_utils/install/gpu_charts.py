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

import dataclasses
import shutil
from collections.abc import Callable
from pathlib import Path

from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import build as sandbox_build


@dataclasses.dataclass(frozen=True)
class ChartSource:
    """Where a chart lives: a Go module at a version, and the chart's directory inside it."""

    name: str
    module: str
    version: str
    path: str
    # A module version whose go.sum vouches for ``version``: needed where the checksum database
    # does not answer for ``version`` (a pseudo-version), so the download is still verified.
    vouched_by: tuple[str, str] | None = None


CHARTS = {
    "gpu-operator": ChartSource(
        "gpu-operator",
        "github.com/NVIDIA/gpu-operator",
        # v25.x tags are not Go module versions (no /v25 suffix); this commit is the one KAI
        # scheduler v0.12.0 builds against, and its go.sum holds the checksums.
        "v1.8.3-0.20250724212111-616690d88d86",
        "deployments/gpu-operator",
        vouched_by=(sandbox_build.KAI_MODULE, "v0.12.0"),
    ),
    "nvidia-device-plugin": ChartSource(
        "nvidia-device-plugin",
        "github.com/NVIDIA/k8s-device-plugin",
        "v0.18.2",
        "deployments/helm/nvidia-device-plugin",
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
        and stamp.read_text().strip() == "%s@%s" % (source.module, source.version)
    )


def vouched_sums(go_sum: str, module: str, version: str) -> str:
    """The lines of ``go_sum`` for ``module`` at ``version`` (its zip and its go.mod)."""
    lines = [
        line for line in go_sum.splitlines() if line.split()[:2] in ([module, version], [module, version + "/go.mod"])
    ]
    if len(lines) != 2:
        raise RuntimeError(
            "expected the go.sum to hold %s %s's two checksums (h1 of the module and of its go.mod), found %d line(s)"
            % (module, version, len(lines))
        )
    return "\n".join(lines) + "\n"


def _module_dir(source: ChartSource, work: Path) -> Path:
    env = sandbox_build._go_env()
    if source.vouched_by is None:
        return Path(sandbox_build._download(source.module, source.version, work, env)["Dir"])
    # A wrapper module whose go.sum carries the voucher's checksums for the pinned version: `go mod
    # download` then verifies against them instead of asking the checksum database.
    voucher = Path(sandbox_build._download(*source.vouched_by, work, env)["Dir"])
    sums = vouched_sums((voucher / "go.sum").read_text(), source.module, source.version)
    (work / "go.mod").write_text(
        "module clusterproof.local/charts/%s\n\ngo 1.24\n\nrequire %s %s\n"
        % (source.name, source.module, source.version)
    )
    (work / "go.sum").write_text(sums)
    downloaded = sandbox_build._download(source.module, source.version, work, env)
    if "Error" in downloaded:
        raise RuntimeError("go mod download %s@%s: %s" % (source.module, source.version, downloaded["Error"]))
    return Path(downloaded["Dir"])


def fetch_chart(share_dir: Path, src_dir: Path, source: ChartSource, progress: Progress = print) -> Path:
    """Copy ``source``'s chart out of the Go module cache into the share directory; return its directory."""
    work = src_dir / "charts" / source.name
    work.mkdir(parents=True, exist_ok=True)
    progress("copying the %s chart from %s@%s" % (source.name, source.module, source.version))
    chart = _module_dir(source, work) / source.path
    if not (chart / "Chart.yaml").is_file():
        raise RuntimeError("%s@%s has no chart at %s" % (source.module, source.version, source.path))
    target = chart_dir(share_dir, source.name)
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(chart, target)
    # The module cache is read-only; the copy must be ours to replace later.
    for path in target.rglob("*"):
        path.chmod(0o644 if path.is_file() else 0o755)
    target.chmod(0o755)
    _stamp(share_dir, source).write_text("%s@%s\n" % (source.module, source.version))
    return target


def chart_version(chart: Path) -> str:
    """The version a chart's Chart.yaml gives (what Helm records for the release)."""
    for line in (chart / "Chart.yaml").read_text().splitlines():
        if line.startswith("version:"):
            return line.split(":", 1)[1].strip().strip("\"'")
    raise RuntimeError("%s/Chart.yaml has no version" % chart)


def ensure_chart(plan: sandbox_build.BuildPlan, name: str, progress: Progress = print) -> tuple[Path, bool]:
    """The chart ``name`` in the cache, fetched if missing or of another pin; and whether it was fetched."""
    source = CHARTS[name]
    if is_current(plan.share_dir, source):
        return chart_dir(plan.share_dir, name), False
    if shutil.which("go") is None:
        raise RuntimeError("the %s chart comes from its Go module; 'go' is not on PATH" % name)
    return fetch_chart(plan.share_dir, plan.src_dir, source, progress), True
