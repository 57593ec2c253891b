"""bench/suite_profile.py: a run's times file read back into the cost table (groups, workers, the
critical path), and the recorder plugin's lines from a real pytest run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from bench import suite_profile
from tests import timings

REPO = Path(__file__).resolve().parents[2]


def line(**fields) -> str:
    return json.dumps(fields)


def write_times(path: Path) -> Path:
    """Two workers: gw0 runs the lab group (two tests, 600 s), gw1 a sandbox group then a lone test."""
    t0 = 1000.0
    lines = [
        line(kind="stage", name="unit tests", event="begin", t=t0),
        line(kind="stage", name="unit tests", event="end", t=t0 + 60),
        line(
            kind="test",
            nodeid="tests/e2e/test_lab.py::test_up",
            worker="gw0",
            group="lab",
            start=t0 + 60,
            stop=t0 + 460,
            cpu_s=30.0,
        ),
        line(
            kind="phase",
            nodeid="tests/e2e/test_lab.py::test_up",
            when="setup",
            start=t0 + 60,
            stop=t0 + 400,
            outcome="passed",
        ),
        line(
            kind="phase",
            nodeid="tests/e2e/test_lab.py::test_up",
            when="call",
            start=t0 + 400,
            stop=t0 + 460,
            outcome="failed",
        ),
        line(
            kind="test",
            nodeid="tests/e2e/test_lab.py::test_down",
            worker="gw0",
            group="lab",
            start=t0 + 460,
            stop=t0 + 660,
            cpu_s=5.0,
        ),
        line(
            kind="test",
            nodeid="tests/e2e/test_kai.py::test_a",
            worker="gw1",
            group="kai",
            start=t0 + 60,
            stop=t0 + 160,
            cpu_s=8.0,
        ),
        line(
            kind="test",
            nodeid="tests/e2e/test_site.py::test_bad",
            worker="gw1",
            group="",
            start=t0 + 160,
            stop=t0 + 170,
            cpu_s=1.0,
        ),
        line(kind="load", t=t0 + 100, load1=3.5, busy=0.9, programs={"kube-apiserver": 4.0, "lab: kubelet": 1.5}),
        line(
            kind="load",
            t=t0 + 400,
            load1=1.5,
            busy=0.5,
            programs={"kube-apiserver": 2.0, "pytest (ended children)": 12.5},
        ),
        "",
    ]
    path.write_text("\n".join(lines))
    return path


def recorded_pytest(tmp_path: Path, source: str, **env: str) -> tuple[subprocess.CompletedProcess, Path]:
    """A pytest run of its own over ``source`` (a test file) with the recorder on, and its times
    file. Not an xdist worker, even when this test runs on one, unless ``env`` says so."""
    (tmp_path / "test_sample.py").write_text(source)
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["tests.timings"]\n')
    times = tmp_path / "times.jsonl"
    inherited = {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_XDIST")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "test_sample.py")],
        cwd=tmp_path,
        env=dict(inherited, CLUSTERPROOF_TEST_TIMES=str(times), PYTHONPATH=str(REPO), **env),
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done, times


def test_the_profile_puts_each_test_with_its_phases_and_finds_the_critical_path(tmp_path):
    profile = suite_profile.read(write_times(tmp_path / "times.jsonl"))
    assert [stage[0] for stage in profile.stages] == ["unit tests"]
    up = next(test for test in profile.tests if test.nodeid.endswith("test_up"))
    assert up.phases == {"setup": 340.0, "call": 60.0} and up.outcome == "failed" and up.wall == 400.0
    text = suite_profile.report(profile, top=2)
    # The lab group is the longest: 10 minutes of its worker, one failed test.
    groups = text.split("## xdist groups, longest first\n\n")[1].splitlines()
    assert groups[2].split() == ["lab", "gw0", "2", "1", "1:00", "10:00", "35"]
    assert groups[4].startswith("tests/e2e/test_site.py (no group)")
    assert "## critical path: gw0, done at 11:00" in text
    # gw1 was busy 1:50 of the 10 minutes the tests ran.
    assert "gw1     2      1:50   2:50     8:10" in text
    assert "## the 2 slowest tests" in text and "0:00  3.5         3.5" in text
    brief = suite_profile.report(profile, top=2, brief=True)
    assert "## stages" in brief and "## critical path" in brief and "slowest" not in brief


def test_the_cpu_by_program_is_summed_over_the_run_heaviest_first(tmp_path):
    profile = suite_profile.read(write_times(tmp_path / "times.jsonl"))
    assert profile.programs == {"kube-apiserver": 6.0, "lab: kubelet": 1.5, "pytest (ended children)": 12.5}
    text = suite_profile.report(profile, top=10)
    section = text.split("## CPU by program, over the run\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert [row.split()[0] for row in section[2:]] == ["pytest", "kube-apiserver", "lab:"]
    assert section[2].split()[-2:] == ["12", "62.5%"]


def test_a_program_is_named_by_what_it_runs_and_a_lab_host_s_apart():
    slice_ = "0::/machine.slice/machine-lab1.scope/payload\n"
    assert timings.program_of("kube-apiserver", ["/x/kube-apiserver", "--etcd-servers=..."], "0::/user.slice\n") == (
        "kube-apiserver"
    )
    assert timings.program_of("kubelet", ["/usr/bin/kubelet"], slice_) == "lab: kubelet"
    v1 = "4:memory:/clusterproof-lab/lab-1\n1:cpu,cpuacct:/clusterproof-lab/lab-1\n"
    assert timings.program_of("containerd", ["/usr/bin/containerd"], v1) == "lab: containerd"
    assert timings.program_of("ansible-playboo", ["/v/bin/python", "/v/bin/ansible-playbook", "site.yml"], "") == (
        "ansible-playbook"
    )
    assert timings.program_of("python", ["/v/bin/python", "/tmp/ansible-tmp-1/AnsiballZ_x.py"], "") == "ansible module"
    assert timings.program_of("python3.11", ["python", "-c", "from xdist.remote import ..."], "") == "pytest"
    assert timings.program_of("python", ["python", "-c", "import sys;exec(eval(sys.stdin.readline()))"], "") == "pytest"
    assert timings.program_of("python", ["python", "-m", "http.server"], "") == "python"


def test_the_cpu_of_a_child_that_ran_and_ended_between_samples_is_its_parent_s(tmp_path):
    """A busy child started and waited for between two samples: its seconds are this process's
    "(ended children)", not lost, and not counted twice."""
    programs = timings.ProgramCpu()
    programs.sample()
    subprocess.run([sys.executable, "-c", "sum(range(40_000_000))"], check=True)
    used = programs.sample()
    me = timings.program_of("python", psutil.Process().cmdline(), "")
    child_cpu = used.get(me + " (ended children)", 0.0)
    assert child_cpu >= 0.3, used
    again = programs.sample()
    assert again.get(me + " (ended children)", 0.0) < 0.1, again


def test_a_line_that_is_not_json_names_its_file_and_line(tmp_path):
    times = tmp_path / "times.jsonl"
    times.write_text(line(kind="load", t=1.0, load1=1.0, busy=0.1) + "\n{not json\n")
    with pytest.raises(SystemExit, match=r"times.jsonl:2: not a JSON line"):
        suite_profile.read(times)


def test_an_empty_times_file_says_so(tmp_path):
    times = tmp_path / "times.jsonl"
    times.write_text("")
    with pytest.raises(SystemExit, match="no stage and no test recorded"):
        suite_profile.read(times)


def test_the_recorder_writes_each_phase_and_the_test_s_cpu_from_a_real_pytest_run(tmp_path):
    done, times = recorded_pytest(
        tmp_path,
        "import time\n\ndef test_busy():\n    sum(range(20_000_000))\n\ndef test_sleeps():\n    time.sleep(0.3)\n",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [json.loads(text) for text in times.read_text().splitlines()]
    phases = [(entry["nodeid"].rsplit("::", 1)[1], entry["when"]) for entry in lines if entry["kind"] == "phase"]
    assert phases == [(name, when) for name in ("test_busy", "test_sleeps") for when in ("setup", "call", "teardown")]
    tests = {entry["nodeid"].rsplit("::", 1)[1]: entry for entry in lines if entry["kind"] == "test"}
    assert tests["test_sleeps"]["stop"] - tests["test_sleeps"]["start"] >= 0.3
    assert tests["test_busy"]["cpu_s"] > tests["test_sleeps"]["cpu_s"]
    assert [entry["event"] for entry in lines if entry["kind"] == "session"] == ["start", "finish"]


def test_a_run_cut_off_names_what_still_ran_and_what_failed_with_pytest_s_words(tmp_path):
    times = tmp_path / "times.jsonl"
    lines = [
        line(kind="begin", nodeid="tests/e2e/test_lab_site.py::test_reboot", worker="gw0", start=100.0),
        line(kind="begin", nodeid="tests/e2e/test_kai.py::test_a", worker="gw1", start=110.0),
        line(
            kind="phase",
            nodeid="tests/e2e/test_kai.py::test_a",
            when="setup",
            start=110.0,
            stop=170.0,
            outcome="failed",
            message="AssertionError: KAI did not start",
        ),
        line(
            kind="test",
            nodeid="tests/e2e/test_kai.py::test_a",
            worker="gw1",
            group="kai",
            start=110.0,
            stop=170.0,
            cpu_s=3.0,
        ),
    ]
    times.write_text("\n".join(lines) + "\n")
    profile = suite_profile.read(times)
    assert profile.running == [("tests/e2e/test_lab_site.py::test_reboot", "gw0", 100.0)]
    brief = suite_profile.report(profile, top=5, brief=True)
    assert "## running when the file was read" in brief
    assert "tests/e2e/test_lab_site.py::test_reboot  gw0     0:00     1:10" in brief
    assert "tests/e2e/test_kai.py::test_a (setup):\nAssertionError: KAI did not start" in brief


def test_the_recorder_keeps_a_failed_phase_s_message(tmp_path):
    _, times = recorded_pytest(
        tmp_path,
        "import pytest\n\n@pytest.fixture\ndef broken():\n    raise RuntimeError('the sandbox did not come up')\n\n"
        "def test_uses_it(broken):\n    pass\n",
    )
    profile = suite_profile.read(times)
    [(nodeid, when, message)] = profile.failures
    assert nodeid.endswith("test_uses_it") and when == "setup" and "the sandbox did not come up" in message
    assert profile.running == []


def test_a_pytest_started_by_a_test_on_a_worker_records_nothing(tmp_path):
    """The lab's host suite runs as a pytest of its own inside a worker's test: not the run's tests."""
    done, times = recorded_pytest(
        tmp_path, "def test_inner():\n    pass\n", PYTEST_XDIST_WORKER="gw0", PYTEST_XDIST_WORKER_COUNT="4"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert not times.exists()
