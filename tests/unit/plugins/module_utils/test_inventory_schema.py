"""The inventory schema: what it accepts, and the errors it gives for bad input."""

from __future__ import annotations

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils import versions
from ansible_collections.clusterproof.gpu.plugins.module_utils.inventory.schema import validate_site

SITE = {
    "clusterproof_site_name": "netapp-sandbox",
    "clusterproof_cluster_mode": "sandbox",
    "clusterproof_projects": [
        {"name": "team-a", "gpu_quota": 4},
        {"name": "team-b", "gpu_quota": 2},
        {"name": "team-c", "gpu_quota": 2},
        {"name": "team-d", "gpu_quota": 8},
    ],
}
NODE = {"gpu_count": 8, "gpu_product": "Tesla-V100-SXM2-32GB", "gpu_memory_mib": 32768}


def inventory(nodes=None, site=None, groups=None):
    nodes = {"dgx1-1": dict(NODE), "dgx1-2": dict(NODE)} if nodes is None else nodes
    site = dict(SITE) if site is None else site
    hostvars = {"localhost": dict(site)}
    for host, variables in nodes.items():
        hostvars[host] = {**site, **variables}
    groups = groups or {"all": list(hostvars), "kube_control_plane": ["localhost"], "gpu_nodes": list(nodes)}
    return groups, hostvars


def errors_of(*args, **kwargs) -> list[str]:
    declaration, errors = validate_site(*inventory(*args, **kwargs))
    assert declaration is None
    return [str(error) for error in errors]


def test_the_netapp_site_is_accepted():
    declaration, errors = validate_site(*inventory())
    assert errors == []
    assert [node.name for node in declaration.nodes] == ["dgx1-1", "dgx1-2"]
    assert declaration.total_gpus == 16
    assert [(p.name, p.gpu_quota, p.over_quota_weight) for p in declaration.projects] == [
        ("team-a", 4, 4),
        ("team-b", 2, 2),
        ("team-c", 2, 2),
        ("team-d", 8, 8),
    ]
    assert declaration.warnings == []


def test_node_defaults_and_node_name_override():
    declaration, errors = validate_site(*inventory({"gpu-host-7": {"gpu_count": 0, "node_name": "worker-7.site"}}))
    assert errors == []
    node = declaration.nodes[0]
    assert (node.host, node.name, node.gpu_count, node.gpu_product) == ("gpu-host-7", "worker-7.site", 0, None)
    assert node.cpu_cores > 0 and node.memory_gib > 0


@pytest.mark.parametrize(
    ("value", "found"),
    [("eight", "'eight'"), (-1, "-1"), (2.5, "2.5"), (True, "True"), (None, "nothing")],
)
def test_gpu_count_must_be_a_non_negative_integer(value, found):
    assert errors_of({"dgx1-1": {"gpu_count": value}}) == [
        "host dgx1-1: gpu_count: expected a non-negative integer, found %s" % found
    ]


def test_missing_gpu_count_names_the_host():
    assert errors_of({"dgx1-1": {"gpu_product": "A100"}}) == [
        "host dgx1-1: gpu_count: expected the number of GPUs this node has (a non-negative integer), found nothing"
    ]


def test_unknown_variables_of_our_prefixes_are_errors():
    errors = errors_of({"dgx1-1": {"gpu_count": 8, "gpu_cuont": 8}})
    assert len(errors) == 1
    assert errors[0].startswith("host dgx1-1: gpu_cuont: expected one of gpu_count, gpu_memory_mib, gpu_product")
    assert errors[0].endswith("found an unknown variable")


def test_variables_of_the_gpu_host_roles_are_left_to_those_roles():
    host = {**NODE, "gpu_benchmark_python": "/opt/conda/bin/python3", "gpu_host_tests_sudo": True}
    declaration, errors = validate_site(*inventory({"dgx1-1": host, "dgx1-2": dict(NODE)}))
    assert errors == []
    assert [node.name for node in declaration.nodes] == ["dgx1-1", "dgx1-2"]
    # A misspelt prefix is still ours, and still an error.
    assert errors_of({"dgx1-1": {**NODE, "gpu_benchmarks_python": "python3"}, "dgx1-2": dict(NODE)})


def test_unknown_site_variable_is_an_error_and_foreign_variables_are_not():
    site = {**SITE, "clusterproof_projets": [], "kubespray_thing": 1}
    errors = errors_of(site=site)
    assert errors and all(": clusterproof_projets: " in error for error in errors)
    assert not any("kubespray_thing" in error for error in errors)


def test_duplicate_node_names_are_rejected():
    nodes = {"a": {"gpu_count": 8, "node_name": "dgx1-1"}, "dgx1-1": {"gpu_count": 8}}
    assert errors_of(nodes) == [
        "host dgx1-1: node_name: expected a node name no other host uses, found 'dgx1-1, also used by host a'"
    ]


def test_missing_required_group():
    groups, hostvars = inventory()
    del groups["gpu_nodes"]
    declaration, errors = validate_site(groups, hostvars)
    assert declaration is None
    assert [str(e) for e in errors] == ["inventory: group gpu_nodes: expected a group named gpu_nodes, found nothing"]


