"""Judge what the GPU benchmark runner measured against a reference per GPU model.

Pure logic, plus one function that starts the runner (:func:`run_runner`, whose process runner
can be replaced in tests). The runner itself is ``gpu_benchmark_runner.py`` beside this file: it
executes on the GPU host and prints one JSON document; :func:`parse_runner_output` reads it, and
:func:`judge` turns it into ``report.Check`` results and a report section.

A result passes when ``measured >= fraction x reference``. The references are the vendor's
figures for the model (dense, never the "with sparsity" ones), except ResNet-50, whose reference
is a published measured throughput. The default fractions, and why:

* ``matmul`` 0.5 of the datasheet's dense peak. The peak assumes the highest boost clock; under
  sustained dense tensor load a GPU reaches its power limit and lowers its clock. Recorded on an
  H100 SXM (700 W, tests/unit/fixtures/gpu): 8192^3 bf16 products ran at 788 TFLOP/s in a
  10-product burst, then at 600-690 TFLOP/s sustained (0.61-0.69 of 989.5) with the SM clock at
  1,300-1,400 MHz and "SW power cap" as the throttle reason; fp16 at 0.56-0.67. A threshold of
  0.6 would fail that healthy GPU on some runs; under 0.5 the GPU is throttled beyond its power
  cap (thermal, a lowered power limit), shared, or faulty.
* ``copy`` 0.7 of the HBM/GDDR bandwidth: a device-to-device copy, counting bytes read and
  written, reaches 80-90 % of it (0.90 on the recorded H100). Under 70 % the memory clock or the
  GPU is not what it should be.
* ``resnet50`` 0.5 of the published throughput: the references come from NVIDIA's tuned recipes
  (DALI, batch 256, NGC containers); the runner trains plain torchvision ResNet-50 in eager mode,
  batch 128. Half the reference still catches a throttled or misconfigured GPU without failing on
  framework differences.
* ``allreduce`` 0.6 of the NVLink bandwidth per GPU and direction: NCCL's bus bandwidth on
  NVLink/NVSwitch nodes reaches 75-90 % of it with large messages (nccl-tests doc/PERFORMANCE.md
  explains why busbw is the figure to compare with the hardware's). Under 60 % a link is down,
  traffic goes through PCIe or host memory, or peer-to-peer is disabled.

The datasheet fractions are a floor: a GPU 30 % slower than its peers can pass them. Beside the
floor, each check shows what healthy GPUs of the model measure in practice (``IN_PRACTICE``: our
own recordings, or a published measurement with its conditions; none is invented, so most models
have none). Slower-than-it-should-be is judged across the site, against the same model's other
GPUs and against the site's baseline run, by ``benchmark_verdicts`` (the section
``gpu-benchmark-site``), from the figures table each host's section carries (``FIGURE_COLUMNS``).

Statuses: ``pass``/``fail`` where a reference exists; ``warn`` for a GPU model the table does not
know (the figures are reported, not judged); ``skip`` where a benchmark did not run here or the
model has no reference for that figure; ``needs-hardware`` where the runner fell back to the CPU
on a host without GPUs (a dry run); ``fail`` where a benchmark crashed on a GPU host, or a host
with GPUs has no interpreter that can use them.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import pkgutil
import platform
import re
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.node import gpu_benchmark_runner as runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.node import program
from ansible_collections.clusterproof.gpu.plugins.module_utils.node.gpu_facts import gather
from ansible_collections.clusterproof.gpu.plugins.module_utils.report.model import Check, Table

BENCHMARKS = runner.BENCHMARKS
MATMUL_DTYPES = runner.DTYPES
DEFAULT_MATMUL_DTYPES = runner.DEFAULT_DTYPES
SECTION_ID_PREFIX = "gpu-benchmark"

# The columns of a host's figures table; "GPU" is the index, or "host" for a figure of the whole host.
# Reports written before the "Model" column hold "<index>: <name>" in "GPU" and no "In practice".
FIGURE_COLUMNS = (
    "GPU",
    "Model",
    "Benchmark",
    "Measured",
    "Unit",
    "Reference",
    "In practice",
    "Ratio",
    "Threshold",
    "Status",
)

DEFAULT_THRESHOLDS: dict[str, float] = {"matmul": 0.5, "copy": 0.7, "resnet50": 0.5, "allreduce": 0.6}
JUDGED = tuple(DEFAULT_THRESHOLDS)

# The order of badness when one figure is judged on several GPUs: the check shows the worst.
_SEVERITY = {"fail": 4, "warn": 3, "pass": 2, "needs-hardware": 1, "skip": 0}


class BenchmarkError(RuntimeError):
    """The runner could not be started, or did not print the JSON document expected."""


# ---------------------------------------------------------------------------------------------
# Reference table


@dataclasses.dataclass(frozen=True)
class GpuReference:
    """A GPU model's reference figures, each with where it comes from (``source``).

    ``matmul_tflops``: dense peak per dtype (bf16, fp16, fp32, tf32, fp64), None where the model
    has no such path. ``memory_bandwidth_gbps``: the memory's peak, GB/s (1e9 bytes).
    ``resnet50_images_per_s``: a published single-GPU training throughput, None where no credible
    figure exists. ``allreduce_busbw_gbps``: NVLink bandwidth per GPU and direction on the
    NVLink/NVSwitch node the model comes in, None where the topology is not fixed (PCIe cards).
    """

    key: str
    model: str
    patterns: tuple[str, ...]
    matmul_tflops: Mapping[str, float | None]
    memory_bandwidth_gbps: float
    resnet50_images_per_s: float | None
    allreduce_busbw_gbps: float | None
    source: Mapping[str, str]

    def figure(self, benchmark: str, dtype: str | None = None) -> float | None:
        if benchmark == "matmul":
            return self.matmul_tflops.get(dtype or "")
        return {
            "copy": self.memory_bandwidth_gbps,
            "resnet50": self.resnet50_images_per_s,
            "allreduce": self.allreduce_busbw_gbps,
        }.get(benchmark)

    def source_of(self, benchmark: str) -> str:
        return self.source.get({"matmul": "compute", "copy": "memory"}.get(benchmark, benchmark), "")

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["patterns"] = list(self.patterns)
        return data


_V100_DATASHEET = "NVIDIA Tesla V100 datasheet (https://www.nvidia.com/en-us/data-center/v100/)"
_A100_DATASHEET = "NVIDIA A100 Tensor Core GPU datasheet (https://www.nvidia.com/en-us/data-center/a100/)"
_H100_DATASHEET = "NVIDIA H100 Tensor Core GPU datasheet (https://www.nvidia.com/en-us/data-center/h100/)"
_H200_DATASHEET = "NVIDIA H200 Tensor Core GPU datasheet (https://www.nvidia.com/en-us/data-center/h200/)"
_L40S_DATASHEET = "NVIDIA L40S datasheet (https://www.nvidia.com/en-us/data-center/l40s/)"
# The datasheets give tensor figures "with sparsity" (starred), twice the dense figures used here.
_DENSE = "dense = half the starred with-sparsity tensor figures; fp64 is the FP64 Tensor Core figure"
_DLE_RESNET50 = (
    "NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5/README.md, 'Training "
    "performance' table for {system}, 1 GPU, mixed precision, pytorch-21.03 NGC container "
    "(https://github.com/NVIDIA/DeepLearningExamples)"
)
_NVLINK = (
    "{link} per GPU in the datasheet, {total} GB/s both directions together, so {half} GB/s each way: the "
    "ceiling for all-reduce bus bandwidth (nccl-tests doc/PERFORMANCE.md, "
    "https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md)"
)
_NO_RESNET = "no published single-GPU ResNet-50 training throughput for this model was found"
_NO_NVLINK = "PCIe card: its NVLink bridges (if any) pair GPUs, so the node's all-reduce ceiling depends on the host"
_PCIE_ONLY = "no NVLink: GPUs exchange data over PCIe, whose ceiling depends on the host"


# fmt: off
# One GPU model a row, in the order ``match_reference`` tries the patterns (more specific first):
#   key, model, NVML name patterns;
#   dense TFLOP/s (fp64, fp32, tf32, bf16, fp16), memory GB/s, ResNet-50 img/s, all-reduce GB/s per direction;
#   where the compute figures stand in the datasheet (after its name);
#   the datasheet, its memory line, the ResNet-50 system measured (None: no published figure), and the NVLink
#   generation (or why the model has no all-reduce figure).
_ROWS: tuple[tuple[Any, ...], ...] = (
    # Volta has no bf16 or tf32 tensor cores; fp16 is the tensor-core figure (fp32 accumulate).
    ("v100-sxm2-32gb", "NVIDIA Tesla V100 SXM2 32GB", (r"\bv100\b.*\bsxm2\b.*\b32gb\b",),
     (7.8, 15.7, None, None, 125.0), 900.0, 1156.0, 150.0,
     ", SXM2: double 7.8, single 15.7, tensor (fp16) 125 TFLOPS; no bf16 or tf32",
     _V100_DATASHEET, "900 GB/s HBM2", "NVIDIA DGX-1 32GB (8x V100 32GB)", "NVLink 2.0, 6 links"),
    ("v100-sxm2-16gb", "NVIDIA Tesla V100 SXM2 16GB", (r"\bv100\b.*\bsxm2\b",),
     (7.8, 15.7, None, None, 125.0), 900.0, 1200.0, 150.0,
     ", SXM2: double 7.8, single 15.7, tensor (fp16) 125 TFLOPS; no bf16 or tf32",
     _V100_DATASHEET, "900 GB/s HBM2", "NVIDIA DGX-1 16GB (8x V100 16GB)", "NVLink 2.0, 6 links"),
    ("v100-pcie", "NVIDIA Tesla V100 PCIe (16GB or 32GB)", (r"\bv100\b.*\bpcie\b",),
     (7.0, 14.0, None, None, 112.0), 900.0, None, None,
     ", PCIe: double 7, single 14, tensor (fp16) 112 TFLOPS; no bf16 or tf32",
     _V100_DATASHEET, "900 GB/s HBM2", None, _NO_NVLINK),
    ("a100-pcie-80gb", "NVIDIA A100 PCIe 80GB", (r"\ba100\b.*\bpcie\b.*\b80gb\b", r"\ba100\b.*\b80gb\b.*\bpcie\b"),
     (19.5, 19.5, 156.0, 312.0, 312.0), 1935.0, None, None,
     "; " + _DENSE,
     _A100_DATASHEET, "1,935 GB/s HBM2e (80GB PCIe)", None, _NO_NVLINK),
    ("a100-pcie-40gb", "NVIDIA A100 PCIe 40GB", (r"\ba100\b.*\bpcie\b",),
     (19.5, 19.5, 156.0, 312.0, 312.0), 1555.0, None, None,
     "; " + _DENSE,
     _A100_DATASHEET, "1,555 GB/s HBM2 (40GB)", None, _NO_NVLINK),
    ("a100-sxm4-80gb", "NVIDIA A100 SXM4 80GB", (r"\ba100\b.*\b80gb\b",),
     (19.5, 19.5, 156.0, 312.0, 312.0), 2039.0, 2470.0, 300.0,
     "; " + _DENSE,
     _A100_DATASHEET, "2,039 GB/s HBM2e (80GB SXM)", "NVIDIA DGX A100 (8x A100 80GB)", "NVLink 3.0, 12 links"),
    ("a100-sxm4-40gb", "NVIDIA A100 SXM4 40GB", (r"\ba100\b.*(\bsxm\d?\b|\b40gb\b)",),
     (19.5, 19.5, 156.0, 312.0, 312.0), 1555.0, None, 300.0,
     "; " + _DENSE,
     _A100_DATASHEET, "1,555 GB/s HBM2 (40GB)", None, "NVLink 3.0, 12 links"),
    ("h100-pcie", "NVIDIA H100 PCIe 80GB", (r"\bh100\b.*\bpcie\b",),
     (51.0, 51.0, 378.0, 756.5, 756.5), 2000.0, None, None,
     ", H100 PCIe column; " + _DENSE,
     _H100_DATASHEET, "2 TB/s (H100 PCIe)", None, _NO_NVLINK),
    ("h100-nvl", "NVIDIA H100 NVL 94GB", (r"\bh100\b.*\bnvl\b",),
     (60.0, 60.0, 417.5, 835.5, 835.5), 3900.0, None, None,
     ", H100 NVL column; " + _DENSE,
     _H100_DATASHEET, "3.9 TB/s (H100 NVL)", None, _NO_NVLINK),
    # NVML names the SXM5 part "NVIDIA H100 80GB HBM3"; the PCIe and NVL parts name themselves.
    ("h100-sxm5-80gb", "NVIDIA H100 SXM5 80GB", (r"\bh100\b.*(\bsxm\d?\b|\bhbm3\b)",),
     (67.0, 67.0, 494.5, 989.5, 989.5), 3350.0, None, 450.0,
     ", H100 SXM column; " + _DENSE,
     _H100_DATASHEET, "3.35 TB/s HBM3 (H100 SXM)", None, "NVLink 4.0, 18 links"),
    ("h200-nvl", "NVIDIA H200 NVL 141GB", (r"\bh200\b.*\bnvl\b",),
     (60.0, 60.0, 417.5, 835.5, 835.5), 4800.0, None, None,
     ", H200 NVL column; " + _DENSE,
     _H200_DATASHEET, "4.8 TB/s HBM3e", None, _NO_NVLINK),
    # NVML names the SXM part "NVIDIA H200".
    ("h200-sxm-141gb", "NVIDIA H200 SXM 141GB", (r"\bh200\b",),
     (67.0, 67.0, 494.5, 989.5, 989.5), 4800.0, None, 450.0,
     ", H200 SXM column; " + _DENSE,
     _H200_DATASHEET, "4.8 TB/s HBM3e", None, "NVLink 4.0, 18 links"),
    ("l40s", "NVIDIA L40S 48GB", (r"\bl40s\b",),
     (None, 91.6, 183.0, 362.05, 362.05), 864.0, None, None,
     "; dense = the first of each 'dense | sparse' pair; it gives no FP64 figure",
     _L40S_DATASHEET, "864 GB/s GDDR6", None, _PCIE_ONLY),
)
# fmt: on


def _reference(row: tuple[Any, ...]) -> GpuReference:
    """A row of ``_ROWS`` as a reference, its sources spelled out in full."""
    key, model, patterns, dense, memory, resnet50, allreduce, compute_note, datasheet, memory_note, system, nvlink = row
    fp64, fp32, tf32, bf16, fp16 = dense
    return GpuReference(
        key=key,
        model=model,
        patterns=patterns,
        matmul_tflops={"bf16": bf16, "fp16": fp16, "fp32": fp32, "tf32": tf32, "fp64": fp64},
        memory_bandwidth_gbps=memory,
        resnet50_images_per_s=resnet50,
        allreduce_busbw_gbps=allreduce,
        source={
            "compute": datasheet + compute_note,
            "memory": datasheet + ": " + memory_note,
            "resnet50": _NO_RESNET
            if system is None
            else _DLE_RESNET50.format(system="%s: %d img/s" % (system, resnet50)),
            "allreduce": nvlink
            if allreduce is None
            else _NVLINK.format(link=nvlink, total=round(2 * allreduce), half=round(allreduce)),
        },
    )


REFERENCES: tuple[GpuReference, ...] = tuple(_reference(row) for row in _ROWS)

REFERENCES_BY_KEY: dict[str, GpuReference] = {reference.key: reference for reference in REFERENCES}


# ---------------------------------------------------------------------------------------------
# What healthy GPUs measure in practice


@dataclasses.dataclass(frozen=True)
class InPractice:
    """What healthy GPUs of a model measure for one figure, and where that comes from.

    Shown beside the datasheet floor in a check's ``expected`` and message, never judged on its
    own: a healthy GPU can land below a range measured on a few GPUs (the power cap makes matmul
    figures move by several percent from run to run), so the judgement of "slower than it should
    be" is the comparison with the site's peers and its baseline (``benchmark_verdicts``).
    ``low`` is None where only a best case is published.
    """

    low: float | None
    high: float
    basis: str
    source: str

    def span(self) -> str:
        return (
            f"up to {format_figure(self.high)}"
            if self.low is None
            else f"{format_figure(self.low)}-{format_figure(self.high)}"
        )


_RECORDED_H100 = (
    "recorded with this runner on one H100 SXM 80GB at its 700 W limit, two runs a minute apart and a "
    "sustained probe (tests/unit/fixtures/gpu/BENCHMARK.md)"
)
_MAMF = (
    "published best-shape BF16 matmul, mean of 100 products after 50 warm-up (Maximum Achievable Matmul "
    "FLOPS table, github.com/stas00/ml-engineering compute/accelerator/README.md as read in 2026-11, {row}); "
    "a best case over shapes, above what sustained 8192^3 products reach at the power limit"
)
_H100_SXM_PRACTICE = {
    # Runner 602.1, module run 591.7; the probe's 1 s and 5 s sustained windows 686.2 and 686.7 (a
    # 10-product burst reached 788, the published best shape 794.5: both above the sustained figure).
    "matmul-bf16": InPractice(
        591.7,
        686.7,
        "sustained 8192^3 bf16 products, SM clock 1,300-1,400 MHz under 'SW power cap'",
        _RECORDED_H100 + "; a 10-product burst reached 788 and the published best-shape figure is 794.5 "
        "(" + _MAMF.format(row="row 'NVIDIA H100 SXM'") + ")",
    ),
    "matmul-fp16": InPractice(
        557.3,
        662.8,
        "sustained 8192^3 fp16 products under the power cap, PyTorch (CuPy's cuBLAS call: 526.8)",
        _RECORDED_H100,
    ),
    "matmul-fp32": InPractice(51.66, 51.99, "8192^3 fp32 products without TF32", _RECORDED_H100),
    "matmul-fp64": InPractice(59.52, 59.52, "8192^3 fp64 products through CuPy (one run)", _RECORDED_H100),
    "memory-bandwidth": InPractice(
        3023.3, 3025.0, "device-to-device copy of 2 GiB, bytes read + written (0.90 of 3,350)", _RECORDED_H100
    ),
    "resnet50-training": InPractice(
        4062.2, 4062.2, "torchvision ResNet-50, batch 128, autocast fp16, channels_last (one run)", _RECORDED_H100
    ),
}
_A100_SXM_PRACTICE = {
    "matmul-bf16": InPractice(None, 271.2, "best-shape bf16 matmul", _MAMF.format(row="row 'NVIDIA A100 SXM'"))
}
_A100_PCIE_PRACTICE = {
    "matmul-bf16": InPractice(None, 252.9, "best-shape bf16 matmul", _MAMF.format(row="row 'NVIDIA A100 PCIe'"))
}
# By reference key, then metric. Only figures measured on real GPUs, ours or published with their
# conditions; a model or figure not here has none that could be cited (the H200's bf16 is left out:
# the published table only notes "H200 is the same" beside the H100 row, with no figure of its own).
IN_PRACTICE: dict[str, dict[str, InPractice]] = {
    "h100-sxm5-80gb": _H100_SXM_PRACTICE,
    "a100-sxm4-80gb": _A100_SXM_PRACTICE,
    "a100-sxm4-40gb": _A100_SXM_PRACTICE,
    "a100-pcie-80gb": _A100_PCIE_PRACTICE,
    "a100-pcie-40gb": _A100_PCIE_PRACTICE,
}


def in_practice(reference_key: str | None, metric: str) -> InPractice | None:
    """What healthy GPUs of the model measure for the figure, None where nothing measured is known."""
    return IN_PRACTICE.get(reference_key or "", {}).get(metric)


def normalise_name(name: str) -> str:
    """``"Tesla V100-SXM2-32GB"`` -> ``"v100 sxm2 32gb"``: the form the patterns match.

    Handles NVML/nvidia-smi names ("NVIDIA H100 80GB HBM3") and the Kubernetes label form that
    GPU feature discovery writes ("Tesla-V100-SXM2-32GB", "NVIDIA-H100-80GB-HBM3").
    """
    text = re.sub(r"[-_/]+", " ", name.lower())
    text = re.sub(r"\b(nvidia|tesla|tensor core gpu|gpu)\b", " ", text)
    return " ".join(text.split())


def match_reference(name: str | None) -> GpuReference | None:
    """The table entry for a GPU's product name or reference key, None for a model it does not know.

    Entries are tried in table order, so more specific parts (PCIe, NVL) come before the
    part that shares their family name.
    """
    if not name:
        return None
    if name in REFERENCES_BY_KEY:
        return REFERENCES_BY_KEY[name]
    normalised = normalise_name(name)
    for reference in REFERENCES:
        if any(re.search(pattern, normalised) for pattern in reference.patterns):
            return reference
    return None


# ---------------------------------------------------------------------------------------------
# The runner's output


@dataclasses.dataclass(frozen=True)
class Measurement:
    """One figure the runner measured (or could not) on one GPU, or on the whole host."""

    benchmark: str  # matmul, copy, resnet50, allreduce, dcgm
    metric: str  # matmul-bf16, memory-bandwidth, resnet50-training, nccl-allreduce, dcgm-diag
    gpu: int | None  # GPU index; None for host-wide figures (all-reduce, DCGM)
    status: str  # ok, skip, error: as the runner said
    value: float | None = None
    unit: str = ""
    reason: str = ""
    detail: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class RunnerOutput:
    """The runner's JSON document, with its figures as :class:`Measurement` values."""

    backend: str | None
    backend_version: str | None
    device_type: str  # cuda or cpu
    gpus: list[dict[str, Any]]
    measurements: list[Measurement]
    backends_passed_over: list[str]
    error: str | None
    document: dict[str, Any]

    def gpu_name(self, index: int | None) -> str | None:
        for gpu in self.gpus:
            if gpu.get("index") == index:
                return gpu.get("name")
        return None


