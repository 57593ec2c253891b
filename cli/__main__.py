"""``python -m cli site|validate|upgrade|down [ansible-playbook args]``: a playbook through ansible-runner
with a short live view, the full event log and output kept beside the report.

On a terminal the view is one line rewritten in place; elsewhere (CI, a pipe) it is a plain line
per stage and per failure, and a heartbeat a minute, so a log stays short and still shows life.

Every ``site`` and ``validate`` run ends in a report: when the playbook stopped before writing one
(a stage failed, or the run was interrupted), the report is written here from the sections the
validation tasks had returned, with the failed check ``run/stopped`` naming where and why. SIGINT
(Ctrl-C) and SIGTERM are passed on to ansible-playbook as the SIGINT a terminal sends, so that a
scenario under way removes what it created. The exit status: 0 every check passed, 1 a check
failed or the run stopped, 2 bad input (the inventory check failed, an inventory file that is not
UTF-8, or ansible-playbook's arguments). The inventory's files are checked to be UTF-8 before
ansible-playbook starts: its YAML loader fails on other bytes naming no file.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from . import progress
from .playbook import DEFAULT_INVENTORY, EVENTS_FILE, LOG_FILE, REPO, inventory_sources, run_playbook

PLAYBOOKS = {
    "site": ("playbooks/site.yml", []),
    "validate": ("playbooks/validate.yml", []),
    "down": ("playbooks/sandbox.yml", ["-e", "sandbox_cluster_state=down"]),
    # A kubeadm site to the Kubernetes version its inventory declares (docs/upgrade.md).
    "upgrade": ("playbooks/upgrade.yml", []),
    # A kubeadm site's etcd: a snapshot kept on the controller, and one restored (docs/etcd.md).
    "backup": ("playbooks/etcd_backup.yml", []),
    "restore": ("playbooks/etcd_restore.yml", []),
    "lab-up": ("playbooks/lab.yml", ["-i", "inventories/lab"]),
    "lab-down": ("playbooks/lab.yml", ["-i", "inventories/lab", "-e", "lab_state=down"]),
    # The lab as a site of mode kubeadm, from the bundle: the GPU hosts' stack, then Kubernetes.
    "lab-gpu-nodes": ("playbooks/gpu_nodes.yml", ["-i", "inventories/lab"]),
    "lab-cluster": ("playbooks/cluster.yml", ["-i", "inventories/lab"]),
}
# The commands whose run ends in a site report (a stopped one when the playbook wrote none).
REPORTING = ("site", "validate")
HEARTBEAT_S = 60.0
# Where a run's log waits until the report's directory is known (and stays when none is written:
# ``down``, --check, or a run that failed before the report).
RUNS_DIR = REPO / "reports" / "runs"


class LiveView:
    """Turns events into what a person watching sees, on ``stream``."""

    def __init__(self, stream: TextIO, events_log: TextIO, started: float) -> None:
        self.stream = stream
        self.events_log = events_log
        self.progress = progress.Progress(started=started)
        self.tty = stream.isatty()
        self.last_plain = started
        # ansible-playbook's pid (from its events), to pass an interrupt on to it; the signals
        # received, by name.
        self.playbook_pid: int | None = None
        self.interrupted: list[str] = []

    def __call__(self, event: dict[str, Any]) -> None:
        self.events_log.write(json.dumps(event, default=str) + "\n")
        self.events_log.flush()
        if self.playbook_pid is None:
            self.playbook_pid = progress.playbook_pid([event])
            if self.playbook_pid is not None and self.interrupted:
                self.pass_on_interrupt()  # one came before the playbook had said who it is
        stage_before = self.progress.stage
        if not self.progress.update(event):
            return
        now = time.monotonic()
        failure = progress.failure_line(event)
        if self.tty:
            width = shutil.get_terminal_size().columns
            if failure:
                self.stream.write("\r\033[K" + failure + "\n")
            self.stream.write("\r\033[K" + self.progress.line(now, width - 1))
        elif failure:
            self.stream.write(failure + "\n")
        elif self.progress.stage != stage_before or now - self.last_plain >= HEARTBEAT_S:
            self.stream.write(self.progress.line(now) + "\n")
            self.last_plain = now
        self.stream.flush()

    def interrupt(self, signum: int, frame: Any = None) -> None:
        """A signal handler for SIGINT and SIGTERM: note it, and pass it on to the playbook."""
        self.interrupted.append(signal.Signals(signum).name)
        self.pass_on_interrupt()

    def pass_on_interrupt(self) -> None:
        # ansible-playbook runs on a terminal of its own (ansible-runner's pexpect): pass the
        # interrupt on as the SIGINT a terminal sends its process group, and let it stop.
        if self.playbook_pid is not None:
            try:
                os.killpg(os.getpgid(self.playbook_pid), signal.SIGINT)
            except OSError:
                pass  # it has ended already

    def finish(self) -> None:
        if self.tty:
            self.stream.write("\r\033[K" + self.progress.line(time.monotonic()) + "\n")
            self.stream.flush()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="clusterproof", description="Run a playbook with a live view; its full log is kept beside the report."
    )
    parser.add_argument("command", choices=sorted(PLAYBOOKS))
    parser.add_argument("args", nargs=argparse.REMAINDER, help="passed to ansible-playbook (-i, -e, --check)")
    options = parser.parse_args(argv)
    playbook, fixed_args = PLAYBOOKS[options.command]
    refused = inventory_encoding_errors([*fixed_args, *options.args])
    if refused:
        # Ansible's YAML loader would fail on these naming no file: refused before anything runs.
        print(
            "the inventory has %d error(s); nothing was changed:\n%s"
            % (len(refused), "\n".join("  - " + error for error in refused)),
            file=sys.stderr,
        )
        return progress.EXIT_BAD_INPUT

    # The report directory is known only when site_report has run: keep the log in a run directory
    # of its own until then, and move it beside the report at the end.
    run_dir = new_run_dir(datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ"), options.command)
    started = time.monotonic()
    with (run_dir / EVENTS_FILE).open("w") as events_log:
        view = LiveView(sys.stdout, events_log, started)
        previous = {sig: signal.signal(sig, view.interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            run = run_playbook(playbook, [*fixed_args, *options.args], on_event=view, cancel=lambda: False)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        view.finish()
    (run_dir / LOG_FILE).write_text(run.output)
    if not any(event.get("event") == "playbook_on_play_start" for event in run.events):
        # Nothing ran (--syntax-check, --list-tasks, an error before the first play): what
        # ansible-playbook printed is the answer, so show it.
        print(run.output.rstrip())

    returncode = progress.exit_status(run.returncode, run.events)
    paths = run.report_paths()
    if options.command in REPORTING and not paths and returncode != progress.EXIT_BAD_INPUT:
        check_mode = any(arg in ("--check", "-C") for arg in options.args)
        paths = {} if check_mode else write_stopped_report(run.events, view.interrupted[0] if view.interrupted else "")
    log_dir = run_dir
    if paths.get("dir") and Path(paths["dir"]).is_dir():
        log_dir = Path(paths["dir"])
        for name in (EVENTS_FILE, LOG_FILE):
            shutil.move(str(run_dir / name), str(log_dir / name))
        run_dir.rmdir()
    status = "interrupted" if view.interrupted else run.status
    for line in summary(returncode, status, paths, log_dir, time.monotonic() - started):
        print(line)
    return returncode


def new_run_dir(stamp: str, command: str) -> Path:
    """A run directory of this run's own, named by its start and command: two runs started in the same
    second (two validations side by side) must not share one, or the first to end moves the other's
    log away with its own."""
    RUNS_DIR.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{stamp}-{command}-", dir=RUNS_DIR))


def _collections_importable() -> None:
    collections = str(REPO / "collections")
    if collections not in sys.path:
        sys.path.insert(0, collections)


def inventory_encoding_errors(args: Sequence[str]) -> list[str]:
    """The files of the inventory ansible-playbook's ``args`` name (the sandbox's when they name
    none) that are not UTF-8, each with its line, byte and the byte's value."""
    _collections_importable()
    from ansible_collections.clusterproof.gpu.plugins.module_utils.inventory import files

    sources = inventory_sources(args) or [str(DEFAULT_INVENTORY.relative_to(REPO))]
    return files.encoding_errors(sources, root=REPO)


