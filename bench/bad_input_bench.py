#!/usr/bin/env python3
"""Bad input answers fast: every case of the bad-input suite (tests/unit/test_bad_input.py), timed.

    .venv/bin/python bench/bad_input_bench.py [--repeat 3]

Goal (issue 16): no case takes more than 5 s; an inventory's anchor bomb, which used to hang the
check past 500 s, is refused within a second. Prints, per kind of input and in all, the number of
cases, the median and the largest seconds per case (the best of ``--repeat`` runs of each), and
the slowest cases; exits 1 when a case exceeds the goal or is not refused as the suite expects.
The playbook-level cases (tests/e2e/test_bad_input_playbooks.py) time Ansible's start-up more than
the checks, and are not run here.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for path in (REPO / "collections", REPO):
    sys.path.insert(0, str(path))

GOAL_S = 5.0


def load_suite():
    spec = importlib.util.spec_from_file_location("bad_input_suite", REPO / "tests" / "unit" / "test_bad_input.py")
    assert spec and spec.loader
    suite = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = suite  # dataclasses look their module up while the file runs
    spec.loader.exec_module(suite)
    return suite


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each case; the best counts")
    args = parser.parse_args()
    suite = load_suite()
    timings: list[tuple[float, str, str]] = []
    failures = []
    with tempfile.TemporaryDirectory(prefix="bad-input-bench-") as folder:
        for index, case in enumerate(suite.CASES):
            directory = Path(folder) / str(index)
            directory.mkdir()
            best = float("inf")
            for _ in range(max(1, args.repeat)):
                started = time.perf_counter()
                try:
                    text = suite.run_case(case, directory)
                    missing = [part for part in case.expect if part not in text]
                    if missing:
                        failures.append(f"{case.kind}/{case.id}: the error does not say {missing}")
                except AssertionError as error:
                    failures.append(f"{case.kind}/{case.id}: {error}")
                best = min(best, time.perf_counter() - started)
            timings.append((best, case.kind, case.id))
    print("%-10s %6s %10s %10s" % ("input", "cases", "median s", "max s"))
    for kind in ("inventory", "scenario", "module", "all"):
        seconds = [t for t, k, _ in timings if kind in (k, "all")]
        print("%-10s %6d %10.4f %10.4f" % (kind, len(seconds), statistics.median(seconds), max(seconds)))
    print("slowest:")
    for seconds, kind, case_id in sorted(timings, reverse=True)[:5]:
        print("  %8.4f s  %s/%s" % (seconds, kind, case_id))
    over = [f"{kind}/{case_id}: {seconds:.2f} s" for seconds, kind, case_id in timings if seconds > GOAL_S]
    for line in failures + over:
        print("FAIL", line)
    print(
        "goal: every case refused as expected within %g s: %s"
        % (GOAL_S, "met" if not (failures or over) else "NOT met")
    )
    return 1 if failures or over else 0


if __name__ == "__main__":
    sys.exit(main())
