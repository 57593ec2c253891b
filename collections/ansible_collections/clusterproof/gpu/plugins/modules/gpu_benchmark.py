#!/usr/bin/python
"""Ansible module: benchmark a host's GPUs and judge the figures against the model's reference."""

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_benchmark
short_description: Benchmark the NVIDIA GPUs of a host against a reference for their model
version_added: 0.1.0
author:
  - clusterproof developers
description:
  - Runs the benchmark runner (C(gpu_benchmark_runner.py), shipped with this module) on the host with
    the interpreter O(python), and judges what it measured against the reference table for the GPU
    model (V100, A100, H100, H200, L40S and their variants; each figure cites its source).
  - Benchmarks are dense matrix products (bf16, fp16, fp32; tf32 and fp64 on request), device memory
    bandwidth (a device-to-device copy, bytes read plus written), ResNet-50 synthetic training
    throughput, NCCL all-reduce bus bandwidth across the host's GPUs (2 or more), and C(dcgmi diag)
    where DCGM is installed.
  - A figure passes when it is at least O(thresholds) times the reference (defaults matmul 0.5,
    copy 0.7, resnet50 0.5, allreduce 0.6), a floor. Each check also shows what healthy GPUs of the
    model measure in practice where a measurement is known (recorded, or published with its source).
    Stragglers and falls since a baseline run are judged across hosts, by the site_report's
    C(gpu-benchmark-site) section. A GPU model the table does not know gives warnings with
    the figures, not failures. Without PyTorch or CuPy on a host without GPUs, the runner falls back
    to NumPy or plain Python on the CPU and the checks say "needs hardware".
  - Failed checks do not fail the task; they are returned as C(checks) and as a report C(section)
    for the site_report module. The task fails only on invalid options.
  - The benchmarks load the GPUs fully for a minute or more; they change nothing on the host
    (C(changed) is always false). In check mode nothing runs and every check is a skip.
extends_documentation_fragment:
  - clusterproof.gpu.host_check
options:
  benchmarks:
    description: Which benchmarks to run.
    type: list
    elements: str
    choices: [matmul, copy, resnet50, allreduce, dcgm]
    default: [matmul, copy, resnet50, allreduce, dcgm]
  python:
    description:
      - The interpreter on the host that runs the runner; it needs PyTorch (and torchvision for
        ResNet-50), else CuPy, for GPU figures. Not necessarily the one Ansible uses.
    type: str
    default: python3
  backend:
    description: The runner's array library; V(auto) tries PyTorch, CuPy, NumPy, then plain Python.
    type: str
    choices: [auto, torch, cupy, numpy, python]
    default: auto
  gpus:
    description: GPU indexes to benchmark; empty means every GPU of the host.
    type: list
    elements: int
    default: []
  matmul_dtypes:
    description: Data types of the matrix products.
    type: list
    elements: str
    choices: [bf16, fp16, fp32, tf32, fp64]
    default: [bf16, fp16, fp32]
  sizes:
    description:
      - Sizes and iteration counts, by the runner's option names; any left out take the runner's
        defaults for the device (on a GPU, 8192^3 products, a 2 GiB copy buffer, ResNet-50 batch 128
        for 50 steps, a 1 GiB all-reduce).
    type: dict
    default: {}
    suboptions:
      matmul_size:
        description: Matrix side n of the n x n x n products.
        type: int
      matmul_iterations:
        description: Timed products per dtype.
        type: int
      matmul_warmup:
        description: Untimed products before timing.
        type: int
      copy_mib:
        description: Copy buffer size in MiB.
        type: int
      copy_iterations:
        description: Timed copies.
        type: int
      copy_warmup:
        description: Untimed copies before timing.
        type: int
      warmup_seconds:
        description: Least warm-up time in seconds per GPU figure, as clocks take a moment to ramp up.
        type: float
      resnet50_batch:
        description: ResNet-50 batch size.
        type: int
      resnet50_image_size:
        description: ResNet-50 image side in pixels.
        type: int
      resnet50_steps:
        description: Timed training steps.
        type: int
      resnet50_warmup:
        description: Untimed training steps before timing.
        type: int
      allreduce_mib:
        description: All-reduce buffer size in MiB.
        type: int
      allreduce_iterations:
        description: Timed all-reduces.
        type: int
      allreduce_warmup:
        description: Untimed all-reduces before timing.
        type: int
  resnet50_precision:
    description: Autocast type of the ResNet-50 training (fp16 with loss scaling, as the references).
    type: str
    choices: [fp16, bf16]
    default: fp16
  dcgm_level:
    description: The C(dcgmi diag -r) level; 1 takes seconds, 3 about half an hour.
    type: int
    choices: [1, 2, 3, 4]
    default: 1
  thresholds:
    description:
      - Fractions of the reference a figure must reach, per benchmark (V(matmul), V(copy),
        V(resnet50), V(allreduce)); those left out keep their defaults.
    type: dict
    default: {}
  gpu_model:
    description:
      - Judge against this model instead of the one the GPUs report; a product name such as
        V(NVIDIA H100 80GB HBM3) or a reference key such as V(h100-sxm5-80gb).
    type: str
  host:
    description: The host's name in check ids and the report section; defaults to the host's hostname.
    type: str
  failure:
    description:
      - Why the benchmarks cannot run on the host (it was unreachable, or the module failed there).
        Nothing runs; every requested benchmark is a failed check with this message. Run the task
        on another host (the report host) with this set.
  timeout:
    description: Seconds the runner may take in all.
    type: int
    default: 1800