@pytest.mark.parametrize(
    ("project", "message"),
    [
        (
            {"name": "team-a", "gpu_quota": -1},
            "project team-a: gpu_quota: expected a non-negative number of GPUs, found -1",
        ),
        (
            {"name": "team-a", "gpu_quota": "four"},
            "project team-a: gpu_quota: expected a non-negative number of GPUs, found 'four'",
        ),
        (
            {"name": "team-a", "gpu_quota": 4, "gpu_limit": 2},
            "project team-a: gpu_limit: expected a number of GPUs not below gpu_quota (4), found 2",
        ),
        (
            {"name": "Team_A", "gpu_quota": 1},
            "project Team_A: name: expected a lower-case DNS label (it becomes the namespace), found 'Team_A'",
        ),
        (
            {"name": "team-a", "gpu_quota": 1, "quota": 2},
            "project team-a: quota: expected one of name, gpu_quota, gpu_limit, over_quota_weight, priority, node_affinity, interactive_time_limit_seconds, users, groups, gpu_lending_limit, cpu_quota, cpu_limit, memory_quota, memory_limit, pod_security, resource_quota, found an unknown field",
        ),
    ],
)
def test_bad_projects(project, message):
    assert errors_of(site={**SITE, "clusterproof_projects": [project]}) == [message]


def test_duplicate_project_names():
    projects = [{"name": "team-a", "gpu_quota": 1}, {"name": "team-a", "gpu_quota": 2}]
    assert errors_of(site={**SITE, "clusterproof_projects": projects}) == [
        "project team-a: name: expected a name used by one project only, found 'team-a'"
    ]


def test_fractional_quota_is_allowed_and_oversubscription_is_a_warning():
    projects = [{"name": "team-a", "gpu_quota": 0.5}, {"name": "team-b", "gpu_quota": 20}]
    declaration, errors = validate_site(*inventory(site={**SITE, "clusterproof_projects": projects}))
    assert errors == []
    assert declaration.projects[0].gpu_quota == 0.5
    assert (
        len(declaration.warnings) == 1
        and "20.5 GPUs" in declaration.warnings[0]
        and "16 GPUs" in declaration.warnings[0]
    )


@pytest.mark.parametrize(
    ("field", "value", "accepted"),
    [
        ("gpu_quota", 0.29, True),  # 28.999999999999996 hundredths as a float product: exact as written
        ("gpu_quota", 12.35, True),
        ("gpu_quota", 1e-9, False),  # within a float tolerance of 0, not a hundredth
        ("gpu_quota", 0.001, False),
        ("cpu_quota", 0.001, True),
        ("cpu_quota", 1e-10, False),
        ("memory_quota", 0.0009765625, True),  # one MiB
        ("memory_quota", 1e-10, False),  # 1.024e-07 MiB: within the old float tolerance
    ],
)
def test_amounts_are_in_their_steps_exactly_as_written(field, value, accepted):
    project = {"name": "team-a", "gpu_quota": 4 if field != "gpu_quota" else value}
    if field != "gpu_quota":
        project[field] = value
    declaration, errors = validate_site(*inventory(site={**SITE, "clusterproof_projects": [project]}))
    if accepted:
        assert errors == [], errors
    else:
        assert [str(error).split(":")[:2] for error in errors] == [["project team-a", " " + field]]
        assert str(errors[0]).endswith("found %r" % value)


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("a" * 80, "whose dot-separated DNS labels have at most 63 characters each (one has 80)"),
        ("rack-1." + "b" * 64 + ".site", "whose dot-separated DNS labels have at most 63 characters each (one has 64)"),
        ("a" * 254, "of at most 253 characters"),
        ("dgx_1", "a lower-case DNS name: dot-separated labels of a-z, 0-9 and '-'"),
        ("dgx1..site", "each starting and ending with a letter or digit"),
    ],
)
def test_a_refused_node_name_names_the_rule_it_breaks(name, rule):
    (error,) = errors_of({"gpu-host-7": {"gpu_count": 0, "node_name": name}})
    assert error.startswith("host gpu-host-7: node_name: expected a Kubernetes node name ")
    assert rule in error
    if len(name) <= 253:
        assert "253" not in error


def test_bad_labels_and_taints():
    nodes = {
        "dgx1-1": {
            "gpu_count": 8,
            "node_labels": {"ok/key": "fine", "bad key": "x"},
            "node_taints": [{"key": "nvidia.com/gpu", "effect": "NoWay"}],
        }
    }
    errors = errors_of(nodes)
    assert "host dgx1-1: node_labels: expected label keys of the form [prefix/]name, found 'bad key'" in errors
    assert (
        "host dgx1-1: node_taints[0].effect: expected one of NoSchedule, PreferNoSchedule, NoExecute, found 'NoWay'"
        in errors
    )


def test_existing_mode_needs_a_kubeconfig():
    errors = errors_of(site={**SITE, "clusterproof_cluster_mode": "existing"})
    assert errors == [
        "group all: clusterproof_kubeconfig: expected the path of the cluster's kubeconfig (mode existing), found nothing"
    ]


def test_every_error_is_reported_at_once():
    nodes = {"dgx1-1": {"gpu_count": -1}, "dgx1-2": {"gpu_count": "x"}}
    site = {**SITE, "clusterproof_projects": [{"name": "team-a", "gpu_quota": -2}]}
    assert len(errors_of(nodes, site=site)) == 3


def test_a_thousand_nodes():
    nodes = {"node-%04d" % i: {"gpu_count": 8} for i in range(1000)}
    declaration, errors = validate_site(*inventory(nodes))
    assert errors == [] and declaration.total_gpus == 8000


