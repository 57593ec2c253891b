"""How fast the fair-share model settles a large site: 10,000 projects, 100,000 jobs (goal: <= 1 s).

Not a test: run it by hand, ``.venv/bin/python bench/fairshare_bench.py``. It prints the time of a
fresh prediction (nothing running yet), of a follow-up step (a tenth of the jobs end, a fifth as many
new ones arrive across all projects, the rest run where the first step put them: fair shares move and
projects reclaim), and the peak Python memory of each (tracemalloc, measured in a separate run because
tracing slows the code down).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "collections"))

from ansible_collections.clusterproof.gpu.plugins.module_utils.model import fairshare

SIZES = (0.25, 0.5, 1, 1, 1, 2, 2, 4, 8)


def site(projects: int, jobs: int, node_gpus: int, seed: int):
    rng = random.Random(seed)
    demand_per_gpu = 1.5  # more work than GPUs, so fair shares and reclaim matter
    mean_size = sum(SIZES) / len(SIZES)
    gpus = int(jobs * mean_size / demand_per_gpu)
    nodes = [(f"node-{n:05d}", node_gpus) for n in range(gpus // node_gpus)]
    capacity = len(nodes) * node_gpus
    raw = [rng.random() for _ in range(projects)]
    scale = capacity * 0.9 / sum(raw)  # quotas add up to 90 % of the site
    project_list = [fairshare.Project(f"p{i:05d}", quota=round(r * scale)) for i, r in enumerate(raw)]
    job_list = [
        fairshare.Job(f"j{i:06d}", f"p{rng.randrange(projects):05d}", rng.choice(SIZES), rng.random() < 0.2)
        for i in range(jobs)
    ]
    return nodes, project_list, job_list, rng


def step_two(jobs, rng, new: int, projects: int, ended: float = 0.1):
    kept = [job for job in jobs if rng.random() >= ended]
    start = len(jobs)
    kept += [
        fairshare.Job(f"j{start + i:06d}", f"p{rng.randrange(projects):05d}", rng.choice(SIZES), rng.random() < 0.2)
        for i in range(new)
    ]
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--projects", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--node-gpus", type=int, default=8)
    parser.add_argument("--policy", choices=fairshare.POLICIES, default="runai")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    nodes, projects, jobs, rng = site(args.projects, args.jobs, args.node_gpus, args.seed)
    print(f"site: {len(nodes)} nodes x {args.node_gpus} GPUs, {len(projects)} projects, {len(jobs)} jobs")

    started = time.perf_counter()
    first = fairshare.predict(args.policy, nodes, projects, jobs)
    fresh = time.perf_counter() - started
    print(
        f"fresh step:     {fresh:6.3f} s   running {len(first.placements)}, pending {len(first.pending)}, "
        f"allocated {first.total_allocated:.0f}/{first.capacity:.0f}"
    )

    later = step_two(jobs, rng, len(jobs) // 5, args.projects)
    started = time.perf_counter()
    second = fairshare.predict(args.policy, nodes, projects, later, first.placements)
    follow = time.perf_counter() - started
    print(
        f"follow-up step: {follow:6.3f} s   running {len(second.placements)}, pending {len(second.pending)}, "
        f"preempted {len(second.preempted)}, allocated {second.total_allocated:.0f}/{second.capacity:.0f}"
    )

    tracemalloc.start()
    fairshare.predict(args.policy, nodes, projects, jobs)
    _, peak_fresh = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    fairshare.predict(args.policy, nodes, projects, later, first.placements)
    _, peak_follow = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"peak memory:    fresh {peak_fresh / 2**20:.1f} MiB, follow-up {peak_follow / 2**20:.1f} MiB (tracemalloc)")
    verdicts = [
        f"{name} {'met' if seconds <= 1.0 else 'NOT met'}"
        for name, seconds in (("fresh", fresh), ("follow-up", follow))
    ]
    print(f"goal <= 1 s a step: {', '.join(verdicts)}")


if __name__ == "__main__":
    main()