_METRICS = {
    "matmul": ("TFLOP/s", "dense {dtype} matmul"),
    "copy": ("GB/s", "device memory bandwidth (copy, read + write)"),
    "resnet50": ("images/s", "ResNet-50 training throughput"),
    "allreduce": ("GB/s", "NCCL all-reduce bus bandwidth"),
    "dcgm": ("", "DCGM diagnostics"),
}


def metric_name(benchmark: str, dtype: str | None = None) -> str:
    return {
        "matmul": f"matmul-{dtype}",
        "copy": "memory-bandwidth",
        "resnet50": "resnet50-training",
        "allreduce": "nccl-allreduce",
        "dcgm": "dcgm-diag",
    }[benchmark]


def parse_runner_output(text: str | Mapping[str, Any]) -> RunnerOutput:
    """The runner's JSON document (as text or already decoded); raises BenchmarkError on anything else."""
    if isinstance(text, Mapping):
        document = dict(text)
    else:
        stripped = (text or "").strip()
        if not stripped:
            raise BenchmarkError("the benchmark runner printed nothing; expected one JSON document")
        try:
            document = json.loads(stripped)
        except ValueError as error:
            raise BenchmarkError(
                f"the benchmark runner did not print JSON ({error}); its output began with {stripped[:200]!r}"
            ) from error
    if not isinstance(document, dict) or document.get("format") != runner.FORMAT:
        raise BenchmarkError(f"the JSON printed is not a {runner.FORMAT} document (no 'format': '{runner.FORMAT}')")
    if document.get("version") != runner.FORMAT_VERSION:
        raise BenchmarkError(
            f"the runner's document is version {document.get('version')!r}; this reader knows {runner.FORMAT_VERSION}"
        )
    if document.get("error"):
        raise BenchmarkError(f"the benchmark runner could not start a backend: {document['error']}")
    backend = document.get("backend") or {}
    dtypes = [str(dtype) for dtype in (document.get("options") or {}).get("matmul_dtypes") or DEFAULT_MATMUL_DTYPES]
    measurements: list[Measurement] = []
    for name, result in (document.get("benchmarks") or {}).items():
        if name in BENCHMARKS and isinstance(result, Mapping):
            measurements.extend(_measurements(name, result, dtypes))
    return RunnerOutput(
        backend=backend.get("name"),
        backend_version=backend.get("version"),
        device_type=str(backend.get("device_type") or "cpu"),
        gpus=[dict(gpu) for gpu in document.get("gpus") or []],
        measurements=measurements,
        backends_passed_over=[str(item) for item in document.get("backends_passed_over") or []],
        error=document.get("error"),
        document=document,
    )


