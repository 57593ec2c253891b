"""The entry point's command line: a live view on a terminal, plain lines elsewhere, and the run's
full log kept (beside the report when one was written)."""

from __future__ import annotations

import io
import json
import random
import shutil
import signal
import subprocess

import pytest

from cli import __main__ as cli_main
from cli.playbook import REPO, inventory_sources

PLAYBOOK = """
- name: Bring up something
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Change one thing
      ansible.builtin.command: "true"
      changed_when: true
    - name: Fail on a host
      ansible.builtin.fail:
        msg: "what went wrong"
      when: fail_now | default(false) | bool
"""


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def events(*names: str) -> list[dict]:
    kinds = {"play": "playbook_on_play_start", "task": "playbook_on_task_start"}
    return [
        {"event": kinds[name.split(":")[0]], "event_data": {name.split(":")[0]: name.split(":")[1]}} for name in names
    ]


def test_on_a_terminal_one_line_is_rewritten_in_place():
    screen, log = Terminal(), io.StringIO()
    view = cli_main.LiveView(screen, log, started=0.0)
    for event in events("play:Bring up the cluster", "task:Start etcd", "task:Start kube-apiserver"):
        view(event)
    view.finish()
    assert "\n" not in screen.getvalue().rstrip("\n")
    assert screen.getvalue().count("\r\033[K") == 4
    assert "Bring up the cluster › Start kube-apiserver" in screen.getvalue().rsplit("\r\033[K", 1)[1]
    assert len(log.getvalue().splitlines()) == 3
    assert json.loads(log.getvalue().splitlines()[0])["event"] == "playbook_on_play_start"


def test_elsewhere_a_plain_line_per_stage_and_failure():
    plain, log = io.StringIO(), io.StringIO()
    view = cli_main.LiveView(plain, log, started=0.0)
    for event in events("play:One", "task:a", "task:b", "play:Two", "task:c"):
        view(event)
    view({"event": "runner_on_failed", "event_data": {"host": "gpu-1", "task": "c", "res": {"msg": "boom"}}})
    lines = plain.getvalue().splitlines()
    assert [line.split("] ", 1)[1].split(" · ")[0] for line in lines[:2]] == ["One › …", "Two › …"]
    assert lines[2] == "FAILED gpu-1: c: boom"
    assert len(lines) == 3


@pytest.mark.parametrize("fail", [False, True])
def test_a_run_keeps_its_event_log_and_output_and_ends_with_its_exit_status(tmp_path, monkeypatch, capsys, fail):
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK)
    monkeypatch.setattr(cli_main, "RUNS_DIR", tmp_path / "runs")
    monkeypatch.setitem(cli_main.PLAYBOOKS, "site", (str(playbook), []))
    returncode = cli_main.main(["site", "-e", "fail_now=%s" % fail])
    # A failed task is a failed run (1); 2 is kept for bad input.
    assert returncode == (1 if fail else 0)
    (run_dir,) = (tmp_path / "runs").iterdir()
    logged = [json.loads(line) for line in (run_dir / "ansible-events.jsonl").read_text().splitlines()]
    assert "playbook_on_stats" in [event["event"] for event in logged]
    assert "PLAY RECAP" in (run_dir / "ansible.log").read_text()
    shown = capsys.readouterr().out
    assert shown.rstrip().endswith("exit status %d" % returncode)
    assert ("FAILED localhost: Fail on a host: what went wrong" in shown) is fail


def test_the_log_moves_beside_the_report_and_the_summary_gives_the_reports_paths(tmp_path, monkeypatch, capsys):
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        """
- name: Validate and report
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Write the site validation report
      clusterproof.gpu.site_report:
        site: unit-site
        cluster_mode: sandbox
        reports_dir: "%s"
        sections: []
"""
        % (tmp_path / "reports")
    )
    monkeypatch.setattr(cli_main, "RUNS_DIR", tmp_path / "runs")
    monkeypatch.setitem(cli_main.PLAYBOOKS, "site", (str(playbook), []))
    assert cli_main.main(["site"]) == 0
    (report_dir,) = (path for path in (tmp_path / "reports" / "unit-site").iterdir() if not path.is_symlink())
    assert {"report.html", "ansible-events.jsonl", "ansible.log"} <= {path.name for path in report_dir.iterdir()}
    assert list((tmp_path / "runs").iterdir()) == []
    shown = capsys.readouterr().out
    assert "report html  %s" % (report_dir / "report.html") in shown
    assert "ansible log  %s" % report_dir in shown


def test_a_run_where_no_play_starts_shows_what_ansible_printed(tmp_path, monkeypatch, capsys):
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK)
    monkeypatch.setattr(cli_main, "RUNS_DIR", tmp_path / "runs")
    monkeypatch.setitem(cli_main.PLAYBOOKS, "site", (str(playbook), []))
    assert cli_main.main(["site", "--list-tasks"]) == 0
    assert "Change one thing" in capsys.readouterr().out


STOPPING_PLAYBOOK = """
- name: Validate
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Settle the site  # as site_inventory and clusterproof_defaults do
      ansible.builtin.set_fact:
        clusterproof_site: {site_name: stopping-site, cluster_mode: sandbox}
        clusterproof_reports_dir: "{{ reports }}"
    - name: Refuse the scenario
      ansible.builtin.fail:
        msg: "scenario netapp not started: 1 workload pod(s) outside it hold or wait for GPUs"
"""


