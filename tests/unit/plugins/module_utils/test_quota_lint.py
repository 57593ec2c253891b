"""Quota lint: settings an engine accepts but treats in its own way are warned of, with what it does."""

from __future__ import annotations

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.model import quota_lint
from ansible_collections.clusterproof.gpu.plugins.module_utils.model.fairshare import Project
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate import projects as project_validation


def codes(findings):
    return [(finding.code, finding.field) for finding in findings]


def test_quotas_that_fit_the_cluster_are_not_worth_a_warning():
    assert quota_lint.lint([Project("a", 4), Project("b", 4, limit=8, weight=2)], 8) == []


@pytest.mark.parametrize("policy", ["runai", "kueue", "elastic"])
def test_quotas_adding_up_to_more_than_the_cluster_say_what_the_engine_does(policy):
    (finding,) = quota_lint.lint([Project("a", 6), Project("b", 4)], 8, policy)
    assert (finding.code, finding.field) == ("quotas-above-capacity", "projects[*].gpu_quota")
    assert finding.found == "10 (a 6, b 4)"
    assert "at most 8 GPUs (the cluster)" in finding.expected
    engine = {"runai": "KAI still gives each queue min(quota, demand)", "kueue": "Kueue admits by quota",
              "elastic": "minimums cannot all be met"}[policy]  # fmt: skip
    assert engine in finding.what_the_engine_does


def test_an_unknown_capacity_leaves_the_top_level_sum_alone():
    assert quota_lint.lint([Project("a", 6), Project("b", 4)], None) == []


def test_a_limit_below_its_quota_says_how_much_quota_is_never_usable():
    (finding,) = quota_lint.lint([Project("a", 4, limit=3)], 8)
    assert codes([finding]) == [("limit-below-quota", "projects[a].gpu_limit")]
    assert "never holds more than 3 GPUs, so 1 of its quota can never be used" in finding.what_the_engine_does


def test_a_child_above_its_parent_and_children_above_their_parent():
    tree = [Project("dept", 4), Project("team-a", 5, parent="dept"), Project("team-b", 1, parent="dept")]
    findings = quota_lint.lint(tree, 8, "elastic")
    assert codes(findings) == [
        ("quotas-above-capacity", "projects[parent=dept].gpu_quota"),
        ("child-above-parent", "projects[team-a].gpu_quota"),
    ]
    assert "(dept's quota)" in findings[0].expected
    assert "EnableCheckParentQuota" in findings[1].what_the_engine_does
    assert "EnableCheckParentQuota" not in quota_lint.lint(tree, 8, "runai")[1].what_the_engine_does


def test_a_zero_weight_leaf_is_worth_a_warning_and_a_zero_weight_parent_is_not():
    findings = quota_lint.lint([Project("dept", 4, weight=0), Project("a", 2, weight=0, parent="dept")], 8, "kueue")
    assert codes(findings) == [("zero-weight", "projects[a].over_quota_weight")]
    assert "compared by their unweighted share" in findings[0].what_the_engine_does


def test_findings_become_warning_checks_with_a_category_and_an_action():
    findings = quota_lint.lint([Project("a", 6), Project("b", 4, limit=2)], 8)
    checks = project_validation.quota_lint_checks(findings, "scenario/x")
    assert [check.id for check in checks] == [
        "scenario/x/lint/quotas-above-capacity/projects[*].gpu_quota",
        "scenario/x/lint/limit-below-quota/projects[b].gpu_limit",
    ]
    assert {check.status for check in checks} == {"warn"}
    assert {check.category for check in checks} == {"configuration"}
    assert checks[1].action == "nothing, if this is what the site wants; otherwise change projects[b].gpu_limit"
    assert checks[1].expected == "a limit of at least the quota (4)" and checks[1].observed == "2"


def test_the_inventory_s_projects_are_linted_against_the_cluster_s_allocatable_gpus():
    nodes = [{"status": {"allocatable": {"nvidia.com/gpu": "8"}}}, {"status": {"allocatable": {"cpu": "4"}}},
             {"status": {"allocatable": {"nvidia.com/gpu": "2Ki"}}}, {}]  # fmt: skip
    assert project_validation.allocatable_gpus(nodes) == 8
    declared = [{"name": "a", "gpu_quota": 6, "over_quota_weight": 0}, {"name": "b", "gpu_quota": 4}]
    checks = project_validation.lint_projects(declared, 8, "runai")
    assert [check.id for check in checks] == [
        "projects/lint/quotas-above-capacity/projects[*].gpu_quota",
        "projects/lint/zero-weight/projects[a].over_quota_weight",
    ]