def test_node_affinity_must_name_declared_nodes():
    projects = [{"name": "team-a", "gpu_quota": 4, "node_affinity": {"training": ["dgx1-1", "dgx9"], "gpus": []}}]
    errors = errors_of(site={**SITE, "clusterproof_projects": projects})
    assert (
        "project team-a: node_affinity.training: expected a GPU node of this inventory (dgx1-1, dgx1-2), found 'dgx9'"
        in errors
    )
    assert "project team-a: node_affinity.gpus: expected training or interactive, found an unknown key" in errors


def test_full_project_declaration():
    project = {
        "name": "team-a",
        "gpu_quota": 4,
        "gpu_limit": 8,
        "over_quota_weight": 2,
        "priority": 10,
        "node_affinity": {"interactive": ["dgx1-2"]},
        "interactive_time_limit_seconds": 3600,
        "users": ["alice"],
        "groups": ["team-a-researchers"],
    }
    declaration, errors = validate_site(*inventory(site={**SITE, "clusterproof_projects": [project]}))
    assert errors == []
    declared = declaration.projects[0]
    assert declared.node_affinity == {"training": [], "interactive": ["dgx1-2"]}
    assert (declared.priority, declared.interactive_time_limit_seconds, declared.users) == (10, 3600, ["alice"])


def test_kueue_scheduler_takes_a_lending_limit_per_project():
    site = {
        **SITE,
        "clusterproof_scheduler": "kueue",
        "clusterproof_projects": [{"name": "team-a", "gpu_quota": 4, "gpu_limit": 8, "gpu_lending_limit": 1.5}],
    }
    declaration, errors = validate_site(*inventory(site=site))
    assert errors == []
    assert declaration.scheduler == "kueue"
    project = declaration.projects[0]
    assert (project.gpu_quota, project.gpu_limit, project.gpu_lending_limit) == (4, 8, 1.5)
    assert declaration.to_dict()["projects"][0]["gpu_lending_limit"] == 1.5


@pytest.mark.parametrize(
    ("lending", "message"),
    [
        (5, "project team-a: gpu_lending_limit: expected a number of GPUs from 0 to gpu_quota (4), found 5"),
        (-1, "project team-a: gpu_lending_limit: expected a number of GPUs from 0 to gpu_quota (4), found -1"),
        ("two", "project team-a: gpu_lending_limit: expected a number of GPUs from 0 to gpu_quota (4), found 'two'"),
    ],
)
def test_bad_lending_limit(lending, message):
    site = {
        **SITE,
        "clusterproof_scheduler": "kueue",
        "clusterproof_projects": [{"name": "team-a", "gpu_quota": 4, "gpu_lending_limit": lending}],
    }
    assert message in errors_of(site=site)


def test_lending_limit_needs_the_kueue_scheduler():
    site = {**SITE, "clusterproof_projects": [{"name": "team-a", "gpu_quota": 4, "gpu_lending_limit": 2}]}
    assert errors_of(site=site) == [
        "project team-a: gpu_lending_limit: expected no lending limit: only clusterproof_scheduler kueue "
        "lends quota by a limit, found 2.0"
    ]


def test_bad_time_limit_and_members():
    project = {"name": "team-a", "gpu_quota": 1, "interactive_time_limit_seconds": 0, "users": "alice"}
    assert errors_of(site={**SITE, "clusterproof_projects": [project]}) == [
        "project team-a: interactive_time_limit_seconds: expected a positive whole number of seconds, found 0",
        "project team-a: users: expected a list of names, found 'alice'",
    ]


KUBEADM_SITE = {**SITE, "clusterproof_cluster_mode": "kubeadm"}


def test_kubeadm_mode_with_defaults():
    declaration, errors = validate_site(*inventory(site=KUBEADM_SITE))
    assert errors == []
    kubernetes = declaration.kubernetes
    assert (kubernetes.version, kubernetes.pod_subnet, kubernetes.service_subnet) == (
        "v1.36.3",
        "10.244.0.0/16",
        "10.96.0.0/12",
    )
    assert kubernetes.package_repo == "https://pkgs.k8s.io/core:/stable:/v1.36/deb/"
    assert kubernetes.package_key == "https://pkgs.k8s.io/core:/stable:/v1.36/deb/Release.key"
    assert (kubernetes.control_plane_hosts, kubernetes.worker_hosts) == (("localhost",), ("dgx1-1", "dgx1-2"))
    assert declaration.to_dict()["kubernetes"]["cni"] == "flannel"
    assert kubernetes.package_version == "1.36.3-1.1"


def test_other_modes_carry_no_kubernetes_settings():
    declaration, errors = validate_site(*inventory())
    assert errors == [] and declaration.kubernetes is None


def test_kubeadm_mode_takes_a_mirror_and_extra_workers():
    site = {
        **KUBEADM_SITE,
        "clusterproof_kubernetes_version": "v1.35.2",
        "clusterproof_kubernetes_package_repo": "http://mirror.site.example/kubernetes/v1.35/deb/",
        "clusterproof_kubernetes_package_key": "http://mirror.site.example/kubernetes/Release.key",
        "clusterproof_gpu_node_taint": True,
    }
    groups, hostvars = inventory(site=site)
    groups["kube_workers"] = ["cpu-1", "dgx1-1"]
    hostvars["cpu-1"] = dict(site)
    declaration, errors = validate_site(groups, hostvars)
    assert errors == []
    assert declaration.kubernetes.package_repo == "http://mirror.site.example/kubernetes/v1.35/deb/"
    assert declaration.kubernetes.package_key == "http://mirror.site.example/kubernetes/Release.key"
    assert declaration.kubernetes.worker_hosts == ("dgx1-1", "dgx1-2", "cpu-1")
    assert declaration.kubernetes.gpu_node_taint is True


