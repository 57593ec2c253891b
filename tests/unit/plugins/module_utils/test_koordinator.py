"""Koordinator on the sandbox: the quota tree's ElasticQuotas, the scheduler's configuration and flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import build as sandbox_build
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import control_plane as sandbox
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import koordinator
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import quota_tree

# The guide's tree (cores): root 40; root-a and root-b min 20 max 40; four leaves min 10 max 20.
LEAVES = ("root-a-1", "root-a-2", "root-b-1", "root-b-2")
ALIBABA = [
    {"name": "root", "min": {"cpu": 40}, "max": {"cpu": 40}},
    {"name": "root-a", "parent": "root", "min": {"cpu": 20}, "max": {"cpu": 40}},
    {"name": "root-b", "parent": "root", "min": {"cpu": 20}, "max": {"cpu": 40}},
] + [
    {"name": leaf, "parent": leaf[:6], "min": {"cpu": 10}, "max": {"cpu": 20}, "namespaces": ["namespace%d" % n]}
    for n, leaf in enumerate(LEAVES, start=1)
]


def _by_name(manifests):
    return {manifest["metadata"]["name"]: manifest for manifest in manifests}


def test_the_guides_tree_becomes_elastic_quotas_linked_by_parent_labels():
    nodes, problems = quota_tree.check_tree(ALIBABA)
    assert problems == []
    manifests = koordinator.tree_manifests(nodes)
    assert [m["metadata"]["name"] for m in manifests] == [node.name for node in nodes]
    quotas = _by_name(manifests)
    root, inner, leaf = quotas["root"], quotas["root-b"], quotas["root-b-1"]
    assert root["kind"] == "ElasticQuota" and root["apiVersion"] == "scheduling.sigs.k8s.io/v1alpha1"
    # The tree's root hangs under Koordinator's own root: it names no parent.
    assert koordinator.PARENT_LABEL not in root["metadata"]["labels"]
    assert root["metadata"]["labels"][koordinator.IS_PARENT_LABEL] == "true"
    assert inner["metadata"]["labels"][koordinator.PARENT_LABEL] == "root"
    assert leaf["metadata"]["labels"][koordinator.PARENT_LABEL] == "root-b"
    assert leaf["metadata"]["labels"][koordinator.IS_PARENT_LABEL] == "false"
    assert inner["spec"] == {"min": {"cpu": "20"}, "max": {"cpu": "40"}}
    assert leaf["spec"] == {"min": {"cpu": "10"}, "max": {"cpu": "20"}}
    assert {m["metadata"]["namespace"] for m in manifests} == {koordinator.SYSTEM_NAMESPACE}


def test_leaves_attach_their_namespaces_by_annotation_and_parents_attach_none():
    nodes, _ = quota_tree.check_tree(ALIBABA)
    quotas = _by_name(koordinator.tree_manifests(nodes))
    annotation = quotas["root-a-2"]["metadata"]["annotations"][koordinator.NAMESPACES_ANNOTATION]
    assert json.loads(annotation) == ["namespace2"]
    assert "annotations" not in quotas["root-a"]["metadata"]


def test_every_declared_resource_gets_a_min_and_a_max_in_koordinator_units():
    tree = [
        {"name": "org", "min": {"cpu": 8, "gpu": 4}, "max": {"cpu": 16, "gpu": 8, "memory": 64}},
        {"name": "team", "parent": "org", "min": {"cpu": 0.5}, "namespaces": ["team"]},
    ]
    nodes, problems = quota_tree.check_tree(tree)
    assert problems == []
    quotas = _by_name(koordinator.tree_manifests(nodes))
    assert quotas["org"]["spec"]["max"] == {"cpu": "16", "memory": "65536Mi", "nvidia.com/gpu": "8"}
    assert quotas["org"]["spec"]["min"] == {"cpu": "8", "memory": "0", "nvidia.com/gpu": "4"}
    # Undeclared min is 0, undeclared max is Koordinator's own unlimited.
    assert quotas["team"]["spec"]["min"] == {"cpu": "500m", "memory": "0", "nvidia.com/gpu": "0"}
    assert set(quotas["team"]["spec"]["max"].values()) == {koordinator.UNLIMITED}


def test_scheduler_configuration_enables_the_quota_plugin_with_revocation():
    settings = koordinator.ElasticQuotaSettings(delay_evict_seconds=7)
    config = koordinator.scheduler_config(Path("/state/kubeconfig"), settings)
    assert config["leaderElection"] == {"leaderElect": False}
    assert config["clientConnection"]["kubeconfig"] == "/state/kubeconfig"
    (profile,) = config["profiles"]
    assert profile["schedulerName"] == koordinator.SCHEDULER_NAME
    for point in ("preFilter", "postFilter", "reserve"):
        assert {"name": "ElasticQuota"} in profile["plugins"][point]["enabled"], point
    assert profile["plugins"]["postFilter"]["enabled"][0] == {"name": "ElasticQuota"}
    (plugin_config,) = profile["pluginConfig"]
    args = plugin_config["args"]
    assert plugin_config["name"] == "ElasticQuota" and args["kind"] == "ElasticQuotaArgs"
    assert args["delayEvictTime"] == "7s"
    assert args["monitorAllQuotas"] is True and args["enableRuntimeQuota"] is True
    assert args["enableCheckParentQuota"] is True
    assert args["quotaGroupNamespace"] == koordinator.SYSTEM_NAMESPACE


def test_koord_scheduler_listens_on_loopback_ports_after_kai_and_kueue():
    layout = sandbox.Layout(Path("/state"))
    ports = koordinator.KoordinatorPorts(20000)
    assert (ports.secure, ports.healthz) == (20022, 20023)
    (component,) = koordinator.components(layout, Path("/bin"), ports, Path("/state/koord-scheduler.yaml"))
    argv = component.argv
    assert argv[0] == "/bin/koord-scheduler"
    assert "--config=/state/koord-scheduler.yaml" in argv
    # Both the secure port and the deprecated plain-HTTP one (0.0.0.0:10251 by default) on loopback.
    assert {"--bind-address=127.0.0.1", "--address=127.0.0.1", "--secure-port=20022", "--port=20023"} <= set(argv)
    assert "0.0.0.0" not in " ".join(argv)
    assert component.ready_url == "http://127.0.0.1:20023/healthz"


def test_koord_schedulers_view_of_a_quota_is_asked_on_its_loopback_health_port():
    url = koordinator.quota_url(koordinator.KoordinatorPorts(20000), "root-a")
    assert url == "http://127.0.0.1:20023/apis/v1/plugins/ElasticQuota/quotas/root-a"


def test_pod_labels_name_the_leaf_quota():
    assert koordinator.pod_labels("root-b-1") == {"quota.scheduling.koordinator.sh/name": "root-b-1"}


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        # 1, 2: a leaf borrows idle capacity up to its max of 20.
        (1, {"root-a-1": 20}),
        (2, {"root-a-1": 20, "root-a-2": 20}),
        # 3: root-b asks 20, its min; root-a keeps only its min, and within root-b the idle
        # root-b-2 lends its min to root-b-1: fair share, not the guide's reclaim-to-min (15, 15, 10).
        (3, {"root-a-1": 10, "root-a-2": 10, "root-b-1": 20}),
        (4, {"root-a-1": 10, "root-a-2": 10, "root-b-1": 10, "root-b-2": 10}),
    ],
)
def test_runtime_quotas_of_the_guides_steps(step, expected):
    nodes, _ = quota_tree.check_tree(ALIBABA)
    # Each step adds a Deployment of 5 x 5 cores to the next leaf; pending pods count as request.
    requests = {leaf: 25.0 for leaf in LEAVES[:step]}
    runtime = koordinator.runtime_quotas(nodes, requests, 40)
    assert {leaf: runtime[leaf] for leaf in LEAVES[:step]} == expected
    # A leaf requests at most its max (20), the root at most its 40.
    assert runtime["root"] == min(40, 20 * step)


def test_runtime_quota_shares_what_is_left_by_max_and_never_beyond_request():
    tree = [
        {"name": "big", "min": {"cpu": 0}, "max": {"cpu": 30}},
        {"name": "small", "min": {"cpu": 0}, "max": {"cpu": 10}},
        {"name": "modest", "min": {"cpu": 0}, "max": {"cpu": 30}},
    ]
    nodes, problems = quota_tree.check_tree(tree)
    assert problems == []
    # 40 shared 3:1:3 gives modest more than the 5 it asks; what it leaves goes round again.
    runtime = koordinator.runtime_quotas(nodes, {"big": 100, "small": 100, "modest": 5}, 40)
    assert runtime["modest"] == 5
    assert runtime["small"] == pytest.approx(35 / 4) and runtime["big"] == pytest.approx(3 * 35 / 4)


UPSTREAM_GOMOD = """module github.com/koordinator-sh/koordinator

