"""What a person and a test want from ansible-runner's events: a one-line live view, which tasks
changed on which host, the PLAY RECAP as numbers, and where the site report was written.

Pure functions over the event dicts ansible-runner hands its event handler (and writes to
``artifacts/<ident>/job_events``); no I/O here, so each is unit-tested with hand-written events.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Event = Mapping[str, Any]

# Per-host results of a task. runner_item_* are a loop's items, reported again in the task's own
# runner_on_* result, so they are left out of the counts.
HOST_RESULTS = {
    "runner_on_ok": "ok",
    "runner_on_failed": "failed",
    "runner_on_unreachable": "unreachable",
    "runner_on_skipped": "skipped",
}
# playbook_on_stats names two counters differently from the PLAY RECAP line.
RECAP_NAMES = {"dark": "unreachable", "failures": "failed"}
RECAP_KEYS = ("ok", "changed", "unreachable", "failed", "skipped", "rescued", "ignored")
SITE_REPORT_ACTIONS = {"clusterproof.gpu.site_report", "site_report"}


@dataclass
class Progress:
    """The run as far as its events tell: the stage (play), the current task and host results."""

    started: float
    stage: str = ""
    task: str = ""
    hosts_done: set[str] = field(default_factory=set)
    hosts_failed: set[str] = field(default_factory=set)
    tasks_done: int = 0

    def update(self, event: Event) -> bool:
        """Take one event in; True when the live view should change."""
        kind = event.get("event", "")
        data = event.get("event_data") or {}
        if kind == "playbook_on_play_start":
            self.stage = data.get("play", "") or data.get("name", "")
            self.task = ""
            return True
        if kind == "playbook_on_task_start":
            self.task = data.get("task", "") or data.get("name", "")
            self.tasks_done += 1
            return True
        result = HOST_RESULTS.get(kind)
        if result is None:
            return False
        host = data.get("host", "")
        if result in ("failed", "unreachable") and not data.get("ignore_errors"):
            self.hosts_failed.add(host)
        self.hosts_done.add(host)
        return True

    def line(self, now: float, width: int = 0) -> str:
        """``[12:34] Bring up the cluster › Start kube-apiserver · 2 hosts, 0 failed · task 17``."""
        elapsed = max(0, int(now - self.started))
        text = "[%02d:%02d] %s › %s · %d host%s, %d failed · task %d" % (
            elapsed // 60,
            elapsed % 60,
            self.stage or "starting",
            self.task or "…",
            len(self.hosts_done),
            "" if len(self.hosts_done) == 1 else "s",
            len(self.hosts_failed),
            self.tasks_done,
        )
        if width and len(text) > width:
            text = text[: max(0, width - 1)] + "…"
        return text


def changed_tasks(events: Iterable[Event]) -> dict[str, list[str]]:
    """Host -> the names of the tasks that reported a change there, in the order they ran."""
    changed: dict[str, list[str]] = {}
    for event in events:
        if event.get("event") != "runner_on_ok":
            continue
        data = event.get("event_data") or {}
        if (data.get("res") or {}).get("changed"):
            changed.setdefault(data.get("host", ""), []).append(data.get("task", ""))
    return changed


def recap(events: Iterable[Event]) -> dict[str, dict[str, int]]:
    """Host -> the PLAY RECAP counters (ok, changed, unreachable, failed, skipped, rescued, ignored),
    from the run's last playbook_on_stats event; every counter present, zero when the host had none."""
    stats: Mapping[str, Any] = {}
    for event in events:
        if event.get("event") == "playbook_on_stats":
            stats = event.get("event_data") or {}
    hosts: set[str] = set()
    for counter in ("processed", "ok", "changed", "dark", "failures", "skipped", "rescued", "ignored"):
        hosts.update((stats.get(counter) or {}).keys())
    table = {host: dict.fromkeys(RECAP_KEYS, 0) for host in hosts}
    for counter, per_host in stats.items():
        name = RECAP_NAMES.get(counter, counter)
        if name not in RECAP_KEYS or not isinstance(per_host, Mapping):
            continue
        for host, count in per_host.items():
            table[host][name] = int(count)
    return table


def report_paths(events: Iterable[Event]) -> dict[str, str]:
    """The paths the site_report task wrote (dir, json, html, junit, latest); empty when it did not run
    or ran in check mode."""
    paths: dict[str, str] = {}
    for event in events:
        if event.get("event") not in ("runner_on_ok", "runner_on_failed"):
            continue
        data = event.get("event_data") or {}
        if data.get("resolved_action", data.get("task_action")) in SITE_REPORT_ACTIONS:
            paths = dict((data.get("res") or {}).get("paths") or {})
    return paths


