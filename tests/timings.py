"""Where a test run's time goes: a pytest plugin that records, when ``CLUSTERPROOF_TEST_TIMES`` names
a file, JSON lines: each test's begin and end (its worker, its xdist group, the CPU seconds it used
in its worker and the programs the worker waited for: ansible-playbook and its forks), each phase
(setup, call, teardown: start, stop, outcome, and the end of pytest's message when it failed),
and, from the controller, the machine's load every ``SAMPLE_SECONDS`` with the CPU seconds each
program used since the last sample (``ProgramCpu``: the lab's hosts' programs apart, and what ran
and ended between two samples as one sum). ``bench/suite_profile.py`` reads the file back into the
cost table.

It only appends to that one file: each line is written with one ``write`` of an ``O_APPEND``
file, so the workers' lines never interleave. Without the variable it does nothing.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

TIMES_ENV = "CLUSTERPROOF_TEST_TIMES"
SAMPLE_SECONDS = 10.0
MESSAGE_CHARS = 1500


_NESTED = False
_SAMPLER_STOP: threading.Event | None = None


def pytest_configure(config: pytest.Config) -> None:
    # A pytest that a test starts (the lab's host suite) inherits the worker's environment, but is no
    # worker (pytest-xdist gives its workers ``workerinput``): its tests are not the run's.
    global _NESTED
    _NESTED = "PYTEST_XDIST_WORKER" in os.environ and not hasattr(config, "workerinput")


def _path() -> str | None:
    if _NESTED:
        return None
    return os.environ.get(TIMES_ENV) or None


def _worker() -> str:
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


def record(line: dict[str, Any]) -> None:
    """Append one JSON line to the times file (nothing when it is not set)."""
    path = _path()
    if path is None:
        return
    data = (json.dumps(line, sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _cpu_seconds() -> float:
    """This process's CPU seconds and those of the children it has waited for."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def _group(item: pytest.Item) -> str:
    marker = item.get_closest_marker("xdist_group")
    if marker is None:
        return ""
    return str(marker.args[0] if marker.args else marker.kwargs.get("name", ""))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    if _path() is None:
        yield
        return
    cpu, start = _cpu_seconds(), time.time()
    # A test still running when a run is stopped shows as begun without an end.
    record({"kind": "begin", "nodeid": item.nodeid, "worker": _worker(), "start": start})
    yield
    record(
        {
            "kind": "test",
            "nodeid": item.nodeid,
            "worker": _worker(),
            "group": _group(item),
            "start": start,
            "stop": time.time(),
            "cpu_s": round(_cpu_seconds() - cpu, 3),
        }
    )


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # The controller also sees the workers' reports (pytest-xdist gives them ``node``); each
    # worker writes its own.
    if _path() is None or hasattr(report, "node"):
        return
    line = {
        "kind": "phase",
        "nodeid": report.nodeid,
        "when": report.when,
        "worker": _worker(),
        "start": report.start,
        "stop": report.stop,
        "outcome": report.outcome,
    }
    if report.failed:
        # The end of what pytest says of it: a run cut off by its time limit never prints its summary.
        line["message"] = report.longreprtext[-MESSAGE_CHARS:]
    record(line)


# The machine's CPU seconds that no process's account holds (the kernel's own work, what ended
# without a waiting parent the samples saw).
UNACCOUNTED = "(unaccounted)"
PYTHON_ROLES = (
    ("ansible-playbook", "ansible-playbook"),
    ("AnsiballZ_", "ansible module"),
    ("ansible-tmp-", "ansible module"),
    ("molecule", "molecule"),
    ("xdist", "pytest"),
    # pytest-xdist's workers are started by execnet: python -c "import sys;exec(eval(sys.stdin.readline()))"
    ("sys.stdin.readline", "pytest"),
    ("pytest", "pytest"),
)


def program_of(name: str, cmdline: list[str], cgroup: str) -> str:
    """The program a process is, for the CPU table: its name, a Python process by what it runs
    (ansible-playbook, an Ansible module, molecule, pytest), and ``lab:`` before a lab host's own
    (in the ``clusterproof-lab`` cgroup lab/machines.py makes for the hosts, or in systemd's
    machine.slice)."""
    program = name
    if name.startswith("python") or name in ("ansible-playboo", "ansible-playbook"):
        joined = " ".join(cmdline[:4])
        program = next((role for marker, role in PYTHON_ROLES if marker in joined), "python")
    in_lab = "clusterproof-lab" in cgroup or "machine.slice" in cgroup
    return ("lab: " + program) if in_lab else program


