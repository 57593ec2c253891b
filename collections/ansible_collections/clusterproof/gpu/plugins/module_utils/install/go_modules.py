"""The one place that downloads Go modules: ``go mod download -json <module>@<version>``.

Everything clusterproof takes from upstream travels as a Go module through the Go module proxy,
checksummed by Go's sum database: the sandbox's binaries (``sandbox.build``), the Helm charts of
the GPU device layer and of the storage provisioners (``chart_source``), the CNI manifest
(``kubernetes_cni``). Each asks here for a module version and gets the unpacked source directory
(``Dir``) and its go.mod (``GoMod``) in the Go module cache, which is read-only.

What it touches: the Go module cache (and the network, through the module proxy).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path


class GoModuleError(RuntimeError):
    """A module version could not be downloaded; the message says which and what Go said."""


@dataclasses.dataclass(frozen=True)
class GoModule:
    """A module version unpacked in the Go module cache."""

    path: str
    version: str
    dir: Path
    go_mod: Path


def go_env(gobin: Path | None = None) -> dict[str, str]:
    """The environment every go command of clusterproof runs with: the local toolchain (never one
    Go would download itself), static binaries, go.mod updated as needed, no local paths in binaries."""
    env = dict(os.environ)
    env["CGO_ENABLED"] = "0"
    env["GOFLAGS"] = "-mod=mod -trimpath"
    env["GOTOOLCHAIN"] = "local"
    if gobin is not None:
        env["GOBIN"] = str(gobin)
    return env


def download(module: str, version: str, cwd: Path | None = None, timeout: float | None = None) -> GoModule:
    """``module@version`` in the Go module cache, downloaded if it is not there.

    ``cwd`` is a directory whose go.mod/go.sum take part (a wrapper module whose go.sum vouches for
    a pseudo-version); without it the download runs outside any module, so that no go.mod of the
    working directory gets in the way. ``timeout`` bounds a download that should be quick (a chart
    at install time); the build waits as long as the proxy takes.
    """
    if cwd is None:
        with tempfile.TemporaryDirectory(prefix="clusterproof-go-") as empty:
            return download(module, version, Path(empty), timeout)
    wanted = "%s@%s" % (module, version)
    try:
        done = subprocess.run(
            ["go", "mod", "download", "-json", wanted],
            cwd=cwd,
            env=go_env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError as error:
        raise GoModuleError("%s comes from its Go module, and 'go' is not on PATH" % wanted) from error
    except subprocess.TimeoutExpired as error:
        raise GoModuleError("go mod download %s took more than %d s" % (wanted, timeout)) from error
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        answer = {"Error": (done.stderr or done.stdout).strip() or "no output (exit %d)" % done.returncode}
    if answer.get("Error") or not answer.get("Dir"):
        raise GoModuleError("go mod download %s failed: %s" % (wanted, answer.get("Error") or "no Dir in its answer"))
    return GoModule(module, version, Path(answer["Dir"]), Path(answer["GoMod"]))


def copy_out(source: Path, target: Path, ignore: Callable[[str, list[str]], Iterable[str]] | None = None) -> Path:
    """Copy a folder out of the (read-only) module cache to ``target``, replacing what was there,
    with ordinary permissions: the copy must be ours to replace later."""
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target, ignore=ignore)
    for path in target.rglob("*"):
        path.chmod(0o644 if path.is_file() else 0o755)
    target.chmod(0o755)
    return target
