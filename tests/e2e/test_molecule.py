"""Every role's molecule scenario: converge, converge again with no change, verify, destroy."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO, free_port_base

SCENARIOS = sorted(REPO.glob("roles/*/molecule/*/molecule.yml"))


@pytest.mark.sandbox
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda path: "%s/%s" % (path.parents[2].name, path.parent.name))
def test_molecule_scenario(scenario: Path):
    role_dir = scenario.parents[2]
    env = dict(os.environ)
    env["PATH"] = "%s:%s" % (Path(sys.executable).parent, env.get("PATH", ""))
    env["CLUSTERPROOF_MOLECULE_PORT_BASE"] = str(free_port_base())
    env["ANSIBLE_NOCOLOR"] = "1"
    env["NO_COLOR"] = "1"
    done = subprocess.run(
        [str(Path(sys.executable).parent / "molecule"), "test", "-s", scenario.parent.name],
        cwd=role_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    assert "idempotence" in output


def test_there_are_molecule_scenarios():
    assert SCENARIOS, "no role has a molecule scenario"
