#!/usr/bin/env python3
"""Offline bundle figures: the build from an empty bundle cache and Go build cache (``--cold``), a
rebuild with nothing to do, the bundle's size, and an install from it: the lab's hosts brought up
and served the bundle, then the node stack (mirror, containerd, Kubernetes packages, NVIDIA toolkit,
a static pod from the bundle's registry) installed on every host, and installed again (no change).

    .venv/bin/python bench/bundle_bench.py             # warm figures
    .venv/bin/python bench/bundle_bench.py --cold      # also the build from empty caches (many minutes)

The cold build keeps the Go module cache (the downloads) and the sandbox cache (the Kubernetes
programs, whose cold build is bench/sandbox_bench.py's figure). Runs on a lab of its own (bridge
``cpbench1``, 10.217.0.0/24). Needs root, Go and Debian's tools (./clusterproof installs them).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "collections"))
sys.path.insert(0, str(REPO))

from ansible_collections.clusterproof.gpu.plugins.module_utils.bundle import build  # noqa: E402
from ansible_collections.clusterproof.gpu.plugins.module_utils.lab import machines  # noqa: E402
from bench.lab_bench import BenchLab, bench_parser  # noqa: E402
from tests.e2e.conftest import run_playbook  # noqa: E402

LAB = BenchLab("cpbench1", "10.217.0")


def timed_build(label: str, layout: build.Layout) -> None:
    started = time.monotonic()
    steps: list[str] = []
    build.build(layout, progress=steps.append)
    made = [step for step in steps if step.startswith(("building", "packaging", "making", "copying", "writing"))]
    print(f"{label:<46} {time.monotonic() - started:7.1f} s  ({len(made)} steps made something)", flush=True)


def timed_playbook(label: str, playbook: str, *args: str, inventory_path: Path) -> None:
    started = time.monotonic()
    run = run_playbook(playbook, *args, inventory=inventory_path, timeout=1800)
    elapsed = time.monotonic() - started
    if run.returncode != 0:
        sys.exit(f"{label} failed:\n{run.output[-3000:]}")
    changed = sum(run.recap(host)["changed"] for host in LAB.hosts) if "node" in label else run.recap()["changed"]
    print(f"{label:<46} {elapsed:7.1f} s  (changed: {changed})", flush=True)


def size_mib(path: Path) -> float:
    out = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True).stdout
    return int(out.split()[0]) / 1024


def main() -> None:
    options = bench_parser(__doc__, cold="first build a bundle from empty caches").parse_args()
    with tempfile.TemporaryDirectory(prefix="bundle-bench.") as work:
        base = Path(work)
        if options.cold:
            os.environ["GOCACHE"] = str(base / "gocache")
            timed_build("bundle build, cold", build.Layout(base / "cache", base / "cold-bundle"))
            del os.environ["GOCACHE"]
        layout = build.Layout(build.default_cache(), build.default_cache() / "out")
        timed_build("bundle build, warm", layout)
        timed_build("bundle build again (nothing to do)", layout)
        print(f"{'bundle size: apt repository':<46} {size_mib(layout.apt):7.0f} MiB")
        print(f"{'bundle size: registry':<46} {size_mib(layout.registry):7.0f} MiB")
        state_dir = base / "state"
        path = LAB.inventory(
            base / "hosts.yml",
            state_dir,
            lab_bundle=str(layout.out),
            bundle_apt_url=f"http://{LAB.gateway}:8081/",
            bundle_registry=f"{LAB.gateway}:5000",
        )
        lab = str(REPO / "playbooks" / "lab.yml")
        stack = str(REPO / "tests" / "e2e" / "playbooks" / "bundle_node_stack.yml")
        settings = machines.read_kernel_settings()
        try:
            timed_playbook("lab up (3 hosts) and serve the bundle", lab, inventory_path=path)
            timed_playbook("node stack from the bundle, 3 hosts", stack, inventory_path=path)
            timed_playbook("node stack again (no change)", stack, inventory_path=path)
        finally:
            timed_playbook("lab down", lab, "-e", "lab_state=down", inventory_path=path)
            machines.write_kernel_settings(settings)
        left = LAB.leftovers(state_dir)
        print(f"{'left behind after down':<46} {left or 'nothing'}")


if __name__ == "__main__":
    main()
