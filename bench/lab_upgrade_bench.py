#!/usr/bin/env python3
"""A kubeadm site kept: wall time of a Kubernetes upgrade of the three-host lab (a control plane, two
workers) from the previous minor the bundle carries to the pinned one, per host and in all (the
issue's goal: under 10 minutes for three hosts), then of a worker's removal and of its join again.

    .venv/bin/python bench/lab_upgrade_bench.py

The lab is installed at the previous minor with gpu_nodes.yml and cluster.yml (timed, not counted);
the site's later stages are left out (the upgrade drains what runs, it does not need them) and so is
the validation after the upgrade (-e clusterproof_upgrade_validate=false): what is timed is the
upgrade itself. A host's time is the span of its events in the two upgrade plays (its kubeadm, its
kubeadm step, its drain, its kubelet, Ready again, uncordoned). The bundle is built (or found built)
first and not counted. Runs on a lab of its own (bridge ``cpbench3``, 10.222.0.0/24). Needs root, Go
and Debian's tools (./clusterproof installs them).
"""

from __future__ import annotations

import datetime
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "collections"))
sys.path.insert(0, str(REPO))

from ansible_collections.clusterproof.gpu.plugins.module_utils import versions  # noqa: E402
from ansible_collections.clusterproof.gpu.plugins.module_utils.lab import machines  # noqa: E402
from bench.lab_bench import BenchLab, bench_parser, pinned_bundle  # noqa: E402
from tests.e2e.conftest import run_playbook  # noqa: E402

LAB = BenchLab("cpbench3", "10.222.0")
PLAYBOOKS = REPO / "playbooks"
UPGRADE_PLAYS = ("Upgrade the control planes, one at a time", "Upgrade the workers, in batches")


def host_spans(events: Iterable[Mapping[str, Any]], plays: Iterable[str]) -> dict[str, float]:
    """Seconds from each host's first to its last event in ``plays`` (ansible-runner's events)."""
    wanted = set(plays)
    first: dict[str, datetime.datetime] = {}
    last: dict[str, datetime.datetime] = {}
    for event in events:
        data = event.get("event_data") or {}
        host, created = data.get("host"), event.get("created")
        if not host or not created or data.get("play") not in wanted:
            continue
        when = datetime.datetime.fromisoformat(str(created))
        first.setdefault(host, when)
        last[host] = when
    return {host: (last[host] - first[host]).total_seconds() for host in first}


def timed(label: str, playbook: str, *args: str, inventory: Path) -> Any:
    started = time.monotonic()
    run = run_playbook(str(PLAYBOOKS / playbook), *args, inventory=inventory, timeout=2400)
    elapsed = time.monotonic() - started
    if run.returncode != 0:
        sys.exit(f"{label} failed:\n{run.output[-3000:]}")
    print(f"{label:<56} {elapsed:7.1f} s", flush=True)
    return run


def main() -> None:
    bench_parser(__doc__).parse_args()
    layout = pinned_bundle()
    with tempfile.TemporaryDirectory(prefix="lab-upgrade-bench.") as work:
        base = Path(work)
        declaration = LAB.site_declaration("lab-upgrade-bench", base, layout.out, simulated_gpu_nodes_port=16509)
        pinned = base / "pinned.yml"
        pinned.write_text(yaml.safe_dump(declaration))
        declaration["all"]["vars"]["clusterproof_kubernetes_version"] = versions.KUBERNETES_PREVIOUS.version
        previous = base / "previous.yml"
        previous.write_text(yaml.safe_dump(declaration))
        worker = next(iter(LAB.workers))
        settings = machines.read_kernel_settings()
        try:
            timed("lab up (3 hosts) and serve the bundle", "lab.yml", inventory=previous)
            timed("gpu_nodes.yml at %s" % versions.KUBERNETES_PREVIOUS.version, "gpu_nodes.yml", inventory=previous)
            timed("cluster.yml at %s" % versions.KUBERNETES_PREVIOUS.version, "cluster.yml", inventory=previous)
            upgraded = timed(
                "upgrade.yml to %s, 3 hosts, in all" % versions.KUBERNETES.version,
                "upgrade.yml",
                "-e",
                "clusterproof_upgrade_validate=false",
                inventory=pinned,
            )
            for host, seconds in sorted(host_spans(upgraded.events, UPGRADE_PLAYS).items()):
                print(f"{'  of which ' + host:<56} {seconds:7.1f} s", flush=True)
            timed(
                "upgrade.yml again (nothing to do)",
                "upgrade.yml",
                "-e",
                "clusterproof_upgrade_validate=false",
                inventory=pinned,
            )
            timed("remove_node.yml, a worker", "remove_node.yml", "-e", "node=" + worker, inventory=pinned)
            timed("gpu_nodes.yml + cluster.yml: the worker joins again", "gpu_nodes.yml", inventory=pinned)
            timed("  (cluster.yml)", "cluster.yml", inventory=pinned)
        finally:
            run_playbook(str(PLAYBOOKS / "lab.yml"), "-e", "lab_state=down", inventory=previous, timeout=600)
            machines.write_kernel_settings(settings)


if __name__ == "__main__":
    main()
