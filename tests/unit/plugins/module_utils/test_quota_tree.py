"""Elastic quota trees: the guide's rules, the KAI mapping, the dashboard."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import kai, kueue
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import quota_tree
from tests.conftest import ALIBABA_QUOTA_TREE as ALIBABA


def test_the_guides_tree_is_valid_and_maps_to_kai_queues_under_their_parents():
    nodes, problems = quota_tree.check_tree(ALIBABA)
    assert problems == []
    assert [node.name for node in quota_tree.leaves(nodes)] == ["root-a-1", "root-a-2", "root-b-1", "root-b-2"]
    manifests = kai.tree_manifests(nodes)
    queues = {m["metadata"]["name"]: m["spec"] for m in manifests if m["kind"] == "Queue"}
    assert "parentQueue" not in queues["root"] and queues["root-a-1"]["parentQueue"] == "root-a"
    assert queues["root-a"]["resources"]["cpu"] == {"quota": 20000, "overQuotaWeight": 20, "limit": 40000}
    # GPUs and memory are declared nowhere in this tree: left unlimited.
    assert queues["root-a"]["resources"]["gpu"]["quota"] == -1
    namespaces = {m["metadata"]["name"]: m["metadata"]["labels"] for m in manifests if m["kind"] == "Namespace"}
    assert namespaces["namespace3"][quota_tree.LEAF_LABEL] == "root-b-1"
    assert all(
        node.parent is None or kai.tree_queue_differences(node, {"spec": queues[node.name]}, {"cpu"}) is None
        for node in nodes
    )


def test_memory_is_counted_in_kai_megabytes():
    nodes, _ = quota_tree.check_tree([{"name": "team", "min": {"memory": 1}, "max": {"memory": 2, "gpu": 4}}])
    queue = kai.tree_queue(nodes[0], {"memory", "gpu"})
    assert queue["spec"]["resources"]["memory"]["quota"] == pytest.approx(1073.742)
    assert queue["spec"]["resources"]["gpu"] == {"quota": 0, "overQuotaWeight": 0, "limit": 4}


def _problems(change):
    data = copy.deepcopy(ALIBABA)
    change(data)
    return [
        "%s: %s: expected %s, found %r" % (p.where, p.field, p.expected, p.found)
        for p in quota_tree.check_tree(data)[1]
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: d[3].update(max={"cpu": 5}),
            "quota tree node root-a-1: max.cpu: expected at least min.cpu (10), found 5.0",
        ),
        (
            lambda d: d[3].update(min={"cpu": 15}),
            "quota tree node root-a: min.cpu: expected children's min.cpu adding up to at most root-a's min.cpu (20), found '25'",
        ),
        (
            lambda d: d[3].update(max={"cpu": 50}),
            "quota tree node root-a-1: max.cpu: expected at most its parent root-a's max.cpu (40), found 50.0",
        ),
        (
            lambda d: d[1].update(parent="nowhere"),
            "quota tree node root-a: parent: expected a node declared before it (root), found 'nowhere'",
        ),
        (
            lambda d: d[1].update(namespaces=["spare"]),
            "quota tree node root-a: namespaces: expected no namespaces: namespaces attach to leaves, and root-a has children",
        ),
        (lambda d: d[4].update(namespaces=["namespace1"]), "namespaces no other leaf has (namespace1 is root-a-1's)"),
        (
            lambda d: d[0].update(min={"tpu": 4}),
            "quota tree node root: min.tpu: expected one of cpu, memory, gpu, found 'an unknown resource'",
        ),
        (
            lambda d: d[0].update(weight=2),
            "quota tree node root: weight: expected one of name, parent, min, max, namespaces",
        ),
        (lambda d: d[2].update(name="root-a"), "name: expected a DNS label no other tree node uses, found 'root-a'"),
    ],
)
def test_a_tree_against_the_guides_rules_names_node_and_field(change, message):
    assert any(message in problem for problem in _problems(change)), _problems(change)


def test_used_is_summed_up_the_tree_and_shown_like_the_guides_dashboard():
    nodes, _ = quota_tree.check_tree(ALIBABA)
    pods = {"namespace1": [{"cpu": 5.0}] * 3, "namespace3": [{"cpu": 5.0}] * 2}
    used = quota_tree.used_by_pods(nodes, pods)
    assert used["root-a-1"] == {"cpu": 15.0} and used["root-b"] == {"cpu": 10.0} and used["root"] == {"cpu": 25.0}
    rows = quota_tree.dashboard_rows(nodes, used)
    assert rows[0] == ["root", "—", "cpu", "40", "40", "25"]
    assert rows[3] == ["    root-a-1", "namespace1", "cpu", "20", "10", "15"]


def test_a_queue_that_differs_is_named():
    nodes, _ = quota_tree.check_tree(ALIBABA)
    queue = kai.tree_queue(nodes[1], {"cpu"})
    queue["spec"]["resources"]["cpu"]["limit"] = 30000
    assert kai.tree_queue_differences(nodes[1], queue, {"cpu"}) == "cpu.limit 30000, not 40000"
    assert kai.tree_queue_differences(nodes[1], None, {"cpu"}) == "no KAI queue root-a"


def test_on_kueue_inner_nodes_are_cohorts_and_leaves_cluster_queues():
    nodes, _ = quota_tree.check_tree(ALIBABA)
    manifests = kueue.tree_manifests(nodes)
    by_name = {(m["kind"], m["metadata"]["name"]): m for m in manifests}
    root = by_name[("Cohort", "root")]["spec"]
    assert "parentName" not in root
    # root's own quota is its min less its children's (40 - 20 - 20); a top cohort borrows from nobody.
    assert root["resourceGroups"][0]["flavors"][0]["resources"] == [{"name": "cpu", "nominalQuota": "0"}]
    root_a = by_name[("Cohort", "root-a")]["spec"]
    assert root_a["parentName"] == "root"
    assert root_a["resourceGroups"][0]["flavors"][0]["resources"] == [
        {"name": "cpu", "nominalQuota": "0", "borrowingLimit": "20"}
    ]
    leaf = by_name[("ClusterQueue", "root-b-1")]["spec"]
    assert leaf["cohortName"] == "root-b"
    assert leaf["resourceGroups"][0]["flavors"][0]["resources"] == [
        {"name": "cpu", "nominalQuota": "10", "borrowingLimit": "10"}
    ]
    assert leaf["namespaceSelector"] == {"matchLabels": {quota_tree.LEAF_LABEL: "root-b-1"}}
    assert by_name[("LocalQueue", "root-b-1")]["metadata"]["namespace"] == "namespace3"
    wanted = by_name[("ClusterQueue", "root-b-1")]
    assert kueue.tree_object_differences(nodes[5], wanted, wanted) is None
    assert kueue.tree_object_differences(nodes[5], None, wanted) == "no Kueue ClusterQueue root-b-1"


def test_memory_on_kueue_is_in_mebibytes():
    nodes, _ = quota_tree.check_tree([{"name": "team", "min": {"memory": 1.5}, "max": {"memory": 2}}])
    queue = kueue.tree_manifests(nodes)[0]
    assert queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"] == [
        {"name": "memory", "nominalQuota": "1536Mi"}
    ]