go 1.20

require (
	k8s.io/api v0.28.7
	k8s.io/client-go v11.0.1-0.20190409021438-1a26190bd76a+incompatible
)

replace github.com/go-logr/logr => github.com/go-logr/logr v1.2.0

replace (
	// github.com/containerd/ttrpc => github.com/containerd/ttrpc v1.1.0
	k8s.io/api => k8s.io/api v0.28.7
	k8s.io/client-go   =>   k8s.io/client-go v0.28.7 // published, not the incompatible tag
)
"""


def test_koordinator_wrapper_gomod_repeats_upstreams_replace_directives():
    text = sandbox_build.replacing_wrapper_gomod(
        "koordinator", sandbox_build.KOORDINATOR_MODULE, "v1.7.0", UPSTREAM_GOMOD
    )
    lines = text.splitlines()
    assert lines[0] == "module clusterproof.local/sandbox/koordinator"
    assert "go 1.20" in lines and "require github.com/koordinator-sh/koordinator v1.7.0" in lines
    replaces = lines[lines.index("replace (") + 1 : -1]
    # Commented-out directives are not taken; spacing and trailing comments are dropped.
    assert replaces == [
        "\tgithub.com/go-logr/logr => github.com/go-logr/logr v1.2.0",
        "\tk8s.io/api => k8s.io/api v0.28.7",
        "\tk8s.io/client-go => k8s.io/client-go v0.28.7",
    ]


def test_a_local_path_replace_cannot_be_carried_into_the_wrapper():
    gomod = "module m\n\ngo 1.22\n\nreplace k8s.io/api => ./staging/src/k8s.io/api\n"
    with pytest.raises(ValueError, match="local path"):
        sandbox_build.module_replaces(gomod)