def _measurements(benchmark: str, result: Mapping[str, Any], dtypes: list[str]) -> list[Measurement]:
    unit = _METRICS[benchmark][0]
    status = str(result.get("status") or "error")
    reason = str(result.get("reason") or "")
    if status != "ok":
        metrics = (
            [metric_name(benchmark, dtype) for dtype in dtypes] if benchmark == "matmul" else [metric_name(benchmark)]
        )
        return [Measurement(benchmark, metric, None, status, unit=unit, reason=reason) for metric in metrics]
    if benchmark == "matmul":
        found = []
        for device in result.get("devices") or []:
            for dtype, figures in (device.get("dtypes") or {}).items():
                found.append(_device_measurement(benchmark, metric_name(benchmark, dtype), device, figures, "tflops"))
        return found
    if benchmark in ("copy", "resnet50"):
        key = "gbps" if benchmark == "copy" else "images_per_s"
        return [
            _device_measurement(benchmark, metric_name(benchmark), device, device, key)
            for device in result.get("devices") or []
        ]
    if benchmark == "allreduce":
        detail = {key: result.get(key) for key in ("backend", "ranks", "bytes", "algbw_gbps", "mean_ms")}
        return [
            Measurement(
                benchmark, metric_name(benchmark), None, "ok", as_number(result.get("busbw_gbps")), unit, detail=detail
            )
        ]
    detail = {key: result.get(key) for key in ("command", "exit_status", "level", "overall", "tests")}
    return [Measurement(benchmark, metric_name(benchmark), None, "ok", unit=unit, detail=detail)]