def test_a_site_mirror_is_the_package_source_and_the_registry_containerd_pulls_through():
    site = {
        **KUBEADM_SITE,
        "clusterproof_mirror": {"packages": "http://10.213.0.1:8081/", "registry": "10.213.0.1:5000", "insecure": True},
    }
    declaration, errors = validate_site(*inventory(site=site))
    assert errors == []
    kubernetes = declaration.kubernetes
    assert kubernetes.package_repo == "http://10.213.0.1:8081/"
    assert kubernetes.package_key == "http://10.213.0.1:8081/key.asc"
    assert (kubernetes.mirror_registry, kubernetes.mirror_insecure) == ("10.213.0.1:5000", True)
    # The pause image kubeadm v1.36 asks for, which the bundle holds, goes to the playbooks.
    assert declaration.to_dict()["kubernetes"]["sandbox_image"] == "registry.k8s.io/pause:3.10.2"
    # Without charts on the mirror the stages take helm and the charts from the Go modules.
    assert (declaration.to_dict()["charts"], declaration.to_dict()["helm_binary"]) == ({}, "")
    # A package repository declared on its own still wins over the mirror's.
    own = {**site, "clusterproof_kubernetes_package_repo": "http://pkgs.site.example/k8s/"}
    assert validate_site(*inventory(site=own))[0].kubernetes.package_repo == "http://pkgs.site.example/k8s/"


def test_a_mirror_that_serves_the_charts_gives_every_stage_its_chart_url_and_the_packaged_helm():
    mirror = {"packages": "http://10.213.0.1:8081/", "registry": "10.213.0.1:5000", "charts": "http://10.213.0.1:8082/"}
    declaration, errors = validate_site(*inventory(site={**KUBEADM_SITE, "clusterproof_mirror": mirror}))
    assert errors == []
    site = declaration.to_dict()
    assert site["charts"] == {
        "kai-scheduler": "http://10.213.0.1:8082/kai-scheduler-0.12.0.tgz",
        "kueue": "http://10.213.0.1:8082/kueue-%s.tgz" % versions.KUEUE.bare,
        "local-path-provisioner": "http://10.213.0.1:8082/local-path-provisioner-0.0.30.tgz",
    }
    assert site["storage_charts"] == {"local-path": "http://10.213.0.1:8082/local-path-provisioner-0.0.30.tgz"}
    assert site["helm_binary"] == "/usr/bin/helm"


@pytest.mark.parametrize(
    ("mirror", "message"),
    [
        (
            "10.213.0.1:5000",
            "clusterproof_mirror: expected a mapping with packages, registry, insecure, charts, found '10.213.0.1:5000'",
        ),
        (
            {"packages": "http://10.213.0.1:8081"},
            "clusterproof_mirror.packages: expected the http(s):// URL of a flat apt repository, ending in /, "
            "found 'http://10.213.0.1:8081'",
        ),
        (
            {"registry": "10.213.0.1"},
            "clusterproof_mirror.registry: expected the registry as host:port, such as 10.213.0.1:5000, found '10.213.0.1'",
        ),
        (
            {"registry": "10.213.0.1:5000", "insecure": "yes"},
            "clusterproof_mirror.insecure: expected true or false, found 'yes'",
        ),
        (
            {"registry": "10.213.0.1:5000", "registy": "x"},
            "clusterproof_mirror: expected only the fields packages, registry, insecure, charts, found 'registy'",
        ),
        ({"insecure": True}, "clusterproof_mirror: expected packages, registry or both, found 'neither'"),
        (
            {"registry": "10.213.0.1:5000", "charts": "10.213.0.1:8082"},
            "clusterproof_mirror.charts: expected the http(s):// URL of the packaged Helm charts, ending in /, "
            "found '10.213.0.1:8082'",
        ),
    ],
)
def test_a_bad_site_mirror_names_its_field(mirror, message):
    assert errors_of(site={**KUBEADM_SITE, "clusterproof_mirror": mirror}) == ["group all: " + message]


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        (
            "clusterproof_kubelet_config",
            ["failCgroupV1"],
            "clusterproof_kubelet_config: expected a mapping of the component's fields (camelCase names) to values, "
            "found a list",
        ),
        (
            "clusterproof_kubelet_config",
            {"cgroupDriver": "cgroupfs"},
            "clusterproof_kubelet_config: expected no cgroupDriver: clusterproof sets it to match containerd's runc, "
            "found 'cgroupDriver'",
        ),
        (
            "clusterproof_kube_proxy_config",
            "maxPerCore: 0",
            "clusterproof_kube_proxy_config: expected a mapping of the component's fields (camelCase names) to values, "
            "found 'maxPerCore: 0'",
        ),
        (
            "clusterproof_kubeadm_ignore_preflight_errors",
            "SystemVerification",
            "clusterproof_kubeadm_ignore_preflight_errors: expected a list of kubeadm preflight check names, "
            "such as [SystemVerification], found 'SystemVerification'",
        ),
    ],
)
def test_bad_kubeadm_component_settings_name_their_field(variable, value, message):
    assert errors_of(site={**KUBEADM_SITE, variable: value}) == ["group all: " + message]


