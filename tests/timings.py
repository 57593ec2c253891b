"""Where a test run's time goes: a pytest plugin that records, when ``CLUSTERPROOF_TEST_TIMES`` names
a file, JSON lines: each test's begin and end (its worker, its xdist group, the CPU seconds it used
in its worker and the programs the worker waited for: ansible-playbook and its forks), each phase
(setup, call, teardown: start, stop, outcome, and the end of pytest's message when it failed),
and, from the controller, the machine's load every ``SAMPLE_SECONDS``. ``bench/suite_profile.py``
reads the file back into the cost table.

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


def _sample_load(stop: threading.Event) -> None:
    psutil.cpu_percent()  # the first call starts the measure; each later one covers the time since
    while not stop.wait(SAMPLE_SECONDS):
        record(
            {
                "kind": "load",
                "t": time.time(),
                "load1": os.getloadavg()[0],
                "busy": round(psutil.cpu_percent() / 100, 3),
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