def _device_measurement(
    benchmark: str, metric: str, device: Mapping[str, Any], figures: Mapping[str, Any], key: str
) -> Measurement:
    status = str(figures.get("status") or "error")
    return Measurement(
        benchmark=benchmark,
        metric=metric,
        gpu=device.get("index"),
        status=status,
        value=as_number(figures.get(key)) if status == "ok" else None,
        unit=_METRICS[benchmark][0],
        reason=str(figures.get("reason") or ""),
        detail={k: v for k, v in figures.items() if k not in ("status", "reason", key)},
    )


def as_number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


# ---------------------------------------------------------------------------------------------
# Judging


@dataclasses.dataclass
class BenchmarkResult:
    """One measured figure, judged: what was measured, against what, and the verdict."""

    metric: str
    benchmark: str
    gpu: int | None
    gpu_name: str | None
    reference_model: str | None
    measured: float | None
    unit: str
    reference: float | None
    threshold_fraction: float | None
    threshold: float | None
    ratio: float | None
    status: str
    message: str
    in_practice: str | None = None  # what healthy GPUs of the model measure (IN_PRACTICE), e.g. "591.7-686.7"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class BenchmarkOutcome:
    """Everything judged on one host: per-figure results, one check per figure, the section."""

    host: str
    gpu_model: str | None
    reference: str | None
    results: list[BenchmarkResult]
    checks: list[Check]

    @property
    def failed(self) -> list[Check]:
        return [check for check in self.checks if check.status == "fail"]

    def table(self) -> Table:
        """Every figure, one row each; ``benchmark_verdicts`` reads the GPU, model, metric and value
        back from it (here and in a saved report.json) to compare GPUs and runs."""
        rows = [
            [
                "host" if result.gpu is None else result.gpu,
                (result.gpu_name if result.gpu is not None else self.gpu_model) or "unknown",
                result.metric,
                result.measured,
                result.unit,
                result.reference,
                result.in_practice,
                None if result.ratio is None else round(result.ratio, 3),
                result.threshold,
                result.status,
            ]
            for result in self.results
        ]
        return Table(
            id=f"{SECTION_ID_PREFIX}-{self.host}",
            title=f"Benchmark figures on {self.host}, against the reference for {self.gpu_model or 'an unknown model'}",
            columns=list(FIGURE_COLUMNS),
            rows=rows,
            row_status=[result.status for result in self.results],
        )

    def section_dict(self) -> dict[str, Any]:
        """The report section as data, the shape ``site_report`` accepts."""
        return {
            "id": f"{SECTION_ID_PREFIX}-{self.host}",
            "title": f"GPU benchmarks: {self.host}",
            "checks": [check.to_dict() for check in self.checks],
            "tables": [self.table().to_dict()] if self.results else [],
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "gpu_model": self.gpu_model,
            "reference": self.reference,
            "results": [result.to_dict() for result in self.results],
            "checks": [check.to_dict() for check in self.checks],
        }


