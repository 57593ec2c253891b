"""What a person and a test want from ansible-runner's events: a one-line live view, which tasks
changed on which host, the PLAY RECAP as numbers, and where the site report was written.

Pure functions over the event dicts ansible-runner hands its event handler (and writes to
``artifacts/<ident>/job_events``); no I/O here, so each is unit-tested with hand-written events.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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


def failure_line(event: Event) -> str:
    """``FAILED localhost: Start kube-apiserver: <msg>`` for a failed or unreachable host, else ``""``."""
    kind = HOST_RESULTS.get(event.get("event", ""))
    data = event.get("event_data") or {}
    if kind not in ("failed", "unreachable") or data.get("ignore_errors"):
        return ""
    message = str((data.get("res") or {}).get("msg", "")).strip().splitlines()
    return "%s %s: %s: %s" % (kind.upper(), data.get("host", ""), data.get("task", ""), message[0] if message else "")