def test_two_kubeadm_hosts_at_one_address_are_refused_naming_both():
    groups, hostvars = inventory(site=KUBEADM_SITE)
    hostvars["localhost"]["ansible_host"] = "10.0.0.10"
    hostvars["dgx1-1"]["ansible_host"] = "10.0.0.11"
    hostvars["dgx1-2"]["ansible_host"] = "10.0.0.11"
    declaration, errors = validate_site(groups, hostvars)
    assert declaration is None
    assert [str(error) for error in errors] == [
        "host dgx1-2: ansible_host: expected an address no other host of the site has (host dgx1-1 has it), "
        "found '10.0.0.11'"
    ]


@pytest.mark.parametrize(
    ("endpoint", "refused"),
    [("10.0.0.99", True), ("10.0.0.99:6443", True), ("10.0.0.10:6443", False), ("api.site.example", False)],
)
def test_a_single_control_planes_endpoint_must_be_its_address_or_a_name(endpoint, refused):
    groups, hostvars = inventory(site={**KUBEADM_SITE, "clusterproof_control_plane_endpoint": endpoint})
    for host, address in (("localhost", "10.0.0.10"), ("dgx1-1", "10.0.0.11"), ("dgx1-2", "10.0.0.12")):
        hostvars[host]["ansible_host"] = address
    declaration, errors = validate_site(groups, hostvars)
    if refused:
        assert [str(error) for error in errors] == [
            "group all: clusterproof_control_plane_endpoint: expected the address of a host in kube_control_plane "
            "(localhost: 10.0.0.10), or a load balancer's name, found '%s'" % endpoint
        ]
    else:
        assert errors == []


def test_kubeadm_pod_subnet_overlapping_the_service_subnet_names_both():
    site = {**KUBEADM_SITE, "clusterproof_pod_subnet": "10.96.0.0/16", "clusterproof_service_subnet": "10.96.0.0/12"}
    assert errors_of(site=site) == [
        "group all: clusterproof_pod_subnet: expected a network that does not overlap "
        "clusterproof_service_subnet (10.96.0.0/12), found '10.96.0.0/16'"
    ]


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        (
            "clusterproof_pod_subnet",
            "10.244.1.0/15",
            "clusterproof_pod_subnet: expected a network in CIDR notation with no host bits set, such as 10.244.0.0/16, found '10.244.1.0/15'",
        ),
        (
            "clusterproof_service_subnet",
            "fd00::/108",
            "clusterproof_service_subnet: expected a network of the same IP version as clusterproof_pod_subnet (10.244.0.0/16), found 'fd00::/108'",
        ),
        (
            "clusterproof_kubernetes_version",
            "1.36",
            "clusterproof_kubernetes_version: expected a version v1.<minor>.<patch>, such as v1.36.3, found '1.36'",
        ),
        (
            "clusterproof_kubernetes_package_repo",
            "mirror/k8s",
            "clusterproof_kubernetes_package_repo: expected an http(s):// or file:// URL, or empty for the upstream one, found 'mirror/k8s'",
        ),
        (
            "clusterproof_control_plane_endpoint",
            "api.site:70000",
            "clusterproof_control_plane_endpoint: expected host or host:port (port 1-65535), or empty, found 'api.site:70000'",
        ),
        ("clusterproof_cni", "calico", "clusterproof_cni: expected one of flannel, none, found 'calico'"),
        (
            "clusterproof_cni_version",
            "latest",
            "clusterproof_cni_version: expected a version v<major>.<minor>.<patch>, such as v0.28.4, found 'latest'",
        ),
        ("clusterproof_gpu_node_taint", "yes", "clusterproof_gpu_node_taint: expected true or false, found 'yes'"),
    ],
)
def test_bad_kubeadm_settings(variable, value, message):
    assert errors_of(site={**KUBEADM_SITE, variable: value}) == ["group all: " + message]


def test_kubeadm_settings_are_not_checked_in_other_modes():
    declaration, errors = validate_site(*inventory(site={**SITE, "clusterproof_pod_subnet": "10.96.0.0/16"}))
    assert errors == [] and declaration.kubernetes is None


def test_several_kubeadm_control_planes_need_an_endpoint():
    groups, hostvars = inventory(site=KUBEADM_SITE)
    groups["kube_control_plane"] = ["localhost", "cp-2"]
    hostvars["cp-2"] = dict(KUBEADM_SITE)
    declaration, errors = validate_site(groups, hostvars)
    assert [str(error) for error in errors] == [
        "group all: clusterproof_control_plane_endpoint: expected the load-balanced host[:port] of the API server, "
        "or clusterproof_control_plane_vip, as group kube_control_plane has 2 hosts, found ''"
    ]
    hostvars["localhost"]["clusterproof_control_plane_endpoint"] = "api.site.example:6443"
    declaration, errors = validate_site(groups, hostvars)
    assert errors == [] and declaration.kubernetes.control_plane_hosts == ("localhost", "cp-2")


def three_control_planes(**variables):
    """A kubeadm site with three control planes at 10.0.0.1-3 and its GPU hosts at 10.0.0.11-12."""
    groups, hostvars = inventory(site={**KUBEADM_SITE, **variables})
    groups["kube_control_plane"] = ["localhost", "cp-2", "cp-3"]
    hostvars["cp-2"] = dict(hostvars["localhost"])
    hostvars["cp-3"] = dict(hostvars["localhost"])
    addresses = {"localhost": "10.0.0.1", "cp-2": "10.0.0.2", "cp-3": "10.0.0.3", "dgx1-1": "10.0.0.11"}
    addresses["dgx1-2"] = "10.0.0.12"
    for host, address in addresses.items():
        hostvars[host]["ansible_host"] = address
    return groups, hostvars


