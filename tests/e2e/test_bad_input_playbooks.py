"""Bad inventories that only Ansible's own loader meets, through the real ``playbooks/inventory.yml``.

The rest of the bad-input suite (tests/unit/test_bad_input.py) calls the schema directly; these
cases need Ansible to read the files: a tab in a group_vars file or in the hosts file, an undefined variable, bytes
that are not UTF-8 (Ansible parses a group's files when a host's variables are first read), an
anchor bomb (Ansible's loader turns it into shared lists, which templating would expand), an empty
control-plane group (every play after it would match no host), and values given with -e. Each run
fails naming where (hosts, group, file and line), the variable and what was found, and changes
nothing: no task changed, and neither the sandbox's state directory nor the reports directory
exists afterwards. No sandbox is needed; each run takes a few seconds.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.e2e.conftest import REPO, run_playbook

BOMB = 'l0: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    "l%d: &%s [%s]\n" % (level, name, ",".join(["*" + previous] * 9))
    for level, (previous, name) in enumerate(zip("abcdefghi", "bcdefghij", strict=True), start=1)
)
GPUS = "group_vars/gpu_nodes/gpus.yml"
PROJECTS = "group_vars/all/projects.yml"
SITE = "group_vars/all/site.yml"


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


CASES = {
    # Ansible names the file (and line) it could not parse; the check adds the hosts it concerns.
    "tab-in-group-vars": (
        lambda inv: _replace(inv / GPUS, "\ngpu_product:", "\n\tgpu_product:"),
        (),
        ["hosts dgx1-1, dgx1-2: variables: expected files Ansible can read", "Tabs", GPUS + ":"],
    ),
    # A hosts file Ansible cannot parse: Ansible names it in a warning and goes on with no groups,
    # which the check refuses (without it every play would match no host and the run "pass").
    "tab-in-hosts-file": (
        lambda inv: _replace(inv / "hosts.yml", "        dgx1-2:", "\t  dgx1-2:"),
        (),
        [
            "Tabs are usually invalid in YAML",
            "hosts.yml",
            "inventory: group kube_control_plane: expected a group named kube_control_plane",
        ],
    ),
    "undefined-variable-in-gpu-count": (
        lambda inv: _replace(inv / GPUS, "gpu_count: 8", 'gpu_count: "{{ gpus_per_dgx }}"'),
        (),
        [
            "hosts dgx1-1, dgx1-2: gpu_count: expected a value Ansible can template, found 'gpus_per_dgx' is undefined",
            GPUS + ":3:",
        ],
    ),
    "not-utf8": (
        lambda inv: (inv / GPUS).write_bytes((inv / GPUS).read_bytes().replace(b"Tesla", b"T\xe9sla", 1)),
        (),
        [GPUS + ": line 2, byte 98: expected UTF-8 text, found the byte 0xe9; save the file as UTF-8"],
    ),
    "empty-control-plane": (
        lambda inv: _replace(
            inv / "hosts.yml", "      hosts:\n        localhost:", "      hosts: {}\n      vars:\n        x:"
        ),
        (),
        ["group kube_control_plane: hosts: expected at least one host, found an empty group"],
    ),
    "anchor-bomb-in-users": (
        lambda inv: (inv / PROJECTS).write_text(BOMB + (inv / PROJECTS).read_text().replace("[alice]", "*j", 1)),
        (),
        ["group all: clusterproof_projects: expected at most 100000 values (YAML aliases expanded)"],
    ),
    "benchmarks-maybe": (
        lambda inv: (inv / SITE).write_text((inv / SITE).read_text() + "clusterproof_benchmarks: maybe\n"),
        (),
        ["group all: clusterproof_benchmarks: expected a boolean (true or false), found 'maybe'"],
    ),
    "port-base-abc-on-the-command-line": (
        lambda inv: None,
        ("-e", "clusterproof_sandbox_port_base=abc"),
        ["group all: clusterproof_sandbox_port_base: expected an integer from 1024 to 65509", "found 'abc'"],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_inventory_fails_the_run_naming_where_and_changes_nothing(case, tmp_path):
    change, extra, expected = CASES[case]
    inventory = tmp_path / "inventory"
    shutil.copytree(REPO / "inventories" / "sandbox", inventory)
    change(inventory)
    state, reports = tmp_path / "state", tmp_path / "reports"
    run = run_playbook(
        "playbooks/inventory.yml",
        "-e",
        f"clusterproof_sandbox_dir={state}",
        "-e",
        f"clusterproof_reports_dir={reports}",
        *extra,
        inventory=inventory,
        timeout=120,
    )
    assert run.returncode != 0, run.tail(3000)
    for part in expected:
        assert part in run.output, f"{part!r} not in:\n{run.tail(3000)}"
    assert "nothing was changed" in run.output
    assert run.recap()["changed"] == 0 and run.changed_tasks() == {}
    assert not state.exists() and not reports.exists()
