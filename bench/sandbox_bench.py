#!/usr/bin/env python3
"""Sandbox figures: cold build, warm bring-up, teardown, and the memory the sandbox holds.

Runs the real playbooks against a sandbox of its own (a temporary state directory and free
loopback ports), for the default inventory and for a generated inventory of N nodes.

    .venv/bin/python bench/sandbox_bench.py                 # default site and 1,000 nodes
    .venv/bin/python bench/sandbox_bench.py --nodes 200     # another size
    .venv/bin/python bench/sandbox_bench.py --cold-build    # also time a build from empty Go caches

Goals (issue 2): warm bring-up <= 30 s on 2 cores; sandbox RSS <= 1.5 GiB.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "collections"))
sys.path.insert(0, str(REPO))

from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import build as sandbox_build  # noqa: E402
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import control_plane as sandbox  # noqa: E402
from tests.e2e.conftest import free_port_base, run_playbook, sandbox_vars  # noqa: E402

COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")


def generated_inventory(
    path: Path,
    nodes: int,
    projects: int = 0,
    node_gpus: int = 8,
    scheduler: str = "",
    site_name: str = "",
    node_cpus: int | None = None,
    node_memory_gib: int | None = None,
) -> Path:
    """A sandbox inventory of ``nodes`` GPU nodes (gpu-0000 ...) of ``node_gpus`` H100s each, and
    ``projects`` projects sharing 8 GPUs per node; ``scheduler`` empty keeps the default, as do
    ``node_cpus`` and ``node_memory_gib`` None (the inventory's defaults)."""
    lines = [
        "all:",
        "  children:",
        "    kube_control_plane:",
        "      hosts:",
        "        localhost:",
        "          ansible_connection: local",
        "          ansible_python_interpreter: '{{ ansible_playbook_python }}'",
        "    gpu_nodes:",
        "      vars:",
        f"        gpu_count: {node_gpus}",
        "        gpu_product: NVIDIA-H100-80GB-HBM3",
        "        gpu_memory_mib: 81559",
        *([f"        node_cpu_cores: {node_cpus}"] if node_cpus else []),
        *([f"        node_memory_gib: {node_memory_gib}"] if node_memory_gib else []),
        "      hosts:",
    ]
    lines += ["        gpu-%04d:" % index for index in range(nodes)]
    lines += ["  vars:", "    clusterproof_site_name: %s" % (site_name or "bench-%d-nodes" % nodes)]
    if scheduler:
        lines.append(f"    clusterproof_scheduler: {scheduler}")
    if projects:
        lines.append("    clusterproof_projects:")
        quota = 8 * nodes // projects
        lines += ["      - {name: project-%03d, gpu_quota: %d}" % (index, quota) for index in range(projects)]
    path.write_text("\n".join(lines) + "\n")
    return path


def sandbox_rss(state_dir: Path) -> dict[str, int]:
    layout = sandbox.Layout(state_dir)
    figures = {}
    for name in COMPONENTS:
        pid = sandbox.running_pid(layout, name)
        figures[name] = sandbox.rss_bytes(pid) if pid else 0
    return figures


def timed_playbook(*args: str, inventory: Path | None) -> float:
    started = time.monotonic()
    run = run_playbook(*args, inventory=inventory, timeout=1800)
    elapsed = time.monotonic() - started
    if run.returncode != 0:
        raise SystemExit("playbook %s failed:\n%s" % (args[0], run.output[-4000:]))
    return elapsed


def measure(label: str, inventory: Path | None, settle: float) -> None:
    state_dir = Path(tempfile.mkdtemp(prefix="cp-bench-")) / "state"
    extra = sandbox_vars(state_dir, free_port_base())
    first = timed_playbook("playbooks/sandbox.yml", *extra, inventory=inventory)
    again = timed_playbook("playbooks/sandbox.yml", *extra, inventory=inventory)
    time.sleep(settle)
    rss = sandbox_rss(state_dir)
    down = timed_playbook("playbooks/sandbox.yml", "-e", "sandbox_cluster_state=down", *extra, inventory=inventory)
    # Restart from the cache with existing certificates gone too: that is the warm bring-up.
    warm = timed_playbook("playbooks/sandbox.yml", *extra, inventory=inventory)
    timed_playbook("playbooks/sandbox.yml", "-e", "sandbox_cluster_state=down", *extra, inventory=inventory)
    total = sum(rss.values())
    print("\n== %s" % label)
    print("  bring-up, binaries cached (playbook wall time)     %6.1f s   (goal <= 30 s)" % warm)
    print("  first bring-up in this run                         %6.1f s" % first)
    print("  re-run of 'up' on the running sandbox (no change)  %6.1f s" % again)
    print("  teardown ('down')                                  %6.1f s" % down)
    rss_line = "  sandbox RSS after %2.0f s settled                   %6.0f MiB (goal <= 1536 MiB)"
    print(rss_line % (settle, total / 2**20))
    for name in COMPONENTS:
        print("    %-26s %6.0f MiB" % (name, rss[name] / 2**20))


def cold_build() -> None:
    scratch = Path(tempfile.mkdtemp(prefix="cp-cold-build-"))
    env = dict(os.environ, GOCACHE=str(scratch / "gocache"), GOMODCACHE=str(scratch / "gomod"))
    env["GOFLAGS"] = "-modcacherw"
    env["PYTHONPATH"] = str(REPO / "collections")
    env["CLUSTERPROOF_CACHE"] = str(scratch / "cache")
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox.build"],
        env=env,
        check=True,
    )
    elapsed = time.monotonic() - started
    shutil.rmtree(scratch, ignore_errors=True)
    print("\n== cold build (empty Go build and module caches, downloads included): %.0f s" % elapsed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000, help="size of the generated inventory (0 to skip)")
    parser.add_argument("--settle", type=float, default=20.0, help="seconds to let the sandbox settle before RSS")
    parser.add_argument("--cold-build", action="store_true", help="also time a build from empty Go caches")
    args = parser.parse_args()

    build = sandbox_build.plan()
    print("sandbox binaries: %s (%s)" % (build.bin_dir, "cached" if not build.missing() else "to build"))
    if args.cold_build:
        cold_build()
    measure("default site: inventories/sandbox (2 nodes, 16 GPUs)", None, args.settle)
    if args.nodes:
        with tempfile.TemporaryDirectory() as scratch:
            inventory = generated_inventory(Path(scratch) / "hosts.yml", args.nodes)
            measure("%d nodes, %d GPUs" % (args.nodes, 8 * args.nodes), inventory, args.settle)


if __name__ == "__main__":
    main()
