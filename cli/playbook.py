"""Run one of the repository's playbooks through ansible-runner and keep every event.

The same code serves ``./clusterproof site`` (with a live view on ``on_event``) and the e2e tests
(which read structured results from the events instead of parsing ansible-playbook's output).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import progress

REPO = Path(__file__).resolve().parents[1]
DEFAULT_INVENTORY = REPO / "inventories" / "sandbox"
EVENTS_FILE = "ansible-events.jsonl"
LOG_FILE = "ansible.log"


@dataclass
class PlaybookRun:
    """A finished playbook run: its exit status, its plain output and every runner event."""

    returncode: int
    output: str
    events: list[dict[str, Any]] = field(default_factory=list)
    status: str = ""

    def recap(self, host: str = "localhost") -> dict[str, int]:
        """The PLAY RECAP counters of ``host``."""
        table = progress.recap(self.events)
        assert host in table, f"no PLAY RECAP for {host} in:\n{self.output[-3000:]}"
        return table[host]

    def tail(self, chars: int = 5000) -> str:
        """What a failed test shows of the run: each failed task's whole message, then the last
        ``chars`` characters of the output (under profile_tasks, mostly the tasks' timings)."""
        return "\n".join([*progress.failure_messages(self.events), self.output[-chars:]])

    def changed_tasks(self) -> dict[str, list[str]]:
        """Host -> the tasks that changed something there."""
        return progress.changed_tasks(self.events)

    def report_paths(self) -> dict[str, str]:
        return progress.report_paths(self.events)

    def save(self, directory: Path) -> tuple[Path, Path]:
        """Write the event log (one JSON object a line) and the plain output into ``directory``."""
        directory.mkdir(parents=True, exist_ok=True)
        events_path, log_path = directory / EVENTS_FILE, directory / LOG_FILE
        with events_path.open("w") as stream:
            for event in self.events:
                stream.write(json.dumps(event, default=str) + "\n")
        log_path.write_text(self.output)
        return events_path, log_path


def run_playbook(
    playbook: str | Path,
    args: Sequence[str] = (),
    inventory: str | Path | None = None,
    timeout: int | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    cancel: Callable[[], bool] | None = None,
) -> PlaybookRun:
    """Run ``playbook`` (a path relative to the repository, or absolute) with ansible-playbook's
    ``args`` (``-e VAR=VALUE``, ``--check``, ``-i``...) through ansible-runner.

    ``inventory`` is the repository's sandbox inventory unless given (here or as ``-i`` in ``args``).
    Each run has a private data directory of its own, so runs side by side never share one.

    ``cancel``: asked while the playbook runs, True stops it (with SIGKILL). Without it, ansible-runner
    takes SIGINT and SIGTERM itself and kills the playbook with them; the entry point passes one that
    never cancels and passes interrupts on itself, so that a module under way can clean up."""
    import ansible_runner  # imported here so that `--help` and the unit tests of `progress` stay light

    args = list(args)
    if inventory is not None or not inventory_sources(args):
        args = ["-i", str(inventory or DEFAULT_INVENTORY), *args]
    events: list[dict[str, Any]] = []

    def keep(event: dict[str, Any]) -> bool:
        events.append(event)
        if on_event is not None:
            on_event(event)
        return True

    private = Path(tempfile.mkdtemp(prefix="clusterproof-runner-"))
    try:
        runner = ansible_runner.run(
            private_data_dir=str(private),
            project_dir=str(REPO),
            playbook=str(REPO / playbook),
            cmdline=shlex.join(args),
            envvars=_environment(),
            event_handler=keep,
            quiet=True,
            timeout=timeout,
            suppress_env_files=True,
            cancel_callback=cancel,
        )
        output = Path(runner.stdout.name).read_text(errors="replace") if runner.stdout else ""
        returncode = runner.rc if runner.rc is not None else 1
        return PlaybookRun(returncode, output, events, runner.status)
    finally:
        shutil.rmtree(private, ignore_errors=True)


def inventory_sources(args: Sequence[str]) -> list[str]:
    """The inventory sources ansible-playbook's ``args`` name (``-i X``, ``-iX``, ``--inventory X``,
    ``--inventory=X``, ``--inventory-file``), in order; none when they name none."""
    sources = []
    for index, arg in enumerate(args):
        option, equals, value = arg.partition("=")
        if arg in ("-i", "--inventory", "--inventory-file"):
            if index + 1 < len(args):
                sources.append(args[index + 1])
        elif equals and option in ("--inventory", "--inventory-file"):
            sources.append(value)
        elif arg.startswith("-i") and len(arg) > 2:
            sources.append(arg[2:])
    return sources


def _environment() -> dict[str, str]:
    """ansible-playbook from this interpreter's venv, the repository's ansible.cfg, no colours (the
    log is read by people and tests, not a terminal)."""
    venv_bin = Path(sys.executable).parent
    return {
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "PATH": "{}:{}".format(venv_bin, os.environ.get("PATH", "")),
    }