def test_a_run_that_stops_before_its_report_gets_one_naming_the_task_and_cause(tmp_path, monkeypatch, capsys):
    playbook = tmp_path / "play.yml"
    playbook.write_text(STOPPING_PLAYBOOK)
    monkeypatch.setattr(cli_main, "RUNS_DIR", tmp_path / "runs")
    monkeypatch.setitem(cli_main.PLAYBOOKS, "validate", (str(playbook), []))
    returncode = cli_main.main(["validate", "-e", "reports=%s" % (tmp_path / "reports")])
    assert returncode == 1
    report = json.loads((tmp_path / "reports" / "stopping-site" / "latest" / "report.json").read_text())
    assert report["verdict"] == "fail"
    (check,) = [check for section in report["sections"] for check in section["checks"]]
    assert check["id"] == "run/stopped"
    assert check["observed"] == "stopped at: Refuse the scenario"
    assert check["message"] == "scenario netapp not started: 1 workload pod(s) outside it hold or wait for GPUs"
    # The run's log moved beside the report it got.
    assert (tmp_path / "reports" / "stopping-site" / "latest" / "ansible.log").is_file()
    assert "report json " in capsys.readouterr().out


def test_a_bad_inventory_gets_no_report_and_exit_status_2(tmp_path, monkeypatch):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "all:\n  children:\n    kube_control_plane:\n      hosts:\n        localhost:\n"
        "          ansible_connection: local\n          ansible_python_interpreter: '{{ ansible_playbook_python }}'\n"
        "    gpu_nodes:\n      hosts:\n        gpu-1:\n          gpu_count: eight\n"
        "  vars:\n    clusterproof_reports_dir: %s\n" % (tmp_path / "reports")
    )
    monkeypatch.setattr(cli_main, "RUNS_DIR", tmp_path / "runs")
    assert cli_main.main(["validate", "-i", str(inventory)]) == 2
    assert not (tmp_path / "reports").exists()


@pytest.mark.parametrize(
    ("folder", "text"),
    [
        ("group_vars/all/site.yml", "# Réseau du site\nclusterproof_site_name: netapp\n".encode("latin-1")),
        ("host_vars/dgx1-1.yml", bytes(random.Random(7).randrange(256) for _ in range(400))),
    ],
    ids=["latin-1-group-vars", "random-bytes-host-vars"],
)
def test_an_inventory_file_that_is_not_utf8_is_refused_naming_it_before_ansible_runs(
    tmp_path, monkeypatch, capsys, folder, text
):
    inventory = tmp_path / "site"
    shutil.copytree(REPO / "inventories" / "sandbox", inventory)
    bad = inventory / folder
    bad.parent.mkdir(parents=True, exist_ok=True)
    bad.write_bytes(text)
    with pytest.raises(UnicodeDecodeError) as undecodable:
        text.decode("utf-8")
    offset = undecodable.value.start
    monkeypatch.setattr(cli_main, "RUNS_DIR", tmp_path / "runs")
    monkeypatch.setattr(cli_main, "run_playbook", lambda *args, **kwargs: pytest.fail("ansible-playbook ran"))
    assert cli_main.main(["validate", "-i", str(inventory)]) == 2
    error = capsys.readouterr().err
    where = "%s: line %d, byte %d: expected UTF-8 text, found the byte 0x%02x; save the file as UTF-8" % (
        bad,
        text[:offset].count(b"\n") + 1,
        offset,
        text[offset],
    )
    assert "the inventory has 1 error(s); nothing was changed:\n  - " + where in error, error
    assert bad.read_bytes() == text and not (tmp_path / "runs").exists()


def test_the_inventory_sources_are_read_from_ansible_playbook_s_arguments():
    args = ["-i", "a", "-ib", "--inventory=c", "--inventory", "d", "--inventory-file", "e", "-e", "x=1", "--check"]
    assert inventory_sources(args) == ["a", "b", "c", "d", "e"]
    assert inventory_sources(["-e", "x=1"]) == []


def test_the_repository_s_inventories_are_utf8_and_relative_sources_are_read_in_the_repository():
    for command, (_, arguments) in cli_main.PLAYBOOKS.items():
        assert cli_main.inventory_encoding_errors(arguments) == [], command
    assert cli_main.inventory_encoding_errors(["-i", "inventories/kubeadm-example"]) == []


def test_an_interrupt_is_passed_on_to_the_playbook_s_process_group_even_before_it_is_known():
    """Ctrl-C reaches ansible-playbook (on a terminal of its own) as the SIGINT a terminal sends."""
    # SIGINT's default action in the child, whatever the test run inherited (a shell's background job
    # starts with SIGINT ignored, and exec keeps an ignored signal ignored).
    playbook = subprocess.Popen(
        ["sleep", "30"], start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)
    )
    try:
        view = cli_main.LiveView(io.StringIO(), io.StringIO(), started=0.0)
        view.interrupt(signal.SIGINT)  # before the first event: noted, passed on once the pid is known
        assert view.interrupted == ["SIGINT"] and playbook.poll() is None
        view({"event": "playbook_on_start", "pid": playbook.pid, "event_data": {}})
        assert playbook.wait(timeout=10) == -signal.SIGINT
    finally:
        playbook.kill()


def test_every_command_names_a_playbook_and_inventory_of_the_repository():
    for command, (playbook, arguments) in cli_main.PLAYBOOKS.items():
        assert (REPO / playbook).is_file(), command
        inventories = [arguments[i + 1] for i, argument in enumerate(arguments) if argument == "-i"]
        assert all((REPO / inventory).is_dir() for inventory in inventories), command


def test_two_runs_started_in_the_same_second_each_have_a_run_directory_of_their_own(monkeypatch, tmp_path):
    monkeypatch.setattr(cli_main, "RUNS_DIR", tmp_path / "runs")
    first = cli_main.new_run_dir("20261129T025036Z", "validate")
    second = cli_main.new_run_dir("20261129T025036Z", "validate")
    assert first != second and first.is_dir() and second.is_dir()
    assert first.parent == second.parent == tmp_path / "runs"
    assert first.name.startswith("20261129T025036Z-validate-")
