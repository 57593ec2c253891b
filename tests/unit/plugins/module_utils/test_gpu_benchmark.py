"""gpu_benchmark: the reference table and its matcher on real GPU names, the threshold logic, the
runner's JSON as recorded on a real H100 (tests/unit/fixtures/gpu/BENCHMARK.md says how), and the
runner itself, run for real on this CPU with tiny sizes (plain Python, and NumPy where installed)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.node import gpu_benchmark_runner as runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.node.gpu_benchmark import (
    DEFAULT_THRESHOLDS,
    FIGURE_COLUMNS,
    IN_PRACTICE,
    REFERENCES,
    REFERENCES_BY_KEY,
    BenchmarkError,
    in_practice,
    judge,
    match_reference,
    normalise_name,
    not_run,
    parse_runner_output,
    run_runner,
    runner_arguments,
    runner_source,
    thresholds_with,
)
from ansible_collections.clusterproof.gpu.plugins.module_utils.node.gpu_facts import parse_nvidia_smi_xml
from ansible_collections.clusterproof.gpu.plugins.module_utils.report.model import Report, section_from_dict
from ansible_collections.clusterproof.gpu.plugins.module_utils.report.render import to_html, to_junit_xml
from tests.conftest import run_module_file
from tests.unit.plugins.module_utils.helpers import H100_XML, gpu_fixture

COLLECTIONS = Path(__file__).resolve().parents[4] / "collections"
RUNNER = Path(runner.__file__)
MODULE = COLLECTIONS / "ansible_collections/clusterproof/gpu/plugins/modules/gpu_benchmark.py"
H100_NAME = "NVIDIA H100 80GB HBM3"


def _statuses(outcome) -> dict[str, str]:
    return {check.id.rsplit("/", 1)[1]: check.status for check in outcome.checks}


# ---------------------------------------------------------------------------------------------
# The reference table and the matcher


@pytest.mark.parametrize(
    ("name", "key"),
    [
        # NVML / nvidia-smi product names.
        (H100_NAME, "h100-sxm5-80gb"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA H100 NVL", "h100-nvl"),
        ("NVIDIA H200", "h200-sxm-141gb"),
        ("NVIDIA H200 NVL", "h200-nvl"),
        ("NVIDIA A100-SXM4-80GB", "a100-sxm4-80gb"),
        ("NVIDIA A100-SXM4-40GB", "a100-sxm4-40gb"),
        ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb"),
        ("NVIDIA A100-PCIE-40GB", "a100-pcie-40gb"),
        ("Tesla V100-SXM2-32GB", "v100-sxm2-32gb"),
        ("Tesla V100-SXM2-16GB", "v100-sxm2-16gb"),
        ("Tesla V100-PCIE-32GB", "v100-pcie"),
        ("NVIDIA L40S", "l40s"),
        # The label form GPU feature discovery writes, as the sandbox inventory declares it.
        ("Tesla-V100-SXM2-32GB", "v100-sxm2-32gb"),
        ("NVIDIA-H100-80GB-HBM3", "h100-sxm5-80gb"),
        # How people write them.
        ("H100 SXM5 80GB", "h100-sxm5-80gb"),
        ("nvidia h200 sxm 141gb", "h200-sxm-141gb"),
        # A reference key stands for itself.
        ("l40s", "l40s"),
        ("v100-pcie", "v100-pcie"),
    ],
)
def test_product_names_match_their_reference(name, key):
    reference = match_reference(name)

    assert reference is not None, name
    assert reference.key == key


@pytest.mark.parametrize(
    "name",
    ["NVIDIA L40", "Tesla V100S-PCIE-32GB", "NVIDIA GeForce RTX 4090", "NVIDIA GH200 480GB", "A1000", "", None],
)
def test_models_not_in_the_table_match_nothing(name):
    assert match_reference(name) is None


def test_the_recorded_h100_is_matched_from_nvidia_smi_and_from_the_runner():
    from_smi = parse_nvidia_smi_xml(H100_XML).gpus[0].name
    from_runner = json.loads(gpu_fixture("benchmark-h100.json"))["gpus"][0]["name"]

    assert from_smi == from_runner == H100_NAME
    assert match_reference(from_smi).key == "h100-sxm5-80gb"


def test_normalise_name_drops_vendor_words_and_separators():
    assert normalise_name("Tesla V100-SXM2-32GB") == "v100 sxm2 32gb"
    assert normalise_name("NVIDIA-H100-80GB-HBM3") == "h100 80gb hbm3"


def test_every_entry_is_matched_by_its_own_model_name_and_cites_a_source_per_figure():
    assert len(REFERENCES_BY_KEY) == len(REFERENCES)
    for reference in REFERENCES:
        assert match_reference(reference.model) is reference, reference.model
        for figure in ("compute", "memory", "resnet50", "allreduce"):
            assert reference.source.get(figure), f"{reference.key}: no source for {figure}"
        assert set(reference.matmul_tflops) == set(runner.DTYPES)
        assert reference.memory_bandwidth_gbps > 0
        assert json.loads(json.dumps(reference.to_dict()))["key"] == reference.key


def test_the_table_holds_dense_figures_not_the_sparse_ones():
    h100 = REFERENCES_BY_KEY["h100-sxm5-80gb"]
    # The H100 datasheet: BF16/FP16 1,979 and TF32 989 TFLOPS "with sparsity".
    assert h100.matmul_tflops["bf16"] == pytest.approx(1979 / 2)
    assert h100.matmul_tflops["tf32"] == pytest.approx(989 / 2)
    assert h100.matmul_tflops["fp32"] == 67.0
    assert h100.memory_bandwidth_gbps == 3350.0
    assert h100.allreduce_busbw_gbps == 450.0  # 900 GB/s NVLink, 450 each way
    a100 = REFERENCES_BY_KEY["a100-sxm4-80gb"]
    assert (a100.matmul_tflops["bf16"], a100.matmul_tflops["tf32"]) == (312.0, 156.0)
    v100 = REFERENCES_BY_KEY["v100-sxm2-32gb"]
    assert v100.matmul_tflops["bf16"] is None  # Volta has no bf16 tensor cores
    assert v100.resnet50_images_per_s == 1156.0
    assert REFERENCES_BY_KEY["l40s"].allreduce_busbw_gbps is None  # no NVLink


# ---------------------------------------------------------------------------------------------
# Threshold logic, on runner documents written here


def _document(
    names: list[str] | None = None,
    *,
    matmul: dict[str, Any] | None = None,
    copy_gbps: list[float] | None = None,
    resnet50: list[float] | None = None,
    allreduce: dict[str, Any] | None = None,
    dcgm: dict[str, Any] | None = None,
    device_type: str = "cuda",
    backend: str = "torch",
) -> dict[str, Any]:
    """A runner document as the runner writes it, with the figures given."""
    names = [H100_NAME] if names is None else names
    indexes = list(range(len(names))) or [0]
    benchmarks: dict[str, Any] = {}
    if matmul is not None:
        benchmarks["matmul"] = {
            "status": "ok",
            "devices": [
                {
                    "index": index,
                    "dtypes": {
                        dtype: {"status": "ok", "tflops": values[index] if isinstance(values, list) else values}
                        for dtype, values in matmul.items()
                    },
                }
                for index in indexes
            ],
        }
    if copy_gbps is not None:
        benchmarks["copy"] = {
            "status": "ok",
            "devices": [
                {"index": i, "status": "ok", "gbps": value} for i, value in zip(indexes, copy_gbps, strict=True)
            ],
        }
    if resnet50 is not None:
        benchmarks["resnet50"] = {
            "status": "ok",
            "devices": [
                {"index": i, "status": "ok", "images_per_s": value} for i, value in zip(indexes, resnet50, strict=True)
            ],
        }
    if allreduce is not None:
        benchmarks["allreduce"] = allreduce
    if dcgm is not None:
        benchmarks["dcgm"] = dcgm
    return {
        "format": runner.FORMAT,
        "version": runner.FORMAT_VERSION,
        "backend": {"name": backend, "version": "x", "device_type": device_type},
        "backends_passed_over": [] if backend == "torch" else ["torch: ModuleNotFoundError: No module named 'torch'"],
        "gpus": [{"index": i, "name": name} for i, name in enumerate(names)] if device_type == "cuda" else [],
        "options": {"matmul_dtypes": list(matmul or [])},
        "benchmarks": benchmarks,
    }


def _judge(document: dict[str, Any], **kwargs: Any):
    return judge(parse_runner_output(document), "gpu-1", **kwargs)


def test_a_figure_at_the_threshold_passes_and_just_under_it_fails():
    at = 0.5 * 989.5
    outcome = _judge(_document(matmul={"bf16": at, "fp16": at - 0.1}, copy_gbps=[0.7 * 3350.0]))

    assert _statuses(outcome) == {"matmul-bf16": "pass", "matmul-fp16": "fail", "memory-bandwidth": "pass"}
    failed = outcome.checks[1]
    assert failed.id == "gpu-benchmark/gpu-1/matmul-fp16"
    # The datasheet floor decides; what healthy H100s measure in practice stands beside it.
    assert failed.expected == ">= 494.8 TFLOP/s (floor: 0.5 x datasheet); in practice 557.3-662.8 TFLOP/s"
    assert failed.observed == "494.6 TFLOP/s (0.50 x reference)"
    assert "In practice healthy NVIDIA H100 SXM5 80GB GPUs measure 557.3-662.8 TFLOP/s" in failed.message
    assert "11.2% below the lowest of those" in failed.message
    # What was expected, what was found, and where to look.
    assert failed.message.startswith("expected dense fp16 matmul >= 494.8 TFLOP/s on GPU 0, found 494.6 TFLOP/s.")
    assert "NVIDIA H100 Tensor Core GPU datasheet" in failed.message
    assert "nvidia-smi -q -d PERFORMANCE,CLOCK,POWER" in failed.message
    result = outcome.results[1]
    assert (result.reference, result.threshold_fraction, result.threshold) == (989.5, 0.5, 494.75)
    assert result.ratio == pytest.approx((at - 0.1) / 989.5)


def test_the_floor_still_fails_a_gpu_at_045_of_the_datasheet():
    outcome = _judge(_document(matmul={"bf16": 0.45 * 989.5}, copy_gbps=[0.45 * 3350.0]))

    assert _statuses(outcome) == {"matmul-bf16": "fail", "memory-bandwidth": "fail"}
    assert outcome.checks[0].observed == "445.3 TFLOP/s (0.45 x reference)"
    assert "24.7% below the lowest of those" in outcome.checks[0].message  # 445.3 against 591.7 recorded


def test_in_practice_figures_cite_a_measurement_and_stay_above_the_floor():
    for key, figures in IN_PRACTICE.items():
        reference = REFERENCES_BY_KEY[key]
        for metric, practice in figures.items():
            assert practice.source and practice.basis, (key, metric)
            assert "recorded" in practice.source or "github.com/stas00/ml-engineering" in practice.source
            benchmark = {"memory-bandwidth": "copy", "resnet50-training": "resnet50"}.get(metric, "matmul")
            figure = reference.figure(benchmark, metric.split("-", 1)[1] if benchmark == "matmul" else None)
            if figure is not None:
                # Measured figures sit between the floor and the datasheet: a healthy GPU passes the floor.
                assert DEFAULT_THRESHOLDS[benchmark] * figure < (practice.low or practice.high) <= figure
    assert in_practice("h100-sxm5-80gb", "matmul-bf16").span() == "591.7-686.7"
    assert in_practice("a100-sxm4-80gb", "matmul-bf16").span() == "up to 271.2"
    assert in_practice("l40s", "matmul-bf16") is None  # nothing measured known: left out, not invented
    assert in_practice(None, "matmul-bf16") is None


def test_default_fractions_and_overrides():
    assert DEFAULT_THRESHOLDS == {"matmul": 0.5, "copy": 0.7, "resnet50": 0.5, "allreduce": 0.6}
    assert thresholds_with({"matmul": "0.4"})["matmul"] == 0.4
    with pytest.raises(ValueError, match="no such judged benchmark"):
        thresholds_with({"dcgm": 0.5})
    with pytest.raises(ValueError, match="above 0"):
        thresholds_with({"copy": 0})

    document = _document(matmul={"bf16": 450.0})
    assert _statuses(_judge(document)) == {"matmul-bf16": "fail"}
    assert _statuses(_judge(document, thresholds={"matmul": 0.45})) == {"matmul-bf16": "pass"}


def test_an_unknown_model_is_a_warning_with_the_figure_not_a_failure():
    outcome = _judge(_document(["NVIDIA GeForce RTX 4090"], matmul={"bf16": 150.0}, copy_gbps=[900.0]))

    assert _statuses(outcome) == {"matmul-bf16": "warn", "memory-bandwidth": "warn"}
    assert outcome.reference is None
    assert outcome.gpu_model == "NVIDIA GeForce RTX 4090"
    assert "'NVIDIA GeForce RTX 4090' is not in the reference table" in outcome.checks[0].message
    assert outcome.checks[0].observed == "150.0 TFLOP/s"


def test_gpu_model_override_judges_against_the_named_model():
    document = _document(["NVIDIA Graphics Device"], matmul={"fp16": 100.0})

    outcome = _judge(document, gpu_model="Tesla V100-SXM2-32GB")

    assert outcome.reference == "v100-sxm2-32gb"
    assert _statuses(outcome) == {"matmul-fp16": "pass"}  # 100 >= 0.5 x 125
    with pytest.raises(ValueError, match="matches no entry"):
        _judge(document, gpu_model="Voodoo 2")


def test_a_figure_the_model_has_no_reference_for_is_skipped_with_the_measurement():
    outcome = _judge(_document(["Tesla V100-SXM2-32GB"], matmul={"bf16": 30.0, "fp16": 100.0}, resnet50=[1000.0]))

    assert _statuses(outcome) == {"matmul-bf16": "skip", "matmul-fp16": "pass", "resnet50-training": "pass"}
    assert "NVIDIA Tesla V100 SXM2 32GB has no reference for it" in outcome.checks[0].message
    assert outcome.results[2].reference == 1156.0  # DeepLearningExamples, DGX-1 32GB, 1 GPU, AMP


def test_the_slowest_gpu_decides_and_the_others_are_named():
    names = [H100_NAME] * 4
    outcome = _judge(_document(names, matmul={"bf16": [700.0, 690.0, 300.0, 710.0]}))

    (check,) = outcome.checks
    assert check.status == "fail"
    assert "on GPU 2" in check.message
    assert "Other GPUs: GPU 0 700.0 (pass), GPU 1 690.0 (pass), GPU 3 710.0 (pass)." in check.message
    assert check.observed == "300.0 TFLOP/s (0.30 x reference)"
    assert [result.status for result in outcome.results] == ["pass", "pass", "fail", "pass"]


def test_a_benchmark_that_crashed_on_a_gpu_host_fails():
    document = _document(matmul={"bf16": 700.0})
    document["benchmarks"]["matmul"]["devices"][0]["dtypes"]["bf16"] = {
        "status": "error",
        "reason": "OutOfMemoryError: CUDA out of memory",
    }
    document["benchmarks"]["resnet50"] = {"status": "error", "reason": "ImportError: torchvision"}

    outcome = _judge(document)

    assert _statuses(outcome) == {"matmul-bf16": "fail", "resnet50-training": "fail"}
    assert "CUDA out of memory" in outcome.checks[0].message


def test_skips_keep_the_runners_reason():
    document = _document(
        allreduce={"status": "skip", "reason": "needs >= 2 GPUs; found 1"},
        dcgm={"status": "skip", "reason": "dcgmi not found on PATH (DCGM is not installed)"},
    )

    outcome = _judge(document)

    assert _statuses(outcome) == {"nccl-allreduce": "skip", "dcgm-diag": "skip"}
    assert outcome.checks[0].message == "NCCL all-reduce bus bandwidth: not run: needs >= 2 GPUs; found 1"


def test_nccl_bus_bandwidth_is_judged_against_nvlink_and_gloo_is_not_judged():
    nccl = {"status": "ok", "backend": "nccl", "ranks": 8, "busbw_gbps": 380.0}
    gloo = {"status": "ok", "backend": "gloo", "ranks": 2, "busbw_gbps": 1.3}
    slow = dict(nccl, busbw_gbps=25.0)  # what PCIe gives when NVLink is down

    assert _statuses(_judge(_document([H100_NAME] * 8, allreduce=nccl))) == {"nccl-allreduce": "pass"}
    failed = _judge(_document([H100_NAME] * 8, allreduce=slow)).checks[0]
    assert failed.status == "fail"
    assert "nvidia-smi topo -m" in failed.message
    assert _statuses(_judge(_document([H100_NAME] * 2, allreduce=gloo))) == {"nccl-allreduce": "skip"}
    assert _statuses(_judge(_document(["NVIDIA L40S"] * 4, allreduce=nccl))) == {"nccl-allreduce": "skip"}


def test_dcgm_results():
    def dcgm(*statuses: str) -> dict[str, Any]:
        tests = [
            {"category": "Hardware", "name": f"test {i}", "status": s, "message": "m"} for i, s in enumerate(statuses)
        ]
        return {"status": "ok", "command": "dcgmi diag -r 1 -j", "exit_status": 0, "tests": tests}

    assert _statuses(_judge(_document(dcgm=dcgm("Pass", "Pass", "Skip")))) == {"dcgm-diag": "pass"}
    assert _statuses(_judge(_document(dcgm=dcgm("Pass", "Warn")))) == {"dcgm-diag": "warn"}
    assert _statuses(_judge(_document(dcgm=dcgm())))["dcgm-diag"] == "warn"
    failed = _judge(_document(dcgm=dcgm("Pass", "Fail"))).checks[0]
    assert failed.status == "fail"
    assert "1 failed: test 1: m" in failed.message


def test_dcgmi_json_of_dcgm_3_and_4_is_read():
    def document(root: str) -> dict[str, Any]:
        return {
            root: {
                "test_categories": [
                    {
                        "category": "Deployment",
                        "tests": [{"name": "Denylist", "results": [{"status": "Pass"}]}],
                    },
                    {
                        "category": "Hardware",
                        "tests": [
                            {
                                "name": "GPU Memory",
                                "results": [
                                    {"gpu_id": "0", "status": "Pass"},
                                    {"gpu_id": "1", "status": "Fail", "warnings": "ECC errors"},
                                ],
                            },
                            {"name": "Diagnostic", "results": [{"status": "Skip"}]},
                        ],
                    },
                ]
            }
        }

    for root in ("DCGM GPU Diagnostic", "DCGM Diagnostic"):
        tests = runner.dcgm_tests(document(root))
        assert [(test["name"], test["status"]) for test in tests] == [
            ("Denylist", "Pass"),
            ("GPU Memory", "Fail"),
            ("Diagnostic", "Skip"),
        ]
        assert tests[1]["message"] == "ECC errors"


def test_cpu_dry_runs_need_hardware_but_a_gpu_host_without_torch_fails():
    document = _document([], matmul={"fp64": 1e-5}, copy_gbps=[50.0], device_type="cpu", backend="python")
    document["benchmarks"]["resnet50"] = {"status": "skip", "reason": "needs PyTorch and torchvision"}

    dry = _judge(document)
    assert set(_statuses(dry).values()) == {"needs-hardware"}
    assert "on the CPU with the python backend (a dry run" in dry.checks[0].message

    broken = _judge(document, host_gpu_names=[H100_NAME])
    assert _statuses(broken) == {"matmul-fp64": "fail", "memory-bandwidth": "fail", "resnet50-training": "skip"}
    assert "could use neither PyTorch nor CuPy with CUDA (torch: ModuleNotFoundError" in broken.checks[0].message


def test_outcomes_with_nothing_measured():
    checked = not_run("gpu-1", ["matmul", "dcgm"], ["bf16", "fp32"], "skip", "check mode: the benchmarks were not run")
    assert [(c.id, c.status) for c in checked.checks] == [
        ("gpu-benchmark/gpu-1/matmul-bf16", "skip"),
        ("gpu-benchmark/gpu-1/matmul-fp32", "skip"),
        ("gpu-benchmark/gpu-1/dcgm-diag", "skip"),
    ]
    broken = not_run("gpu-1", ["copy"], [], "skip", "skipped", runner_failure="python3 not found")
    assert [(c.id, c.status) for c in broken.checks] == [
        ("gpu-benchmark/gpu-1/runner", "fail"),
        ("gpu-benchmark/gpu-1/memory-bandwidth", "skip"),
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "printed nothing"),
        ("Traceback (most recent call last):", "did not print JSON"),
        ('{"format": "something-else"}', "not a clusterproof-gpu-benchmark document"),
        ('{"format": "clusterproof-gpu-benchmark", "version": 99}', "version 99"),
        (
            '{"format": "clusterproof-gpu-benchmark", "version": 1, "error": "RuntimeError: no backend"}',
            "could not start a backend",
        ),
    ],
)
def test_output_that_is_not_the_runners_document_is_an_error(text, expected):
    with pytest.raises(BenchmarkError, match=expected):
        parse_runner_output(text)


# ---------------------------------------------------------------------------------------------
# What the runner printed on a real H100


def test_recorded_h100_run_parses_to_its_figures():
    output = parse_runner_output(gpu_fixture("benchmark-h100.json"))

    assert (output.backend, output.device_type) == ("torch", "cuda")
    assert output.backend_version == "2.11.0+cu130"
    assert [gpu["name"] for gpu in output.gpus] == [H100_NAME]
    figures = {m.metric: (m.status, m.value, m.unit) for m in output.measurements}
    assert figures == {
        "matmul-bf16": ("ok", 602.14, "TFLOP/s"),
        "matmul-fp16": ("ok", 557.31, "TFLOP/s"),
        "matmul-fp32": ("ok", 51.66, "TFLOP/s"),
        "memory-bandwidth": ("ok", 3025.0, "GB/s"),
        "resnet50-training": ("ok", 4062.2, "images/s"),
        "nccl-allreduce": ("skip", None, "GB/s"),
        "dcgm-diag": ("skip", None, ""),
    }
    reasons = {m.metric: m.reason for m in output.measurements if m.status == "skip"}
    assert reasons["nccl-allreduce"] == "needs >= 2 GPUs; found 1"
    assert reasons["dcgm-diag"] == "dcgmi not found on PATH (DCGM is not installed)"


def test_recorded_h100_run_is_judged_as_recorded():
    names = [gpu.name for gpu in parse_nvidia_smi_xml(H100_XML).gpus]
    outcome = judge(parse_runner_output(gpu_fixture("benchmark-h100.json")), "h100-device", host_gpu_names=names)

    assert outcome.reference == "h100-sxm5-80gb"
    assert _statuses(outcome) == {
        "matmul-bf16": "pass",
        "matmul-fp16": "pass",
        "matmul-fp32": "pass",
        "memory-bandwidth": "pass",
        "resnet50-training": "skip",  # no published H100 figure to compare with
        "nccl-allreduce": "skip",  # one GPU
        "dcgm-diag": "skip",  # no DCGM on the device machine
    }
    ratios = {result.metric: round(result.ratio, 2) for result in outcome.results if result.ratio is not None}
    assert ratios == {"matmul-bf16": 0.61, "matmul-fp16": 0.56, "matmul-fp32": 0.77, "memory-bandwidth": 0.9}
    recorded = json.loads(gpu_fixture("benchmark-h100-judged.json"))
    assert recorded["matched_reference"] == "h100-sxm5-80gb"
    assert recorded["checks"] == [check.to_dict() for check in outcome.checks]
    assert recorded["section"] == outcome.section_dict()


def test_other_recorded_runs_parse():
    cupy = parse_runner_output(gpu_fixture("benchmark-h100-cupy.json"))
    assert cupy.backend == "cupy"
    assert {m.metric: m.status for m in cupy.measurements} == {
        "matmul-bf16": "skip",
        "matmul-fp16": "ok",
        "matmul-fp32": "ok",
        "matmul-fp64": "ok",
        "memory-bandwidth": "ok",
    }
    torch_cpu = parse_runner_output(gpu_fixture("benchmark-torch-cpu.json"))
    assert (torch_cpu.backend, torch_cpu.device_type) == ("torch", "cpu")
    allreduce = next(m for m in torch_cpu.measurements if m.metric == "nccl-allreduce")
    assert allreduce.status == "ok"
    assert allreduce.detail["backend"] == "gloo"
    assert allreduce.detail["ranks"] == 2
    assert set(_statuses(judge(torch_cpu, "cpu")).values()) == {"needs-hardware"}
    numpy_cpu = parse_runner_output(gpu_fixture("benchmark-numpy-cpu.json"))
    assert numpy_cpu.backend == "numpy"


def test_recorded_module_run_on_the_h100():
    result = json.loads(gpu_fixture("module-run-benchmark-h100.json"))

    assert result["changed"] is False
    assert result["reference"] == "h100-sxm5-80gb"
    assert result["gpu_model"] == H100_NAME
    assert [check["id"].rsplit("/", 1)[1] for check in result["checks"]] == [
        "matmul-bf16",
        "matmul-fp16",
        "matmul-fp32",
        "memory-bandwidth",
        "nccl-allreduce",
        "dcgm-diag",
    ]
    # Re-judged with today's thresholds, the module's own runner output gives the same figures.
    output = parse_runner_output(result["runner"])
    measured = {r["metric"]: r["measured"] for r in result["results"]}
    assert {m.metric: m.value for m in output.measurements} == measured


def test_a_section_goes_into_the_site_report():
    outcome = judge(parse_runner_output(gpu_fixture("benchmark-h100.json")), "h100-device")

    section = section_from_dict(json.loads(json.dumps(outcome.section_dict())))
    report = Report(site="s", cluster_mode="existing", started="", finished="", sections=[section])

    assert section.id == "gpu-benchmark-h100-device"
    assert section.tables[0].columns == list(FIGURE_COLUMNS)
    assert section.tables[0].rows[0][:4] == [0, H100_NAME, "matmul-bf16", 602.14]
    assert section.tables[0].rows[0][6] == "591.7-686.7"
    assert report.verdict == "pass"
    assert "gpu-benchmark/h100-device/memory-bandwidth" in to_html(report)
    assert 'name="GPU benchmarks: h100-device"' in to_junit_xml(report)


# ---------------------------------------------------------------------------------------------
# The runner, for real, on this CPU


def _run_runner_process(*arguments: str) -> dict[str, Any]:
    completed = subprocess.run(
        [sys.executable, str(RUNNER), *arguments], capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(completed.stdout)


def test_runner_on_the_cpu_in_plain_python():
    document = _run_runner_process(
        "--backend", "python", "--matmul-dtypes", "fp64,fp32", "--matmul-size", "8", "--copy-mib", "1"
    )

    assert document["backend"]["name"] == "python"
    assert document["gpus"] == []
    matmul = document["benchmarks"]["matmul"]
    assert matmul["size"] == 8
    assert matmul["flop_per_product"] == 2 * 8**3
    dtypes = matmul["devices"][0]["dtypes"]
    assert dtypes["fp64"]["status"] == "ok"
    assert dtypes["fp64"]["tflops"] > 0
    assert dtypes["fp32"] == {
        "status": "skip",
        "reason": "the pure-Python backend multiplies in Python floats (fp64) only, not fp32",
    }
    copy_result = document["benchmarks"]["copy"]
    assert copy_result["bytes_per_copy"] == 2 * 1024 * 1024  # read + written
    assert copy_result["devices"][0]["gbps"] > 0
    assert document["benchmarks"]["resnet50"]["status"] == "skip"
    assert document["benchmarks"]["allreduce"]["status"] == "skip"
    assert document["benchmarks"]["dcgm"]["status"] == "skip"
    outcome = judge(parse_runner_output(document), "cpu-host")
    assert set(_statuses(outcome).values()) == {"needs-hardware"}


def test_runner_on_the_cpu_with_numpy():
    pytest.importorskip("numpy", reason="NumPy is not installed for this interpreter")
    document = _run_runner_process(
        "--backend", "numpy", "--benchmarks", "matmul,copy", "--matmul-dtypes", "bf16,fp32,fp64",
        "--matmul-size", "64", "--copy-mib", "1",
    )  # fmt: skip

    dtypes = document["benchmarks"]["matmul"]["devices"][0]["dtypes"]
    assert dtypes["bf16"]["status"] == "skip"
    assert dtypes["fp32"]["status"] == dtypes["fp64"]["status"] == "ok"
    assert document["benchmarks"]["copy"]["devices"][0]["gbps"] > 0


def test_auto_backend_says_why_it_passed_over_the_others():
    options = runner.parse_args(["--benchmarks", "copy", "--copy-mib", "1"])
    document = runner.run(options)

    passed_over = " ".join(document["backends_passed_over"])
    assert document["backend"]["name"] in ("torch", "cupy", "numpy", "python")
    if document["backend"]["name"] != "torch":
        assert "torch:" in passed_over


def test_runner_refuses_bad_arguments():
    for arguments in (["--benchmarks", "matmul,bogus"], ["--matmul-dtypes", "int4"], ["--copy-mib", "0"]):
        with pytest.raises(SystemExit) as stopped:
            runner.parse_args(arguments)
        assert stopped.value.code == 2


def test_runner_reports_a_gpu_index_the_host_lacks_per_benchmark():
    document = runner.run(runner.parse_args(["--backend", "python", "--benchmarks", "copy", "--gpus", "3"]))

    assert document["benchmarks"]["copy"]["status"] == "error"
    assert "GPU index [3] not found" in document["benchmarks"]["copy"]["reason"]


def test_run_runner_writes_the_runner_out_and_runs_it(tmp_path):
    arguments = runner_arguments(
        ["matmul", "copy"], backend="python", matmul_dtypes=["fp64"], sizes={"matmul_size": 4, "copy_mib": 1}
    )

    output, _ = run_runner(sys.executable, arguments, timeout=60, workdir=str(tmp_path))

    assert output.backend == "python"
    assert [m.metric for m in output.measurements] == ["matmul-fp64", "memory-bandwidth"]
    assert list(tmp_path.iterdir()) == []  # the temporary copy is gone
    assert runner_source() == RUNNER.read_text()


def test_runner_arguments():
    arguments = runner_arguments(["copy"], gpus=[0, 2], sizes={"copy_mib": 64, "matmul_size": None})

    assert arguments[:6] == ["--benchmarks", "copy", "--backend", "auto", "--gpus", "0,2"]
    assert arguments[-2:] == ["--copy-mib", "64"]
    assert "--matmul-size" not in arguments
    with pytest.raises(ValueError, match="unknown benchmark"):
        runner_arguments(["matmul", "stream"])
    with pytest.raises(ValueError, match="unknown size option"):
        runner_arguments(["matmul"], sizes={"matrix": 3})


def _completed(returncode: int, stdout: str = "", stderr: str = "") -> subprocess.CompletedProcess:
    return subprocess.CompletedProcess(args=[], returncode=returncode, stdout=stdout, stderr=stderr)


def test_run_runner_failures_say_what_to_do(tmp_path):
    with pytest.raises(BenchmarkError, match="set the module's python option"):
        run_runner(str(tmp_path / "no-such-python"), [], timeout=10, workdir=str(tmp_path))

    def times_out(command, **kwargs):
        raise subprocess.TimeoutExpired(command, kwargs["timeout"])

    with pytest.raises(BenchmarkError, match="did not finish within 5 s"):
        run_runner("python3", [], timeout=5, workdir=str(tmp_path), execute=times_out)
    with pytest.raises(BenchmarkError, match="exited 1: Traceback ImportError: libcudart.so.12"):
        run_runner(
            "python3",
            [],
            timeout=5,
            workdir=str(tmp_path),
            execute=lambda *a, **k: _completed(1, stderr="Traceback\nImportError: libcudart.so.12"),
        )
    recorded = gpu_fixture("benchmark-h100.json")
    output, stderr = run_runner(
        "python3", [], timeout=5, workdir=str(tmp_path), execute=lambda *a, **k: _completed(0, recorded, "warning")
    )
    assert output.gpus[0]["name"] == H100_NAME
    assert stderr == "warning"


# ---------------------------------------------------------------------------------------------
# The module, run directly as Ansible would run it on the host


def _run_module(arguments: dict[str, Any]) -> dict[str, Any]:
    return run_module_file(MODULE, arguments, timeout=120)


def test_module_on_this_cpu_host():
    result = _run_module(
        {
            "host": "cpu-host",
            "python": sys.executable,
            "backend": "python",
            "benchmarks": ["matmul", "copy", "dcgm"],
            "matmul_dtypes": ["fp64"],
            "sizes": {"matmul_size": 4, "copy_mib": 1},
        }
    )

    assert result["changed"] is False
    assert result["failed_checks"] == 0
    assert [(c["id"], c["status"]) for c in result["checks"]] == [
        ("gpu-benchmark/cpu-host/matmul-fp64", "needs-hardware"),
        ("gpu-benchmark/cpu-host/memory-bandwidth", "needs-hardware"),
        ("gpu-benchmark/cpu-host/dcgm-diag", "needs-hardware"),
    ]
    assert result["runner"]["options"]["matmul_size"] == 4
    assert result["section"]["id"] == "gpu-benchmark-cpu-host"


def test_module_in_check_mode_and_on_simulated_hosts_runs_nothing():
    checked = _run_module({"host": "gpu-1", "benchmarks": ["copy"], "_ansible_check_mode": True})
    simulated = _run_module({"host": "dgx1-1", "benchmarks": ["copy"], "hardware": False})

    assert [(c["status"], c["message"]) for c in checked["checks"]] == [
        ("skip", "check mode: the benchmarks were not run")
    ]
    assert checked["runner"] is None
    assert simulated["checks"][0]["status"] == "needs-hardware"
    assert "dgx1-1 is a simulated host" in simulated["checks"][0]["message"]


def test_module_records_a_host_it_could_not_run_on_as_failed_checks():
    reason = "gpu-1 could not be reached: Failed to connect to the host via ssh: no route to host"
    result = _run_module(
        {"host": "gpu-1", "benchmarks": ["matmul", "copy"], "matmul_dtypes": ["bf16"], "failure": reason}
    )

    assert [(c["id"], c["status"], c["message"]) for c in result["checks"]] == [
        ("gpu-benchmark/gpu-1/matmul-bf16", "fail", reason),
        ("gpu-benchmark/gpu-1/memory-bandwidth", "fail", reason),
    ]
    assert result["failed_checks"] == 2
    assert result["runner"] is None
    assert result["section"]["id"] == "gpu-benchmark-gpu-1"
    # Invalid options still fail the task, with or without a failure to record.
    assert _run_module({"failure": reason, "thresholds": {"matmul": -1}})["failed"] is True


def test_module_refuses_bad_thresholds_and_models():
    bad_threshold = _run_module({"thresholds": {"matmul": -1}})
    bad_model = _run_module({"gpu_model": "Voodoo 2"})

    assert bad_threshold["failed"] is True
    assert "invalid options: threshold for 'matmul'" in bad_threshold["msg"]
    assert "gpu_model 'Voodoo 2' matches no reference" in bad_model["msg"]


def test_outcome_to_dict_is_json_ready():
    outcome = judge(parse_runner_output(gpu_fixture("benchmark-h100.json")), "h")
    data = outcome.to_dict()

    assert json.loads(json.dumps(data)) == copy.deepcopy(data)