def thresholds_with(overrides: Mapping[str, Any] | None) -> dict[str, float]:
    """The default fractions with the caller's overrides; raises ValueError on an unknown key or bad value."""
    chosen = dict(DEFAULT_THRESHOLDS)
    for key, value in (overrides or {}).items():
        if key not in DEFAULT_THRESHOLDS:
            raise ValueError(f"threshold for {key!r}: no such judged benchmark; choose from {', '.join(JUDGED)}")
        number = as_number(value)
        if number is None or not 0 < number <= 10:
            raise ValueError(
                f"threshold for {key!r} must be a fraction of the reference above 0 (e.g. 0.6), not {value!r}"
            )
        chosen[key] = number
    return chosen


_HINTS = {
    "matmul": (
        "Look at `nvidia-smi -q -d PERFORMANCE,CLOCK,POWER` for throttle reasons and power caps, and at other "
        "processes on the GPU (`nvidia-smi`)."
    ),
    "copy": (
        "Look at the memory clock (`nvidia-smi -q -d CLOCK`), at row remapping and ECC (`nvidia-smi -q -d "
        "ROW_REMAPPER,ECC`), and at other processes on the GPU."
    ),
    "resnet50": (
        "Look at this host's matmul and bandwidth results first; then at CPU load on the host and at the "
        "PyTorch and cuDNN versions in the runner's output."
    ),
    "allreduce": (
        "Look at `nvidia-smi topo -m` (NV# between every pair of GPUs), `nvidia-smi nvlink -s`, and on NVSwitch "
        "systems at the fabric manager (`systemctl status nvidia-fabricmanager`); NCCL_DEBUG=INFO shows the "
        "transport NCCL chose."
    ),
    "dcgm": "Read the failed tests' messages; `dcgmi diag -r 3` runs the longer diagnostics.",
}


