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
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "collections"))
sys.path.insert(0, str(REPO))

from ansible_collections.clusterproof.gpu.plugins.module_utils.bundle import build  # noqa: E402
from ansible_collections.clusterproof.gpu.plugins.module_utils.lab import lifecycle, machines  # noqa: E402
from tests.e2e import lab_site  # noqa: E402
from tests.e2e.conftest import run_playbook  # noqa: E402

# Where the lab keeps its Debian root between runs (playbooks/lab.yml's default lab_cache).
LAB_CACHE = Path.home() / ".cache" / "clusterproof" / "lab"


def bench_parser(doc: str, cold: str = "") -> argparse.ArgumentParser:
    """A lab bench's command line: ``--help`` says the first paragraph of its docstring. A bench that can
    also start from empty caches says what ``--cold`` then does first (``cold``)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    if cold:
        parser.add_argument("--cold", action="store_true", help=cold)
    return parser


def pinned_bundle() -> build.Layout:
    """The bundle at the pins in the default build cache, built first (without progress lines) for a
    bench that installs from it."""
    layout = build.Layout(build.default_cache(), build.default_cache() / "out")
    build.build(layout, progress=lambda message: None)
    return layout


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

    @property
    def control_plane(self) -> dict[str, str]:
        """The first host, the control plane."""
        return dict(list(self.hosts.items())[:1])

    @property
    def workers(self) -> dict[str, str]:
        """The other two hosts, the workers."""
        return dict(list(self.hosts.items())[1:])

    def site_declaration(self, site_name: str, base: Path, bundle: Path, **extra_vars: Any) -> dict[str, Any]:
        """inventories/lab's site on this lab's bridge and hosts (tests/e2e/lab_site.declaration), served
        ``bundle`` from the bridge's address, its state under ``base``, with ``extra_vars``."""
        return lab_site.declaration(
            site_name, self.gateway, self.bridge, self.control_plane, self.workers, base, bundle, extra_vars
        )

    def leftovers(self, state_dir: Path) -> list[str]:
        """What the lab of ``state_dir`` (with the default Debian root cache) left on the machine after
        ``down`` (lab/lifecycle.leftovers)."""
        return lifecycle.leftovers(machines.Layout(state_dir, LAB_CACHE), self.bridge, self.hosts)

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
    options = bench_parser(__doc__, cold="build the Debian root from an empty cache first").parse_args()
    with tempfile.TemporaryDirectory(prefix="lab-bench.") as work:
        base = Path(work)
        state_dir = base / "state"
        cache_dir = base / "cache" if options.cold else LAB_CACHE
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
