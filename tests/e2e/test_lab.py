"""The lab: three Debian hosts booted with systemd on this machine, reached by Ansible over SSH, and
a ``down`` that leaves nothing behind (docs/lab.md).

One lab for the module, on a bridge and subnet of its own (not the default lab's), with the Debian
root from the machine's cache (built on the first run, about 1.5 minutes).
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from ansible_collections.clusterproof.gpu.plugins.module_utils.lab import lifecycle, machines
from ansible_collections.clusterproof.gpu.plugins.module_utils.lab.plan import make_plan
from tests.e2e import lab_site
from tests.e2e.conftest import REPO, run_playbook

pytestmark = pytest.mark.xdist_group("lab")

BRIDGE = "cptest0"
HOSTS = {"lab-cp-1": "10.214.0.10", "lab-worker-1": "10.214.0.11", "lab-worker-2": "10.214.0.12"}
LAB = str(REPO / "playbooks" / "lab.yml")


def lab_inventory(
    path: Path, state_dir: Path, hosts: dict[str, str], bridge: str = BRIDGE, gateway: str = "10.214.0.1"
) -> Path:
    inventory = {"all": {"vars": lab_site.lab_vars(state_dir, bridge, gateway), "children": lab_site.lab_hosts(hosts)}}
    path.write_text(yaml.safe_dump(inventory))
    return path


class Lab:
    def __init__(self, inventory: Path, state_dir: Path) -> None:
        self.inventory, self.state_dir = inventory, state_dir
        self.layout = machines.Layout(state_dir, Path.home() / ".cache" / "clusterproof" / "lab")

    def up(self):
        return run_playbook(LAB, inventory=self.inventory, timeout=600)

    def down(self):
        return run_playbook(LAB, "-e", "lab_state=down", inventory=self.inventory, timeout=600)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    base = tmp_path_factory.mktemp("lab")
    state_dir = base / "state"
    the_lab = Lab(lab_inventory(base / "hosts.yml", state_dir, HOSTS), state_dir)
    try:
        yield the_lab
    finally:
        # Whatever a test left, the lab goes (and the last lab down puts the kernel settings back).
        the_lab.down()


def test_the_lab_comes_up_and_each_host_runs_systemd_reached_over_ssh(lab):
    run = lab.up()
    assert run.returncode == 0, run.tail(3000)
    assert run.recap()["changed"] == 1
    facts = run_playbook(str(REPO / "tests" / "e2e" / "playbooks" / "lab_facts.yml"), inventory=lab.inventory)
    assert facts.returncode == 0, facts.tail(3000)
    for host in HOSTS:
        assert facts.recap(host)["failed"] == 0
    managers = dict(re.findall(r"LAB (\S+) (\w+/\w+)", facts.output))
    assert managers == dict.fromkeys(HOSTS, "systemd/running")


def test_a_second_up_changes_nothing(lab):
    run = lab.up()
    assert run.returncode == 0, run.tail(3000)
    assert run.recap()["changed"] == 0


def test_a_host_left_half_made_by_a_crash_is_cleaned_up_and_made_again(lab):
    crashed = machines.nspawn_processes(lab.layout)["lab-worker-2"]
    os.kill(crashed, signal.SIGKILL)
    run = lab.up()
    assert run.returncode == 0, run.tail(3000)
    assert run.recap()["changed"] == 1
    states = lifecycle.status(lab.layout, make_plan(BRIDGE, "10.214.0.1/24", HOSTS))
    assert states == dict.fromkeys(HOSTS, "running")
    assert machines.nspawn_processes(lab.layout)["lab-worker-2"] != crashed


def test_down_leaves_nothing_and_the_last_lab_down_puts_back_what_a_kubelet_changed(lab, tmp_path):
    # The machine's own values, saved by the first lab up (this module's, or a lab of another
    # module running beside it in CI).
    machine = machines.load_machine_settings()
    assert set(machine) == {*machines.KERNEL_SETTINGS, *machines.INOTIFY_LIMITS}
    # Another lab on this machine, with a state directory, bridge and hosts of its own.
    other_hosts, other_bridge, other_gateway = {"lab-other-1": "10.214.1.10"}, "cptest1", "10.214.1.1"
    other = Lab(
        lab_inventory(tmp_path / "other.yml", tmp_path / "other", other_hosts, other_bridge, other_gateway),
        tmp_path / "other",
    )
    try:
        up = other.up()
        assert up.returncode == 0, up.tail(3000)
        # Up beside a running lab, it read the kubelets' values and kept the machine's.
        assert machines.load_machine_settings() == machine
        # What a kubelet does on a lab host: these settings are the whole machine's, not the host's.
        Path("/proc/sys/vm/overcommit_memory").write_text("1")
        Path("/proc/sys/kernel/panic_on_oops").write_text("1")
        run = lab.down()
        assert run.returncode == 0, run.tail(3000)
        assert run.recap()["changed"] == 1
        # The other lab's kubelets want these settings and its hosts the raised limits: kept.
        said = re.search(r"kernel settings kept as they are while another lab runs \(([\w., -]+)\)", run.output)
        assert said and "lab-other-1" in said.group(1).split(", "), run.output
        assert machines.read_kernel_settings(["vm.overcommit_memory", "kernel.panic_on_oops"]) == {
            "vm.overcommit_memory": "1",
            "kernel.panic_on_oops": "1",
        }
        # Its hosts' processes, cgroups and nspawn run files; the other lab's host still runs.
        assert lifecycle.leftovers(lab.layout, BRIDGE, HOSTS) == []
        assert machines.mounts_under(lab.state_dir) == []
        assert lifecycle.status(other.layout, make_plan(other_bridge, other_gateway + "/24", other_hosts)) == {
            "lab-other-1": "running"
        }
        again = lab.down()
        assert again.returncode == 0 and again.recap()["changed"] == 0
    finally:
        gone = other.down()
    assert gone.returncode == 0, gone.tail(3000)
    assert lifecycle.leftovers(other.layout, other_bridge, other_hosts) == []
    # The last lab down puts the machine's values back; in CI a lab of another module may still run,
    # and then the settings wait for it.
    put_back = re.search(r"kernel settings put back: ([\w., ]+)", gone.output)
    if put_back:
        assert {"vm.overcommit_memory", "kernel.panic_on_oops"} <= set(put_back.group(1).split(", ")), gone.output
        assert machines.read_kernel_settings([*machines.KERNEL_SETTINGS, *machines.INOTIFY_LIMITS]) == machine
        assert machines.load_machine_settings() == {}
    else:
        assert "kernel settings kept as they are while another lab runs" in gone.output, gone.output
        assert machines.load_machine_settings() == machine


def test_a_lab_declared_with_a_duplicate_address_stops_before_anything_changes(lab, tmp_path):
    state_dir = tmp_path / "state"
    inventory = lab_inventory(tmp_path / "hosts.yml", state_dir, {"lab-a": "10.214.0.20", "lab-b": "10.214.0.20"})
    run = run_playbook(LAB, inventory=inventory)
    assert run.returncode != 0
    assert "hosts.lab-b: expected an address no other host has (lab-a has it), found '10.214.0.20'" in run.output
    assert "nothing was changed" in run.output
    assert not state_dir.exists() and not machines.bridge_exists(BRIDGE)