def judge(
    output: RunnerOutput,
    host: str,
    thresholds: Mapping[str, Any] | None = None,
    gpu_model: str | None = None,
    host_gpu_names: Sequence[str] = (),
) -> BenchmarkOutcome:
    """Judge each measurement against the reference for its GPU's model, and make one check per figure.

    ``gpu_model`` overrides the model the runner saw (a product name or a reference key).
    ``host_gpu_names`` are the GPUs NVML or nvidia-smi found on the host: when the runner fell back
    to the CPU on a host that has GPUs, the benchmarks fail instead of being dry runs.
    """
    fractions = thresholds_with(thresholds)
    override = None
    if gpu_model:
        override = match_reference(gpu_model)
        if override is None:
            raise ValueError(
                f"gpu_model {gpu_model!r} matches no entry of the reference table; known: "
                + ", ".join(sorted(REFERENCES_BY_KEY))
            )
    names = [gpu.get("name") for gpu in output.gpus] or list(host_gpu_names)
    first_name = names[0] if names else None
    model_name = override.model if override else first_name
    host_reference = override or match_reference(first_name)

    results = [
        _judge_one(measurement, output, override, host_reference, fractions, list(host_gpu_names))
        for measurement in output.measurements
    ]
    return BenchmarkOutcome(
        host=host,
        gpu_model=model_name,
        reference=host_reference.key if host_reference else None,
        results=results,
        checks=_checks(host, results, output),
    )


def _judge_one(
    measurement: Measurement,
    output: RunnerOutput,
    override: GpuReference | None,
    host_reference: GpuReference | None,
    fractions: Mapping[str, float],
    host_gpu_names: list[str],
) -> BenchmarkResult:
    gpu_name = None
    if measurement.gpu is not None:
        gpu_name = output.gpu_name(measurement.gpu) if output.device_type == "cuda" else "CPU"
    if measurement.gpu is None:
        reference = host_reference
    else:
        reference = override or match_reference(gpu_name)
    dtype = measurement.metric.split("-", 1)[1] if measurement.benchmark == "matmul" else None
    what = _METRICS[measurement.benchmark][1].format(dtype=dtype)
    where = f"GPU {measurement.gpu}" if measurement.gpu is not None else "the host"
    result = BenchmarkResult(
        metric=measurement.metric,
        benchmark=measurement.benchmark,
        gpu=measurement.gpu,
        gpu_name=gpu_name,
        reference_model=reference.model if reference else None,
        measured=measurement.value,
        unit=measurement.unit,
        reference=None,
        threshold_fraction=None,
        threshold=None,
        ratio=None,
        status="skip",
        message="",
    )

    if measurement.status == "skip":
        result.message = f"{what}: not run: {measurement.reason}"
        if output.device_type != "cuda" and not host_gpu_names:
            result.status = "needs-hardware"
            result.message += "; the host has no NVIDIA GPU"
        return result
    if measurement.status != "ok":
        result.status = "fail"
        result.message = (
            f"{what} on {where} failed: {measurement.reason or 'no reason given'}. "
            "The runner's output (module result `runner`) holds the whole answer."
        )
        return result
    if output.device_type != "cuda":
        return _cpu_result(result, measurement, output, what, host_gpu_names)
    if measurement.benchmark == "dcgm":
        return _dcgm_result(result, measurement)
    if measurement.benchmark == "allreduce" and measurement.detail.get("backend") != "nccl":
        result.message = (
            f"{what}: measured {format_figure(measurement.value)} GB/s through {measurement.detail.get('backend')} "
            "(a test path, not NCCL); not judged"
        )
        return result
    shown = f"{format_figure(measurement.value)} {measurement.unit}"
    if reference is None:
        result.status = "warn"
        result.message = (
            f"{what} on {where}: measured {shown}, not judged: GPU model {gpu_name or 'unknown'!r} is not in the "
            "reference table (gpu_benchmark.REFERENCES). Add an entry with its datasheet figures, or set the "
            "module's gpu_model to the model it is."
        )
        return result
    figure = reference.figure(measurement.benchmark, dtype)
    practice = in_practice(reference.key, measurement.metric)
    result.in_practice = practice.span() if practice else None
    if figure is None:
        result.message = f"{what} on {where}: measured {shown}, not judged: {reference.model} has no reference for it"
        note = reference.source_of(measurement.benchmark)
        if note and measurement.benchmark in ("resnet50", "allreduce"):
            result.message += f" ({note})"
        result.message += _practice_note(practice, reference, measurement)
        return result
    fraction = fractions[measurement.benchmark]
    threshold = round(fraction * figure, 2)
    ratio = (measurement.value or 0.0) / figure
    result.reference, result.threshold_fraction, result.threshold, result.ratio = figure, fraction, threshold, ratio
    summary = (
        f"{what} on {where} ({gpu_name or reference.model}): measured {shown} = {ratio:.2f} x the "
        f"{format_figure(figure)} {measurement.unit} reference for {reference.model}; threshold {fraction:g} x = "
        f"{format_figure(threshold)} {measurement.unit} (the floor). "
        f"Reference: {reference.source_of(measurement.benchmark)}." + _practice_note(practice, reference, measurement)
    )
    if (measurement.value or 0.0) >= threshold:
        result.status = "pass"
        result.message = summary
    else:
        result.status = "fail"
        result.message = (
            f"expected {what} >= {format_figure(threshold)} {measurement.unit} on {where}, found {shown}. {summary} "
            + _HINTS[measurement.benchmark]
        )
    return result


def _practice_note(practice: InPractice | None, reference: GpuReference, measurement: Measurement) -> str:
    """What healthy GPUs of the model measure, and whether this figure is below it (said, not judged)."""
    if practice is None:
        return ""
    note = (
        f" In practice healthy {reference.model} GPUs measure {practice.span()} {measurement.unit} "
        f"({practice.basis}; {practice.source})."
    )
    if practice.low is not None and measurement.value is not None and measurement.value < practice.low:
        below = 100.0 * (1.0 - measurement.value / practice.low)
        note += (
            f" This figure is {below:.1f}% below the lowest of those: compare it with the same model's other GPUs "
            "and with the site's baseline (section gpu-benchmark-site)."
        )
    return note