def test_a_vip_is_the_endpoint_of_several_control_planes_on_haproxys_port():
    declaration, errors = validate_site(*three_control_planes(clusterproof_control_plane_vip="10.0.0.100"))
    assert errors == []
    assert declaration.kubernetes.control_plane_vip == "10.0.0.100"
    assert declaration.kubernetes.control_plane_endpoint == "10.0.0.100:8443"
    assert declaration.to_dict()["kubernetes"]["control_plane_vip"] == "10.0.0.100"


@pytest.mark.parametrize(
    ("endpoint", "settled"),
    [
        ("api.site.example", "api.site.example:8443"),
        ("api.site.example:8443", "api.site.example:8443"),
        ("10.0.0.100", "10.0.0.100:8443"),
        ("10.0.0.100:8443", "10.0.0.100:8443"),
    ],
)
def test_a_declared_endpoint_beside_a_vip_is_the_vip_or_a_name_on_haproxys_port(endpoint, settled):
    declaration, errors = validate_site(
        *three_control_planes(clusterproof_control_plane_vip="10.0.0.100", clusterproof_control_plane_endpoint=endpoint)
    )
    assert errors == [] and declaration.kubernetes.control_plane_endpoint == settled


@pytest.mark.parametrize("endpoint", ["10.0.0.99", "10.0.0.100:6443", "api.site.example:6443", "10.0.0.1:8443"])
def test_a_declared_endpoint_that_bypasses_the_vip_is_refused(endpoint):
    declaration, errors = validate_site(
        *three_control_planes(clusterproof_control_plane_vip="10.0.0.100", clusterproof_control_plane_endpoint=endpoint)
    )
    assert declaration is None
    assert [str(error) for error in errors] == [
        "group all: clusterproof_control_plane_endpoint: expected 10.0.0.100:8443, or a name of it on port 8443 "
        "(haproxy's port on clusterproof_control_plane_vip), or empty, found '%s'" % endpoint
    ]


@pytest.mark.parametrize(
    "vip",
    [
        "10.0.0.300",
        "10.0.0.0/24",
        "fd00::10",
        "127.0.0.1",
        "224.0.0.18",
        "0.0.0.0",
        "255.255.255.255",
        10,
        0,
        False,
        ["10.0.0.100"],
    ],
)
def test_a_vip_that_is_not_an_ipv4_unicast_address_is_refused_and_nothing_else_is_said(vip):
    declaration, errors = validate_site(*three_control_planes(clusterproof_control_plane_vip=vip))
    assert declaration is None
    assert [str(error) for error in errors] == [
        "group all: clusterproof_control_plane_vip: expected an IPv4 unicast address on the control planes' network, "
        "such as 192.0.2.10, or empty, found %s" % ("a list" if isinstance(vip, list) else repr(vip))
    ]


@pytest.mark.parametrize("host", ["cp-2", "dgx1-1"])
def test_a_vip_at_a_hosts_address_is_refused_naming_the_host(host):
    groups, hostvars = three_control_planes(clusterproof_control_plane_vip="10.0.0.100")
    hostvars[host]["ansible_host"] = "10.0.0.100"
    declaration, errors = validate_site(groups, hostvars)
    assert declaration is None
    assert [str(error) for error in errors] == [
        "group all: clusterproof_control_plane_vip: expected an address no host of the site has (host %s has it), "
        "found '10.0.0.100'" % host
    ]


def test_a_single_control_plane_may_have_a_vip_as_its_endpoint():
    groups, hostvars = inventory(site={**KUBEADM_SITE, "clusterproof_control_plane_vip": "10.0.0.100"})
    for host, address in (("localhost", "10.0.0.10"), ("dgx1-1", "10.0.0.11"), ("dgx1-2", "10.0.0.12")):
        hostvars[host]["ansible_host"] = address
    declaration, errors = validate_site(groups, hostvars)
    assert errors == [] and declaration.kubernetes.control_plane_endpoint == "10.0.0.100:8443"
    hostvars["localhost"]["clusterproof_control_plane_endpoint"] = "10.0.0.100"
    declaration, errors = validate_site(groups, hostvars)
    assert errors == [] and declaration.kubernetes.control_plane_endpoint == "10.0.0.100:8443"


@pytest.mark.parametrize("vip", ["", None])
def test_an_empty_vip_is_none(vip):
    declaration, errors = validate_site(
        *three_control_planes(
            clusterproof_control_plane_vip=vip, clusterproof_control_plane_endpoint="api.site.example"
        )
    )
    assert errors == [] and declaration.kubernetes.control_plane_vip == ""


def test_without_a_vip_the_endpoint_is_as_declared():
    declaration, errors = validate_site(*three_control_planes(clusterproof_control_plane_endpoint="api.site.example"))
    assert errors == [] and declaration.kubernetes.control_plane_vip == ""
    assert declaration.kubernetes.control_plane_endpoint == "api.site.example"


def test_the_gpu_device_layer_is_none_on_the_sandbox_and_the_operator_on_an_existing_cluster():
    declaration, errors = validate_site(*inventory())
    assert errors == [] and declaration.device_layer.layer == "none"
    existing = {**SITE, "clusterproof_cluster_mode": "existing", "clusterproof_kubeconfig": "/etc/kubeconfig"}
    declaration, errors = validate_site(*inventory(site=existing))
    assert errors == []
    layer = declaration.to_dict()["device_layer"]
    assert (layer["layer"], layer["driver_by"], layer["toolkit_by"]) == ("gpu_operator", "hosts", "hosts")