requirements:
  - On the host, an interpreter with PyTorch and torchvision (or CuPy) for GPU figures; C(dcgmi) for DCGM.
"""

EXAMPLES = r"""
- name: Benchmark every GPU of the host and judge it against its model's reference
  clusterproof.gpu.gpu_benchmark:
    host: "{{ inventory_hostname }}"
  register: gpu_benchmark_result

- name: A quick look at one GPU, with the interpreter of a conda environment
  clusterproof.gpu.gpu_benchmark:
    python: /opt/conda/bin/python3
    benchmarks: [matmul, copy]
    gpus: [0]
    sizes:
      matmul_size: 4096
      matmul_iterations: 20

- name: A site whose GPUs run power-capped at 70 %
  clusterproof.gpu.gpu_benchmark:
    thresholds:
      matmul: 0.4
"""

RETURN = r"""
checks:
  description: One check per figure (the slowest GPU decides), in the report's check shape.
  returned: always
  type: list
  elements: dict
  sample:
    - id: gpu-benchmark/gpu-1/matmul-bf16
      title: Dense bf16 matmul on gpu-1
      status: pass
      expected: ">= 494.8 TFLOP/s (floor: 0.5 x datasheet); in practice 591.7-686.7 TFLOP/s"
      observed: "602.1 TFLOP/s (0.61 x reference)"
      message: "dense bf16 matmul on GPU 0 (NVIDIA H100 80GB HBM3): measured 602.1 TFLOP/s = 0.61 x ..."
      duration_s: 4.2
results:
  description:
    - Every figure judged, per GPU - C(metric), C(gpu), C(gpu_name), C(measured), C(unit),
      C(reference), C(reference_model), C(threshold_fraction), C(threshold), C(ratio), C(status), C(message),
      C(in_practice) (what healthy GPUs of the model measure, e.g. C(591.7-686.7); null where none is known).
  returned: always
  type: list
  elements: dict
failed_checks:
  description: How many checks failed.
  returned: always
  type: int
section:
  description: The report section (id C(gpu-benchmark-<host>)) for clusterproof_report_sections.
  returned: always
  type: dict
gpu_model:
  description: The GPU model judged against (the first GPU's name, or O(gpu_model)); null when nothing ran.
  returned: always
  type: str
  sample: NVIDIA H100 80GB HBM3
reference:
  description: The key of the reference table entry used; null for an unknown model or when nothing ran.
  returned: always
  type: str
  sample: h100-sxm5-80gb
runner:
  description: The runner's whole JSON document (backend, GPUs, options, every figure); null when it did not run.
  returned: always
  type: dict
runner_stderr:
  description: The last lines the runner wrote on stderr (framework warnings), for diagnosis.
  returned: always
  type: str
"""

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.node import gpu_benchmark

SIZE_OPTIONS = {
    name: {"type": "float" if name == "warmup_seconds" else "int"}
    for name in gpu_benchmark.runner.DEFAULTS["cuda"]  # the runner's own list of size options
}

ARGUMENT_SPEC = {
    "benchmarks": {
        "type": "list",
        "elements": "str",
        "choices": list(gpu_benchmark.BENCHMARKS),
        "default": list(gpu_benchmark.BENCHMARKS),
    },
    "python": {"type": "str", "default": "python3"},
    "backend": {"type": "str", "choices": ["auto", "torch", "cupy", "numpy", "python"], "default": "auto"},
    "gpus": {"type": "list", "elements": "int", "default": []},
    "matmul_dtypes": {
        "type": "list",
        "elements": "str",
        "choices": list(gpu_benchmark.MATMUL_DTYPES),
        "default": list(gpu_benchmark.DEFAULT_MATMUL_DTYPES),
    },
    "sizes": {"type": "dict", "default": {}, "options": SIZE_OPTIONS},
    "resnet50_precision": {"type": "str", "choices": ["fp16", "bf16"], "default": "fp16"},
    "dcgm_level": {"type": "int", "choices": [1, 2, 3, 4], "default": 1},
    "thresholds": {"type": "dict", "default": {}},
    "gpu_model": {"type": "str"},
    "host": {"type": "str"},
    "timeout": {"type": "int", "default": 1800},
}


def main() -> None:
    runner.run_host_check(
        ARGUMENT_SPEC,
        gpu_benchmark.benchmark_host,
        doing="benchmarking the host's GPUs",
        expected=(gpu_benchmark.OptionsError,),
    )


if __name__ == "__main__":
    main()
