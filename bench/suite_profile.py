#!/usr/bin/env python3
"""Where a ``./clusterproof test`` run's time went: the cost table of issue 46, from the times file
the run wrote (tests/timings.py; ``./clusterproof test`` writes it beside its pytest basetemp and
names it at the end).

    .venv/bin/python bench/suite_profile.py /tmp/clusterproof-e2e-XXXXXXXX.times.jsonl [--top 30]

It prints the stages of the run (ruff, unit tests, the builds, the end-to-end tests), each xdist
group with its worker, start, wall and CPU seconds, each worker's timeline and idle time, the
critical path (the worker that finished last, group by group), the slowest tests split into
setup, call and teardown, the machine's load over the run in five-minute buckets, and the CPU
seconds of each program over the run (the lab's hosts' programs apart; what a program ran and waited
for as its "ended children": ansible-playbook's forks and modules).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class TestTime:
    nodeid: str
    worker: str
    group: str
    start: float
    stop: float
    cpu_s: float
    phases: dict[str, float] = field(default_factory=dict)
    outcome: str = "passed"

    @property
    def wall(self) -> float:
        return self.stop - self.start


@dataclass
class Profile:
    stages: list[tuple[str, float, float]]
    tests: list[TestTime]
    load: list[tuple[float, float, float]]
    started: float
    # CPU seconds by program over the run, from the load samples (tests/timings.py's ProgramCpu).
    programs: dict[str, float] = field(default_factory=dict)
    # Begun and not ended (nodeid, worker, start): what ran when the file was read.
    running: list[tuple[str, str, float]] = field(default_factory=list)
    # Each failed phase: (nodeid, when, the end of pytest's message).
    failures: list[tuple[str, str, str]] = field(default_factory=list)


def read(path: Path) -> Profile:
    """The lines of a times file, put together: each test with its phases, the stages and the load."""
    stages: dict[str, list[float]] = {}
    tests: dict[str, TestTime] = {}
    phases: dict[str, dict[str, tuple[float, str]]] = defaultdict(dict)
    load: list[tuple[float, float, float]] = []
    begun: dict[str, tuple[str, str, float]] = {}
    failures: list[tuple[str, str, str]] = []
    programs: dict[str, float] = defaultdict(float)
    for number, text in enumerate(path.read_text().splitlines(), 1):
        if not text.strip():
            continue
        try:
            line: dict[str, Any] = json.loads(text)
        except json.JSONDecodeError as error:
            raise SystemExit(f"{path}:{number}: not a JSON line ({error.msg}): {text[:80]!r}") from None
        kind = line.get("kind")
        if kind == "stage":
            stages.setdefault(line["name"], [line["t"], line["t"]])
            stages[line["name"]][1 if line["event"] == "end" else 0] = line["t"]
        elif kind == "test":
            tests[line["nodeid"]] = TestTime(
                line["nodeid"], line["worker"], line["group"], line["start"], line["stop"], line["cpu_s"]
            )
        elif kind == "begin":
            begun[line["nodeid"]] = (line["nodeid"], line["worker"], line["start"])
        elif kind == "phase":
            phases[line["nodeid"]][line["when"]] = (line["stop"] - line["start"], line["outcome"])
            if line["outcome"] == "failed":
                failures.append((line["nodeid"], line["when"], line.get("message", "")))
        elif kind == "load":
            load.append((line["t"], line["load1"], line["busy"]))
            for program, seconds in line.get("programs", {}).items():
                programs[program] += seconds
    for nodeid, test in tests.items():
        test.phases = {when: seconds for when, (seconds, _) in phases[nodeid].items()}
        outcomes = {outcome for _, outcome in phases[nodeid].values()}
        test.outcome = "failed" if "failed" in outcomes else "skipped" if "skipped" in outcomes else "passed"
    running = sorted((entry for nodeid, entry in begun.items() if nodeid not in tests), key=lambda e: e[2])
    starts = [start for start, _ in stages.values()] + [test.start for test in tests.values()]
    starts += [start for _, _, start in running]
    if not starts:
        raise SystemExit(f"{path}: no stage and no test recorded")
    ordered = sorted(((name, start, end) for name, (start, end) in stages.items()), key=lambda s: s[1])
    by_start = sorted(tests.values(), key=lambda t: t.start)
    return Profile(ordered, by_start, sorted(load), min(starts), dict(programs), running, failures)


def minutes(seconds: float) -> str:
    return "%d:%02d" % divmod(round(seconds), 60)


def table(header: tuple[str, ...], rows: list[tuple[Any, ...]]) -> str:
    cells = [tuple(str(cell) for cell in row) for row in [header, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in cells]
    return "\n".join([lines[0], "  ".join("-" * width for width in widths), *lines[1:]])


def group_name(test: TestTime) -> str:
    return test.group or test.nodeid.split("::", 1)[0] + " (no group)"


def report(profile: Profile, top: int, brief: bool = False) -> str:
    """The cost table; ``brief``: the stages and the critical path only (for a CI log's tail)."""
    at = profile.started
    sections: dict[str, str] = {}
    if profile.stages:
        sections["stages"] = table(
            ("stage", "start", "wall"),
            [(name, minutes(start - at), minutes(end - start)) for name, start, end in profile.stages],
        )
    groups: dict[tuple[str, str], list[TestTime]] = defaultdict(list)
    workers: dict[str, list[TestTime]] = defaultdict(list)
    for test in profile.tests:
        groups[(test.worker, group_name(test))].append(test)
        workers[test.worker].append(test)
    rows = []
    for (worker, name), members in sorted(groups.items(), key=lambda g: -sum(t.wall for t in g[1])):
        rows.append(
            (
                name,
                worker,
                len(members),
                sum(t.outcome == "failed" for t in members),
                minutes(members[0].start - at),
                minutes(sum(t.wall for t in members)),
                round(sum(t.cpu_s for t in members)),
            )
        )
    sections["xdist groups, longest first"] = table(
        ("group", "worker", "tests", "failed", "start", "wall", "cpu_s"), rows
    )
    if workers:
        end = max(t.stop for t in profile.tests)
        first = min(t.start for t in profile.tests)
        rows = []
        for worker, members in sorted(workers.items()):
            busy = sum(t.wall for t in members)
            done = max(t.stop for t in members)
            rows.append((worker, len(members), minutes(busy), minutes(done - at), minutes((end - first) - busy)))
        sections["workers (idle: from the first test's start to the last test's end)"] = table(
            ("worker", "tests", "busy", "done at", "idle"), rows
        )
        critical = max(workers, key=lambda w: max(t.stop for t in workers[w]))
        names = list(dict.fromkeys(group_name(test) for test in workers[critical]))
        on_path = [groups[(critical, name)] for name in names]
        sections[f"critical path: {critical}, done at {minutes(end - at)}"] = table(
            ("group", "start", "wall"),
            [(group_name(m[0]), minutes(m[0].start - at), minutes(sum(t.wall for t in m))) for m in on_path],
        )
    slowest = sorted(profile.tests, key=lambda t: -t.wall)[:top]
    sections[f"the {len(slowest)} slowest tests"] = table(
        ("test", "worker", "wall", "setup", "call", "teardown", "cpu_s", "outcome"),
        [
            (
                t.nodeid[:110],
                t.worker,
                minutes(t.wall),
                minutes(t.phases.get("setup", 0)),
                minutes(t.phases.get("call", 0)),
                minutes(t.phases.get("teardown", 0)),
                round(t.cpu_s),
                t.outcome,
            )
            for t in slowest
        ],
    )
    if profile.load:
        buckets: dict[int, list[tuple[float, float]]] = defaultdict(list)
        for t, load1, busy in profile.load:
            buckets[int((t - at) // 300)].append((load1, busy))
        sections["machine load, five-minute buckets"] = table(
            ("from", "load1 mean", "load1 max", "cpu busy"),
            [
                (
                    minutes(bucket * 300),
                    "%.1f" % (sum(v[0] for v in values) / len(values)),
                    "%.1f" % max(v[0] for v in values),
                    "%d%%" % round(100 * sum(v[1] for v in values) / len(values)),
                )
                for bucket, values in sorted(buckets.items())
            ],
        )
    if profile.programs:
        total = sum(profile.programs.values())
        heaviest = sorted(profile.programs.items(), key=lambda p: -p[1])[:top]
        sections["CPU by program, over the run"] = table(
            ("program", "cpu_s", "share"),
            [(name, round(seconds), "%.1f%%" % (100 * seconds / total)) for name, seconds in heaviest],
        )
    if profile.running:
        now = max([t.stop for t in profile.tests] + [start for _, _, start in profile.running])
        sections["running when the file was read"] = table(
            ("test", "worker", "started", "running for at least"),
            [
                (test[:110], worker, minutes(start - at), minutes(now - start))
                for test, worker, start in profile.running
            ],
        )
    if profile.failures:
        sections["failed"] = "\n\n".join(
            f"{nodeid} ({when}):\n{message.strip()[-600:] if brief else message.strip()}"
            for nodeid, when, message in profile.failures
        )
    if brief:
        kept = ("stages", "critical path", "running", "failed")
        sections = {title: text for title, text in sections.items() if title.startswith(kept)}
    return "".join(f"## {title}\n\n{text}\n\n" for title, text in sections.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("times", type=Path, help="the times file of a run (CLUSTERPROOF_TEST_TIMES)")
    parser.add_argument("--top", type=int, default=30, help="how many of the slowest tests to list (default 30)")
    parser.add_argument("--brief", action="store_true", help="the stages and the critical path only")
    args = parser.parse_args(argv)
    if not args.times.is_file():
        parser.error(f"times file {args.times}: not found")
    sys.stdout.write(report(read(args.times), args.top, args.brief))
    return 0


if __name__ == "__main__":
    sys.exit(main())