def test_bad_gpu_device_layer_settings_name_the_variable():
    site = {
        **SITE,
        "clusterproof_gpu_device_layer": "device_plugin",
        "clusterproof_gpu_mig_strategy": "mixd",
        "clusterproof_gpu_time_slicing": {"replicas": 0},
    }
    assert errors_of(site=site) == [
        "group all: clusterproof_gpu_mig_strategy: expected one of none, single, mixed, found 'mixd'",
        "group all: clusterproof_gpu_time_slicing.replicas: expected an integer of at least 2 (pods sharing one GPU; "
        "leave time-slicing out for none), found 0",
    ]
    assert errors_of(site={**SITE, "clusterproof_gpu_devce_layer": "none"})[0].startswith(
        "host dgx1-1: clusterproof_gpu_devce_layer: expected one of"
    )


TRIDENT_CLASS = {
    "name": "ontap-nas",
    "provisioner": "trident",
    "access_modes": ["ReadWriteOnce", "ReadWriteMany"],
    "trident": {
        "backends": [
            {
                "name": "aff-a400",
                "storage_driver": "ontap-nas",
                "management_lif": "10.0.0.5",
                "svm": "svm_ai",
                "credentials": "vault_ontap_aff",
            }
        ]
    },
}


def test_storage_classes_are_declared_with_one_default():
    classes = [
        {"name": "local-path", "provisioner": "local-path", "default": True},
        {
            "name": "nfs-shared",
            "provisioner": "nfs",
            "access_modes": ["ReadWriteMany"],
            "nfs": {"server": "nas1", "path": "/export/ai"},
        },
        TRIDENT_CLASS,
    ]
    site = {
        **SITE,
        "clusterproof_storage_classes": classes,
        "vault_ontap_aff": {"username": "admin", "password": "s3cret"},
    }
    declaration, errors = validate_site(*inventory(site=site))
    assert errors == []
    by_name = {cls.name: cls for cls in declaration.storage_classes}
    assert by_name["local-path"].path == "/opt/local-path-provisioner"
    assert by_name["local-path"].volume_binding_mode == "WaitForFirstConsumer"
    assert by_name["nfs-shared"].volume_binding_mode == "Immediate"
    assert by_name["ontap-nas"].backends[0].credentials == "vault_ontap_aff"
    # The declaration names the credentials' variable and never holds the secret.
    assert "s3cret" not in repr(declaration.to_dict())


def test_two_default_storage_classes_are_an_error():
    classes = [
        {"name": "fast", "provisioner": "local-path", "default": True},
        {"name": "slow", "provisioner": "local-path", "default": True},
    ]
    assert errors_of(site={**SITE, "clusterproof_storage_classes": classes}) == [
        "group all: clusterproof_storage_classes: expected exactly one class with default: true, found 2: fast, slow"
    ]
    no_default = [{"name": "fast", "provisioner": "local-path"}]
    assert errors_of(site={**SITE, "clusterproof_storage_classes": no_default}) == [
        "group all: clusterproof_storage_classes: expected exactly one class with default: true, found none"
    ]


def test_trident_backend_without_management_address_names_the_backend():
    backend = dict(TRIDENT_CLASS["trident"]["backends"][0])
    del backend["management_lif"]
    cls = {**TRIDENT_CLASS, "default": True, "trident": {"backends": [backend]}}
    site = {**SITE, "clusterproof_storage_classes": [cls], "vault_ontap_aff": {"username": "a", "password": "b"}}
    assert errors_of(site=site) == [
        "storage class ontap-nas: trident.backends[0].management_lif: expected the ONTAP cluster or SVM management "
        "address (host name or IP), found nothing"
    ]


def test_trident_credentials_must_name_a_defined_variable_and_never_show_it():
    cls = {**TRIDENT_CLASS, "default": True}
    missing = errors_of(site={**SITE, "clusterproof_storage_classes": [cls]})
    assert missing == [
        "storage class ontap-nas: trident.backends[0].credentials: expected a variable holding {username, password}, "
        "found variable vault_ontap_aff: no such variable"
    ]
    site = {
        **SITE,
        "clusterproof_storage_classes": [cls],
        "vault_ontap_aff": {"username": "admin", "pasword": "s3cret"},
    }
    partial = errors_of(site=site)
    assert partial == [
        "storage class ontap-nas: trident.backends[0].credentials: expected a variable holding {username, password}, "
        "found variable vault_ontap_aff: a variable without a username and password"
    ]
    assert "s3cret" not in partial[0]