def _cpu_result(
    result: BenchmarkResult, measurement: Measurement, output: RunnerOutput, what: str, host_gpu_names: list[str]
) -> BenchmarkResult:
    dry_run = (
        f"{what}: measured {format_figure(measurement.value)} {measurement.unit} on the CPU with the {output.backend} "
        "backend (a dry run, not a GPU figure)"
    )
    if host_gpu_names:
        result.status = "fail"
        passed_over = "; ".join(output.backends_passed_over) or "no reason recorded"
        result.message = (
            f"expected the benchmark to run on the host's {len(host_gpu_names)} GPU(s) ({host_gpu_names[0]}), but "
            f"the interpreter could use neither PyTorch nor CuPy with CUDA ({passed_over}). Install PyTorch with "
            "CUDA for that interpreter, or set the module's python option to one that has it. " + dry_run
        )
    else:
        result.status = "needs-hardware"
        result.message = dry_run + "; the host has no NVIDIA GPU, so nothing is judged"
    return result


def _dcgm_result(result: BenchmarkResult, measurement: Measurement) -> BenchmarkResult:
    detail = measurement.detail
    tests = detail.get("tests") or []
    failed = [test for test in tests if str(test.get("status", "")).lower() == "fail"]
    warned = [test for test in tests if str(test.get("status", "")).lower() == "warn"]
    ran = f"`{detail.get('command')}` ran {len(tests)} tests"
    if failed:
        result.status = "fail"
        listed = "; ".join(f"{test.get('name')}: {test.get('message') or 'failed'}" for test in failed)
        result.message = f"expected every DCGM diagnostic to pass, {len(failed)} failed: {listed}. " + _HINTS["dcgm"]
    elif not tests:
        result.status = "warn"
        result.message = f"`{detail.get('command')}` exited {detail.get('exit_status')} and reported no test results"
    elif warned:
        result.status = "warn"
        result.message = f"{ran}; none failed, warnings from " + ", ".join(str(test.get("name")) for test in warned)
    else:
        result.status = "pass"
        result.message = f"{ran}; none failed"
    return result


def _checks(host: str, results: list[BenchmarkResult], output: RunnerOutput) -> list[Check]:
    """One check per figure: the worst GPU decides, and the message names it."""
    grouped: dict[str, list[BenchmarkResult]] = {}
    for result in results:
        grouped.setdefault(result.metric, []).append(result)
    checks = []
    for metric, group in grouped.items():
        worst = max(group, key=lambda result: (_SEVERITY[result.status], -(result.ratio or 0.0)))
        measured = [result.measured for result in group if result.measured is not None]
        observed: Any = None
        if measured:
            observed = f"{format_figure(min(measured))} {worst.unit}".strip()
            if worst.ratio is not None:
                observed += f" ({worst.ratio:.2f} x reference)"
        message = worst.message
        others = [r for r in group if r is not worst and r.measured is not None]
        if others:
            message += (
                " Other GPUs: "
                + ", ".join(f"GPU {r.gpu} {format_figure(r.measured)} ({r.status})" for r in others)
                + "."
            )
        checks.append(
            Check(
                id=f"{SECTION_ID_PREFIX}/{host}/{metric}",
                title=f"{_title(worst)} on {host}",
                status=worst.status,
                expected=_expected(worst),
                observed=observed,
                message=message,
                duration_s=_duration(output, worst.benchmark),
            )
        )
    return checks


def _expected(result: BenchmarkResult) -> str | None:
    """The datasheet floor, and what healthy GPUs of the model measure in practice where known."""
    practice = f"in practice {result.in_practice} {result.unit}" if result.in_practice else None
    if result.threshold is None:
        return practice
    floor = f">= {format_figure(result.threshold)} {result.unit} (floor: {result.threshold_fraction:g} x datasheet)"
    return f"{floor}; {practice}" if practice else floor


def _title(result: BenchmarkResult) -> str:
    dtype = result.metric.split("-", 1)[1] if result.benchmark == "matmul" else None
    text = _METRICS[result.benchmark][1].format(dtype=dtype)
    return text[0].upper() + text[1:]


def _duration(output: RunnerOutput, benchmark: str) -> float | None:
    value = ((output.document.get("benchmarks") or {}).get(benchmark) or {}).get("duration_s")
    return as_number(value)


def format_figure(value: float | None) -> str:
    if value is None:
        return "-"
    if value != 0 and abs(value) < 0.01:
        return f"{value:.3g}"
    return f"{value:.1f}" if abs(value) >= 100 else f"{value:.2f}"


# ---------------------------------------------------------------------------------------------
# Outcomes where nothing was measured


def requested_metrics(benchmarks: Iterable[str], matmul_dtypes: Iterable[str]) -> list[tuple[str, str]]:
    """(benchmark, metric) for each figure the options ask for, in the runner's order."""
    chosen = list(benchmarks)
    metrics = []
    for benchmark in BENCHMARKS:
        if benchmark not in chosen:
            continue
        if benchmark == "matmul":
            metrics.extend((benchmark, metric_name(benchmark, dtype)) for dtype in matmul_dtypes)
        else:
            metrics.append((benchmark, metric_name(benchmark)))
    return metrics


def not_run(
    host: str,
    benchmarks: Iterable[str],
    matmul_dtypes: Iterable[str],
    status: str,
    reason: str,
    runner_failure: str | None = None,
) -> BenchmarkOutcome:
    """An outcome with nothing measured: check mode (skip), a simulated host (needs-hardware), or a
    runner that could not run (its own failed check, then every figure skipped)."""
    checks = []
    if runner_failure is not None:
        checks.append(
            Check(
                id=f"{SECTION_ID_PREFIX}/{host}/runner",
                title=f"The GPU benchmark runner ran on {host}",
                status="fail",
                expected="one JSON document from gpu_benchmark_runner.py",
                observed="none",
                message=runner_failure,
            )
        )
    for benchmark, metric in requested_metrics(benchmarks, matmul_dtypes):
        dtype = metric.split("-", 1)[1] if benchmark == "matmul" else None
        title = _METRICS[benchmark][1].format(dtype=dtype)
        checks.append(
            Check(
                id=f"{SECTION_ID_PREFIX}/{host}/{metric}",
                title=f"{title[0].upper() + title[1:]} on {host}",
                status=status,
                message=reason,
            )
        )
    return BenchmarkOutcome(host=host, gpu_model=None, reference=None, results=[], checks=checks)


# ---------------------------------------------------------------------------------------------
# Running the runner on the host


