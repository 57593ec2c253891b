"""Faults during the validation, on a sandbox of the test's own: a frozen scheduler, a node held
NotReady, the API server killed mid-scenario, Ctrl-C to ``./clusterproof validate``. Each run
writes a report whose failed check names the cause, leaves no scenario object behind, and the next
run passes. One sandbox and a two-step scenario keep it to a few minutes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from kubernetes import client, config

from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import control_plane
from cli.playbook import PlaybookRun

from .conftest import REPO, Sandbox, own_sandbox, run_playbook, two_node_site, two_team_scenario, wait_for

pytestmark = pytest.mark.sandbox

INVENTORY = two_node_site("faults")
# Two steps, a few seconds each: long enough to be hit mid-run, short enough to run six times.
SCENARIO = two_team_scenario(
    "faults",
    "Two teams, one job each, then one ends",
    "clusterproof's fault tests",
    """\
  - name: "a job each"
    submit:
      - {name: a-1, project: team-a, kind: train, gpus: 2}
      - {name: b-1, project: team-b, kind: train, gpus: 2}
    expect:
      allocated: {team-a: 2, team-b: 2}
      running: all
  - name: "team-a's job ends"
    delete: [a-1]
    submit:
      - {name: b-2, project: team-b, kind: train, gpus: 2}
    expect:
      allocated: {team-a: 0, team-b: 4}
""",
)
STOPPED = "scenario/faults/stopped"
# How long the validation may take to reach the scenario (its sections before it, under CI's load:
# a rehearsal of 3 Dec passed its validation, but its first workload ran after more than 120 s).
SCENARIO_START_SECONDS = 300
KAI_PROCESSES = ("kai-scheduler", "kai-binder", "kai-podgrouper", "kai-queuecontroller")


class Site:
    """The test's sandbox, its inventory, scenario and reports, and a client to look at it."""

    def __init__(self, sandbox: Sandbox, directory: Path) -> None:
        self.sandbox, self.directory = sandbox, directory
        self.inventory = directory / "hosts.yml"
        self.reports = directory / "reports"
        scenario = directory / "faults.yml"
        scenario.write_text(SCENARIO)
        self.extra = json.dumps(
            {
                "clusterproof_reports_dir": str(self.reports),
                "validate_scenarios_files": [str(scenario)],
                "validate_scenarios_settle_seconds": 2,
            }
        )
        self.api = config.new_client_from_config(config_file=str(sandbox.kubeconfig))
        self.core = client.CoreV1Api(self.api)
        self.layout = control_plane.Layout(sandbox.state_dir)

    def validate(self) -> PlaybookRun:
        return run_playbook("playbooks/validate.yml", *self.sandbox.vars(), "-e", self.extra, inventory=self.inventory)

    def cli_validate(self) -> subprocess.Popen:
        """``./clusterproof validate`` (the cli, as the entry script runs it), in a session of its own
        as on a terminal, so that the test can send it the terminal's Ctrl-C."""
        env = dict(os.environ, PYTHONPATH=str(REPO), PATH="%s:%s" % (Path(sys.executable).parent, os.environ["PATH"]))
        argv = [
            sys.executable,
            "-m",
            "cli",
            "validate",
            "-i",
            str(self.inventory),
            *self.sandbox.vars(),
            "-e",
            self.extra,
        ]
        return subprocess.Popen(argv, cwd=REPO, env=env, start_new_session=True, stdout=subprocess.PIPE, text=True)

    def report(self) -> dict:
        return json.loads((self.reports / "faults" / "latest" / "report.json").read_text())

    def pid(self, component: str) -> int:
        pid = control_plane.running_pid(self.layout, component)
        assert pid is not None, "%s is not running" % component
        return pid

    def scenario_objects(self) -> list[str]:
        """What any scenario run has on the cluster: its namespaces and KAI queues (pods and jobs
        live in the namespaces)."""
        namespaces = [
            ns.metadata.name for ns in self.core.list_namespace().items if ns.metadata.name.startswith("scn-")
        ]
        queues = client.CustomObjectsApi(self.api).list_cluster_custom_object("scheduling.run.ai", "v2", "queues")
        return namespaces + [q["metadata"]["name"] for q in queues["items"] if q["metadata"]["name"].startswith("scn-")]

    def scenario_running(self) -> bool:
        """A workload of the scenario runs (the run is mid-scenario)."""
        try:
            pods = self.core.list_namespaced_pod("scn-team-a").items
        except client.ApiException:
            return False
        return any(pod.status.phase == "Running" for pod in pods)


