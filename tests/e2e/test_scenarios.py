"""The source documents' scenarios run by capability on each scheduler backend that has it: the same
runner, the backend's adapter, each held to its own policy's model. Tests that need the KAI site
alone (refusals, a scaled site) follow."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from kubernetes import client, config

from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import kai
from ansible_collections.clusterproof.gpu.plugins.module_utils.tenancy import workloads

from .conftest import REPO, Sandbox, ansible_module, module_result, own_sandbox, session_sandbox_group

pytestmark = pytest.mark.sandbox
NODES = [{"name": "dgx1-1", "gpu_count": 8, "cpu_cores": 8}, {"name": "dgx1-2", "gpu_count": 8, "cpu_cores": 8}]
# The NetApp site's two 8-GPU, 8-core nodes, with Kueue as the scheduler.
KUEUE_INVENTORY = (
    "all:\n  children:\n    kube_control_plane:\n      hosts:\n        localhost:\n"
    "          ansible_connection: local\n          ansible_python_interpreter: '{{ ansible_playbook_python }}'\n"
    "    gpu_nodes:\n      hosts:\n        dgx1-1:\n          gpu_count: 8\n        dgx1-2:\n          gpu_count: 8\n"
    "  vars:\n    clusterproof_site_name: kueue-scenarios\n    clusterproof_scheduler: kueue\n"
)


@dataclass
class ScenarioSite:
    scheduler: str
    sandbox: Sandbox
    api: client.ApiClient


# KAI runs on the session's shared sandbox (in the xdist group of this module's other tests on it);
# Kueue on a sandbox of this module's own.
@pytest.fixture(
    scope="module",
    params=[pytest.param("kai", marks=pytest.mark.xdist_group(session_sandbox_group(__name__))), "kueue"],
)
def site(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScenarioSite]:
    if request.param == "kai":
        request.getfixturevalue("kai_site")
        yield ScenarioSite("kai", request.getfixturevalue("sandbox"), request.getfixturevalue("api_client"))
        return
    directory = tmp_path_factory.mktemp("kueue-scenarios")
    inventory = directory / "hosts.yml"
    inventory.write_text(KUEUE_INVENTORY)
    with own_sandbox(inventory, directory / "state") as sandbox:
        api = config.new_client_from_config(config_file=str(sandbox.kubeconfig))
        yield ScenarioSite("kueue", sandbox, api)
        api.close()


def run_scenario(sandbox: Sandbox, name: str, **extra):
    args = {"scenario_file": str(REPO / "scenarios" / name), "nodes": NODES, **extra}
    done = ansible_module("clusterproof.gpu.validate_scenario", args, sandbox)
    return done.returncode, module_result(done)


def run_on(site: ScenarioSite, name: str) -> dict:
    """The scenario on the site's backend; it must run through (its checks are the test's to read)."""
    extra = {} if site.scheduler == "kai" else {"scheduler": site.scheduler}
    returncode, result = run_scenario(site.sandbox, name, **extra)
    assert returncode == 0, result.get("msg")
    return result


def scenario_namespaces(api) -> list[str]:
    return [
        ns.metadata.name for ns in client.CoreV1Api(api).list_namespace().items if ns.metadata.name.startswith("scn-")
    ]


def step_tables(section: dict) -> list[dict]:
    """The section's per-step tables (running GPUs per team), without its disruption table."""
    return [table for table in section["tables"] if not table["id"].endswith("-disruption")]


def evicted_per_step(section: dict) -> dict[str, set[str]]:
    """The disruption table: the workloads seen evicted at each step, by the step's number."""
    (table,) = [table for table in section["tables"] if table["id"].endswith("-disruption")]
    return {row[0].split()[0]: set() if row[4] == "none" else set(row[4].split(", ")) for row in table["rows"]}


def failed(checks) -> str:
    """The failed checks in full, one per line (as a string: pytest cuts a dict's repr short, and
    stop 55's rehearsal failure of fractional-gpus said nothing of what it observed)."""
    return "\n".join(
        "%s: expected %r, observed %r; %s"
        % (check["id"], check.get("expected"), check.get("observed"), check.get("message"))
        for check in checks
        if check["status"] == "fail"
    )