def runner_source() -> str:
    """The runner's source, also from inside a module's zipped payload (no file on disk there)."""
    try:
        return inspect.getsource(runner)
    except (OSError, TypeError):
        data = pkgutil.get_data(__package__ or "", "gpu_benchmark_runner.py")
        if not data:
            raise
        return data.decode("utf-8")


def runner_arguments(
    benchmarks: Sequence[str],
    backend: str = "auto",
    gpus: Sequence[int] = (),
    matmul_dtypes: Sequence[str] = DEFAULT_MATMUL_DTYPES,
    sizes: Mapping[str, Any] | None = None,
    dcgm_level: int = 1,
    allreduce_backend: str = "nccl",
    resnet50_precision: str = "fp16",
) -> list[str]:
    """The runner's command-line arguments; sizes left None take the runner's per-device defaults."""
    unknown = [name for name in benchmarks if name not in BENCHMARKS]
    if unknown:
        raise ValueError(f"unknown benchmark {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
    arguments = [
        "--benchmarks",
        ",".join(benchmarks),
        "--backend",
        backend,
        "--gpus",
        ",".join(str(gpu) for gpu in gpus) or "all",
        "--matmul-dtypes",
        ",".join(matmul_dtypes),
        "--dcgm-level",
        str(dcgm_level),
        "--allreduce-backend",
        allreduce_backend,
        "--resnet50-precision",
        resnet50_precision,
    ]
    for name, value in sorted((sizes or {}).items()):
        if name not in runner.DEFAULTS["cuda"]:
            raise ValueError(f"unknown size option {name!r}; choose from {', '.join(sorted(runner.DEFAULTS['cuda']))}")
        if value is not None:
            arguments += ["--" + name.replace("_", "-"), str(value)]
    return arguments


def run_runner(
    python: str,
    arguments: Sequence[str],
    timeout: float,
    workdir: str | None = None,
    execute: Callable[..., subprocess.CompletedProcess] = subprocess.run,
) -> tuple[RunnerOutput, str]:
    """Write the runner to a temporary file, run it with ``python``, and parse what it printed.

    Returns the parsed output and the runner's stderr (PyTorch's warnings land there). Raises
    BenchmarkError when the interpreter cannot be started, the runner times out, exits non-zero
    or prints something else than its JSON document.
    """
    with program.scratch_file("clusterproof_gpu_benchmark_", ".py", workdir, runner_source()) as path:
        completed = program.run_to_end(
            [python, path, *arguments],
            timeout=timeout,
            error=BenchmarkError,
            not_found=lambda error: (
                f"the interpreter {python!r} was not found on the host ({error}); set the module's python option "
                "to the interpreter that has PyTorch (e.g. /opt/conda/bin/python3)"
            ),
            not_started=lambda error: f"{python} could not be started: {error}",
            timed_out=lambda error: (
                f"the benchmark runner did not finish within {timeout:g} s; raise the module's timeout, or run "
                "fewer benchmarks or smaller sizes"
            ),
            execute=execute,
        )
        stderr = completed.stderr or ""
        if completed.returncode != 0:
            tail = " ".join(stderr.strip().splitlines()[-5:])[-800:]
            raise BenchmarkError(
                f"{python} {os.path.basename(path)} exited {completed.returncode}: {tail or 'no output'}"
            )
        return parse_runner_output(completed.stdout), stderr


# ---------------------------------------------------------------------------------------------
# The gpu_benchmark module's run

# How much of the runner's stderr a result carries.
STDERR_TAIL = 4000


class OptionsError(ValueError):
    """The module's options, refused; the message says which and why."""


def _checked_arguments(params: Mapping[str, Any]) -> list[str]:
    try:
        thresholds_with(params["thresholds"])
        if params["gpu_model"] and match_reference(params["gpu_model"]) is None:
            raise ValueError(
                f"gpu_model {params['gpu_model']!r} matches no reference; known: "
                + ", ".join(sorted(REFERENCES_BY_KEY))
            )
        return runner_arguments(
            params["benchmarks"],
            backend=params["backend"],
            gpus=params["gpus"],
            matmul_dtypes=params["matmul_dtypes"],
            sizes=params["sizes"],
            dcgm_level=params["dcgm_level"],
            resnet50_precision=params["resnet50_precision"],
        )
    except ValueError as error:
        raise OptionsError(f"invalid options: {error}") from error


def benchmark_host(params: Mapping[str, Any], check_mode: bool, workdir: str | None = None) -> dict[str, Any]:
    """What the gpu_benchmark module returns for its options: the runner run (unless the host is
    simulated, failed before, or this is check mode) and its figures judged."""
    host = params["host"] or platform.node()
    benchmarks, dtypes = params["benchmarks"], params["matmul_dtypes"]
    arguments = _checked_arguments(params)
    document, stderr = None, ""
    if params["failure"]:
        outcome = not_run(host, benchmarks, dtypes, "fail", params["failure"])
    elif not params["hardware"]:
        reason = f"{host} is a simulated host (hardware=false): GPU benchmarks need a real GPU host"
        outcome = not_run(host, benchmarks, dtypes, "needs-hardware", reason)
    elif check_mode:
        outcome = not_run(host, benchmarks, dtypes, "skip", "check mode: the benchmarks were not run")
    else:
        try:
            output, stderr = run_runner(params["python"], arguments, timeout=params["timeout"], workdir=workdir)
        except BenchmarkError as error:
            failure = f"the GPU benchmark runner failed on {host}: {error}"
            reason = "skipped: the benchmark runner produced no results"
            outcome = not_run(host, benchmarks, dtypes, "skip", reason, runner_failure=failure)
        else:
            document = output.document
            # NVML or nvidia-smi say whether the host has GPUs the runner should have used.
            facts = gather() if output.device_type != "cuda" else None
            names = [gpu.name or "unknown" for gpu in facts.gpus] if facts else []
            outcome = judge(output, host, params["thresholds"], gpu_model=params["gpu_model"], host_gpu_names=names)
    return {
        "checks": [check.to_dict() for check in outcome.checks],
        "results": [result.to_dict() for result in outcome.results],
        "failed_checks": len(outcome.failed),
        "section": outcome.section_dict(),
        "gpu_model": outcome.gpu_model,
        "reference": outcome.reference,
        "runner": document,
        "runner_stderr": stderr[-STDERR_TAIL:],
    }
