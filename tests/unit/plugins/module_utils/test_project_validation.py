"""Configuration checks of the projects against the scheduler's queues and namespaces."""

from __future__ import annotations

from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import kai
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import projects
from ansible_collections.clusterproof.gpu.plugins.module_utils.validate.projects import validate_projects

TEAM_A = {"name": "team-a", "gpu_quota": 4, "over_quota_weight": 4, "node_affinity": {"interactive": ["dgx1-2"]}}


def objects(declared):
    project = projects.Project.from_dict(declared)
    return [kai.project_queue_manifest(project)], [projects.namespace_manifest(project)]


def test_a_project_as_declared_passes_and_shows_what_it_holds():
    queues, namespaces = objects(TEAM_A)
    checks, table = validate_projects([TEAM_A], queues, namespaces, {"team-a": 6.5})
    assert [c.status for c in checks] == ["pass"] * 5
    assert table["rows"] == [["team-a", "4", "4", "4", "4", "6.5"]]


def test_a_changed_quota_and_a_missing_queue_fail_with_what_differs():
    queues, namespaces = objects({**TEAM_A, "gpu_quota": 2, "over_quota_weight": 2})
    checks, table = validate_projects([TEAM_A, {"name": "team-b", "gpu_quota": 2}], queues, namespaces, {})
    failed = {c.id: c for c in checks if c.status == "fail"}
    assert (failed["projects/team-a/quota"].expected, failed["projects/team-a/quota"].observed) == ("4", "2")
    assert "projects/team-a/over-quota-weight" in failed
    assert failed["projects/team-b/queue"].observed == "missing"
    assert table["row_status"] == ["fail", "fail"]


def test_a_namespace_without_the_declared_affinity_fails():
    queues, _ = objects(TEAM_A)
    bare = projects.namespace_manifest(projects.Project.from_dict({**TEAM_A, "node_affinity": {}}))
    checks, _ = validate_projects([TEAM_A], queues, [bare], {})
    assert {c.id: c.status for c in checks}["projects/team-a/namespace"] == "fail"