# The NetApp Run:AI 4.8-4.10 walk-through: the running GPUs per team after each step, and what each
# backend's report says of the steps it cannot run as written.
NETAPP_RUNNING = {
    "kai": [
        ["team-a", "4"], ["team-b", "4"], ["team-c", "4"], ["team-d", "4"],
        ["team-a", "4"], ["team-b", "2"], ["team-c", "2"], ["team-d", "8"],
        ["team-a", "8"], ["team-b", "4"], ["team-c", "4"], ["team-d", "0"],
    ],
    # Kueue's choices match the model of its own policy: at 4.9 it reclaims team-b's newest job,
    # 2 GPUs, leaving team-b at 1.
    "kueue": [
        ["team-a", "4"], ["team-b", "3"], ["team-c", "3"], ["team-d", "4"],
        ["team-a", "4"], ["team-b", "1"], ["team-c", "3"], ["team-d", "8"],
        ["team-a", "8"], ["team-b", "5"], ["team-c", "3"], ["team-d", "0"],
    ],
}  # fmt: skip
# Who is evicted at each step: at 4.9 team-d's claim takes 2 GPUs each from team-b and team-c on
# KAI; Kueue reclaims team-b's newest 2-GPU job alone.
NETAPP_EVICTED = {
    "kai": {"4.8": set(), "4.9": {"b-4-gg (2)", "c-4-gg (2)"}, "4.10": set()},
    "kueue": {"4.8": set(), "4.9": {"b-4-gg (2)"}, "4.10": set()},
}
NETAPP_PENDING = {
    "kai": {2: "b-4-gg, c-4-gg", 3: "b-5-gg, c-6-gg"},
    "kueue": {},
}
# Kueue has no fractions: they are left out and every step says so.
NETAPP_SKIPPED = {
    "kai": {},
    "kueue": {step: "Kueue has no fractional GPUs: b-1-g06, b-2-g04" for step in (1, 2, 3)},
}


def test_netapp_4_8_to_4_10(site):
    started = time.monotonic()
    result = run_on(site, "netapp-runai-4.8-4.10.yml")
    wall = time.monotonic() - started
    section = result["section"]
    checks = {check["id"]: check for check in section["checks"]}
    name = "scenario/netapp-runai-4.8-4.10"
    observed = [[row[0], row[4]] for table in step_tables(section) for row in table["rows"]]
    assert observed == NETAPP_RUNNING[site.scheduler]
    assert evicted_per_step(section) == NETAPP_EVICTED[site.scheduler]
    for step, pending in NETAPP_PENDING[site.scheduler].items():
        assert checks["%s/%d/pending" % (name, step)]["observed"] == pending
    for step, reason in NETAPP_SKIPPED[site.scheduler].items():
        assert checks["%s/%d/written" % (name, step)]["status"] == "skip"
        assert reason in checks["%s/%d/written" % (name, step)]["message"]
    assert result["failed_checks"] == 0, failed(checks.values())
    if site.scheduler == "kai":
        assert section["charts"][0]["timeline"], "no allocation timeline was recorded"
        assert scenario_namespaces(site.api) == [], "the scenario left namespaces behind"
    print("netapp 4.8-4.10 on %s wall time: %.0f s (scenario %.0f s)" % (site.scheduler, wall, result["duration_s"]))


def test_fractional_gpus_share_gpus_or_are_skipped_with_the_reason(site):
    """KAI packs fractions onto shared GPUs; Kueue has none, and a scenario of fractions only is
    skipped with that reason."""
    result = run_on(site, "fractional-gpus.yml")
    checks = result["section"]["checks"]
    if site.scheduler == "kueue":
        assert (
            result["skip_reason"]
            == "Kueue has no fractional GPUs, and every workload of this scenario is a fraction of a GPU"
        )
        assert [check["status"] for check in checks] == ["skip"]
        return
    assert result["failed_checks"] == 0, failed(checks)
    shared = [check for check in checks if check["id"].endswith("/shared-gpus")]
    assert [check["observed"] for check in shared][-1] == "b-half-1+b-half-2; c-g02+c-g03+c-g05; c-g04+c-g06"


def test_a_gang_starts_and_is_evicted_whole_or_is_skipped_with_the_reason(site):
    """KAI runs a gang as a PodGroup whose minMember pods start together: reclaiming 4 GPUs from it
    evicts all four pods, and they start again together, across both nodes, when room comes back.
    Kueue is given no gangs, and the scenario is skipped with that reason, nothing created."""
    result = run_on(site, "gang-scheduling.yml")
    checks = result["section"]["checks"]
    if site.scheduler == "kueue":
        assert result["skip_reason"] == (
            "Kueue is not given gangs by clusterproof, and this scenario has gangs (min_replicas: a-gang)"
        )
        assert [check["status"] for check in checks] == ["skip"]
        return
    assert result["failed_checks"] == 0, failed(checks)
    by_id = {check["id"]: check for check in checks}
    gang = ["scenario/gang-scheduling/%d/model/replicas/a-gang" % step for step in (1, 2, 3)]
    assert [by_id[check]["observed"] for check in gang] == ["4", "0", "4"]
    assert scenario_namespaces(site.api) == [], "the scenario left namespaces behind"


# Where each backend's report differs from the guide at step 3 (besides the verdict), by check.
ALIBABA_STATUSES = {
    "kai": {"3/replicas/namespace3": "warn", "4/replicas/namespace4": "pass"},
    "kueue": {},
}


