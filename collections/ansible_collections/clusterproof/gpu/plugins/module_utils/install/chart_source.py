"""Helm charts taken from inside Go modules, for sites without a chart repository.

Many projects ship their chart in their source tree, and the Go module proxy serves that tree at
every version it serves at all. ``go mod download -json <module>@<version>`` unpacks the module
into the Go module cache and names the directory (``Dir``); the chart is a folder of it. The cache
is read-only, which helm does not mind.

What it touches: the Go module cache. Nothing else.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path


class ChartSourceError(RuntimeError):
    """A chart could not be found in the Go module named; the message says why and what to do."""


def go_module_dir(module: str, version: str, timeout: float = 600.0) -> Path:
    """The unpacked source of ``module@version`` (downloaded into the Go module cache if need be)."""
    env = dict(os.environ, GOTOOLCHAIN="local", GOFLAGS="-mod=mod")
    # Outside any module, so that no go.mod of the working directory gets in the way.
    with tempfile.TemporaryDirectory(prefix="clusterproof-chart-") as empty:
        try:
            done = subprocess.run(
                ["go", "mod", "download", "-json", "%s@%s" % (module, version)],
                cwd=empty,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except FileNotFoundError as error:
            raise ChartSourceError("charts are taken from Go modules, and 'go' is not on PATH") from error
    try:
        answer = json.loads(done.stdout)
    except ValueError as error:
        raise ChartSourceError(
            "go mod download %s@%s failed: %s" % (module, version, (done.stderr or done.stdout).strip())
        ) from error
    if answer.get("Error") or not answer.get("Dir"):
        raise ChartSourceError(
            "the Go module proxy does not serve %s@%s: %s" % (module, version, answer.get("Error") or "no Dir")
        )
    return Path(answer["Dir"])


def chart_in_module(module: str, version: str, path: str) -> Path:
    """The chart at ``path`` inside ``module@version``; refuses a folder without a Chart.yaml."""
    chart = go_module_dir(module, version) / path
    if not (chart / "Chart.yaml").is_file():
        raise ChartSourceError("%s@%s has no chart at %s (no Chart.yaml there)" % (module, version, path))
    return chart
