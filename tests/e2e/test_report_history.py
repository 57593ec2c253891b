"""What changed since the last run, and the exit status of ``./clusterproof validate``, on a sandbox
of the test's own: a clean site exits 0 and its first report has nothing to compare with; a quota
changed in the cluster behind the inventory's back and a node removed show in the next report's
"What changed" and as failed checks, and the run exits 1; a bad inventory exits 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kubernetes import client, config

from .conftest import REPO, own_sandbox, two_node_site

pytestmark = pytest.mark.sandbox

INVENTORY = two_node_site(
    "history",
    "    clusterproof_projects:\n      - {name: team-a, gpu_quota: 4}\n      - {name: team-b, gpu_quota: 4}\n",
)


def cli_validate(inventory: Path, sandbox_vars: list[str], extra: dict) -> subprocess.CompletedProcess:
    """``./clusterproof validate`` as the entry script runs it (the cli on ansible-runner)."""
    env = dict(os.environ, PYTHONPATH=str(REPO), PATH="%s:%s" % (Path(sys.executable).parent, os.environ["PATH"]))
    argv = [sys.executable, "-m", "cli", "validate", "-i", str(inventory), *sandbox_vars, "-e", json.dumps(extra)]
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)


def test_what_changed_behind_the_inventory_s_back_fails_the_next_run_and_the_exit_status_says_so(tmp_path):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(INVENTORY)
    reports = tmp_path / "reports"
    extra = {"clusterproof_reports_dir": str(reports), "validate_scenarios_files": []}
    with own_sandbox(inventory, tmp_path / "sandbox") as sandbox:
        first = cli_validate(inventory, sandbox.vars(), extra)
        assert first.returncode == 0, first.stdout[-3000:]
        report = json.loads((reports / "history" / "latest" / "report.json").read_text())
        assert report["sections"][0]["id"] == "changes"
        assert report["sections"][0]["checks"][0]["message"] == "no earlier run for site history"
        assert set(report["site_state"]["nodes"]) == {"dgx1-1", "dgx1-2"}
        assert report["site_state"]["projects"]["team-b"] == {"quota": 4.0, "weight": 4.0}
        first_run = Path(os.readlink(reports / "history" / "latest")).name

        # Behind the inventory's back: team-b's queue loses a GPU of quota, and a node goes.
        api = config.new_client_from_config(config_file=str(sandbox.kubeconfig))
        client.CustomObjectsApi(api).patch_cluster_custom_object(
            "scheduling.run.ai", "v2", "queues", "team-b", {"spec": {"resources": {"gpu": {"quota": 3}}}}
        )
        client.CoreV1Api(api).delete_node("dgx1-2")
        api.close()

        second = cli_validate(inventory, sandbox.vars(), extra)
        assert second.returncode == 1, second.stdout[-3000:]
        report = json.loads((reports / "history" / "latest" / "report.json").read_text())
        changes = report["changes"]
        assert changes["against"] == first_run
        assert changes["nodes_gone"] == ["dgx1-2"]
        assert changes["quotas"] == [{"project": "team-b", "before": 4.0, "after": 3.0}]
        section = report["sections"][0]
        assert section["title"] == f"What changed since the run {first_run}"
        failed = {check["id"]: check for s in report["sections"] for check in s["checks"] if check["status"] == "fail"}
        assert failed["changes/nodes-gone"]["message"] == f"gone since the run {first_run}: dgx1-2"
        assert failed["changes/nodes-gone"]["category"] == "capacity"
        assert failed["changes/quotas"]["message"] == "team-b: 4.0 -> 3.0 (in the cluster)"
        assert failed["changes/quotas"]["category"] == "configuration" and failed["changes/quotas"]["action"]
        junit = (reports / "history" / "latest" / "junit.xml").read_text()
        assert 'type="capacity"' in junit and '<property name="category" value="configuration"' in junit

        bad = tmp_path / "bad.yml"
        bad.write_text(INVENTORY.replace("gpu_quota: 4}", "gpu_quota: four}", 1))
        second_run = os.readlink(reports / "history" / "latest")
        refused = cli_validate(bad, sandbox.vars(), extra)
        assert refused.returncode == 2, refused.stdout[-3000:]
        assert "FAILED localhost: Check" in refused.stdout
        assert os.readlink(reports / "history" / "latest") == second_run  # no report for bad input