def failure_line(event: Event, whole: bool = False, limit: int = 3000) -> str:
    """``FAILED localhost: Start kube-apiserver: <msg>`` for a failed or unreachable host, else ``""``:
    the message's first line, or with ``whole`` all of it (cut to ``limit`` characters)."""
    kind = HOST_RESULTS.get(event.get("event", ""))
    data = event.get("event_data") or {}
    if kind not in ("failed", "unreachable") or data.get("ignore_errors"):
        return ""
    message = str((data.get("res") or {}).get("msg", "")).strip()
    if not whole:
        lines = message.splitlines()
        message = lines[0] if lines else ""
    elif len(message) > limit:
        message = message[:limit] + "…"
    return "%s %s: %s: %s" % (kind.upper(), data.get("host", ""), data.get("task", ""), message)


def failure_messages(events: Iterable[Event], limit: int = 3000) -> list[str]:
    """Each failed or unreachable host result that was not ignored, with its whole message (cut to
    ``limit`` characters): what a failed test shows before the output's tail, which under the
    profile_tasks callback holds mostly the tasks' timings."""
    return [line for line in (failure_line(event, whole=True, limit=limit) for event in events) if line]


# --- how a run ended ---------------------------------------------------------------------------------

# The exit status of ./clusterproof site (and validate, down): every check passed; some check failed,
# or the run stopped before its end; the input was bad (the inventory check failed, or
# ansible-playbook refused its arguments or could not parse a playbook or the inventory).
EXIT_PASSED, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
# ansible-playbook's own statuses for a parser error and bad or incomplete options.
_ANSIBLE_BAD_INPUT = (4, 5)
INVENTORY_CHECK_ACTIONS = {"clusterproof.gpu.site_inventory", "site_inventory"}


def _action(data: Mapping[str, Any]) -> str:
    return str(data.get("resolved_action", data.get("task_action")) or "")


def _failures(events: Iterable[Event]) -> list[Mapping[str, Any]]:
    """The event data of every failed or unreachable host result that was not ignored, in order."""
    failed = []
    for event in events:
        data = event.get("event_data") or {}
        if HOST_RESULTS.get(event.get("event", "")) in ("failed", "unreachable") and not data.get("ignore_errors"):
            failed.append(data)
    return failed


def report_verdict(events: Iterable[Event]) -> str:
    """The verdict (``pass``/``fail``) of the site report the run wrote, or ``""`` when it wrote none."""
    verdict = ""
    for event in events:
        data = event.get("event_data") or {}
        if event.get("event") in ("runner_on_ok", "runner_on_failed") and _action(data) in SITE_REPORT_ACTIONS:
            res = data.get("res") or {}
            if res.get("paths"):
                verdict = str(res.get("verdict") or "")
    return verdict


def exit_status(returncode: int, events: Sequence[Event]) -> int:
    """0 when the run ended and every check passed, 2 for bad input (the inventory check failed, or
    ansible-playbook refused its arguments or input), 1 for anything else that failed or stopped."""
    if returncode in _ANSIBLE_BAD_INPUT or any(_action(data) in INVENTORY_CHECK_ACTIONS for data in _failures(events)):
        return EXIT_BAD_INPUT
    verdict = report_verdict(events)
    if returncode == 0 and verdict in ("", "pass"):
        return EXIT_PASSED
    return EXIT_FAILED


def run_facts(events: Iterable[Event]) -> dict[str, Any]:
    """The facts the run's tasks set (``ansible_facts`` of their results), the later winning."""
    facts: dict[str, Any] = {}
    for event in events:
        if event.get("event") == "runner_on_ok":
            facts.update(((event.get("event_data") or {}).get("res") or {}).get("ansible_facts") or {})
    return facts


def gathered_sections(events: Iterable[Event]) -> list[dict[str, Any]]:
    """The report sections the validation tasks returned before the run stopped (a loop's items
    each), in order; a section returned again (by id) replaces the earlier one."""
    sections: dict[str, dict[str, Any]] = {}
    for event in events:
        if event.get("event") not in ("runner_on_ok", "runner_item_on_ok"):
            continue
        section = ((event.get("event_data") or {}).get("res") or {}).get("section")
        if isinstance(section, Mapping) and section.get("id"):
            sections.pop(str(section["id"]), None)
            sections[str(section["id"])] = dict(section)
    return list(sections.values())


def stop_cause(events: Sequence[Event], interrupted_by: str = "") -> tuple[str, dict[str, Any]]:
    """Where a run that wrote no report stopped, and why: (task, its result as Ansible gives it, a
    ``msg`` at least). An interrupt names the signal and the task under way; otherwise the last
    failed task and its result."""
    task = ""
    for event in events:
        if event.get("event") == "playbook_on_task_start":
            task = str((event.get("event_data") or {}).get("task") or "")
    if interrupted_by:
        return task, {"msg": "interrupted by %s while this task ran; the run stopped there" % interrupted_by}
    failures = _failures(events)
    if failures:
        data = failures[-1]
        return str(data.get("task") or task), dict(data.get("res") or {})
    return task, {"msg": "ansible-playbook ended before the report was written, with no failed task"}


def playbook_pid(events: Iterable[Event]) -> int | None:
    """The pid of the ansible-playbook process the events come from (its first event's)."""
    for event in events:
        pid = event.get("pid")
        if isinstance(pid, int) and pid > 0:
            return pid
    return None
