#!/usr/bin/env python3
"""Passive GPU health at site scale: judging 10,000 hosts of 8 GPUs (80,000 GPUs) and writing the
report, in one process, as site_report would hold it.

    .venv/bin/python bench/gpu_health_bench.py [--hosts 10000] [--gpus 8] [--faulty 0.01]

Each host's facts are the recorded H100's (tests/unit/fixtures/gpu/nvidia-smi-q-x-h100.xml) parsed
once and copied per GPU with its index, PCI address and serial changed; ``--faulty`` of the GPUs get
a pending row remap and their host an XID 79 line in its kernel log. Prints the time to parse one
recording, to judge every host (``assess_host``), to build the report model from the sections and
to write its JSON, JUnit XML and HTML, with the checks counted and the peak RSS. The goal of
issue 15 is the validation of 10,000 nodes and 80,000 GPUs in at most 30 s and 1 GiB; on a real site
each host judges its own GPUs in parallel, so the per-host figure is what a host adds.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "collections"))

from ansible_collections.clusterproof.gpu.plugins.module_utils.node import gpu_facts, gpu_health  # noqa: E402
from ansible_collections.clusterproof.gpu.plugins.module_utils.report import model, render  # noqa: E402

RECORDING = REPO / "tests" / "unit" / "fixtures" / "gpu" / "nvidia-smi-q-x-h100.xml"


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--faulty", type=float, default=0.01, help="fraction of GPUs given a fault")
    args = parser.parse_args()

    started = time.perf_counter()
    recorded = gpu_facts.parse_nvidia_smi_xml(RECORDING.read_text()).to_dict()
    parse_s = time.perf_counter() - started
    template = recorded["gpus"][0]
    every = max(1, round(1 / args.faulty)) if args.faulty > 0 else 0

    pins = gpu_health.HealthPins(driver_branch="580", cuda_version="12.4", gpu_count=args.gpus)
    started = time.perf_counter()
    sections = []
    faulty = 0
    for host_number in range(args.hosts):
        host = f"gpu-{host_number:05d}"
        gpus, log = [], []
        for index in range(args.gpus):
            gpu = copy.deepcopy(template)
            gpu.update(index=index, pci_bus_id=f"00000000:{0x10 + index:02X}:00.0", serial=f"{host_number:08d}{index}")
            if every and (host_number * args.gpus + index) % every == 0:
                faulty += 1
                gpu["remapped_rows"]["pending"] = True
                log.append(f"[ 9.0] NVRM: Xid (PCI:0000:{0x10 + index:02x}:00): 79, GPU has fallen off the bus.")
            gpus.append(gpu)
        facts = dict(recorded, gpu_count=len(gpus), gpus=gpus)
        sections.append(gpu_health.assess_host(host, facts, pins, "\n".join(log)))
    assess_s = time.perf_counter() - started
    assess_rss = peak_rss_mib()

    started = time.perf_counter()
    report = model.report_from_dict({"site": "health-bench", "cluster_mode": "existing", "sections": sections})
    build_s = time.perf_counter() - started
    build_rss = peak_rss_mib()
    checks = sum(len(section.checks) for section in report.sections)
    failed = sum(1 for section in report.sections for check in section.checks if check.status == "fail")

    with tempfile.TemporaryDirectory() as directory:
        started = time.perf_counter()
        render.write_report(report, directory, datetime.datetime.now(datetime.UTC))
        write_s = time.perf_counter() - started

    print(f"hosts {args.hosts}, GPUs {args.hosts * args.gpus}, faulty GPUs {faulty}")
    print(f"parse one nvidia-smi -q -x recording: {parse_s * 1000:.1f} ms")
    print(
        f"judge every host: {assess_s:.1f} s ({assess_s / args.hosts * 1000:.2f} ms per host),",
        f"peak RSS {assess_rss:.0f} MiB",
    )
    print(f"build the report model: {build_s:.1f} s, peak RSS {build_rss:.0f} MiB")
    print(f"write JSON, JUnit XML and HTML: {write_s:.1f} s")
    print(f"checks {checks}, failed {failed}")
    print(f"total {assess_s + build_s + write_s:.1f} s, peak RSS {peak_rss_mib():.0f} MiB")


if __name__ == "__main__":
    main()
