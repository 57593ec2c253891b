"""The API endpoint clusterproof installs: haproxy and keepalived configuration per control plane,
the interface that holds a host's address, and the filter the role api_endpoint calls."""

from __future__ import annotations

import pytest

from ansible_collections.clusterproof.gpu.plugins.filter import api_endpoint as api_endpoint_filters
from ansible_collections.clusterproof.gpu.plugins.filter import control_plane as control_plane_filters
from ansible_collections.clusterproof.gpu.plugins.module_utils.install import api_endpoint
from ansible_collections.clusterproof.gpu.plugins.module_utils.inventory.schema import validate_site

PLANES = [
    api_endpoint.ControlPlane("cp-1", "10.0.0.1"),
    api_endpoint.ControlPlane("cp-2", "10.0.0.2"),
    api_endpoint.ControlPlane("cp-3", "10.0.0.3"),
]


def facts(address="10.0.0.2", prefix="24", device="eth-0", secondaries=()):
    """Ansible's network facts of a host with loopback and one interface (its facts' key with '_')."""
    return {
        "interfaces": ["lo", device],
        "default_ipv4": {"address": address, "interface": device},
        "lo": {"device": "lo", "ipv4": {"address": "127.0.0.1", "prefix": "8"}},
        device.replace("-", "_"): {
            "device": device,
            "ipv4": {"address": address, "prefix": prefix},
            "ipv4_secondaries": [{"address": a, "prefix": p} for a, p in secondaries],
        },
    }


def test_haproxy_forwards_its_port_to_every_api_server_that_is_ready():
    text = api_endpoint.haproxy_config(PLANES, 6443)
    lines = [line.strip() for line in text.splitlines()]
    assert "bind :8443" in lines and "mode tcp" in lines
    assert "option httpchk GET /readyz" in lines and "http-check expect status 200" in lines
    assert "default-server check check-ssl verify none inter 2s fall 2 rise 2" in lines
    assert [line for line in lines if line.startswith("server ")] == [
        "server cp-1 10.0.0.1:6443",
        "server cp-2 10.0.0.2:6443",
        "server cp-3 10.0.0.3:6443",
    ]
    assert "timeout connect 2s" in lines and "timeout client 15m" in lines and "option redispatch" in lines


def test_haproxy_server_names_keep_to_the_characters_haproxy_takes():
    text = api_endpoint.haproxy_config([api_endpoint.ControlPlane("cp 1/a", "10.0.0.1")], 6443)
    assert "server cp_1_a 10.0.0.1:6443" in text


def test_keepalived_speaks_unicast_to_the_other_control_planes_with_priorities_by_order():
    texts = {
        plane.host: api_endpoint.keepalived_config(plane.host, PLANES, "10.0.0.100", "eth0", 24) for plane in PLANES
    }
    cp2 = [line.strip() for line in texts["cp-2"].splitlines()]
    assert "state BACKUP" in cp2 and "nopreempt" in cp2
    assert "virtual_router_id 83" in cp2 and "advert_int 1" in cp2
    assert "unicast_src_ip 10.0.0.2" in cp2
    peers = cp2[cp2.index("unicast_peer {") + 1 : cp2.index("unicast_peer {") + 3]
    assert peers == ["10.0.0.1", "10.0.0.3"]
    assert "10.0.0.100/24 dev eth0" in cp2 and "interface eth0" in cp2
    assert 'script "/usr/bin/systemctl is-active --quiet haproxy.service"' in cp2
    assert "haproxy_active" in cp2[cp2.index("track_script {") + 1]
    # No authentication block: VRRP's password is sent in clear and VRRPv3 dropped it.
    assert all("auth" not in line for line in cp2)
    priorities = [api_endpoint.priority_of(plane.host, PLANES) for plane in PLANES]
    assert priorities == [150, 149, 148]
    for plane, priority in zip(PLANES, priorities, strict=True):
        assert "priority %d" % priority in texts[plane.host]


def test_the_interface_holding_an_address_is_found_by_its_real_name_with_its_prefix():
    assert api_endpoint.interface_for("10.0.0.2", facts()) == ("eth-0", 24)
    secondary = facts(address="192.168.1.2", secondaries=[("10.0.0.2", "22")])
    assert api_endpoint.interface_for("10.0.0.2", secondary) == ("eth-0", 22)


def test_an_address_label_entry_is_not_taken_for_a_device():
    found = facts()
    found["interfaces"].insert(0, "eth-0:1")
    found["eth_0_1"] = {"ipv4": {"address": "10.0.0.2", "prefix": "24"}}
    assert api_endpoint.interface_for("10.0.0.2", found) == ("eth-0", 24)