@pytest.mark.parametrize(
    ("cls", "message"),
    [
        (
            {"name": "x", "provisioner": "ceph", "default": True},
            "storage class x: provisioner: expected one of local-path, nfs, trident, found 'ceph'",
        ),
        (
            {"name": "x", "provisioner": "nfs", "default": True, "nfs": {"path": "/export"}},
            "storage class x: nfs.server: expected the NFS server's host name or address, found nothing",
        ),
        (
            {"name": "x", "provisioner": "local-path", "default": True, "access_modes": ["ReadWriteMany"]},
            "storage class x: access_modes: expected ReadWriteMany only with local_path.shared_path (a filesystem all "
            "nodes share), found 'ReadWriteMany'",
        ),
        (
            {"name": "x", "provisioner": "local-path", "default": True, "volume_binding_mode": "Immediate"},
            "storage class x: volume_binding_mode: expected WaitForFirstConsumer for a per-node local path, "
            "found 'Immediate'",
        ),
        (
            {"name": "x", "provisioner": "local-path", "default": True, "reclaim_policy": "Recycle"},
            "storage class x: reclaim_policy: expected one of Delete, Retain, found 'Recycle'",
        ),
        (
            {"name": "X_1", "provisioner": "local-path", "default": True},
            "storage class X_1: name: expected a StorageClass name (lower-case DNS subdomain), found 'X_1'",
        ),
        (
            {"name": "x", "provisioner": "local-path", "default": "yes"},
            "storage class x: default: expected true or false, found 'yes'",
        ),
        (
            {"name": "x", "provisioner": "local-path", "default": True, "nfs": {"server": "a"}},
            "storage class x: nfs: expected only local_path settings for provisioner local-path, found settings for "
            "another provisioner",
        ),
        (
            {"name": "x", "provisioner": "local-path", "default": True, "size": 3},
            "storage class x: size: expected one of name, provisioner, default, reclaim_policy, access_modes, "
            "volume_binding_mode, local_path, nfs, trident, found an unknown field",
        ),
    ],
)
def test_bad_storage_classes(cls, message):
    assert errors_of(site={**SITE, "clusterproof_storage_classes": [cls]}) == [message]


def test_duplicate_storage_class_names():
    classes = [
        {"name": "fast", "provisioner": "local-path", "default": True},
        {"name": "fast", "provisioner": "local-path"},
    ]
    assert errors_of(site={**SITE, "clusterproof_storage_classes": classes}) == [
        "storage class fast: name: expected a name used by one storage class only, found 'fast'"
    ]


def test_no_storage_classes_is_allowed():
    declaration, errors = validate_site(*inventory())
    assert errors == [] and declaration.storage_classes == []


# --- the elastic quota tree (module_utils/tenancy/quota_tree.py has the rules' own tests) -----------------

QUOTA_TREE = [
    {"name": "root", "min": {"cpu": 40}, "max": {"cpu": 40}},
    {"name": "root-a", "parent": "root", "min": {"cpu": 20}, "max": {"cpu": 40}, "namespaces": ["namespace1"]},
]


def test_a_quota_tree_is_declared_with_the_site():
    declaration, errors = validate_site(*inventory(site={**SITE, "clusterproof_quota_tree": QUOTA_TREE}))
    assert errors == []
    assert [node.name for node in declaration.quota_tree] == ["root", "root-a"]
    assert declaration.to_dict()["quota_tree"][1]["namespaces"] == ("namespace1",)


def test_a_quota_tree_may_not_reuse_a_project_name_nor_go_without_a_scheduler():
    tree = QUOTA_TREE + [{"name": "team-a", "parent": "root", "min": {"cpu": 5}}]
    assert (
        "quota tree node team-a: name/namespaces: expected names no project uses (a project is a queue and a "
        "namespace of its own), found 'team-a'"
    ) in errors_of(site={**SITE, "clusterproof_quota_tree": tree})
    assert errors_of(site={**SITE, "clusterproof_scheduler": "none", "clusterproof_quota_tree": QUOTA_TREE}) == [
        "group all: clusterproof_quota_tree: expected a scheduler that enforces it (kai or kueue), found 'scheduler none'"
    ]


def test_a_quota_tree_against_the_guides_rules_is_an_inventory_error():
    tree = [QUOTA_TREE[0], {**QUOTA_TREE[1], "max": {"cpu": 50}}]
    assert errors_of(site={**SITE, "clusterproof_quota_tree": tree}) == [
        "quota tree node root-a: max.cpu: expected at most its parent root's max.cpu (40), found 50.0"
    ]


def _with_simulated(site, both=False):
    nodes = {"lab-worker-1": {"gpu_count": 0}, "sim-gpu-1": dict(NODE), "sim-gpu-2": dict(NODE)}
    groups, hostvars = inventory(nodes=nodes, site=site)
    groups["gpu_nodes"] = ["lab-worker-1"] + (["sim-gpu-1"] if both else [])
    groups["simulated_gpu_nodes"] = ["sim-gpu-1", "sim-gpu-2"]
    return groups, hostvars


def test_simulated_gpu_nodes_are_declared_nodes_marked_simulated_and_no_kubeadm_worker():
    declaration, errors = validate_site(*_with_simulated(KUBEADM_SITE))
    assert errors == []
    assert [(node.name, node.gpu_count, node.simulated) for node in declaration.nodes] == [
        ("lab-worker-1", 0, False),
        ("sim-gpu-1", 8, True),
        ("sim-gpu-2", 8, True),
    ]
    assert declaration.total_gpus == 16
    # kubeadm installs and joins real hosts only.
    assert declaration.kubernetes.worker_hosts == ("lab-worker-1",)


def test_simulated_gpu_nodes_are_refused_on_the_sandbox_and_in_both_groups():
    groups, hostvars = _with_simulated(SITE)
    assert [str(error) for error in validate_site(groups, hostvars)[1]] == [
        "group simulated_gpu_nodes: hosts: expected no simulated nodes beside mode sandbox (only with mode kubeadm "
        "or existing), found 'sim-gpu-1, sim-gpu-2'"
    ]
    assert [str(error) for error in validate_site(*_with_simulated(KUBEADM_SITE, both=True))[1]] == [
        "host sim-gpu-1: groups: expected a host of gpu_nodes or of simulated_gpu_nodes, not of both, found 'both'"
    ]
