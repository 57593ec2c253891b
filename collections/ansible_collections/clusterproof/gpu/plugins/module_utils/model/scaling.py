"""Scaling a scenario to a site: a scenario written for one capacity, read as shares of it, sized to
another (``scale_scenario``; ``scaled_jobs_for`` for its jobs alone).

May import the standard library and ``model.data``. Touches nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from ansible_collections.clusterproof.gpu.plugins.module_utils.model.data import UNITS_PER_GPU, Job, Project


@dataclass(frozen=True)
class ScaledScenario:
    """A scenario sized for a site: ``factor`` times the scenario's base capacity, on whole nodes."""

    factor: int
    gpus: int
    nodes: int
    unused_gpus: int
    projects: tuple[Project, ...]
    jobs: tuple[Job, ...]


def _share(value: float) -> Fraction:
    return Fraction(value).limit_denominator(10**6)


def scale_scenario(
    projects: Sequence[Project],
    jobs: Sequence[Job],
    reference_gpus: int,
    site_gpus: int,
    node_gpus: int,
) -> ScaledScenario | str:
    """Size a scenario written for ``reference_gpus`` to a site of ``site_gpus`` on ``node_gpus``-GPU nodes.

    The scenario is read as shares of capacity: a quota (or limit) of 4 on 16 GPUs is a quarter of
    the site, a 2-GPU job an eighth. Quotas, limits and whole-GPU jobs scale by ``gpus /
    reference_gpus``. A fractional job (a notebook on part of a GPU) is repeated that many times
    when the scale is whole (``name``, then ``name-x2`` …), otherwise its size scales (it must stay
    a fraction of a thousandth-multiple). ``gpus`` is the largest multiple of the scenario's base
    capacity (the fewest GPUs on which every share is a whole number) that fills whole nodes of the
    site and holds the largest job on one node; the rest of the site is ``unused_gpus`` (keep the
    scenario off it, or predict with it). Returns the reason, as a sentence, when nothing fits.
    """
    if site_gpus <= 0 or node_gpus <= 0 or reference_gpus <= 0:
        return (
            f"site of {site_gpus} GPUs on {node_gpus}-GPU nodes, scenario written for {reference_gpus} GPUs: "
            f"all three must be positive"
        )
    shares = [_share(p.quota) / reference_gpus for p in projects]
    shares += [_share(p.limit) / reference_gpus for p in projects if p.limit is not None]
    whole = [_share(job.gpus) / reference_gpus for job in jobs if job.gpus >= 1]
    base = math.lcm(1, *(share.denominator for share in shares + whole))
    largest = max(whole, default=Fraction(0))
    fitting = []
    for factor in range(site_gpus // base, 0, -1):
        gpus = factor * base
        if gpus % node_gpus or largest * gpus > node_gpus:
            continue
        scaled_jobs = scaled_jobs_for(jobs, Fraction(gpus, reference_gpus))
        if scaled_jobs is not None:
            fitting.append((factor, gpus, scaled_jobs))
    # A whole multiple of the written capacity keeps every fraction as written (repeated rather
    # than resized), so fractions still pair up on shared GPUs as the document shows: preferred.
    fitting.sort(key=lambda fit: (fit[1] % reference_gpus == 0, fit[1]), reverse=True)
    for factor, gpus, scaled_jobs in fitting[:1]:
        return ScaledScenario(
            factor=factor,
            gpus=gpus,
            nodes=gpus // node_gpus,
            unused_gpus=site_gpus - gpus,
            projects=tuple(
                Project(
                    p.name,
                    quota=float(_share(p.quota) * gpus / reference_gpus),
                    limit=None if p.limit is None else float(_share(p.limit) * gpus / reference_gpus),
                    weight=p.weight,
                    parent=p.parent,
                )
                for p in projects
            ),
            jobs=tuple(scaled_jobs),
        )
    if site_gpus < base:
        return (
            f"site has {site_gpus} GPUs; the scenario needs at least {base} "
            f"(its quotas and whole-GPU jobs are whole numbers of GPUs only on multiples of {base})"
        )
    if largest * base > node_gpus:
        return (
            f"nodes have {node_gpus} GPUs; the scenario's largest job needs {largest * base} GPUs on one node "
            f"even at its smallest size ({base} GPUs in all)"
        )
    return (
        f"no multiple of the scenario's {base} GPUs up to the site's {site_gpus} fills whole {node_gpus}-GPU "
        f"nodes with its largest job on one node and its fractional jobs still fractions"
    )


def scaled_jobs_for(jobs: Sequence[Job], scale: Fraction) -> list[Job] | None:
    """``jobs`` at ``scale``: whole-GPU jobs resized, fractions repeated (whole scale) or resized;
    None when a resized fraction would not stay a fraction in thousandths of a GPU."""
    out: list[Job] = []
    for job in jobs:
        size = _share(job.gpus)
        if size >= 1:
            out.append(Job(job.name, job.project, float(size * scale), job.interactive))
        elif scale.denominator == 1:
            for copy in range(scale.numerator):
                name = job.name if copy == 0 else f"{job.name}-x{copy + 1}"
                out.append(Job(name, job.project, job.gpus, job.interactive))
        else:
            scaled = size * scale
            if scaled >= 1 or (scaled * UNITS_PER_GPU).denominator != 1:
                return None
            out.append(Job(job.name, job.project, float(scaled), job.interactive))
    return out