def write_stopped_report(events: list[dict[str, Any]], interrupted_by: str) -> dict[str, str]:
    """The report of a run that stopped before writing its own: the sections gathered so far and
    the failed check run/stopped. Nothing (``{}``) when the run got no site settings (it stopped
    before the inventory was read)."""
    facts = progress.run_facts(events)
    site, reports_dir = facts.get("clusterproof_site") or {}, facts.get("clusterproof_reports_dir")
    if not site.get("site_name") or not reports_dir:
        return {}
    _collections_importable()
    from ansible_collections.clusterproof.gpu.plugins.module_utils.report import model, render

    now = datetime.now(UTC)
    sections = [model.section_from_dict(section) for section in progress.gathered_sections(events)]
    task, result = progress.stop_cause(events, interrupted_by)
    sections.append(model.stopped_section(task, model.failure_message(result)))
    report = model.Report(
        site=str(site["site_name"]),
        cluster_mode=str(site.get("cluster_mode") or ""),
        started=str(facts.get("clusterproof_run_started") or ""),
        finished=now.isoformat(timespec="seconds"),
        sections=sections,
    )
    return render.write_report(report, reports_dir, now)


def summary(returncode: int, status: str, paths: dict[str, str], log_dir: Path, elapsed: float) -> list[str]:
    lines = []
    for name in ("html", "json", "junit"):
        if paths.get(name):
            lines.append("report %-5s %s" % (name, paths[name]))
    lines.append("ansible log  %s (%s, %s)" % (log_dir, LOG_FILE, EVENTS_FILE))
    lines.append("%s in %dm%02ds, exit status %d" % (status or "finished", elapsed // 60, elapsed % 60, returncode))
    return lines


if __name__ == "__main__":
    sys.exit(main())