class ProgramCpu:
    """CPU seconds by program between two calls of ``sample`` (the first call sets the baseline).

    A process that ran and ended between two samples (an Ansible module, a task's fork, a short
    command) is counted where its parent waited for it: under ``<parent's program> (ended
    children)``, less what earlier samples counted of it while it ran."""

    def __init__(self) -> None:
        # (pid, create time) -> (program, own CPU, its ended children's CPU, parent pid)
        self._seen: dict[tuple[int, float], tuple[str, float, float, int]] = {}
        self._machine: float | None = None

    @staticmethod
    def _cgroup(pid: int) -> str:
        try:
            with open(f"/proc/{pid}/cgroup") as handle:
                return handle.read()
        except OSError:
            return ""

    def sample(self) -> dict[str, float]:
        machine = sum(psutil.cpu_times()[:3])  # user, nice, system
        previous, self._machine = self._machine, machine
        baseline = previous is None
        seen: dict[tuple[int, float], tuple[str, float, float, int]] = {}
        used: dict[str, float] = {}
        for process in psutil.process_iter(["name", "create_time", "cpu_times", "ppid"]):
            info = process.info
            if info["cpu_times"] is None or info["create_time"] is None:
                continue
            key = (process.pid, info["create_time"])
            times = info["cpu_times"]
            own, children = times.user + times.system, times.children_user + times.children_system
            if key in self._seen:
                program, own_before, children_before, _ = self._seen[key]
            else:
                try:
                    cmdline = process.cmdline()
                except psutil.Error:
                    cmdline = []
                program = program_of(info["name"] or "", cmdline, self._cgroup(process.pid))
                own_before, children_before = (own, children) if baseline else (0.0, 0.0)
            seen[key] = (program, own, children, info["ppid"] or 0)
            used[program] = used.get(program, 0.0) + max(own - own_before, 0.0)
            used[program + " (ended children)"] = used.get(program + " (ended children)", 0.0) + max(
                children - children_before, 0.0
            )
        # What the ended processes' parents now count as their children's was partly counted
        # already, while they ran: take that back.
        programs_by_pid = {pid: entry[0] for (pid, _), entry in seen.items()}
        for key, (_, own, children, ppid) in self._seen.items():
            if key in seen:
                continue
            parent = programs_by_pid.get(ppid)
            if parent is not None:
                label = parent + " (ended children)"
                used[label] = used.get(label, 0.0) - own - children
        self._seen = seen
        if baseline:
            return {}
        unaccounted = machine - previous - sum(used.values())
        if unaccounted > 0:
            used[UNACCOUNTED] = unaccounted
        return {program: round(seconds, 2) for program, seconds in used.items() if seconds >= 0.01}


def _sample_load(stop: threading.Event) -> None:
    psutil.cpu_percent()  # the first call starts the measure; each later one covers the time since
    programs = ProgramCpu()
    programs.sample()
    while not stop.wait(SAMPLE_SECONDS):
        record(
            {
                "kind": "load",
                "t": time.time(),
                "load1": os.getloadavg()[0],
                "busy": round(psutil.cpu_percent() / 100, 3),
                "programs": programs.sample(),
            }
        )


def pytest_sessionstart(session: pytest.Session) -> None:
    global _SAMPLER_STOP
    if _path() is None or "PYTEST_XDIST_WORKER" in os.environ:
        return
    record({"kind": "session", "event": "start", "t": time.time(), "args": list(session.config.invocation_params.args)})
    _SAMPLER_STOP = threading.Event()
    threading.Thread(target=_sample_load, args=(_SAMPLER_STOP,), name="clusterproof-load-sampler", daemon=True).start()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    global _SAMPLER_STOP
    if _SAMPLER_STOP is None:
        return
    _SAMPLER_STOP.set()
    record({"kind": "session", "event": "finish", "t": time.time(), "exitstatus": int(exitstatus)})
    _SAMPLER_STOP = None