def checks(report: dict) -> dict[str, dict]:
    return {check["id"]: check for section in report["sections"] for check in section["checks"]}


def failed(report: dict) -> dict[str, str]:
    return {key: check["message"] for key, check in checks(report).items() if check["status"] == "fail"}


def assert_passes(site: Site) -> None:
    run = site.validate()
    assert run.returncode == 0, run.tail(3000)
    report = site.report()
    assert report["verdict"] == "pass", failed(report)
    assert checks(report)["scenario/faults/2/allocated/team-b"]["observed"] == "4"
    assert site.scenario_objects() == []


def in_background(validate: Callable[[], PlaybookRun]) -> Callable[[], PlaybookRun]:
    """Start ``validate`` in a thread; the function returned waits for its run."""
    done: list[PlaybookRun] = []
    thread = threading.Thread(target=lambda: done.append(validate()))
    thread.start()

    def wait() -> PlaybookRun:
        thread.join(timeout=300)
        assert done, "the run did not end"
        return done[0]

    return wait


def hold_not_ready(site: Site, node: str) -> None:
    """Take the node from KWOK (which would make it Ready again at once) and mark it NotReady."""
    site.core.patch_node(node, {"metadata": {"annotations": {control_plane.KWOK_NODE_ANNOTATION: "held-by-test"}}})
    condition = {"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "held by test_faults"}
    site.core.patch_node_status(node, {"status": {"conditions": [condition]}})


def release(site: Site, node: str) -> None:
    site.core.patch_node(node, {"metadata": {"annotations": {control_plane.KWOK_NODE_ANNOTATION: "fake"}}})

    def ready() -> bool:
        conditions = site.core.read_node(node).status.conditions or []
        return any(c.type == "Ready" and c.status == "True" for c in conditions)

    assert wait_for(ready, timeout=30), "KWOK did not make %s Ready again" % node


def test_faults_end_in_a_report_that_names_the_cause_and_leave_nothing_behind(tmp_path):
    (tmp_path / "hosts.yml").write_text(INVENTORY)
    with own_sandbox(tmp_path / "hosts.yml", tmp_path / "state") as sandbox:
        site = Site(sandbox, tmp_path)

        # The scheduler frozen mid-scenario: the step stops at once with the cause, not after its
        # timeout with fairness numbers.
        scheduler = site.pid("kai-scheduler")
        frozen = in_background(site.validate)
        try:
            assert wait_for(site.scenario_running, timeout=SCENARIO_START_SECONDS), "the scenario did not start"
            os.kill(scheduler, signal.SIGSTOP)
            run = frozen()
        finally:
            os.kill(scheduler, signal.SIGCONT)
        assert run.returncode != 0
        report = site.report()
        assert failed(report)[STOPPED].startswith(
            "scenario faults stopped: kai-scheduler is not responding: its process (pid %d) is stopped" % scheduler
        )
        assert checks(report)[STOPPED]["observed"].startswith("stopped while running step ")
        assert "everything it created was removed" in failed(report)[STOPPED]
        assert checks(report)["gpu-nodes/dgx1-1/ready"]["status"] == "pass", "the checks gathered before are kept"
        assert site.scenario_objects() == []

        # A node the scenario uses held NotReady: named, in the scenario's check and the node's own.
        hold_not_ready(site, "dgx1-2")
        try:
            run = site.validate()
        finally:
            release(site, "dgx1-2")
        assert run.returncode != 0
        report = site.report()
        assert "node dgx1-2 is NotReady (Ready=False; KubeletNotReady: held by test_faults)" in failed(report)[STOPPED]
        assert "gpu-nodes/dgx1-2/ready" in failed(report)
        assert site.scenario_objects() == []
        assert_passes(site)

        # The API server killed mid-scenario: the report is written, the next run (after `up`)
        # removes what the cut-off run could not, by its label, and passes.
        cut_off = in_background(site.validate)
        assert wait_for(site.scenario_running, timeout=SCENARIO_START_SECONDS), "the scenario did not start"
        apiserver = site.pid("kube-apiserver")
        os.kill(apiserver, signal.SIGTERM)
        assert cut_off().returncode != 0
        message = failed(site.report())[STOPPED]
        assert "the API server at 127.0.0.1:%d cannot be reached" % (sandbox.port_base + 3) in message, message
        assert "the next run removes it first (label clusterproof.io/scenario-run=" in message
        # `up` restarts what is not running once the old API server is gone; its graceful shutdown
        # can take a minute, which is not what this test is about: cut it short.
        if control_plane.running_pid(site.layout, "kube-apiserver") is not None:
            os.kill(apiserver, signal.SIGKILL)
        assert wait_for(lambda: control_plane.running_pid(site.layout, "kube-apiserver") is None, timeout=60)
        up = run_playbook("playbooks/sandbox.yml", *sandbox.vars(), inventory=site.inventory)
        assert up.returncode == 0, up.tail(3000)
        # KAI's components may have given up without the API server; `up` restarts the control
        # plane only, and the engine's install (scheduler.yml) restarts what of KAI is not running.
        if any(control_plane.running_pid(site.layout, name) is None for name in KAI_PROCESSES):
            installed = run_playbook("playbooks/scheduler.yml", *sandbox.vars(), inventory=site.inventory)
            assert installed.returncode == 0, installed.tail(3000)
        assert_passes(site)

        # Ctrl-C to ./clusterproof validate: the report says so, the scenario removes its objects.
        cli = site.cli_validate()
        try:
            assert wait_for(site.scenario_running, timeout=SCENARIO_START_SECONDS), "the scenario did not start"
            os.killpg(cli.pid, signal.SIGINT)
            output, _ = cli.communicate(timeout=120)
        finally:
            if cli.poll() is None:
                cli.kill()
        assert cli.returncode == 1, output
        report = site.report()
        assert failed(report)["run/stopped"].startswith("interrupted by SIGINT"), failed(report)
        assert checks(report)["run/stopped"]["observed"].endswith(
            "Run each fairness scenario and judge what the scheduler does"
        )
        assert wait_for(lambda: site.scenario_objects() == [], timeout=120), site.scenario_objects()
        assert_passes(site)
        site.api.close()


def test_a_validation_that_cannot_reach_its_cluster_still_writes_its_report(tmp_path, monkeypatch):
    """No sandbox: a cluster that cannot be reached stops the validation at its first task; the
    playbook's rescue still writes the report, whose failed check names the task and the cause."""
    from cli import __main__ as cli_main

    missing = tmp_path / "no-such-kubeconfig"
    (tmp_path / "hosts.yml").write_text(
        INVENTORY.replace("clusterproof_site_name: faults", "clusterproof_site_name: unreachable")
        + "    clusterproof_cluster_mode: existing\n    clusterproof_scheduler: none\n"
        + "    clusterproof_kubeconfig: %s\n    clusterproof_reports_dir: %s\n" % (missing, tmp_path / "reports")
    )
    monkeypatch.setattr(cli_main, "RUNS_DIR", tmp_path / "runs")
    assert cli_main.main(["validate", "-i", str(tmp_path / "hosts.yml")]) == 1
    report = json.loads((tmp_path / "reports" / "unreachable" / "latest" / "report.json").read_text())
    stopped = checks(report)["run/stopped"]
    assert stopped["status"] == "fail"
    assert stopped["observed"] == "stopped at: Check the declared GPU nodes against the cluster's Nodes"
    assert stopped["message"].startswith("cannot read the cluster's Nodes")
    assert "kubeconfig %s does not exist" % missing in stopped["message"]
    # Written by the playbook's own report task (its log moved beside it), not by the entry point.
    assert (tmp_path / "reports" / "unreachable" / "latest" / "ansible.log").is_file()
    assert (
        "site_report : Write the site validation report"
        in (tmp_path / "reports" / "unreachable" / "latest" / "ansible.log").read_text()
    )
