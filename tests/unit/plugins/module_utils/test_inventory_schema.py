"""The inventory schema: what it accepts, and the errors it gives for bad input."""

from __future__ import annotations

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.inventory_schema import validate_site

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
            "project team-a: quota: expected one of name, gpu_quota, gpu_limit, over_quota_weight, priority, node_affinity, interactive_time_limit_seconds, users, groups, found an unknown field",
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


def test_bad_time_limit_and_members():
    project = {"name": "team-a", "gpu_quota": 1, "interactive_time_limit_seconds": 0, "users": "alice"}
    assert errors_of(site={**SITE, "clusterproof_projects": [project]}) == [
        "project team-a: interactive_time_limit_seconds: expected a positive whole number of seconds, found 0",
        "project team-a: users: expected a list of names, found 'alice'",
    ]
