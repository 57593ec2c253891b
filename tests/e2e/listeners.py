"""The TCP sockets a sandbox's processes listen on, read from /proc as ``ss -ltnp`` would show them
(``ss`` need not be installed): each recorded process, with its children (Kueue runs under
unshare and sh), by the session it started."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import control_plane

TCP_LISTEN = "0A"
LOOPBACK = ("127.0.0.1", "::ffff:127.0.0.1")


def _session_pids(leader: int) -> list[int]:
    """Every process of the session ``leader`` started (each sandbox process starts its own), so
    that a process's children (Kueue runs under unshare and sh) are counted with it."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path("/proc/%s/stat" % entry).read_text()
        except OSError:
            continue
        # Fields after the command name: state, ppid, pgrp, session.
        if int(stat[stat.rindex(")") + 2 :].split()[3]) == leader:
            pids.append(int(entry))
    return pids


def _socket_inodes(pid: int) -> set[str]:
    inodes: set[str] = set()
    try:
        fds = list(Path("/proc/%d/fd" % pid).iterdir())
    except OSError:
        return inodes  # the process exited since it was listed
    for fd in fds:
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


def _address(hex_address: str) -> str:
    """An address of /proc/net/tcp{,6}: 32-bit words in host (little-endian) order."""
    words = [bytes.fromhex(hex_address[i : i + 8])[::-1] for i in range(0, len(hex_address), 8)]
    packed = b"".join(words)
    return socket.inet_ntop(socket.AF_INET if len(packed) == 4 else socket.AF_INET6, packed)


def _listeners(pid: int) -> dict[str, tuple[str, int]]:
    """The TCP sockets listening in ``pid``'s network namespace, by inode: (address, port)."""
    found = {}
    for table in ("tcp", "tcp6"):
        lines = Path("/proc/%d/net/%s" % (pid, table)).read_text().splitlines()[1:]
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == TCP_LISTEN:
                address, port = local.split(":")
                found[inode] = (_address(address), int(port, 16))
    return found


def sandbox_listeners(state_dir: Path) -> dict[str, set[tuple[str, int]]]:
    """Every TCP socket the sandbox's processes listen on, by component: read from /proc, as
    ``ss -ltnp`` would show them."""
    layout = control_plane.Layout(state_dir)
    by_component: dict[str, set[tuple[str, int]]] = {}
    for name in control_plane.recorded_components(layout):
        leader = control_plane.running_pid(layout, name)
        assert leader is not None, "%s is recorded but not running" % name
        sockets = by_component.setdefault(name, set())
        # The session shares the leader's network namespace (Kueue's unshare makes user and mount ones).
        listening = _listeners(leader)
        for pid in _session_pids(leader):
            sockets |= {listening[inode] for inode in _socket_inodes(pid) if inode in listening}
    return by_component


def off_loopback(listeners: dict[str, set[tuple[str, int]]]) -> dict[str, list[tuple[str, int]]]:
    """The sockets of ``listeners`` on any address but 127.0.0.1, by component (those with any)."""
    elsewhere = {name: sorted(s for s in sockets if s[0] not in LOOPBACK) for name, sockets in listeners.items()}
    return {name: sockets for name, sockets in elsewhere.items() if sockets}
