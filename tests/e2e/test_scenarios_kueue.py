"""The source documents' scenarios on Kueue: the same runner, Kueue's adapter, Kueue's own policy."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .conftest import REPO, Sandbox, ansible_module, module_result, own_sandbox

pytestmark = pytest.mark.sandbox
NODES = [{"name": "dgx1-%d" % number, "gpu_count": 8, "cpu_cores": 8} for number in (1, 2)]


@pytest.fixture(scope="module")
def kueue_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    """The NetApp site's two 8-GPU, 8-core nodes, with Kueue as the scheduler; torn down after."""
    directory = tmp_path_factory.mktemp("kueue-scenarios")
    inventory = directory / "hosts.yml"
    inventory.write_text(
        "all:\n  children:\n    kube_control_plane:\n      hosts:\n        localhost:\n"
        "          ansible_connection: local\n          ansible_python_interpreter: '{{ ansible_playbook_python }}'\n"
        "    gpu_nodes:\n      hosts:\n        dgx1-1:\n          gpu_count: 8\n        dgx1-2:\n          gpu_count: 8\n"
        "  vars:\n    clusterproof_site_name: kueue-scenarios\n    clusterproof_scheduler: kueue\n"
    )
    with own_sandbox(inventory, directory / "state") as site:
        yield site


def run_on_kueue(site: Sandbox, name: str) -> dict:
    args = {"scenario_file": str(REPO / "scenarios" / name), "nodes": NODES, "scheduler": "kueue"}
    done = ansible_module("clusterproof.gpu.validate_scenario", args, site)
    result = module_result(done)
    assert done.returncode == 0, result.get("msg")
    return result


def test_alibaba_tree_on_kueue_follows_fair_sharing_not_the_guide(kueue_site):
    """Kueue's hierarchical cohorts with fair sharing reclaim to fair share, as KAI does: 2, 2, 4 at
    step 3 where the guide's elastic quota gives 3, 3, 2; the report says so as a warning."""
    result = run_on_kueue(kueue_site, "alibaba-elastic-quota-tree.yml")
    checks = {check["id"]: check for check in result["section"]["checks"]}
    name = "scenario/alibaba-elastic-quota-tree"
    replicas = [
        [checks["%s/%d/model/replicas/namespace%d" % (name, step, ns)]["observed"] for ns in range(1, step + 1)]
        for step in range(1, 5)
    ]
    assert replicas == [["4"], ["4", "4"], ["2", "2", "4"], ["2", "2", "2", "2"]]
    assert result["failed_checks"] == 0, [c for c in checks.values() if c["status"] == "fail"]
    verdict = checks["%s/reproduces-document" % name]
    assert verdict["status"] == "warn" and verdict["observed"] == "differs at 3"
    assert "Kueue reproduces" in verdict["title"]


def test_netapp_on_kueue_with_whole_gpus_is_held_to_kueues_policy(kueue_site):
    """The fractions are left out (Kueue has none) and every step says so; Kueue's choices match the
    model of its own policy: at 4.9 it reclaims team-b's newest job, 2 GPUs, leaving team-b at 1."""
    result = run_on_kueue(kueue_site, "netapp-runai-4.8-4.10.yml")
    section = result["section"]
    checks = {check["id"]: check for check in section["checks"]}
    assert result["failed_checks"] == 0, [c for c in checks.values() if c["status"] == "fail"]
    name = "scenario/netapp-runai-4.8-4.10"
    for step in (1, 2, 3):
        assert checks["%s/%d/written" % (name, step)]["status"] == "skip"
        assert "Kueue has no fractional GPUs: b-1-g06, b-2-g04" in checks["%s/%d/written" % (name, step)]["message"]
    observed = [[row[0], row[4]] for table in section["tables"] for row in table["rows"]]
    assert observed == [
        ["team-a", "4"], ["team-b", "3"], ["team-c", "3"], ["team-d", "4"],
        ["team-a", "4"], ["team-b", "1"], ["team-c", "3"], ["team-d", "8"],
        ["team-a", "8"], ["team-b", "5"], ["team-c", "3"], ["team-d", "0"],
    ]  # fmt: skip


def test_a_scenario_of_fractions_only_is_skipped_on_kueue_with_the_reason(kueue_site):
    result = run_on_kueue(kueue_site, "fractional-gpus.yml")
    assert (
        result["skip_reason"]
        == "Kueue has no fractional GPUs, and every workload of this scenario is a fraction of a GPU"
    )
    assert [check["status"] for check in result["section"]["checks"]] == ["skip"]
