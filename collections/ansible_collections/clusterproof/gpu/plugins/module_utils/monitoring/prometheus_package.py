"""Prometheus and promtool from Debian's package at the pin, into a per-machine cache.

The package (``versions.PROMETHEUS``: Debian's build of Prometheus for the DEBIAN_SUITE) is fetched
with ``apt-get download`` against package lists of the cache's own (``apt-get update`` with the
machine's sources, into the cache: nothing is installed, no root is needed) and its two programs
unpacked with ``dpkg-deb``. The folder is named after the package version, so a new pin fetches
beside the old one; a folder whose programs do not say the pinned version is fetched again.

Measured cold (no lists, no package; 2 cores): 4.8 s, 33 MB downloaded (14 MB of package lists, the
19 MB package), 94 MB unpacked (the two programs, statically linked Go).

What it touches: the cache folder and the network, through apt. Nothing else.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import pwd
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

from ansible_collections.clusterproof.gpu.plugins.module_utils import versions
from ansible_collections.clusterproof.gpu.plugins.module_utils.common.fields import Below

PROGRAMS = ("prometheus", "promtool")


class PrometheusFetchError(RuntimeError):
    """The package could not be had; the message says which, what apt said and where to look."""


def default_cache_root() -> Path:
    """``$XDG_CACHE_HOME/clusterproof/monitoring`` (``~/.cache/clusterproof/monitoring``)."""
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "clusterproof" / "monitoring"


@dataclasses.dataclass(frozen=True)
class PrometheusPrograms:
    """Where the pinned package's programs are, once fetched."""

    folder: Path
    pin: versions.Pin = versions.PROMETHEUS

    @classmethod
    def under(cls, cache_root: Path, pin: versions.Pin = versions.PROMETHEUS) -> PrometheusPrograms:
        return cls(cache_root / ("%s-%s" % (pin.path, pin.package_version)), pin)

    bin = Below("folder", "bin")
    prometheus = Below("folder", "bin", "prometheus")
    promtool = Below("folder", "bin", "promtool")
    stamp = Below("folder", ".version")

    def present(self) -> bool:
        """The programs are there and were unpacked from the pinned package version."""
        return (
            all((self.bin / program).is_file() for program in PROGRAMS)
            and self.stamp.is_file()
            and self.stamp.read_text().strip() == self.pin.package_version
        )


def _apt(folder: Path, *args: str) -> None:
    options = [
        "-o", "Dir::State::Lists=%s" % (folder / "lists"),
        "-o", "Dir::Cache=%s" % folder,
        "-o", "Dir::Cache::archives=%s" % (folder / "archives"),
        "-o", "Debug::NoLocking=1",
        "-o", "APT::Sandbox::User=%s" % _current_user(),
        "-q",
    ]  # fmt: skip
    done = subprocess.run(["apt-get", *options, *args], cwd=folder, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise PrometheusFetchError(
            "apt-get %s failed (exit %d): %s" % (" ".join(args), done.returncode, (done.stderr or done.stdout).strip())
        )


def _current_user() -> str:
    return pwd.getpwuid(os.getuid()).pw_name


def _unpack(deb: Path, into: Path, package_version: str) -> None:
    """The two programs out of the package's data archive (``dpkg-deb --fsys-tarfile``)."""
    shown = subprocess.run(
        ["dpkg-deb", "--showformat", "${Version}", "--show", str(deb)], capture_output=True, text=True, check=False
    )
    if shown.stdout.strip() != package_version:
        raise PrometheusFetchError(
            "%s: expected package version %s, found %r" % (deb, package_version, shown.stdout.strip() or shown.stderr)
        )
    into.mkdir(parents=True, exist_ok=True)
    with subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        with tarfile.open(fileobj=proc.stdout, mode="r|") as archive:
            for member in archive:
                name = member.name.removeprefix("./")
                if member.isfile() and name in {"usr/bin/%s" % program for program in PROGRAMS}:
                    source = archive.extractfile(member)
                    assert source is not None
                    target = into / Path(name).name
                    with target.open("wb") as out:
                        shutil.copyfileobj(source, out)
                    target.chmod(0o755)
    missing = [program for program in PROGRAMS if not (into / program).is_file()]
    if missing:
        raise PrometheusFetchError("%s holds no usr/bin/%s" % (deb, ", usr/bin/".join(missing)))


def fetch(cache_root: Path | None = None, pin: versions.Pin = versions.PROMETHEUS) -> tuple[PrometheusPrograms, bool]:
    """The pinned programs, fetched when the cache lacks them: (where they are, whether fetched now)."""
    programs = PrometheusPrograms.under(cache_root or default_cache_root(), pin)
    if programs.present():
        return programs, False
    programs.folder.parent.mkdir(parents=True, exist_ok=True)
    with _locked(programs.folder.with_name(programs.folder.name + ".lock")):
        if programs.present():  # another process fetched it while this one waited
            return programs, False
        _fetch_into(programs, pin)
    return programs, True


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One fetch at a time per cache folder (parallel test workers share the cache)."""
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _fetch_into(programs: PrometheusPrograms, pin: versions.Pin) -> None:
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        raise PrometheusFetchError(
            "fetching %s %s needs apt-get and dpkg-deb (a Debian machine); found neither in PATH"
            % (pin.path, pin.package_version)
        )
    work = programs.folder.with_name(programs.folder.name + ".partial")
    shutil.rmtree(work, ignore_errors=True)
    for folder in ("lists/partial", "archives/partial"):
        (work / folder).mkdir(parents=True)
    try:
        _apt(work, "update")
        _apt(work, "download", "%s=%s" % (pin.path, pin.package_version))
        (deb,) = work.glob("%s_*.deb" % pin.path)
        _unpack(deb, work / "bin", pin.package_version)
        (work / ".version").write_text(pin.package_version + "\n")
        shutil.rmtree(work / "lists")
        shutil.rmtree(work / "archives")
        deb.unlink()
    except (PrometheusFetchError, ValueError, OSError) as error:
        raise PrometheusFetchError(
            "could not fetch Debian's %s %s into %s: %s" % (pin.path, pin.package_version, programs.folder, error)
        ) from error
    shutil.rmtree(programs.folder, ignore_errors=True)
    work.rename(programs.folder)


def main() -> int:
    """Fetch, and print where the programs are (``python -m ...monitoring.prometheus_package``)."""
    programs, fetched = fetch()
    print("%s %s in %s" % ("fetched" if fetched else "cached:", programs.pin.package_version, programs.bin))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
