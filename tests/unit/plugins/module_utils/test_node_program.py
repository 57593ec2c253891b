"""node/program.py: the scratch file a node check's program reads or writes, and how a program that
did not run to its end becomes the check's own error."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.node import program


class CheckError(Exception):
    pass


def _run(execute):
    return program.run_to_end(
        ["prog", "--flag"],
        timeout=7,
        error=CheckError,
        not_found=lambda error: f"missing: {error}",
        not_started=lambda error: f"not started: {error}",
        timed_out=lambda error: f"too slow: {error.timeout:g} s",
        execute=execute,
        cwd="/somewhere",
    )


def test_the_scratch_file_holds_the_text_and_is_removed_however_the_block_ends(tmp_path):
    with program.scratch_file("check_", ".py", str(tmp_path), "print(1)\n") as path:
        assert Path(path).read_text() == "print(1)\n"
        assert Path(path).name.startswith("check_") and path.endswith(".py")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(RuntimeError), program.scratch_file("check_", ".xml", str(tmp_path)) as path:
        assert Path(path).read_text() == ""
        raise RuntimeError("the check failed")
    assert list(tmp_path.iterdir()) == []


def test_the_program_runs_with_its_output_captured_and_its_exit_status_left_to_the_caller():
    seen = {}

    def execute(command, **options):
        seen.update(options, command=command)
        return subprocess.CompletedProcess(command, 3, "out", "err")

    assert _run(execute).returncode == 3
    assert seen == {
        "command": ["prog", "--flag"],
        "capture_output": True,
        "text": True,
        "timeout": 7,
        "check": False,
        "cwd": "/somewhere",
    }


@pytest.mark.parametrize(
    ("raised", "said"),
    [
        (FileNotFoundError(2, "No such file or directory"), "missing: [Errno 2] No such file or directory"),
        (PermissionError(13, "Permission denied"), "not started: [Errno 13] Permission denied"),
        (subprocess.TimeoutExpired(["prog"], 7), "too slow: 7 s"),
    ],
)
def test_a_program_that_did_not_run_to_its_end_is_the_checks_error_saying_why(raised, said):
    def execute(command, **options):
        raise raised

    with pytest.raises(CheckError) as caught:
        _run(execute)
    assert str(caught.value) == said
    assert caught.value.__cause__ is raised
