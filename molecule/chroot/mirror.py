#!/usr/bin/env python3
"""A local stand-in for an air-gapped site's mirror of NVIDIA's (and Kubernetes') package repositories.

    mirror.py build ROOT REPO...     signed flat apt repositories at ROOT/REPO/, key at ROOT/mirror-key.asc;
                                     REPO=DEBDIR adds the .debs of DEBDIR to that repository
    mirror.py serve ROOT STATE_DIR   serve ROOT on 127.0.0.1 (a free port); write STATE_DIR/{url,pid}
    mirror.py deb OUTDIR PACKAGE VERSION FILE=DEST...
                                     build OUTDIR/PACKAGE_VERSION_amd64.deb installing each FILE at DEST

NVIDIA's packages cannot be had here, so each repository holds one empty package of its own,
clusterproof-mirror-probe, that shows apt resolving packages through the source. The Release files
are signed with a key made for this run, so apt checks the source file and its key exactly as it
would against NVIDIA's repository or a real mirror. Debian's gpg and dpkg-deb make the key and the
package; nothing else is needed. A scenario that needs real packages builds them with ``deb`` (the
kubernetes_packages scenario packages the sandbox cache's kubeadm, kubelet and kubectl) and adds them
to a repository with REPO=DEBDIR.
"""

from __future__ import annotations

import gzip
import hashlib
import http.server
import os
import shutil
import subprocess
import sys
import tempfile
from email.utils import formatdate
from functools import partial
from pathlib import Path

KEY_NAME = "mirror-key.asc"
KEY_UID = "clusterproof molecule mirror <molecule@clusterproof.invalid>"
PROBE = "clusterproof-mirror-probe"
PROBE_VERSION = "1.0"


def _gpg(home: Path, *args: str, stdin: bytes | None = None) -> bytes:
    done = subprocess.run(
        ["gpg", "--homedir", str(home), "--batch", "--quiet", "--pinentry-mode", "loopback", "--passphrase", "", *args],
        input=stdin,
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit("gpg %s failed: %s" % (" ".join(args), done.stderr.decode(errors="replace")))
    return done.stdout


def _probe_package(repo: Path) -> str:
    """Build the probe package into ``repo``; return its Packages stanza."""
    control = {
        "Package": PROBE,
        "Version": PROBE_VERSION,
        "Architecture": "all",
        "Maintainer": KEY_UID,
        "Description": "probe of the clusterproof molecule mirror (empty)",
    }
    deb = repo / ("%s_%s_all.deb" % (PROBE, PROBE_VERSION))
    with tempfile.TemporaryDirectory() as staging:
        (Path(staging) / "DEBIAN").mkdir()
        (Path(staging) / "DEBIAN" / "control").write_text("".join("%s: %s\n" % item for item in control.items()))
        subprocess.run(
            ["dpkg-deb", "--root-owner-group", "--build", staging, str(deb)], capture_output=True, check=True
        )
    data = deb.read_bytes()
    fields = {**control, "Filename": deb.name, "Size": str(len(data)), "SHA256": hashlib.sha256(data).hexdigest()}
    return "".join("%s: %s\n" % item for item in fields.items())


def _stanza(deb: Path) -> str:
    """The Packages stanza of a .deb already in its repository."""
    control = subprocess.run(["dpkg-deb", "--field", str(deb)], capture_output=True, text=True, check=True).stdout
    data = deb.read_bytes()
    fields = "Filename: %s\nSize: %d\nSHA256: %s\n" % (deb.name, len(data), hashlib.sha256(data).hexdigest())
    return control.rstrip("\n") + "\n" + fields


def build_deb(out: Path, package: str, version: str, files: list[str]) -> Path:
    """A package of real files (binaries a scenario installs from the mirror), uncompressed: the
    binaries are large and the package never leaves the machine."""
    out.mkdir(parents=True, exist_ok=True)
    deb = out / ("%s_%s_amd64.deb" % (package, version))
    with tempfile.TemporaryDirectory() as staging:
        for spec in files:
            source, _, dest = spec.partition("=")
            target = Path(staging) / dest.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
        control = {
            "Package": package,
            "Version": version,
            "Architecture": "amd64",
            "Maintainer": KEY_UID,
            "Description": "%s for the clusterproof molecule mirror" % package,
        }
        (Path(staging) / "DEBIAN").mkdir()
        (Path(staging) / "DEBIAN" / "control").write_text("".join("%s: %s\n" % item for item in control.items()))
        subprocess.run(
            ["dpkg-deb", "--root-owner-group", "-Znone", "--build", staging, str(deb)], capture_output=True, check=True
        )
    print(deb)
    return deb


def _release(repo: Path) -> str:
    lines = [
        "Origin: clusterproof-molecule",
        "Label: clusterproof molecule mirror of %s" % repo.name,
        "Date: %s" % formatdate(usegmt=True),
        "SHA256:",
    ]
    for name in ("Packages", "Packages.gz"):
        data = (repo / name).read_bytes()
        lines.append(" %s %d %s" % (hashlib.sha256(data).hexdigest(), len(data), name))
    return "\n".join(lines) + "\n"


def build(root: Path, repos: list[str]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    # A short path: gpg-agent's socket path must fit in 108 bytes.
    home = Path(tempfile.mkdtemp(prefix="cp-gpg-"))
    try:
        _gpg(home, "--quick-generate-key", KEY_UID, "ed25519", "sign", "1d")
        (root / KEY_NAME).write_bytes(_gpg(home, "--armor", "--export"))
        for spec in repos:
            name, _, debs = spec.partition("=")
            repo = root / name
            repo.mkdir(parents=True, exist_ok=True)
            stanzas = [_probe_package(repo)]
            for deb in sorted(Path(debs).glob("*.deb")) if debs else []:
                shutil.copy2(deb, repo / deb.name)
                stanzas.append(_stanza(repo / deb.name))
            packages = "\n".join(stanzas).encode()
            (repo / "Packages").write_bytes(packages)
            (repo / "Packages.gz").write_bytes(gzip.compress(packages, mtime=0))
            release = _release(repo).encode()
            (repo / "Release").write_bytes(release)
            (repo / "InRelease").write_bytes(_gpg(home, "--clearsign", "--digest-algo", "SHA256", stdin=release))
            (repo / "Release.gpg").write_bytes(_gpg(home, "--armor", "--detach-sign", stdin=release))
    finally:
        subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], capture_output=True, check=False)
        shutil.rmtree(home, ignore_errors=True)
    print("mirror with %d repositories and key %s at %s" % (len(repos), KEY_NAME, root))


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        sys.stderr.write("%s %s\n" % (self.log_date_time_string(), format % args))


def serve(root: Path, state: Path) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(_QuietHandler, directory=str(root)))
    state.mkdir(parents=True, exist_ok=True)
    (state / "url").write_text("http://127.0.0.1:%d" % server.server_address[1])
    (state / "pid").write_text(str(os.getpid()))
    server.serve_forever()


def main(argv: list[str]) -> None:
    if len(argv) >= 3 and argv[0] == "build":
        build(Path(argv[1]), argv[2:])
    elif len(argv) == 3 and argv[0] == "serve":
        serve(Path(argv[1]), Path(argv[2]))
    elif len(argv) >= 5 and argv[0] == "deb":
        build_deb(Path(argv[1]), argv[2], argv[3], argv[4:])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
