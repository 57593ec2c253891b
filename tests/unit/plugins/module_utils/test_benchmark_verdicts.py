"""benchmark_verdicts: stragglers across the site and figures against a reference run, on the H100
runs recorded in tests/unit/fixtures/gpu (two healthy runs a minute apart, and the degraded run made
from the first by scaling its figures by 0.75: README.md there says how) and on made-up sites."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.node import gpu_benchmark_runner as runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.node.benchmark_verdicts import (
    SITE_SECTION_ID,
    Figure,
    baseline_checks,
    figures_from_sections,
    site_section,
    straggler_checks,
)
from ansible_collections.clusterproof.gpu.plugins.module_utils.node.gpu_benchmark import (
    judge,
    not_run,
    parse_runner_output,
)
from ansible_collections.clusterproof.gpu.plugins.module_utils.report import model
from ansible_collections.clusterproof.gpu.plugins.module_utils.report.render import to_html, to_junit_xml
from tests.unit.plugins.module_utils.helpers import gpu_fixture, recorded_benchmark

H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
BASELINE = "baseline of 20261122T120700Z"


def _module_run() -> dict[str, Any]:
    return json.loads(gpu_fixture("module-run-benchmark-h100.json"))


def _report(sections: list[dict[str, Any]], schema_version: int = model.SCHEMA_VERSION) -> dict[str, Any]:
    """A report.json as site_report writes it (schema 2), or as an older one was (1: no categories)."""
    report = model.Report(
        site="site-a",
        cluster_mode="existing",
        started="2026-11-22T12:07:00Z",
        finished="2026-11-22T12:20:00Z",
        sections=[model.section_from_dict(section) for section in sections],
    )
    data = model.to_dict(report)
    if schema_version == 1:
        data["schema_version"] = 1
        for section in data["sections"]:
            for check in section["checks"]:
                check.pop("category", None)
                check.pop("action", None)
    return data


def _host(host: str, names: list[str], bf16: list[float], copy_gbps: list[float] | None = None) -> dict[str, Any]:
    """The section of a host whose GPUs measured the figures given (one per GPU)."""
    devices = [{"index": i, "dtypes": {"bf16": {"status": "ok", "tflops": value}}} for i, value in enumerate(bf16)]
    benchmarks: dict[str, Any] = {"matmul": {"status": "ok", "devices": devices}}
    if copy_gbps is not None:
        benchmarks["copy"] = {
            "status": "ok",
            "devices": [{"index": i, "status": "ok", "gbps": value} for i, value in enumerate(copy_gbps)],
        }
    document = {
        "format": runner.FORMAT,
        "version": runner.FORMAT_VERSION,
        "backend": {"name": "torch", "version": "x", "device_type": "cuda"},
        "gpus": [{"index": i, "name": name} for i, name in enumerate(names)],
        "options": {"matmul_dtypes": ["bf16"]},
        "benchmarks": benchmarks,
    }
    return judge(parse_runner_output(document), host).section_dict()


def _by_status(section: dict[str, Any], status: str) -> list[dict[str, Any]]:
    return [check for check in section["checks"] if check["status"] == status]


# ---------------------------------------------------------------------------------------------
# Baseline: the recorded H100 runs


def test_two_healthy_runs_of_the_h100_raise_no_alarm_against_each_other():
    device_run = recorded_benchmark("benchmark-h100.json")
    module_run = _module_run()["section"]  # the module's own run, a minute later, on the same machine

    for current, reference in ((device_run, module_run), (module_run, device_run)):
        section = site_section([current], _report([reference]), BASELINE)
        assert _by_status(section, "fail") == []
        baseline = {check["id"]: check for check in section["checks"] if "/baseline/" in check["id"]}
        assert baseline[f"{SITE_SECTION_ID}/baseline/memory-bandwidth"]["status"] == "pass"
        assert baseline[f"{SITE_SECTION_ID}/baseline/matmul-bf16"]["status"] == "pass"

    # fp16 moved 4.6 % between the two runs (583.9 -> 557.3 TFLOP/s): just inside the 5 % default.
    section = site_section([device_run], _report([module_run]), BASELINE)
    fp16 = next(c for c in section["checks"] if c["id"] == f"{SITE_SECTION_ID}/baseline/matmul-fp16")
    assert fp16["observed"] == "worst change -4.5% (h100-device GPU 0)"
    # The same spread fails a tighter tolerance: the figure the repeat-run spread must set.
    tight = site_section([device_run], _report([module_run]), BASELINE, tolerance=0.04)
    assert [check["id"] for check in _by_status(tight, "fail")] == [
        f"{SITE_SECTION_ID}/baseline/h100-device/gpu0/matmul-fp16"
    ]


def test_the_degraded_gpu_is_flagged_against_the_baseline_with_each_figure_and_its_fall():
    baseline = _report([recorded_benchmark("benchmark-h100.json")])
    section = site_section([recorded_benchmark("benchmark-h100-degraded.json")], baseline, BASELINE)

    failed = {check["id"].rsplit("/", 1)[1]: check for check in _by_status(section, "fail")}
    assert sorted(failed) == ["matmul-bf16", "matmul-fp16", "matmul-fp32", "memory-bandwidth", "resnet50-training"]
    copy_check = failed["memory-bandwidth"]
    assert copy_check["id"] == f"{SITE_SECTION_ID}/baseline/h100-device/gpu0/memory-bandwidth"
    assert copy_check["observed"] == "2268.8 GB/s (25.0% below)"
    assert copy_check["expected"] == f">= 2873.8 GB/s (within 5% of 3025.0 in {BASELINE})"
    assert copy_check["message"].startswith(
        f"memory-bandwidth on h100-device GPU 0 ({H100}) fell 25.0% below {BASELINE}: 2268.8 GB/s now, "
        "3025.0 GB/s then; the tolerance is 5%."
    )
    assert copy_check["category"] == "performance"
    assert copy_check["action"].startswith(model.ISOLATE_NODE + ": h100-device;")
    assert model.RESET_GPU in copy_check["action"]
    assert failed["matmul-bf16"]["observed"] == "451.6 TFLOP/s (25.0% below)"
    # Its own host section fails the datasheet floor only where 0.75 x healthy is under it.
    host = recorded_benchmark("benchmark-h100-degraded.json")
    floor = {check["id"].rsplit("/", 1)[1]: check["status"] for check in host["checks"]}
    assert (floor["matmul-bf16"], floor["matmul-fp16"], floor["memory-bandwidth"]) == ("fail",) * 3
    assert floor["matmul-fp32"] == "pass"  # 38.7 > 0.5 x 67: only the baseline catches it
    assert floor["resnet50-training"] == "skip"  # no datasheet figure for it: only the baseline catches it


def test_the_degraded_fixture_is_the_healthy_recording_scaled_by_three_quarters():
    healthy = json.loads(gpu_fixture("benchmark-h100.json"))
    degraded = json.loads(gpu_fixture("benchmark-h100-degraded.json"))

    assert "not a recording" in degraded["derived_from"]
    for dtype, figures in healthy["benchmarks"]["matmul"]["devices"][0]["dtypes"].items():
        scaled = degraded["benchmarks"]["matmul"]["devices"][0]["dtypes"][dtype]
        assert scaled["tflops"] == round(figures["tflops"] * 0.75, 3)
        assert scaled["mean_ms"] == round(figures["mean_ms"] / 0.75, 4)
    assert degraded["benchmarks"]["copy"]["devices"][0]["gbps"] == round(3025.0 * 0.75, 3)
    del degraded["derived_from"]
    for name in ("matmul", "copy", "resnet50"):
        del degraded["benchmarks"][name], healthy["benchmarks"][name]
    assert degraded == healthy


def test_a_schema_1_reference_report_is_read_also_with_its_older_figures_table():
    module_run = _module_run()["section"]
    assert module_run["tables"][0]["rows"][0][0] == f"0: {H100}"  # before the Model column
    reference = _report([module_run], schema_version=1)
    assert reference["schema_version"] == 1

    section = site_section(
        [recorded_benchmark("benchmark-h100-degraded.json")], reference, "previous run 20261122T120800Z"
    )

    failed = {check["id"].rsplit("/", 1)[1]: check["observed"] for check in _by_status(section, "fail")}
    assert failed == {
        "matmul-bf16": "451.6 TFLOP/s (23.7% below)",  # against 591.74
        "matmul-fp16": "418.0 TFLOP/s (28.4% below)",  # against 583.85
        "matmul-fp32": "38.74 TFLOP/s (25.5% below)",  # against 51.99
        "memory-bandwidth": "2268.8 GB/s (25.0% below)",  # against 3023.8
    }
    # ResNet-50 did not run in the module's run: new, not a failure.
    resnet = next(c for c in section["checks"] if c["id"] == f"{SITE_SECTION_ID}/baseline/resnet50-training")
    assert resnet["status"] == "skip"
    assert "1 new (no counterpart in previous run 20261122T120800Z)" in resnet["message"]


def test_new_and_gone_figures_are_counted_not_failed():
    reference = _report([_host("gpu-1", [H100] * 2, [600.0, 600.0]), _host("gpu-2", [H100], [600.0])])
    # gpu-2 is gone, gpu-3 is new, and gpu-1's GPU 1 is now another model.
    current = [_host("gpu-1", [H100, A100], [601.0, 250.0]), _host("gpu-3", [H100], [300.0])]

    checks, table = baseline_checks(
        figures_from_sections(current), figures_from_sections(reference["sections"]), BASELINE
    )

    assert [(check.id, check.status) for check in checks] == [(f"{SITE_SECTION_ID}/baseline/matmul-bf16", "pass")]
    assert checks[0].message == (
        f"matmul-bf16: 1 figures compared with {BASELINE}, none fell more than 5%; the worst change is +0.2% on "
        f"gpu-1 GPU 0; 2 new (no counterpart in {BASELINE}); 1 of {BASELINE} not measured now"
    )
    assert table.rows == [["matmul-bf16", "TFLOP/s", 1, 2, 1, 0, 0.2, "gpu-1 GPU 0", "pass"]]


def test_host_figures_are_compared_with_the_baseline_host_by_host():
    def with_allreduce(busbw: float) -> dict[str, Any]:
        document = json.loads(gpu_fixture("benchmark-h100.json"))
        document["benchmarks"]["allreduce"] = {"status": "ok", "backend": "nccl", "ranks": 8, "busbw_gbps": busbw}
        return judge(parse_runner_output(document), "dgx-1").section_dict()

    section = site_section([with_allreduce(300.0)], _report([with_allreduce(360.0)]), BASELINE)

    failed = _by_status(section, "fail")
    assert [check["id"] for check in failed] == [f"{SITE_SECTION_ID}/baseline/dgx-1/nccl-allreduce"]
    assert failed[0]["observed"] == "300.0 GB/s (16.7% below)"
    assert "if its GPUs are still slow together" in failed[0]["action"]
    assert failed[0]["action"].endswith(model.REBOOT_NODE)
    # Not compared across hosts: no straggler check for it.
    assert not any("stragglers" in check["id"] and "allreduce" in check["id"] for check in section["checks"])


# ---------------------------------------------------------------------------------------------
# Stragglers


def test_a_straggler_among_four_gpus_on_two_hosts_is_flagged():
    sections = [_host("gpu-1", [H100] * 2, [640.0, 600.0]), _host("gpu-2", [H100] * 2, [630.0, 560.0])]

    section = site_section(sections, None, "no baseline saved")

    failed = _by_status(section, "fail")
    assert [check["id"] for check in failed] == [f"{SITE_SECTION_ID}/straggler/gpu-2/gpu1/matmul-bf16"]
    # The median of 640, 630, 600, 560 is 615; 560 is 8.9 % below it, 600 only 2.4 %.
    assert failed[0]["observed"] == "560.0 TFLOP/s (8.9% below)"
    assert failed[0]["expected"] == ">= 584.2 TFLOP/s (within 5% of the median of the site's 4: 615.0)"
    assert failed[0]["message"].startswith(
        f"matmul-bf16 on gpu-2 GPU 1 ({H100}): 560.0 TFLOP/s, 8.9% below the median of the site's 4 {H100} GPUs "
        "(615.0 TFLOP/s); the tolerance is 5%."
    )
    assert failed[0]["category"] == "performance"
    assert failed[0]["action"].startswith(model.ISOLATE_NODE + ": gpu-2;")
    straggler_table = section["tables"][0]
    assert straggler_table["rows"] == [
        [H100, "matmul-bf16", 4, "the median of the site's 4", 615.0, "TFLOP/s", "gpu-2 GPU 1", 560.0, 8.9, 1, "fail"]
    ]
    baseline = next(check for check in section["checks"] if check["id"] == f"{SITE_SECTION_ID}/baseline")
    assert (baseline["status"], baseline["message"]) == ("skip", "not compared: no reference run (no baseline saved)")


def test_equal_gpus_have_no_straggler_and_each_model_is_its_own_group():
    sections = [_host("gpu-1", [H100] * 4, [600.0] * 4, [3000.0] * 4), _host("gpu-2", [A100] * 2, [250.0, 250.0])]

    section = site_section(sections, None, "")

    assert _by_status(section, "fail") == []
    passed = {check["id"]: check for check in _by_status(section, "pass")}
    assert sorted(passed) == [
        f"{SITE_SECTION_ID}/stragglers/nvidia-a100-sxm4-80gb/matmul-bf16",
        f"{SITE_SECTION_ID}/stragglers/nvidia-h100-80gb-hbm3/matmul-bf16",
        f"{SITE_SECTION_ID}/stragglers/nvidia-h100-80gb-hbm3/memory-bandwidth",
    ]
    h100 = passed[f"{SITE_SECTION_ID}/stragglers/nvidia-h100-80gb-hbm3/matmul-bf16"]
    assert h100["observed"] == "slowest gpu-1 GPU 0: 600.0 TFLOP/s (0.0% below)"


def test_with_two_gpus_the_slower_is_compared_with_the_better():
    # 92 against 100: 8 % behind the better one, but only 4.2 % below their median (96).
    figures = [Figure("gpu-1", 0, "matmul-bf16", H100, 100.0, "TFLOP/s"), Figure("gpu-1", 1, "matmul-bf16", H100, 92.0, "TFLOP/s")]  # fmt: skip

    checks, table = straggler_checks(figures)

    assert [(check.id, check.status, check.observed) for check in checks] == [
        (f"{SITE_SECTION_ID}/straggler/gpu-1/gpu1/matmul-bf16", "fail", "92.00 TFLOP/s (8.0% below)")
    ]
    assert table.rows[0][3] == "the better of the site's 2"


def test_a_gpu_alone_of_its_model_is_not_compared_and_the_tolerance_is_configurable():
    alone = site_section([recorded_benchmark("benchmark-h100.json")], None, "")
    assert {check["status"] for check in alone["checks"]} == {"skip"}
    assert "no peer to compare it with" in alone["checks"][0]["message"]

    figures = [Figure("h", i, "matmul-bf16", H100, value, "TFLOP/s") for i, value in enumerate([100.0, 100.0, 97.0])]
    assert [check.status for check in straggler_checks(figures, tolerance=0.05)[0]] == ["pass"]
    assert [check.status for check in straggler_checks(figures, tolerance=0.02)[0]] == ["fail"]


def test_cpu_dry_runs_and_hosts_without_figures_are_not_compared():
    simulated = not_run("kwok-1", ["matmul", "copy"], ["bf16"], "needs-hardware", "simulated").section_dict()

    section = site_section([simulated, {"id": "gpu-nodes", "title": "GPU nodes", "checks": []}], None, "")

    assert [(check["id"], check["status"]) for check in section["checks"]] == [(f"{SITE_SECTION_ID}/figures", "skip")]
    assert section["tables"] == []
    cpu = recorded_benchmark("benchmark-torch-cpu.json", "cpu-1")
    assert figures_from_sections([cpu]) == []


def test_no_benchmark_section_gives_no_site_section_and_an_earlier_site_section_is_not_a_host():
    assert site_section([{"id": "gpu-nodes", "title": "GPU nodes", "checks": []}], None, "") is None
    assert site_section([], None, "") is None

    sections = [_host("gpu-1", [H100] * 3, [600.0, 600.0, 500.0])]
    first = site_section(sections, None, "")
    again = site_section([*sections, first], _report([*sections, first]), BASELINE)
    assert [check["id"] for check in _by_status(again, "fail")] == [
        f"{SITE_SECTION_ID}/straggler/gpu-1/gpu2/matmul-bf16"
    ]


# ---------------------------------------------------------------------------------------------
# Arguments


@pytest.mark.parametrize("bad", [0, 0.0, 1, 1.5, -0.05, True, "0.05", None])
@pytest.mark.parametrize("field", ["tolerance", "straggler_tolerance"])
def test_bad_tolerances_are_refused_naming_the_field_what_was_expected_and_found(field, bad):
    sections = [recorded_benchmark("benchmark-h100.json")]

    with pytest.raises(ValueError) as refused:
        site_section(sections, None, "", **{field: bad})

    assert str(refused.value) == (f"{field}: expected a fraction between 0 and 1 (exclusive), e.g. 0.05; found {bad!r}")


def test_bad_references_and_sections_are_refused():
    sections = [recorded_benchmark("benchmark-h100.json")]
    newer = _report(sections)
    newer["schema_version"] = 3

    with pytest.raises(ValueError, match=r"^reference: expected a report.json of schema_version 1 or 2; found "
                       r"schema_version 3$"):  # fmt: skip
        site_section(sections, newer, BASELINE)
    with pytest.raises(ValueError, match="^reference: expected a report.json mapping or None; found list$"):
        site_section(sections, [], BASELINE)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^reference_label: expected the reference run's name.*found ''$"):
        site_section(sections, _report(sections), "")
    with pytest.raises(ValueError, match=r"^current_sections: expected a list of report sections.*found dict$"):
        site_section(sections[0], None, "")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^current_sections\[1\]: expected a report section.*found str$"):
        site_section([sections[0], "gpu-1"], None, "")  # type: ignore[list-item]


# ---------------------------------------------------------------------------------------------
# Into the report


def test_the_site_section_goes_into_the_report_with_its_categories_and_actions():
    hosts = [_host("gpu-1", [H100] * 2, [640.0, 600.0]), _host("gpu-2", [H100] * 2, [630.0, 560.0])]
    reference = _report([copy.deepcopy(section) for section in hosts])
    hosts[0] = _host("gpu-1", [H100] * 2, [640.0, 540.0])  # GPU 1 of gpu-1 fell 10 % since
    section = site_section(hosts, reference, BASELINE)

    report = model.report_from_dict(_report([*hosts, section]))
    data = model.to_dict(report)

    site = next(s for s in data["sections"] if s["id"] == SITE_SECTION_ID)
    assert site["verdict"] == "fail"
    failed = {check["id"]: (check["category"], check["action"].split(";")[0]) for check in site["checks"]
              if check["status"] == "fail"}  # fmt: skip
    assert failed == {
        f"{SITE_SECTION_ID}/straggler/gpu-1/gpu1/matmul-bf16": ("performance", f"{model.ISOLATE_NODE}: gpu-1"),
        f"{SITE_SECTION_ID}/straggler/gpu-2/gpu1/matmul-bf16": ("performance", f"{model.ISOLATE_NODE}: gpu-2"),
        f"{SITE_SECTION_ID}/baseline/gpu-1/gpu1/matmul-bf16": ("performance", f"{model.ISOLATE_NODE}: gpu-1"),
    }
    assert "10.0% below baseline of 20261122T120700Z" in to_html(report)
    assert 'name="GPU benchmarks across the site: stragglers and baseline"' in to_junit_xml(report)
