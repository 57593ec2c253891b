"""The end-to-end tests' grouping under pytest-xdist really keeps a sandbox's tests on one worker.

tests/e2e/conftest.py marks each test with the group of the sandbox it uses, and ``--dist loadgroup``
sends a group to one worker, so that a module's sandbox is brought up once. Two things broke that
silently before (every test passed, but sandboxes were brought up again and again and the suite took
minutes longer): pytest 9.2 ignores the test-id suffix that pytest-xdist 3.8 writes for a group, and
pytest-xdist's worker hook read the markers before the conftest had added them. This runs the real
hook over a small suite on two workers and checks where each test ran.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import REPO

CONFTEST = """
import json, os
from pathlib import Path

import pytest

from tests.e2e.conftest import pytest_collection_modifyitems  # noqa: F401  (the hook under test)

LOG = Path(__file__).parent / "log.jsonl"


def record(**entry):
    with LOG.open("a") as handle:
        handle.write(json.dumps({"worker": os.environ.get("PYTEST_XDIST_WORKER"), **entry}) + "\\n")


@pytest.fixture(scope="session")
def sandbox():
    record(setup="sandbox")
    yield


@pytest.fixture(scope="module")
def site():
    record(setup="site")
    yield


@pytest.fixture(scope="module", params=["kai", "kueue"])
def engine_site(request):
    record(setup="engine_site[%s]" % request.param)
    yield request.param
"""

MODULE = """
import time

import pytest

from conftest import record


@pytest.mark.parametrize("number", range(3))
def test_on_site(site, number):
    time.sleep(0.3)
    record(test="{name}/site")


@pytest.mark.parametrize("number", range(2))
def test_alone(number):
    time.sleep(0.3)
    record(test="{name}/alone")


@pytest.mark.parametrize("number", range(2))
def test_on_sandbox(sandbox, number):
    time.sleep(0.3)
    record(test="{name}/sandbox")


@pytest.mark.parametrize("number", range(3))
def test_on_engine_site(engine_site, number):
    time.sleep(0.3)
    record(test="{name}/engine_site[%s]" % engine_site)
"""


def test_a_groups_tests_run_on_one_worker_and_its_fixture_is_set_up_once(tmp_path: Path):
    (tmp_path / "conftest.py").write_text(CONFTEST)
    for name in ("test_one", "test_two"):
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(MODULE).format(name=name))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup"]
        + ["--rootdir", str(tmp_path), "-c", "/dev/null", str(tmp_path)],
        cwd=tmp_path,
        env={"PYTHONPATH": "%s:%s:%s" % (tmp_path, REPO, REPO / "collections"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    log = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    workers_of: dict[str, set[str]] = {}
    for entry in log:
        if "test" in entry:
            workers_of.setdefault(entry["test"], set()).add(entry["worker"])
    assert len(workers_of) == 10, log
    engine_groups = [
        f"{name}/engine_site[{engine}]" for name in ("test_one", "test_two") for engine in ("kai", "kueue")
    ]
    for group in ("test_one/site", "test_two/site", "test_one/sandbox", "test_two/sandbox", *engine_groups):
        assert len(workers_of[group]) == 1, "the tests of %s ran on %s" % (group, sorted(workers_of[group]))
    # Each module's site once; the session sandbox once per worker that ran a sandbox group.
    assert sum(1 for entry in log if entry.get("setup") == "site") == 2, log
    # A parametrized module fixture: once per module and parameter (a group name that ends in "]"
    # is not a group to pytest-xdist, which then spread its tests over the workers).
    for engine in ("kai", "kueue"):
        assert sum(1 for entry in log if entry.get("setup") == f"engine_site[{engine}]") == 2, log
    sandbox_workers = workers_of["test_one/sandbox"] | workers_of["test_two/sandbox"]
    assert sum(1 for entry in log if entry.get("setup") == "sandbox") == len(sandbox_workers), log
