"""Passive GPU health on the recorded H100 (healthy), and on faulty GPUs written by editing that
recording one element at a time (tests/unit/fixtures/gpu/README.md says so)."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.node import gpu_facts, gpu_health
from ansible_collections.clusterproof.gpu.plugins.module_utils.node.gpu_health import (
    COOLING_ACTION,
    LINK_ACTION,
    REACH_ACTION,
    HealthPins,
    KernelLogError,
    assess_host,
    health_host,
    parse_xids,
    read_kernel_log,
)
from ansible_collections.clusterproof.gpu.plugins.module_utils.report.model import (
    REBOOT_NODE,
    REPLACE_GPU,
    RESET_GPU,
    report_from_dict,
)
from tests.unit.plugins.module_utils.helpers import H100_XML, gpu_fixture

KERNEL_LOG = gpu_fixture("kernel-log-xid.txt")
PINS = HealthPins(driver_branch="580", cuda_version="12.4", gpu_count=1)
GPU_SIGNALS = (
    "ecc", "memory-repair", "clock-events", "pcie", "power-limit", "persistence", "applications-clocks",
    "pending-modes", "xid",
)  # fmt: skip


def edited(*edits: tuple[str, str, int]) -> str:
    """The healthy recording with each (old, new, occurrence) edit made; each old text must be in
    the recording at least ``occurrence`` times, so that an edit never silently misses."""
    text = H100_XML
    for old, new, occurrence in edits:
        assert text.count(old) >= occurrence, f"{old!r} is not in the recording {occurrence} times"
        start = -1
        for _ in range(occurrence):
            start = text.index(old, start + 1)
        text = text[:start] + new + text[start + len(old) :]
    return text


def facts_of(xml: str) -> dict[str, Any]:
    return gpu_facts.parse_nvidia_smi_xml(xml).to_dict()


def checks_of(xml: str = H100_XML, kernel_log: str | None = "", pins: HealthPins = PINS) -> dict[str, dict]:
    section = assess_host("dgx-1", facts_of(xml), pins, kernel_log, "journalctl: no permission")
    return {check["id"].removeprefix("gpu-health/dgx-1/"): check for check in section["checks"]}


def test_recorded_h100_gives_the_health_fields():
    (gpu,) = facts_of(H100_XML)["gpus"]
    assert gpu["serial"] == "1650000000001"
    assert gpu["remapped_rows"] == {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}
    assert gpu["retired_pages"] == {"single_bit": None, "double_bit": None, "pending": None}  # H100 remaps rows
    assert gpu["clocks_event_reasons"] == ["gpu_idle"]
    assert gpu["pcie"] == {"current_gen": 5, "max_gen": 5, "current_width": 16, "max_width": 16}
    assert (gpu["power_limit_w"], gpu["power_default_limit_w"]) == (700.0, 700.0)
    assert (gpu["sm_clock_mhz"], gpu["sm_clock_max_mhz"]) == (375, 1980)
    assert (gpu["applications_clock_mhz"], gpu["applications_clock_default_mhz"]) == (1980, 1980)


def test_the_healthy_recording_passes_every_check():
    checks = checks_of()
    assert sorted(checks) == ["cuda", "driver", "gpu0/passive", "gpus-visible", "xid"]
    assert {check_id: check["status"] for check_id, check in checks.items() if check["status"] != "pass"} == {}
    # A healthy GPU's signals are one check, which lists each with what was read.
    passive = checks["gpu0/passive"]
    assert passive["message"] == "healthy: " + ", ".join(GPU_SIGNALS)
    assert set(passive["observed"]) == set(GPU_SIGNALS)
    assert passive["observed"]["pcie"] == {"width": 16, "gen": 5}
    assert passive["observed"]["power-limit"] == 700.0


# (edits to the recording, the signal that must turn, its status, its action)
FAULTS = {
    "uncorrected ECC since the driver loaded": (
        [("<dram_uncorrectable>0</dram_uncorrectable>", "<dram_uncorrectable>2</dram_uncorrectable>", 1)],
        "ecc", "fail", RESET_GPU,
    ),
    "uncorrected ECC over the GPU's life only": (
        [("<dram_uncorrectable>0</dram_uncorrectable>", "<dram_uncorrectable>3</dram_uncorrectable>", 2)],
        "ecc", "warn", f"watch the count; {REPLACE_GPU} if it grows",
    ),
    "ECC switched off": (
        [("<current_ecc>Enabled</current_ecc>", "<current_ecc>Disabled</current_ecc>", 1),
         ("<pending_ecc>Enabled</pending_ecc>", "<pending_ecc>Disabled</pending_ecc>", 1)],
        "ecc", "warn", f"enable ECC (nvidia-smi -e 1), then {RESET_GPU}",
    ),
    "a row remap waiting for a reset": (
        [("<remapped_row_pending>No<", "<remapped_row_pending>Yes<", 1),
         ("<remapped_row_unc>0<", "<remapped_row_unc>1<", 1)],
        "memory-repair", "fail", RESET_GPU,
    ),
    "a row remap that failed": (
        [("<remapped_row_failure>No<", "<remapped_row_failure>Yes<", 1)], "memory-repair", "fail", REPLACE_GPU,
    ),
    "hardware thermal slowdown at idle": (
        [("<clocks_event_reason_hw_thermal_slowdown>Not Active<", "<clocks_event_reason_hw_thermal_slowdown>Active<",
          1)],
        "clock-events", "fail", COOLING_ACTION,
    ),
    "power brake": (
        [("<clocks_event_reason_hw_power_brake_slowdown>Not Active<",
          "<clocks_event_reason_hw_power_brake_slowdown>Active<", 1)],
        "clock-events", "fail", COOLING_ACTION,
    ),
    "power cap with no load": (
        [("<clocks_event_reason_sw_power_cap>Not Active<", "<clocks_event_reason_sw_power_cap>Active<", 1)],
        "clock-events", "warn", "compare the power limit with the default (nvidia-smi -q -d POWER)",
    ),
    "a PCIe link at half width": (
        [("<current_link_width>16x<", "<current_link_width>8x<", 1)], "pcie", "fail", LINK_ACTION,
    ),
    "a lower PCIe generation on a busy GPU": (
        [("<current_link_gen>5<", "<current_link_gen>3<", 1),
         ("<clocks_event_reason_gpu_idle>Active<", "<clocks_event_reason_gpu_idle>Not Active<", 1)],
        "pcie", "warn", LINK_ACTION,
    ),
    "a power limit below the default": (
        [("<current_power_limit>700.00 W<", "<current_power_limit>500.00 W<", 1)],
        "power-limit", "warn", "restore it (nvidia-smi -pl 700) unless the site caps power on purpose",
    ),
    "persistence mode off": (
        [("<persistence_mode>Enabled<", "<persistence_mode>Disabled<", 1)],
        "persistence", "warn", "enable the nvidia-persistenced service",
    ),
    "application clocks moved": (
        [("<applications_clocks>\n\t\t\t<graphics_clock>1980 MHz<", "<applications_clocks>\n\t\t\t<graphics_clock>1755 MHz<",
          1)],
        "applications-clocks", "warn", "reset them (nvidia-smi -rac) unless the site sets them on purpose",
    ),
    "a MIG mode change waiting for a reset": (
        [("<pending_mig>Disabled<", "<pending_mig>Enabled<", 1)], "pending-modes", "warn", RESET_GPU,
    ),
}  # fmt: skip


@pytest.mark.parametrize(("edits", "signal", "status", "action"), list(FAULTS.values()), ids=list(FAULTS))
def test_each_fault_turns_its_own_check_and_no_other(edits, signal, status, action):
    checks = checks_of(edited(*edits))
    turned = checks[f"gpu0/{signal}"]
    assert (turned["status"], turned["action"]) == (status, action), turned["message"]
    assert turned["category"] in ("hardware", "configuration")
    assert turned["expected"] is not None and turned["message"]
    others = {check_id: check["status"] for check_id, check in checks.items() if check_id != f"gpu0/{signal}"}
    assert set(others.values()) == {"pass"}, others


def test_a_faulty_gpu_row_is_coloured_by_its_worst_check():
    xml = edited(("<remapped_row_failure>No<", "<remapped_row_failure>Yes<", 1))
    (table,) = assess_host("dgx-1", facts_of(xml), PINS, "")["tables"]
    assert table["row_status"] == ["fail"]
    assert table["rows"][0][5] == "rows 0+0 (failure)"


def test_a_lower_pcie_generation_while_idle_is_power_saving():
    checks = checks_of(edited(("<current_link_gen>5<", "<current_link_gen>1<", 1)))
    assert "gpu0/pcie" not in checks
    assert checks["gpu0/passive"]["status"] == "pass"
    assert checks["gpu0/passive"]["observed"]["pcie"] == {"width": 16, "gen": 1}
    line = gpu_health._pcie(
        "dgx-1", "gpu0", "GPU 0", facts_of(edited(("<current_link_gen>5<", "<current_link_gen>1<", 1)))["gpus"][0]
    )
    assert "lowers the link to save power" in line.message


# A GPU before Ampere: page retirement, no row remapping.
def _pre_ampere(single: str, double: str, pending: str) -> str:
    start, end = H100_XML.index("<remapped_rows>"), H100_XML.index("</remapped_rows>") + len("</remapped_rows>")
    text = H100_XML[:start] + H100_XML[end:]
    retired = text[text.index("<retired_pages>") : text.index("</retired_pages>")]
    written = (
        retired.replace("<retired_count>N/A<", f"<retired_count>{single}<", 1)
        .replace("<retired_count>N/A<", f"<retired_count>{double}<", 1)
        .replace("<pending_retirement>N/A<", f"<pending_retirement>{pending}<", 1)
    )
    return text.replace(retired, written)


@pytest.mark.parametrize(
    ("single", "double", "pending", "status", "action"),
    [
        ("2", "1", "No", "pass", None),
        ("2", "1", "Yes", "fail", RESET_GPU),
        ("40", "21", "No", "fail", REPLACE_GPU),
    ],
)
def test_page_retirement_on_gpus_before_ampere(single, double, pending, status, action):
    checks = checks_of(_pre_ampere(single, double, pending))
    if status == "pass":
        assert "gpu0/memory-repair" not in checks
        assert checks["gpu0/passive"]["observed"]["memory-repair"]["single_bit"] == int(single)
        return
    check = checks["gpu0/memory-repair"]
    assert (check["status"], check.get("action")) == (status, action), check["message"]
    assert check["observed"]["single_bit"] == int(single)


def test_signals_a_gpu_does_not_report_are_listed_as_not_reported():
    bare = {"gpu_count": 1, "driver_version": "580.1", "cuda_version": "13.0", "gpus": [{"index": 0}]}
    section = assess_host("old", bare, HealthPins(), "")
    checks = {check["id"]: check for check in section["checks"]}
    assert sorted(checks) == ["gpu-health/old/gpu0/passive", "gpu-health/old/xid"]
    passive = checks["gpu-health/old/gpu0/passive"]
    assert passive["status"] == "pass"
    assert passive["message"] == (
        "healthy: xid; not reported by this GPU or driver: ecc, memory-repair, clock-events, pcie, power-limit, "
        "persistence, applications-clocks, pending-modes"
    )
    # Nothing reported and no kernel log read: nothing was judged, a skip.
    (alone,) = [c for c in assess_host("old", bare, HealthPins(), None, "no")["checks"] if "gpu0" in c["id"]]
    assert alone["status"] == "skip"


# ---------------------------------------------------------------------------------------------
# XID events from the kernel log


def test_xids_are_parsed_with_their_pci_address():
    events = parse_xids(KERNEL_LOG)
    assert [(event.code, event.pci) for event in events] == [
        (13, (0, 0, 6)), (45, (0, 0, 6)), (94, (0, 0, 6)), (154, (0, 0, 6)), (79, (0, 0x3B, 0)),
    ]  # fmt: skip
    assert events[3].kind.action == RESET_GPU  # 154: "to 0x1 (GPU Reset Required)"


def test_xids_of_a_gpu_fail_with_the_gravest_action():
    checks = checks_of(kernel_log=KERNEL_LOG)
    xid = checks["gpu0/xid"]
    assert xid["status"] == "fail"
    assert xid["action"] == RESET_GPU
    assert "codes 13, 45, 94, 154" in xid["message"]
    assert len(xid["observed"]) == 4
    # The 79 was logged for an address the driver no longer lists: the GPU fell off the bus.
    stray = checks["xid"]
    assert (stray["status"], stray["action"]) == ("fail", REBOOT_NODE)
    assert "fallen off the bus" in stray["message"]


def test_application_xids_alone_warn():
    log = "\n".join(line for line in KERNEL_LOG.splitlines() if "): 13," in line or "): 45," in line)
    xid = checks_of(kernel_log=log)["gpu0/xid"]
    assert xid["status"] == "warn"
    assert xid["action"] == "look at the jobs that ran on it (an application fault)"


@pytest.mark.parametrize(
    ("line", "status", "action"),
    [
        ("NVRM: Xid (PCI:0000:00:06): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)",
         "fail", REBOOT_NODE),
        ("NVRM: Xid (PCI:0000:00:06): 154, GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)",
         "warn", "look at the jobs that ran on it (an application fault)"),
        ("NVRM: Xid (PCI:0000:00:06): 64, pid=1, name=x, ECC page retirement or row remapper recording failure",
         "fail", REPLACE_GPU),
        ("NVRM: Xid (PCI:0000:00:06.0): 999, something new", "warn",
         "look at the jobs that ran on it (an application fault)"),
    ],
)  # fmt: skip
def test_xid_kinds(line, status, action):
    xid = checks_of(kernel_log=f"[ 1.0] {line}\n")["gpu0/xid"]
    assert (xid["status"], xid["action"]) == (status, action)


def test_an_unreadable_kernel_log_warns_and_checks_no_xid():
    checks = checks_of(kernel_log=None)
    assert "gpu0/xid" not in checks and "xid" not in checks
    log = checks["kernel-log"]
    assert log["status"] == "warn"
    assert "journalctl: no permission" in log["message"]
    section = assess_host("dgx-1", facts_of(H100_XML), PINS, None, "no")
    assert section["tables"][0]["rows"][0][-1] == "not read"


def test_kernel_log_falls_back_from_journalctl_to_dmesg():
    tried = []

    def run(argv):
        tried.append(argv[0])
        if argv[0] == "journalctl":
            raise KernelLogError("journalctl exited 1: No journal files were found.")
        return "dmesg text"

    assert read_kernel_log("auto", run) == "dmesg text"
    assert tried == ["journalctl", "dmesg"]


def test_kernel_log_that_no_way_reads_says_how_each_failed():
    def run(argv):
        raise KernelLogError(f"{argv[0]} failed")

    with pytest.raises(KernelLogError, match="journalctl failed; dmesg failed"):
        read_kernel_log("auto", run)
    with pytest.raises(ValueError, match="kernel log source must be one of"):
        read_kernel_log("syslog", run)


# ---------------------------------------------------------------------------------------------
# Host-wide: GPUs visible, pins


def test_a_gpu_missing_from_the_driver_fails_capacity():
    check = checks_of(pins=HealthPins(gpu_count=8))["gpus-visible"]
    assert (check["status"], check["category"], check["expected"], check["observed"]) == ("fail", "capacity", 8, 1)
    assert "XID 79" in check["message"]


def test_driver_and_cuda_pins():
    checks = checks_of(pins=HealthPins(driver_branch="570", cuda_version="13.1"))
    assert (checks["driver"]["status"], checks["driver"]["category"]) == ("fail", "configuration")
    assert checks["driver"]["observed"] == "580.159.04" and checks["driver"]["expected"] == "570.x"
    assert "nvidia_driver_branch" in checks["driver"]["message"]
    assert (checks["cuda"]["status"], checks["cuda"]["observed"]) == ("fail", "13.0")
    assert "gpus-visible" not in checks  # nothing declared, nothing compared


def test_no_pins_no_pin_checks():
    checks = checks_of(pins=HealthPins())
    assert not {"driver", "cuda", "gpus-visible"} & set(checks)


# ---------------------------------------------------------------------------------------------
# The module's work


def _params(**overrides: Any) -> dict[str, Any]:
    params = {
        "host": "dgx-1", "hardware": True, "failure": None, "source": "nvidia-smi", "kernel_log": "auto",
        "driver_branch": "580", "cuda_version": "", "gpu_count": 1,
    }  # fmt: skip
    params.update(overrides)
    return params


def test_a_simulated_host_needs_hardware_and_is_not_read():
    def gather(**_):
        raise AssertionError("a simulated host is never read")

    result = health_host(_params(hardware=False), False, gather=gather)
    (check,) = result["section"]["checks"]
    assert check["status"] == "needs-hardware"
    assert result["failed_checks"] == 0


def test_a_host_that_failed_before_is_a_failed_check_with_what_to_do():
    result = health_host(_params(failure="ssh: connect to host dgx-1 port 22: No route to host"), False)
    (check,) = result["section"]["checks"]
    assert (check["status"], check["category"], check["action"]) == ("fail", "hardware", REACH_ACTION)
    assert "No route to host" in check["message"]
    assert result["failed_checks"] == 1


def test_a_real_host_is_read_and_judged():
    def gather(prefer, fallback):
        assert (prefer, fallback) == ("nvidia-smi", False)
        return gpu_facts.parse_nvidia_smi_xml(edited(("<remapped_row_pending>No<", "<remapped_row_pending>Yes<", 1)))

    result = health_host(_params(), True, gather=gather, read_log=lambda source: KERNEL_LOG)
    assert result["gpus"]["gpus"][0]["serial"] == "1650000000001"
    failed = sorted(check["id"] for check in result["section"]["checks"] if check["status"] == "fail")
    assert failed == ["gpu-health/dgx-1/gpu0/memory-repair", "gpu-health/dgx-1/gpu0/xid", "gpu-health/dgx-1/xid"]
    assert result["failed_checks"] == 3


def test_kernel_log_none_is_not_read():
    def read_log(source):
        raise AssertionError("kernel_log=none reads nothing")

    result = health_host(
        _params(kernel_log="none"),
        False,
        gather=lambda **_: gpu_facts.parse_nvidia_smi_xml(H100_XML),
        read_log=read_log,
    )
    (log,) = [check for check in result["section"]["checks"] if check["id"].endswith("/kernel-log")]
    assert "kernel_log=none" in log["message"]


def test_the_section_reads_back_as_hardware_checks_of_the_report():
    section = assess_host("dgx-1", facts_of(H100_XML), PINS, KERNEL_LOG)
    report = report_from_dict({"site": "s", "sections": [section]})
    failed = [check for check in report.sections[0].checks if check.status == "fail"]
    assert failed and {check.category for check in failed} == {"hardware"}
    assert report.sections[0].id == "gpu-health-dgx-1"


# ---------------------------------------------------------------------------------------------
# NVML's answers for the health fields. Not recorded (see the fixtures' README): the values are
# written from the nvidia-smi recording of the same H100.


class HealthPynvml:
    NVML_FEATURE_ENABLED = 1
    NVML_CLOCK_SM = 1
    NVML_CLOCK_GRAPHICS = 0

    def __init__(self, with_event_reasons: bool = True, remapped=(0, 0, 0, 0)):
        self.remapped = remapped
        if not with_event_reasons:  # nvidia-ml-py before 12.535 knows only the old name
            self.nvmlDeviceGetCurrentClocksEventReasons = None

    def nvmlDeviceGetSerial(self, handle):
        return b"1650000000001"

    def nvmlDeviceGetRetiredPages(self, handle, cause):
        raise type("NVMLError_NotSupported", (Exception,), {})("Not Supported")

    nvmlDeviceGetRetiredPagesPendingStatus = nvmlDeviceGetRetiredPages

    def nvmlDeviceGetRemappedRows(self, handle):
        return self.remapped

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return 0x1 | 0x40

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle):
        return 0x1

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle):
        return 5

    nvmlDeviceGetMaxPcieLinkGeneration = nvmlDeviceGetCurrPcieLinkGeneration

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle):
        return 8

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle):
        return 16

    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle):
        return 700000

    def nvmlDeviceGetClockInfo(self, handle, clock):
        assert clock == self.NVML_CLOCK_SM
        return 375

    def nvmlDeviceGetMaxClockInfo(self, handle, clock):
        return 1980

    def nvmlDeviceGetApplicationsClock(self, handle, clock):
        assert clock == self.NVML_CLOCK_GRAPHICS
        return 1980

    nvmlDeviceGetDefaultApplicationsClock = nvmlDeviceGetApplicationsClock


def test_nvml_health_fields():
    nvml = HealthPynvml(remapped=(3, 1, 1, 0))
    assert gpu_facts._nvml_field(lambda: nvml.nvmlDeviceGetSerial(0)) == "1650000000001"
    rows = gpu_facts._nvml_remapped_rows(nvml, 0)
    assert (rows.correctable, rows.uncorrectable, rows.pending, rows.failure) == (3, 1, True, False)
    pages = gpu_facts._nvml_retired_pages(nvml, 0)
    assert (pages.single_bit, pages.double_bit, pages.pending) == (None, None, None)
    assert gpu_facts._nvml_clocks_event_reasons(nvml, 0) == ["gpu_idle", "hw_thermal_slowdown"]
    link = gpu_facts._nvml_pcie(nvml, 0)
    assert (link.current_width, link.max_width, link.current_gen, link.max_gen) == (8, 16, 5, 5)


def test_nvml_before_the_clocks_event_rename_reads_the_throttle_reasons():
    assert gpu_facts._nvml_clocks_event_reasons(HealthPynvml(with_event_reasons=False), 0) == ["gpu_idle"]


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        (
            "driver_branch",
            "r580",
            "driver_branch: expected the driver's major version, digits such as '580'; found 'r580'",
        ),
        ("cuda_version", "twelve", "cuda_version: expected a version such as '12.4'; found 'twelve'"),
        ("gpu_count", -1, "gpu_count: expected 0 or more GPUs; found -1"),
    ],
)
def test_malformed_pins_are_refused_naming_the_option(option, value, expected):
    with pytest.raises(ValueError) as raised:
        health_host(_params(**{option: value}), False)
    assert str(raised.value) == expected
