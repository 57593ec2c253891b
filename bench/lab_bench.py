#!/usr/bin/env python3
"""Lab figures: the Debian root's build from an empty cache, a warm ``up`` of three hosts, a second
``up`` (nothing to do), ``down``, and the memory the running lab holds.

Runs the real playbook (playbooks/lab.yml) on a lab of its own (a temporary state directory, the
bridge ``cpbench0`` on 10.215.0.0/24), so it never touches the default lab.

    .venv/bin/python bench/lab_bench.py            # warm figures (the root from the cache)
    .venv/bin/python bench/lab_bench.py --cold     # also build the Debian root from an empty cache

Goals (issue 12): ``up`` of 3 hosts under 60 s, ``down`` under 30 s. Needs root, debootstrap and
systemd-nspawn. Timings on 2 cores depend on what else runs: say what did when you report them.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "collections"))
sys.path.insert(0, str(REPO))

from ansible_collections.clusterproof.gpu.plugins.module_utils.lab import lifecycle, machines  # noqa: E402
from tests.e2e import lab_site  # noqa: E402
from tests.e2e.conftest import run_playbook  # noqa: E402


@dataclasses.dataclass(frozen=True)
class BenchLab:
    """A bench's own lab, beside the default one: three hosts (a control plane, two workers) at .10,
    .11 and .12 of ``subnet`` (its first three numbers) on ``bridge``, whose address is .1."""

    bridge: str
    subnet: str

    @property
    def gateway(self) -> str:
        return self.subnet + ".1"

    @property
    def hosts(self) -> dict[str, str]:
        names = ("bench-cp-1", "bench-worker-1", "bench-worker-2")
        return {name: "%s.%d" % (self.subnet, 10 + index) for index, name in enumerate(names)}

    def inventory(self, path: Path, state_dir: Path, **extra: str) -> Path:
        """The lab's inventory, written to ``path``: its settings (tests/e2e/lab_site.lab_vars) and
        ``extra``, and its hosts."""
        variables = lab_site.lab_vars(state_dir, self.bridge, self.gateway, **extra)
        path.write_text(yaml.safe_dump({"all": {"vars": variables, "children": lab_site.lab_hosts(self.hosts)}}))
        return path


LAB = BenchLab("cpbench0", "10.215.0")


def timed(label: str, *args: str, inventory_path: Path) -> float:
    started = time.monotonic()
    run = run_playbook(str(REPO / "playbooks" / "lab.yml"), *args, inventory=inventory_path, timeout=900)
    elapsed = time.monotonic() - started
    if run.returncode != 0:
        sys.exit(f"{label} failed:\n{run.output[-3000:]}")
    print(f"{label:<40} {elapsed:7.1f} s  (changed: {run.recap()['changed']})", flush=True)
    return elapsed


def lab_rss_mib(layout: machines.Layout) -> float:
    """Resident memory of every process in the lab's cgroups (the hosts' systemd, sshd, ...) and
    of the nspawn processes themselves."""
    pids = set(machines.nspawn_processes(layout).values())
    for parent in machines.cgroup_parents():
        if parent.exists():
            for procs in parent.rglob("cgroup.procs"):
                pids.update(int(pid) for pid in procs.read_text().split())
    total_kib = 0
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        total_kib += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
    return total_kib / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cold", action="store_true", help="build the Debian root from an empty cache first")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lab-bench.") as work:
        base = Path(work)
        state_dir = base / "state"
        cache_dir = base / "cache" if options.cold else Path.home() / ".cache" / "clusterproof" / "lab"
        path = LAB.inventory(base / "hosts.yml", state_dir, lab_cache=str(cache_dir))
        layout = machines.Layout(state_dir, cache_dir)
        if options.cold:
            timed("up, cold (Debian root built)", inventory_path=path)
            timed("down", "-e", "lab_state=down", inventory_path=path)
        timed("up, warm (3 hosts)", inventory_path=path)
        timed("up again (nothing to do)", inventory_path=path)
        print(f"{'RSS of the running lab':<40} {lab_rss_mib(layout):7.0f} MiB", flush=True)
        timed("down", "-e", "lab_state=down", inventory_path=path)
        left = lifecycle.leftovers(layout, LAB.bridge, LAB.hosts)
        print(f"{'left behind after down':<40} {left or 'nothing'}")


if __name__ == "__main__":
    main()
