"""``python -m cli site|down [ansible-playbook args]``: a playbook through ansible-runner with a
short live view, the full event log and output kept beside the report.

On a terminal the view is one line rewritten in place; elsewhere (CI, a pipe) it is a plain line
per stage and per failure, and a heartbeat a minute, so a log stays short and still shows life.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from . import progress
from .playbook import EVENTS_FILE, LOG_FILE, REPO, run_playbook

PLAYBOOKS = {
    "site": ("playbooks/site.yml", []),
    "down": ("playbooks/sandbox.yml", ["-e", "sandbox_cluster_state=down"]),
}
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

    def __call__(self, event: dict[str, Any]) -> None:
        self.events_log.write(json.dumps(event, default=str) + "\n")
        self.events_log.flush()
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

    # The report directory is known only when site_report has run: keep the log in a run directory
    # of its own until then, and move it beside the report at the end.
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    run_dir = RUNS_DIR / f"{stamp}-{options.command}"
    run_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with (run_dir / EVENTS_FILE).open("w") as events_log:
        view = LiveView(sys.stdout, events_log, started)
        run = run_playbook(playbook, [*fixed_args, *options.args], on_event=view)
        view.finish()
    (run_dir / LOG_FILE).write_text(run.output)
    if not any(event.get("event") == "playbook_on_play_start" for event in run.events):
        # Nothing ran (--syntax-check, --list-tasks, an error before the first play): what
        # ansible-playbook printed is the answer, so show it.
        print(run.output.rstrip())

    paths = run.report_paths()
    log_dir = run_dir
    if paths.get("dir") and Path(paths["dir"]).is_dir():
        log_dir = Path(paths["dir"])
        for name in (EVENTS_FILE, LOG_FILE):
            shutil.move(str(run_dir / name), str(log_dir / name))
        run_dir.rmdir()
    for line in summary(run.returncode, run.status, paths, log_dir, time.monotonic() - started):
        print(line)
    return run.returncode


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
