"""The API endpoint clusterproof installs on a kubeadm site's control planes (docs/ha.md): a virtual
IP (``clusterproof_control_plane_vip``) that keepalived holds on one control plane at a time, and
haproxy on every control plane, listening on ENDPOINT_PORT and forwarding to every control plane's
API server. Whichever host holds the VIP, its haproxy reaches every API server that answers
``/readyz``; a dead holder, or a dead haproxy on it, moves the VIP to the next control plane.

The kubeadm HA guide's own recipe, from two Debian packages (in the bundle): no image to build, no
pod that needs the API it fronts.

Pure: the standard library only. It touches nothing: it returns the two configuration files' text
for a host, from the control planes' addresses and the host's network facts (Ansible's, gathered with
``gather_subset: network``); the role api_endpoint writes them.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from collections.abc import Mapping, Sequence
from typing import Any

# haproxy listens here on every control plane, all interfaces (so it need not hold the VIP to bind
# it). Not 6443: the API server itself listens on 6443 on all interfaces of the same host.
ENDPOINT_PORT = 8443
# The VRRP instance's id. Fixed: keepalived speaks unicast to the other control planes only, so two
# sites on one network do not hear each other; not 51, the id of every example, so that another
# keepalived on the network speaking multicast with the examples' id is not taken for a peer.
VIRTUAL_ROUTER_ID = 83
# Seconds between VRRP adverts. A backup takes over after 3 adverts missed plus its skew
# ((256 - priority) / 256 s): about 3.4 s for the second control plane (docs/ha.md).
ADVERT_INTERVAL = 1
# The first control plane's priority; each next one is one lower, so the election is settled by the
# inventory's order and no two hosts share a priority.
FIRST_PRIORITY = 150
# What keepalived asks every second: haproxy's service is active. A failed answer twice puts the VRRP
# instance in FAULT and gives up the VIP. A script, not vrrp_track_process: that listens to the
# kernel's process events, which the kernel sends only to a listener in the initial PID namespace, so
# on a control plane in a container (the lab's nspawn hosts) it would never see haproxy die.
HAPROXY_CHECK = "/usr/bin/systemctl is-active --quiet haproxy.service"
# haproxy's health check of each API server: /readyz over TLS (the API server's own certificate, not
# verified: haproxy is not a client of the cluster, it asks whether the server is ready), every 2 s;
# 2 failures mark it down, 2 successes up again.
CHECK_INTERVAL = "2s"
CHECK_FALL = 2
CHECK_RISE = 2
# Where the role writes the files (the packages' own paths, read by their systemd units).
HAPROXY_CONFIG_PATH = "/etc/haproxy/haproxy.cfg"
KEEPALIVED_CONFIG_PATH = "/etc/keepalived/keepalived.conf"

_HAPROXY_NAME = re.compile(r"[^A-Za-z0-9_.:-]")
_HEADER = (
    "# Written by clusterproof (role api_endpoint, module_utils/install/api_endpoint.py): edits are overwritten.\n"
)


class ApiEndpointError(ValueError):
    """What the control planes' facts or declaration lack, naming the host, the field, what was
    expected and what was found."""


@dataclasses.dataclass(frozen=True)
class ControlPlane:
    """A control-plane host: its inventory name and the address its API server advertises."""

    host: str
    address: str


def haproxy_config(control_planes: Sequence[ControlPlane], api_server_port: int) -> str:
    """haproxy.cfg for every control plane: ENDPOINT_PORT forwarded over TCP to every API server that
    answers /readyz. The same text on every control plane."""
    servers = "".join(
        "    server %s %s:%d\n" % (_HAPROXY_NAME.sub("_", plane.host), plane.address, api_server_port)
        for plane in control_planes
    )
    # One literal, formatted once: the sections, then the servers.
    sections = (
        "global\n"
        "    log /dev/log local0\n"
        "    chroot /var/lib/haproxy\n"
        # Debian's own: an operator drains a control plane with 'disable server' through it.
        "    stats socket /run/haproxy/admin.sock mode 660 level admin\n"
        "    user haproxy\n"
        "    group haproxy\n"
        "\n"
        "defaults\n"
        "    log global\n"
        "    mode tcp\n"
        "    option tcplog\n"
        "    option dontlognull\n"
        # A connection to an API server that died before its checks marked it down is tried again on
        # another one.
        "    retries 2\n"
        "    option redispatch\n"
        # The API servers are on the control planes' own network: a connection takes milliseconds.
        "    timeout connect 2s\n"
        # Watches stay open for minutes without a byte; the API server ends them itself.
        "    timeout client 15m\n"
        "    timeout server 15m\n"
        "    timeout check 2s\n"
        "\n"
        "frontend kube-apiserver\n"
        "    bind :%d\n"
        "    default_backend kube-apiserver\n"
        "\n"
        "backend kube-apiserver\n"
        "    balance roundrobin\n"
        "    option httpchk GET /readyz\n"
        "    http-check expect status 200\n"
        "    default-server check check-ssl verify none inter %s fall %d rise %d\n"
        % (
            ENDPOINT_PORT,
            CHECK_INTERVAL,
            CHECK_FALL,
            CHECK_RISE,
        )
    )
    return _HEADER + sections + servers


def priority_of(host: str, control_planes: Sequence[ControlPlane]) -> int:
    """The host's VRRP priority: the first control plane's highest."""
    hosts = [plane.host for plane in control_planes]
    return FIRST_PRIORITY - hosts.index(host)


def keepalived_config(
    host: str, control_planes: Sequence[ControlPlane], vip: str, interface: str, prefix_length: int
) -> str:
    """keepalived.conf for ``host``: one VRRP instance, BACKUP on every host (the priorities elect the
    first holder), unicast to the other control planes, the VIP on ``interface``; haproxy's health
    decides whether the host may hold it."""
    (own,) = [plane for plane in control_planes if plane.host == host]
    peers = "".join("        %s\n" % plane.address for plane in control_planes if plane.host != host)
    return (
        _HEADER + "global_defs {\n"
        "    router_id %s\n"
        # The check runs as root (systemctl), from a path only root may write.
        "    script_user root\n"
        "    enable_script_security\n"
        "}\n"
        "\n"
        "vrrp_script haproxy_active {\n"
        '    script "%s"\n'
        "    interval 1\n"
        "    timeout 1\n"
        "    fall 2\n"
        "    rise 2\n"
        "}\n"
        "\n"
        "vrrp_instance kube_apiserver {\n"
        "    state BACKUP\n"
        # A control plane that comes back does not take the VIP back: one failover, not two.
        "    nopreempt\n"
        "    interface %s\n"
        "    virtual_router_id %d\n"
        "    priority %d\n"
        "    advert_int %d\n"
        # Unicast: the site's network need not carry multicast, and only the control planes take part.
        "    unicast_src_ip %s\n"
        "    unicast_peer {\n"
        "%s"
        "    }\n"
        "    virtual_ipaddress {\n"
        "        %s/%d dev %s\n"
        "    }\n"
        "    track_script {\n"
        "        haproxy_active\n"
        "    }\n"
        "}\n"
    ) % (
        _HAPROXY_NAME.sub("_", host),
        HAPROXY_CHECK,
        interface,
        VIRTUAL_ROUTER_ID,
        priority_of(host, control_planes),
        ADVERT_INTERVAL,
        own.address,
        peers,
        vip,
        prefix_length,
        interface,
    )


def interface_for(address: str, facts: Mapping[str, Any]) -> tuple[str, int]:
    """The interface holding ``address`` and the prefix length of its network, from Ansible's network
    facts (``facts['interfaces']``, and each interface's ``ipv4`` and ``ipv4_secondaries``)."""
    for name in facts.get("interfaces", ()):
        # Ansible names an interface's facts with '-' as '_' (its 'device' keeps the real name).
        entry = facts.get(str(name).replace("-", "_"))
        # An address label (eth0:1) has an entry of its own, without 'device': its device lists it too.
        if not isinstance(entry, Mapping) or "device" not in entry:
            continue
        held = [entry.get("ipv4", {})] + list(entry.get("ipv4_secondaries", []))
        for ipv4 in held:
            if isinstance(ipv4, Mapping) and ipv4.get("address") == address:
                return str(entry["device"]), int(ipv4["prefix"])
    raise ApiEndpointError(
        "ansible_facts.interfaces: expected an interface holding %s (its IPv4 address), found none among %s"
        % (address, ", ".join(map(str, facts.get("interfaces", ()))) or "no interfaces")
    )


def host_configs(
    host: str,
    vip: str,
    control_planes: Sequence[ControlPlane],
    facts: Mapping[str, Any],
    api_server_port: int,
) -> dict[str, str]:
    """The two files for ``host``: ``haproxy`` and ``keepalived``. The VIP goes on the interface that
    holds the host's own address, with that network's prefix, and must lie in that network: a VIP
    outside it would be held but reached by no other host."""
    if host not in [plane.host for plane in control_planes]:
        raise ApiEndpointError(
            "host %s: expected a host of kube_control_plane (%s), found one that is not"
            % (host, ", ".join(plane.host for plane in control_planes))
        )
    (own,) = [plane for plane in control_planes if plane.host == host]
    interface, prefix_length = interface_for(own.address, facts)
    network = ipaddress.ip_network("%s/%d" % (own.address, prefix_length), strict=False)
    if ipaddress.ip_address(vip) not in network or vip in (
        str(network.network_address),
        str(network.broadcast_address),
    ):
        raise ApiEndpointError(
            "clusterproof_control_plane_vip: expected a host address in %s, the network of host %s's address %s "
            "(interface %s), found '%s'" % (network, host, own.address, interface, vip)
        )
    return {
        "haproxy": haproxy_config(control_planes, api_server_port),
        "keepalived": keepalived_config(host, control_planes, vip, interface, prefix_length),
    }