def test_an_address_no_interface_holds_is_an_error_naming_it():
    with pytest.raises(api_endpoint.ApiEndpointError) as error:
        api_endpoint.interface_for("10.0.0.9", facts())
    assert str(error.value) == (
        "ansible_facts.interfaces: expected an interface holding 10.0.0.9 (its IPv4 address), found none among lo, eth-0"
    )
    with pytest.raises(api_endpoint.ApiEndpointError, match="found none among no interfaces"):
        api_endpoint.interface_for("10.0.0.9", {})


def test_a_hosts_configs_put_the_vip_on_the_interface_of_its_address():
    configs = api_endpoint.host_configs("cp-2", "10.0.0.100", PLANES, facts(), 6443)
    assert set(configs) == {"haproxy", "keepalived"}
    assert "10.0.0.100/24 dev eth-0" in configs["keepalived"]
    assert configs["haproxy"] == api_endpoint.haproxy_config(PLANES, 6443)


@pytest.mark.parametrize("vip", ["10.0.1.100", "10.0.0.0", "10.0.0.255"])
def test_a_vip_outside_the_hosts_network_is_an_error_naming_the_network(vip):
    with pytest.raises(api_endpoint.ApiEndpointError) as error:
        api_endpoint.host_configs("cp-2", vip, PLANES, facts(), 6443)
    assert str(error.value) == (
        "clusterproof_control_plane_vip: expected a host address in 10.0.0.0/24, the network of host cp-2's "
        "address 10.0.0.2 (interface eth-0), found '%s'" % vip
    )


def test_a_host_that_is_not_a_control_plane_is_refused():
    with pytest.raises(api_endpoint.ApiEndpointError, match="host dgx-1: expected a host of kube_control_plane"):
        api_endpoint.host_configs("dgx-1", "10.0.0.100", PLANES, facts(), 6443)


# --- the filter the role calls ------------------------------------------------------------------------------


def vip_site(**variables):
    """A checked kubeadm site of three control planes at PLANES' addresses, with the VIP 10.0.0.100 unless
    ``variables`` say otherwise."""
    common = {
        "clusterproof_site_name": "dgx-site",
        "clusterproof_cluster_mode": "kubeadm",
        "clusterproof_control_plane_vip": "10.0.0.100",
        **variables,
    }
    hostvars = {plane.host: {**common, "ansible_host": plane.address} for plane in PLANES}
    hostvars["dgx-1"] = {**common, "gpu_count": 8, "ansible_host": "10.0.0.11"}
    groups = {"all": list(hostvars), "kube_control_plane": [p.host for p in PLANES], "gpu_nodes": ["dgx-1"]}
    declaration, errors = validate_site(groups, hostvars)
    assert errors == []
    return declaration.to_dict()


def gathered():
    return {plane.host: {"ansible_facts": facts(plane.address, device="ens3")} for plane in PLANES}


def test_the_filter_gives_each_control_plane_its_files_from_every_control_planes_facts():
    configs = api_endpoint_filters.api_endpoint_configs(vip_site(), "cp-3", gathered())
    assert "unicast_src_ip 10.0.0.3" in configs["keepalived"] and "10.0.0.100/24 dev ens3" in configs["keepalived"]
    assert "server cp-1 10.0.0.1:6443" in configs["haproxy"]
    assert api_endpoint_filters.api_endpoint_port(vip_site()) == 8443


def test_the_filter_names_a_control_plane_without_facts():
    hostvars = gathered()
    del hostvars["cp-2"]["ansible_facts"]
    with pytest.raises(Exception, match="host cp-2: ansible_facts.default_ipv4.address: expected the host's address"):
        api_endpoint_filters.api_endpoint_configs(vip_site(), "cp-1", hostvars)


def test_the_filter_names_a_vip_outside_the_network():
    hostvars = gathered()
    hostvars["cp-1"]["ansible_facts"] = facts("10.0.0.1", prefix="28", device="ens3")
    with pytest.raises(
        Exception, match=r"host cp-1: clusterproof_control_plane_vip: expected a host address in 10.0.0.0/28"
    ):
        api_endpoint_filters.api_endpoint_configs(vip_site(), "cp-1", hostvars)


def test_the_filter_refuses_a_site_without_a_vip_or_of_another_mode():
    with pytest.raises(
        Exception, match="clusterproof_control_plane_vip: expected the VIP the endpoint serves, found none"
    ):
        api_endpoint_filters.api_endpoint_configs(
            vip_site(clusterproof_control_plane_vip="", clusterproof_control_plane_endpoint="api.site.example"),
            "cp-1",
            gathered(),
        )
    with pytest.raises(Exception, match="expected a site of mode kubeadm, found mode 'sandbox'"):
        api_endpoint_filters.api_endpoint_configs({"cluster_mode": "sandbox"}, "cp-1", gathered())


def test_the_control_plane_validation_tries_the_vip_on_haproxys_port():
    assert control_plane_filters.control_plane_endpoint(vip_site()) == "10.0.0.100:8443"