def test_alibaba_tree_follows_fair_sharing_and_says_where_it_departs_from_the_guide(site):
    """The guide's tree, sized to the sandbox's 16 cores (0.4x: 2-core replicas). KAI implements the
    Run:AI policy, and Kueue's hierarchical cohorts with fair sharing do the same: both match the
    guide at steps 1, 2 and 4, and reclaim to fair share (2, 2, 4) rather than to min (3, 3, 2) at
    step 3; the report says so, as a warning, not a failure."""
    result = run_on(site, "alibaba-elastic-quota-tree.yml")
    checks = {check["id"]: check for check in result["section"]["checks"]}
    name = "scenario/alibaba-elastic-quota-tree"
    replicas = [
        [checks["%s/%d/model/replicas/namespace%d" % (name, step, ns)]["observed"] for ns in range(1, step + 1)]
        for step in range(1, 5)
    ]
    assert replicas == [["4"], ["4", "4"], ["2", "2", "4"], ["2", "2", "2", "2"]]
    assert result["failed_checks"] == 0, failed(checks.values())
    for check, status in ALIBABA_STATUSES[site.scheduler].items():
        assert checks["%s/%s" % (name, check)]["status"] == status
    verdict = checks["%s/reproduces-document" % name]
    assert verdict["status"] == "warn" and verdict["observed"] == "differs at 3"
    if site.scheduler == "kueue":
        assert "Kueue reproduces" in verdict["title"]
    else:
        assert scenario_namespaces(site.api) == []


def test_busy_cluster_is_refused_and_nothing_changes(kai_site, api_client, sandbox):
    namespace = client.CoreV1Api(api_client).read_namespace("team-a")
    settings = workloads.ProjectSettings.from_namespace(api_client.sanitize_for_serialization(namespace))
    job = kai.job_manifest(workloads.Workload("foreign", "team-a", workloads.TRAINING, 1), settings)
    client.BatchV1Api(api_client).create_namespaced_job("team-a", job)
    try:
        returncode, result = run_scenario(sandbox, "fractional-gpus.yml")
        assert returncode != 0
        assert "workload pod(s) outside it hold or wait for GPUs (team-a/foreign-" in result["msg"]
        assert "nothing was changed" in result["msg"]
        assert scenario_namespaces(api_client) == []
    finally:
        client.BatchV1Api(api_client).delete_namespaced_job("foreign", "team-a", propagation_policy="Background")


def test_bad_scenario_file_is_refused(kai_site, sandbox, tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text((REPO / "scenarios" / "fractional-gpus.yml").read_text().replace("gpus: 0.6", "gpus: 1.6"))
    done = ansible_module("clusterproof.gpu.validate_scenario", {"scenario_file": str(bad), "nodes": NODES}, sandbox)
    assert done.returncode != 0
    assert "steps[0].submit[2].gpus: expected whole GPUs, or a fraction of one GPU below 1, found 1.6" in done.stdout


def test_netapp_scaled_to_a_larger_site(tmp_path):
    """Five 8-GPU nodes: the scenario runs at twice its size on four of them and stays off the
    fifth. Were it not kept off, 4.9 would have room for every job and nothing would wait."""
    inventory = tmp_path / "hosts.yml"
    nodes = "".join("        big-%d:\n          gpu_count: 8\n" % number for number in range(1, 6))
    inventory.write_text(
        "all:\n  children:\n    kube_control_plane:\n      hosts:\n        localhost:\n"
        "          ansible_connection: local\n          ansible_python_interpreter: '{{ ansible_playbook_python }}'\n"
        "    gpu_nodes:\n      hosts:\n" + nodes + "  vars:\n    clusterproof_site_name: scaled-test\n"
    )
    with own_sandbox(inventory, tmp_path / "state") as site:
        args = {
            "scenario_file": str(REPO / "scenarios" / "netapp-runai-4.8-4.10.yml"),
            "nodes": [{"name": "big-%d" % number, "gpu_count": 8} for number in range(1, 6)],
        }
        done = ansible_module("clusterproof.gpu.validate_scenario", args, site)
        result = module_result(done)
        assert done.returncode == 0, result.get("msg")
        section = result["section"]
        assert "scaled 2×" in section["title"] and "kept off big-5" in section["title"]
        observed = [[row[0], row[1], row[4]] for table in step_tables(section) for row in table["rows"]]
        assert observed == [
            ["team-a", "8", "8"], ["team-b", "4", "8"], ["team-c", "4", "8"], ["team-d", "16", "8"],
            ["team-a", "8", "8"], ["team-b", "4", "4"], ["team-c", "4", "4"], ["team-d", "16", "16"],
            ["team-a", "8", "16"], ["team-b", "4", "8"], ["team-c", "4", "8"], ["team-d", "16", "0"],
        ]  # fmt: skip
        checks = {check["id"]: check for check in section["checks"]}
        assert checks["scenario/netapp-runai-4.8-4.10/2/pending"]["observed"] == "b-4-gg, c-4-gg"
        assert "b-1-g06-x2" in checks["scenario/netapp-runai-4.8-4.10/1/running"]["observed"]
        assert result["failed_checks"] == 0, [c for c in checks.values() if c["status"] == "fail"]
