"""The lab as data: its hosts, their addresses on the lab's bridge, and the checks on them. Pure.

A lab host is a name (a DNS label: it is the machine's hostname and its node name) and an IPv4
address in the bridge's subnet; the machine itself holds the bridge's first address. Nothing else
is routed: the hosts reach one another and this machine, and nothing beyond it.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.common.problems import FieldProblem

DEFAULT_BRIDGE = "cplab0"
DEFAULT_HOST_ADDRESS = "10.213.0.1/24"
# Linux interface names are at most 15 characters.
_BRIDGE_NAME = re.compile(r"^[a-z][a-z0-9-]{0,14}$")
_HOST_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
MAX_HOSTS = 16


class LabError(ValueError):
    """A lab that cannot be built as declared, or a step that failed; the message says which and why."""


@dataclasses.dataclass(frozen=True)
class LabHost:
    name: str
    address: str


@dataclasses.dataclass(frozen=True)
class LabPlan:
    bridge: str
    host_address: str  # this machine's address on the bridge, with the prefix length (10.213.0.1/24)
    hosts: tuple[LabHost, ...]

    @property
    def gateway(self) -> str:
        return self.host_address.split("/", 1)[0]

    @property
    def prefix_length(self) -> int:
        return ipaddress.ip_interface(self.host_address).network.prefixlen


def _problems(bridge: Any, host_address: Any, hosts: Any) -> list[FieldProblem]:
    problems: list[FieldProblem] = []
    if not isinstance(bridge, str) or not _BRIDGE_NAME.match(bridge):
        problems.append(FieldProblem("bridge", "an interface name of 1 to 15 lower-case letters, digits, -", bridge))
    try:
        interface = ipaddress.IPv4Interface(str(host_address))
        network = interface.network
        if network.prefixlen > 29 or not network.is_private:
            raise ValueError
    except ValueError:
        problems.append(FieldProblem("host_address", "a private IPv4 address with a prefix of /8 to /29", host_address))
        return problems
    if not isinstance(hosts, Mapping) or not 1 <= len(hosts) <= MAX_HOSTS:
        problems.append(FieldProblem("hosts", f"a mapping of 1 to {MAX_HOSTS} host names to addresses", hosts))
        return problems
    seen: dict[str, str] = {str(interface.ip): "this machine (host_address)"}
    for name, address in hosts.items():
        if not isinstance(name, str) or not _HOST_NAME.match(name):
            problems.append(FieldProblem(f"hosts.{name}", "a DNS label (it is the host's name)", name))
        try:
            ip = ipaddress.IPv4Address(str(address))
        except ValueError:
            problems.append(FieldProblem(f"hosts.{name}", f"an IPv4 address in {network}", address))
            continue
        if ip not in network or ip in (network.network_address, network.broadcast_address):
            problems.append(FieldProblem(f"hosts.{name}", f"a host address in {network}", address))
        elif str(ip) in seen:
            problems.append(
                FieldProblem(f"hosts.{name}", f"an address no other host has ({seen[str(ip)]} has it)", address)
            )
        seen[str(ip)] = name
    return problems


def make_plan(bridge: Any, host_address: Any, hosts: Any) -> LabPlan:
    """The lab from its declaration; raises LabError listing every field that breaks a rule."""
    problems = _problems(bridge, host_address, hosts)
    if problems:
        raise LabError(
            "the lab cannot be built as declared: "
            + "; ".join(f"{p.field}: expected {p.expected}, found {p.found!r}" for p in problems)
            + "; nothing was changed"
        )
    return LabPlan(
        bridge,
        str(host_address),
        tuple(LabHost(name, str(address)) for name, address in hosts.items()),
    )
