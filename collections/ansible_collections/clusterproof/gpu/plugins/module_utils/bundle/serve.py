"""Serve a bundle to a site's hosts: its apt repository and its Helm charts over HTTP and its registry
(docker-registry, read-only), on one address of this machine (the lab's bridge address, or a site's
mirror host).

``start`` is idempotent: servers already running for the same bundle, address and ports are left
as they are. ``stop`` stops the servers it recorded, and only those. The record
(``<state>/serve.json``) holds their process ids with their start times, so a pid the kernel has
reused for another process is never signalled.

What it touches: the state directory, the two server processes, the ports it binds.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.common.wait import wait_until


class ServeError(RuntimeError):
    """The bundle could not be served; the message says why and where the log is."""


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """Where the bundle is served: the apt repository's URL, the registry's host:port, the charts' URL."""

    address: str
    apt_port: int
    registry_port: int
    charts_port: int = 8082

    @property
    def apt_url(self) -> str:
        return "http://%s:%d/" % (self.address, self.apt_port)

    @property
    def registry(self) -> str:
        return "%s:%d" % (self.address, self.registry_port)

    @property
    def charts_url(self) -> str:
        return "http://%s:%d/" % (self.address, self.charts_port)

    @property
    def ports(self) -> tuple[int, int, int]:
        return (self.apt_port, self.registry_port, self.charts_port)


def registry_config(storage: Path, address: str, read_only: bool) -> str:
    """docker-registry's configuration (JSON, which its YAML reader takes): filesystem storage in the
    bundle, no upload purging (the storage is the bundle), read-only when serving."""
    config = {
        "version": 0.1,
        "log": {"level": "warn"},
        "storage": {
            "filesystem": {"rootdirectory": str(storage)},
            "maintenance": {"uploadpurging": {"enabled": False}, "readonly": {"enabled": read_only}},
        },
        "http": {"addr": address},
    }
    return json.dumps(config, indent=2) + "\n"


def _start_time(pid: int) -> str | None:
    try:
        return Path("/proc/%d/stat" % pid).read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _record(state: Path) -> dict[str, Any] | None:
    try:
        return json.loads((state / "serve.json").read_text())
    except (OSError, ValueError):
        return None


def _alive(record: dict[str, Any]) -> bool:
    return all(_start_time(process["pid"]) == process["start"] for process in record.get("processes", []))


def _listening(address: str, port: int) -> bool:
    try:
        socket.create_connection((address, port), timeout=1).close()
        return True
    except OSError:
        return False


def running(state: Path) -> dict[str, Any] | None:
    """The record of the servers running now, or None."""
    record = _record(state)
    return record if record and _alive(record) else None


def start(bundle: Path, endpoint: Endpoint, state: Path, timeout: float = 20) -> bool:
    """Serve ``bundle`` at ``endpoint``; returns whether anything was started."""
    wanted = {"bundle": str(bundle), **dataclasses.asdict(endpoint)}
    current = running(state)
    if current and all(current.get(key) == value for key, value in wanted.items()):
        return False
    if current:
        stop(state)
    for part in ("apt/InRelease", "registry", "charts", "manifest.json"):
        if not (bundle / part).exists():
            raise ServeError(
                "%s is not a built bundle: it has no %s (./clusterproof bundle builds one)" % (bundle, part)
            )
    for port in endpoint.ports:
        if _listening(endpoint.address, port):
            raise ServeError("%s:%d is already taken by another program" % (endpoint.address, port))
    state.mkdir(parents=True, exist_ok=True)
    config = state / "registry.yml"
    config.write_text(registry_config(bundle / "registry", endpoint.registry, read_only=True))
    log = (state / "serve.log").open("ab")
    commands = [
        ["docker-registry", "serve", str(config)],
        _http_server(endpoint.address, bundle / "apt", endpoint.apt_port),
        _http_server(endpoint.address, bundle / "charts", endpoint.charts_port),
    ]
    processes = []
    for command in commands:
        process = subprocess.Popen(command, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
        processes.append({"pid": process.pid, "start": _start_time(process.pid), "command": command[0]})
    (state / "serve.json").write_text(json.dumps({**wanted, "processes": processes}, indent=2) + "\n")

    def up() -> str:
        if all(_listening(endpoint.address, port) for port in endpoint.ports):
            return "listening"
        return "starting" if _alive({"processes": processes}) else "exited"

    if wait_until(up, lambda seen: seen != "starting", timeout=timeout, interval=0.2).value != "listening":
        stop(state)
        raise ServeError("the bundle's servers did not start on %s (log: %s)" % (endpoint.address, state / "serve.log"))
    return True


def _gone(process: dict[str, Any]) -> bool:
    """Whether a recorded server has exited; reaps it if it is this process's child."""
    if _start_time(process["pid"]) != process["start"]:
        return True
    _reap(process["pid"])
    return False


def _http_server(address: str, folder: Path, port: int) -> list[str]:
    return [sys.executable, "-m", "http.server", "--bind", address, "--directory", str(folder), str(port)]


def stop(state: Path, timeout: float = 10) -> bool:
    """Stop the servers ``start`` recorded; returns whether any was running."""
    record = _record(state)
    if record is None:
        return False
    stopped = False
    for process in record.get("processes", []):
        if _start_time(process["pid"]) != process["start"]:
            continue
        stopped = True
        os.killpg(process["pid"], signal.SIGTERM)
        wait_until(lambda process=process: _gone(process), timeout=timeout, interval=0.1)
        if _start_time(process["pid"]) == process["start"]:
            os.killpg(process["pid"], signal.SIGKILL)
            _reap(process["pid"])
    (state / "serve.json").unlink(missing_ok=True)
    return stopped


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
