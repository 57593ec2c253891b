"""Helm charts taken from inside Go modules, for sites without a chart repository.

Many projects ship their chart in their source tree, and the Go module proxy serves that tree at
every version it serves at all. A :class:`ChartSource` names the module, the version and the
chart's folder in it; :func:`chart_in_module` downloads the module (``go_modules``) and returns the
chart's folder in the Go module cache. The cache is read-only, which helm does not mind.

What it touches: the Go module cache, and the work directory given for a vouched download.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path, PurePosixPath

from ansible_collections.clusterproof.gpu.plugins.module_utils.install import go_modules

# A chart found at install time should come quickly; a proxy that hangs is an error to report.
CHART_DOWNLOAD_TIMEOUT = 600.0

# Raised for every way a chart cannot be had (the download's own errors included).
ChartSourceError = go_modules.GoModuleError


@dataclasses.dataclass(frozen=True)
class ChartSource:
    """Where a chart travels: a folder of a Go module at a version."""

    module: str
    version: str
    path: str
    # A module version whose go.sum vouches for ``version``: needed where the checksum database
    # does not answer for ``version`` (a pseudo-version), so the download is still verified.
    vouched_by: tuple[str, str] | None = None

    @property
    def name(self) -> str:
        """The chart's name: its folder's."""
        return PurePosixPath(self.path).name

    @property
    def pin(self) -> str:
        return "%s@%s" % (self.module, self.version)


def vouched_sums(go_sum: str, module: str, version: str) -> str:
    """The lines of ``go_sum`` for ``module`` at ``version`` (its zip and its go.mod)."""
    lines = [
        line for line in go_sum.splitlines() if line.split()[:2] in ([module, version], [module, version + "/go.mod"])
    ]
    if len(lines) != 2:
        raise ChartSourceError(
            "expected the go.sum to hold %s %s's two checksums (h1 of the module and of its go.mod), found %d line(s)"
            % (module, version, len(lines))
        )
    return "\n".join(lines) + "\n"


def module_dir(source: ChartSource, work: Path) -> Path:
    """The unpacked module of ``source``; ``work`` holds the wrapper module of a vouched download."""
    if source.vouched_by is None:
        return go_modules.download(source.module, source.version, timeout=CHART_DOWNLOAD_TIMEOUT).dir
    # A wrapper module whose go.sum carries the voucher's checksums for the pinned version: `go mod
    # download` then verifies against them instead of asking the checksum database.
    voucher = go_modules.download(*source.vouched_by, timeout=CHART_DOWNLOAD_TIMEOUT).dir
    sums = vouched_sums((voucher / "go.sum").read_text(), source.module, source.version)
    work.mkdir(parents=True, exist_ok=True)
    (work / "go.mod").write_text(
        "module clusterproof.local/charts/%s\n\ngo 1.24\n\nrequire %s %s\n"
        % (source.name, source.module, source.version)
    )
    (work / "go.sum").write_text(sums)
    return go_modules.download(source.module, source.version, work, CHART_DOWNLOAD_TIMEOUT).dir


def chart_in_module(source: ChartSource, work: Path | None = None) -> Path:
    """The chart of ``source`` in the Go module cache; refuses a folder without a Chart.yaml."""
    if work is None and source.vouched_by is not None:
        with tempfile.TemporaryDirectory(prefix="clusterproof-chart-") as scratch:
            return chart_in_module(source, Path(scratch))
    chart = module_dir(source, work or Path(".")) / source.path
    if not (chart / "Chart.yaml").is_file():
        raise ChartSourceError("%s has no chart at %s (no Chart.yaml there)" % (source.pin, source.path))
    return chart
