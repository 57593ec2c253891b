#!/usr/bin/env python3
"""The lab as a site of mode kubeadm, installed from the bundle as an admin would: wall time of
``playbooks/gpu_nodes.yml`` and ``playbooks/site.yml`` on a fresh lab of three hosts (kubeadm init
and join, flannel, the nvidia runtime as containerd's default, local-path and KAI from their charts,
the simulated GPU nodes, the projects, the validation and its report; the fairness scenarios left
out, they are timed apart), of the same two again (no change but the report), of site.yml with the
scenarios, and the resident memory of the lab with the cluster running.

    .venv/bin/python bench/lab_site_bench.py

The bundle is built (or found built) first and not counted. Runs on a lab of its own (bridge
``cpbench2``, 10.219.0.0/24) with inventories/lab's site settings. Needs root, Go and Debian's
tools (./clusterproof installs them).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "collections"))
sys.path.insert(0, str(REPO))

from ansible_collections.clusterproof.gpu.plugins.module_utils.lab import machines  # noqa: E402
from bench.lab_bench import BenchLab, bench_parser, lab_rss_mib, pinned_bundle  # noqa: E402
from tests.e2e.conftest import run_playbook  # noqa: E402

LAB = BenchLab("cpbench2", "10.219.0")


def inventory(base: Path, bundle: Path) -> Path:
    """inventories/lab's site, on this bench's bridge and addresses."""
    path = base / "hosts.yml"
    declaration = LAB.site_declaration("lab-site-bench", base, bundle, simulated_gpu_nodes_port=16499)
    path.write_text(yaml.safe_dump(declaration))
    return path


def timed_playbook(label: str, playbook: str, *args: str, inventory_path: Path, hosts: list[str]) -> float:
    started = time.monotonic()
    run = run_playbook(playbook, *args, inventory=inventory_path, timeout=1800)
    elapsed = time.monotonic() - started
    if run.returncode != 0:
        sys.exit(f"{label} failed:\n{run.output[-3000:]}")
    changed = sum(run.recap(host)["changed"] for host in hosts if host in run.output)
    print(f"{label:<52} {elapsed:7.1f} s  (changed: {changed})", flush=True)
    return elapsed


def main() -> None:
    bench_parser(__doc__).parse_args()
    layout = pinned_bundle()
    hosts = [*LAB.hosts]
    with tempfile.TemporaryDirectory(prefix="lab-site-bench.") as work:
        base = Path(work)
        state_dir = base / "state"
        path = inventory(base, layout.out)
        lab = str(REPO / "playbooks" / "lab.yml")
        gpu_nodes = str(REPO / "playbooks" / "gpu_nodes.yml")
        site = str(REPO / "playbooks" / "site.yml")
        no_scenarios = ("-e", '{"validate_scenarios_files": []}')
        settings = machines.read_kernel_settings()
        try:
            timed_playbook("lab up (3 hosts) and serve the bundle", lab, inventory_path=path, hosts=["localhost"])
            first = timed_playbook("gpu_nodes.yml, fresh hosts", gpu_nodes, inventory_path=path, hosts=hosts)
            first += timed_playbook(
                "site.yml without the scenarios (install + validate)",
                site,
                *no_scenarios,
                inventory_path=path,
                hosts=hosts,
            )
            print(f"{'  install and validate, both playbooks':<52} {first:7.1f} s", flush=True)
            again = timed_playbook("gpu_nodes.yml again", gpu_nodes, inventory_path=path, hosts=hosts)
            again += timed_playbook(
                "site.yml again, without the scenarios", site, *no_scenarios, inventory_path=path, hosts=hosts
            )
            print(f"{'  re-run, both playbooks':<52} {again:7.1f} s", flush=True)
            timed_playbook("site.yml with the fairness scenarios", site, inventory_path=path, hosts=hosts)
            rss = lab_rss_mib(machines.Layout(state_dir, Path.home() / ".cache/clusterproof/lab"))
            print(f"{'RSS of the lab with the cluster running':<52} {rss:7.0f} MiB", flush=True)
        finally:
            timed_playbook("lab down", lab, "-e", "lab_state=down", inventory_path=path, hosts=["localhost"])
            machines.write_kernel_settings(settings)
        left = LAB.leftovers(state_dir)
        print(f"{'left behind after down':<52} {left or 'nothing'}")


if __name__ == "__main__":
    main()
