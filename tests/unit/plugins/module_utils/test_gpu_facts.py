"""gpu_facts against what a real H100 node answered (tests/unit/fixtures/gpu/README.md says how it was
recorded), and against hosts without GPUs, driver or tools."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.node import gpu_facts
from ansible_collections.clusterproof.gpu.plugins.module_utils.node.gpu_facts import (
    GpuFactsError,
    NvidiaSmiParseError,
    gather,
    gather_nvml,
    parse_nvidia_smi_xml,
)
from tests.unit.plugins.module_utils.helpers import H100_XML, gpu_fixture

H100_UUID = "GPU-00000000-0000-4000-8000-000000000001"  # the recorded UUID, replaced in every fixture


def _recorded(name: str) -> dict[str, Any]:
    return json.loads(gpu_fixture(name))


# Fields that are the same whenever they are read; the rest (power draw, temperature, memory in use)
# move between two reads taken a second apart.
STABLE_GPU_FIELDS = [
    "index",
    "uuid",
    "name",
    "pci_bus_id",
    "memory_total_mib",
    "driver_version",
    "cuda_version",
    "mig_mode",
    "ecc_mode",
    "ecc_errors",
    "power_limit_w",
    "persistence_mode",
    "nvlink_links_total",
    "nvlink_links_active",
]


def _stable(facts: dict[str, Any]) -> dict[str, Any]:
    host = {key: facts[key] for key in ("gpu_count", "driver_version", "cuda_version")}
    host["gpus"] = [{key: gpu[key] for key in STABLE_GPU_FIELDS} for gpu in facts["gpus"]]
    return host


# ---------------------------------------------------------------------------------------------
# nvidia-smi -q -x, as recorded on the H100


def test_h100_xml_gives_the_recorded_values():
    facts = parse_nvidia_smi_xml(H100_XML)

    assert facts.source == "nvidia-smi"
    assert facts.reason is None
    assert facts.gpu_count == 1
    assert facts.driver_version == "580.159.04"
    assert facts.cuda_version == "13.0"
    (gpu,) = facts.gpus
    assert gpu.index == 0
    assert gpu.uuid == H100_UUID
    assert gpu.name == "NVIDIA H100 80GB HBM3"
    assert gpu.pci_bus_id == "00000000:00:06.0"
    assert gpu.memory_total_mib == 81559
    assert gpu.memory_used_mib == 0  # the 480 MiB the driver reserves is not "used"
    assert gpu.driver_version == "580.159.04"
    assert gpu.cuda_version == "13.0"
    assert (gpu.mig_mode.current, gpu.mig_mode.pending) == (False, False)
    assert (gpu.ecc_mode.current, gpu.ecc_mode.pending) == (True, True)
    assert (gpu.ecc_errors.volatile.corrected, gpu.ecc_errors.volatile.uncorrected) == (0, 0)
    assert (gpu.ecc_errors.aggregate.corrected, gpu.ecc_errors.aggregate.uncorrected) == (0, 0)
    assert gpu.temperature_c == 31
    # R580 writes no <power_draw>; the instant reading is the one NVML's power usage matches.
    assert gpu.power_draw_w == 69.23
    assert gpu.power_limit_w == 700.0
    assert gpu.persistence_mode is True
    # Passed through to a VM, this H100 reports no NVLink (NVML: Not Supported on every link).
    assert gpu.nvlink_links_total is None
    assert gpu.nvlink_links_active is None


def test_h100_xml_to_dict_is_json_ready():
    facts = parse_nvidia_smi_xml(H100_XML).to_dict()

    assert json.loads(json.dumps(facts)) == facts
    assert facts["gpus"][0]["mig_mode"] == {"current": False, "pending": False}
    assert facts["gpus"][0]["ecc_errors"]["aggregate"] == {"corrected": 0, "uncorrected": 0}


def test_parser_here_agrees_with_the_parser_run_on_the_device():
    assert _stable(parse_nvidia_smi_xml(H100_XML).to_dict()) == _stable(_recorded("gather-nvidia-smi-h100.json"))


def test_nvml_on_the_device_matched_nvidia_smi_on_the_device():
    nvml = _recorded("gather-nvml-h100.json")
    xml = parse_nvidia_smi_xml(H100_XML).to_dict()

    assert nvml["source"] == "nvml"
    assert _stable(nvml) == _stable(xml)
    for from_nvml, from_xml in zip(nvml["gpus"], xml["gpus"], strict=True):
        assert abs(from_nvml["temperature_c"] - from_xml["temperature_c"]) <= 5
        assert abs(from_nvml["power_draw_w"] - from_xml["power_draw_w"]) <= 20
        assert abs(from_nvml["memory_used_mib"] - from_xml["memory_used_mib"]) <= 64


# ---------------------------------------------------------------------------------------------
# Malformed and unusual nvidia-smi output


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "printed nothing"),
        ("   \n", "printed nothing"),
        (H100_XML[: len(H100_XML) // 2], "did not print valid XML"),
        ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", "did not print valid XML"),
        ("<html><body>nope</body></html>", "expected <nvidia_smi_log>"),
    ],
)
def test_malformed_xml_gives_a_clear_error(text, expected):
    with pytest.raises(NvidiaSmiParseError, match=expected):
        parse_nvidia_smi_xml(text)


def test_parse_error_is_also_a_value_error():
    with pytest.raises(ValueError):
        parse_nvidia_smi_xml("<nvidia_smi_log>")


def test_attached_gpus_that_disagrees_with_the_list_is_an_error():
    text = H100_XML.replace("<attached_gpus>1</attached_gpus>", "<attached_gpus>8</attached_gpus>")
    with pytest.raises(NvidiaSmiParseError, match="attached_gpus=8 but lists 1"):
        parse_nvidia_smi_xml(text)


def test_xml_without_gpus_says_so():
    text = (
        "<nvidia_smi_log><driver_version>580.159.04</driver_version><cuda_version>13.0</cuda_version>"
        "<attached_gpus>0</attached_gpus></nvidia_smi_log>"
    )
    facts = parse_nvidia_smi_xml(text)

    assert facts.gpu_count == 0
    assert facts.driver_version == "580.159.04"
    assert "reports no NVIDIA GPU" in facts.reason


def test_fields_reported_as_na_become_none():
    text = H100_XML.replace("<gpu_temp>31 C</gpu_temp>", "<gpu_temp>N/A</gpu_temp>").replace(
        "<current_mig>Disabled</current_mig>", "<current_mig>[Not Supported]</current_mig>"
    )
    (gpu,) = parse_nvidia_smi_xml(text).gpus

    assert gpu.temperature_c is None
    assert gpu.mig_mode.current is None
    assert gpu.mig_mode.pending is False


def test_pre_r525_layout_is_read():
    # Synthetic: the element names older drivers write (single_bit/double_bit, power_readings).
    text = """<nvidia_smi_log><driver_version>470.82.01</driver_version><cuda_version>11.4</cuda_version>
      <attached_gpus>1</attached_gpus>
      <gpu id="00000000:3B:00.0"><product_name>Tesla V100-SXM2-16GB</product_name>
        <ecc_errors>
          <volatile><single_bit><total>3</total></single_bit><double_bit><total>1</total></double_bit></volatile>
          <aggregate><single_bit><total>12</total></single_bit><double_bit><total>N/A</total></double_bit></aggregate>
        </ecc_errors>
        <power_readings><power_draw>41.50 W</power_draw><power_limit>300.00 W</power_limit>
          <enforced_power_limit>250.00 W</enforced_power_limit></power_readings>
      </gpu></nvidia_smi_log>"""
    (gpu,) = parse_nvidia_smi_xml(text).gpus

    assert gpu.pci_bus_id == "00000000:3B:00.0"
    assert (gpu.ecc_errors.volatile.corrected, gpu.ecc_errors.volatile.uncorrected) == (3, 1)
    assert (gpu.ecc_errors.aggregate.corrected, gpu.ecc_errors.aggregate.uncorrected) == (12, None)
    assert gpu.power_draw_w == 41.5
    assert gpu.power_limit_w == 250.0


def test_ecc_errors_sum_sram_and_dram():
    text = (
        H100_XML.replace("<sram_correctable>0</sram_correctable>", "<sram_correctable>2</sram_correctable>", 1)
        .replace("<dram_correctable>0</dram_correctable>", "<dram_correctable>5</dram_correctable>", 1)
        .replace("<sram_uncorrectable_secded>0<", "<sram_uncorrectable_secded>1<", 1)
        .replace("<dram_uncorrectable>0</dram_uncorrectable>", "<dram_uncorrectable>4</dram_uncorrectable>", 1)
    )
    (gpu,) = parse_nvidia_smi_xml(text).gpus

    assert (gpu.ecc_errors.volatile.corrected, gpu.ecc_errors.volatile.uncorrected) == (7, 5)
    assert (gpu.ecc_errors.aggregate.corrected, gpu.ecc_errors.aggregate.uncorrected) == (0, 0)


# ---------------------------------------------------------------------------------------------
# NVML, through a fake pynvml that replays what the real one answered on the H100


class FakeNVMLError(Exception):
    def __init__(self, message: str):
        super().__init__(message)


class FakePynvml:
    """The slice of pynvml gpu_facts calls, answering from nvml-raw-h100.json (recorded on the device).

    A recorded error is raised again as an exception of the recorded class name, as pynvml does."""

    NVML_FEATURE_ENABLED = 1
    NVML_TEMPERATURE_GPU = 0
    NVML_VOLATILE_ECC = 0
    NVML_AGGREGATE_ECC = 1
    NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_NVLINK_MAX_LINKS = 36
    nvmlMemory_v2 = 0x02000028

    def __init__(self, raw: dict[str, Any], uuids: list[str], memory_v2: bool = True):
        self.raw = raw
        self.uuids = uuids
        self.memory_v2 = memory_v2
        self.initialised = False
        self.shutdown_called = False

    @staticmethod
    def _answer(recorded: dict[str, Any]) -> Any:
        if "error" in recorded:
            raise type(recorded["error"], (FakeNVMLError,), {})(recorded["message"])
        return recorded["value"]

    @staticmethod
    def _struct(values: dict[str, Any]) -> Any:
        return type(
            "Struct", (), {key: value.encode() if isinstance(value, str) else value for key, value in values.items()}
        )

    def _gpu(self, handle: int) -> dict[str, Any]:
        assert self.initialised, "pynvml called before nvmlInit"
        return self.raw["gpus"][handle]

    def nvmlInit(self) -> None:
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self.shutdown_called = True

    def nvmlSystemGetDriverVersion(self) -> str:
        return self._answer(self.raw["nvmlSystemGetDriverVersion"])

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return self._answer(self.raw["nvmlSystemGetCudaDriverVersion"])

    def nvmlDeviceGetCount(self) -> int:
        return self._answer(self.raw["nvmlDeviceGetCount"])

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        return self.uuids[handle]

    def nvmlDeviceGetName(self, handle: int) -> str:
        return self._answer(self._gpu(handle)["nvmlDeviceGetName"])

    def nvmlDeviceGetPciInfo(self, handle: int) -> Any:
        return self._struct(self._answer(self._gpu(handle)["nvmlDeviceGetPciInfo"]))

    def nvmlDeviceGetMemoryInfo(self, handle: int, version: int | None = None) -> Any:
        if version is not None and not self.memory_v2:
            raise TypeError("nvmlDeviceGetMemoryInfo() got an unexpected keyword argument 'version'")
        name = "nvmlDeviceGetMemoryInfo_v2" if version else "nvmlDeviceGetMemoryInfo"
        return self._struct(self._answer(self._gpu(handle)[name]))

    def nvmlDeviceGetMigMode(self, handle: int) -> list[int]:
        return self._answer(self._gpu(handle)["nvmlDeviceGetMigMode"])

    def nvmlDeviceGetEccMode(self, handle: int) -> list[int]:
        return self._answer(self._gpu(handle)["nvmlDeviceGetEccMode"])

    def nvmlDeviceGetTotalEccErrors(self, handle: int, error_type: int, counter_type: int) -> int:
        return self._answer(self._gpu(handle)["ecc"][f"{error_type}/{counter_type}"])

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        assert sensor == self.NVML_TEMPERATURE_GPU
        return self._answer(self._gpu(handle)["nvmlDeviceGetTemperature"])

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        return self._answer(self._gpu(handle)["nvmlDeviceGetPowerUsage"])

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: int) -> int:
        return self._answer(self._gpu(handle)["nvmlDeviceGetEnforcedPowerLimit"])

    def nvmlDeviceGetPersistenceMode(self, handle: int) -> int:
        return self._answer(self._gpu(handle)["nvmlDeviceGetPersistenceMode"])

    def nvmlDeviceGetNvLinkState(self, handle: int, link: int) -> int:
        recorded = self._gpu(handle)["nvlink"].get(str(link))
        if recorded is None:
            raise type("NVMLError_InvalidArgument", (FakeNVMLError,), {})("Invalid Argument")
        return self._answer(recorded)


def _h100_pynvml(**kwargs: Any) -> FakePynvml:
    return FakePynvml(_recorded("nvml-raw-h100.json"), [H100_UUID], **kwargs)


def test_nvml_replay_gives_what_gather_gave_on_the_device():
    fake = _h100_pynvml()
    facts = gather_nvml(load=lambda: fake).to_dict()
    recorded = _recorded("gather-nvml-h100.json")

    assert fake.shutdown_called
    assert _stable(facts) == _stable(recorded)
    gpu = facts["gpus"][0]
    assert gpu["memory_used_mib"] == recorded["gpus"][0]["memory_used_mib"] == 0
    assert gpu["temperature_c"] == 31
    assert gpu["power_draw_w"] == 68.88  # 68877 mW, read a moment after gather's own 68.96 W
    assert facts["source"] == "nvml" and facts["reason"] is None


def test_nvml_replay_matches_the_recorded_xml():
    nvml = gather_nvml(load=_h100_pynvml).to_dict()
    assert _stable(nvml) == _stable(parse_nvidia_smi_xml(H100_XML).to_dict())


def test_nvml_without_memory_v2_counts_reserved_memory_as_used():
    # pynvml releases before the v2 structure take no version argument; v1 "used" holds the 480 MiB reserve.
    (gpu,) = gather_nvml(load=lambda: _h100_pynvml(memory_v2=False)).gpus
    assert (gpu.memory_total_mib, gpu.memory_used_mib) == (81559, 480)


def test_nvml_unsupported_fields_become_none():
    raw = _recorded("nvml-raw-h100.json")
    unsupported = {"error": "NVMLError_NotSupported", "message": "Not Supported"}
    gpu_raw = raw["gpus"][0]
    for name in list(gpu_raw):
        if name.startswith("nvmlDevice") and name != "nvmlDeviceGetName":
            gpu_raw[name] = unsupported
    gpu_raw["ecc"] = {key: unsupported for key in gpu_raw["ecc"]}
    raw["nvmlSystemGetCudaDriverVersion"] = unsupported

    facts = gather_nvml(load=lambda: FakePynvml(raw, [H100_UUID]))
    (gpu,) = facts.gpus

    assert facts.gpu_count == 1 and facts.cuda_version is None
    assert gpu.name == "NVIDIA H100 80GB HBM3"
    assert gpu.pci_bus_id is None and gpu.memory_total_mib is None and gpu.memory_used_mib is None
    assert gpu.mig_mode.current is None and gpu.ecc_mode.pending is None
    assert gpu.ecc_errors.volatile.corrected is None and gpu.ecc_errors.aggregate.uncorrected is None
    assert gpu.temperature_c is None and gpu.power_draw_w is None and gpu.power_limit_w is None
    assert gpu.persistence_mode is None


def test_nvml_counts_active_nvlinks():
    raw = _recorded("nvml-raw-h100.json")
    raw["gpus"][0]["nvlink"] = {str(link): {"value": 1 if link < 16 else 0} for link in range(18)}

    (gpu,) = gather_nvml(load=lambda: FakePynvml(raw, [H100_UUID])).gpus

    assert (gpu.nvlink_links_total, gpu.nvlink_links_active) == (18, 16)


def test_nvml_cuda_version_is_decoded():
    raw = _recorded("nvml-raw-h100.json")
    raw["nvmlSystemGetCudaDriverVersion"] = {"value": 12040}
    assert gather_nvml(load=lambda: FakePynvml(raw, [H100_UUID])).cuda_version == "12.4"


# ---------------------------------------------------------------------------------------------
# Hosts without GPUs, driver, pynvml or nvidia-smi


NO_PYNVML = "the Python module pynvml (package nvidia-ml-py) is not installed: No module named 'pynvml'"


def _no_pynvml() -> Any:
    raise GpuFactsError(NO_PYNVML)


class _PynvmlWithoutLibrary:
    def nvmlInit(self) -> None:
        raise type("NVMLError_LibraryNotFound", (FakeNVMLError,), {})("NVML Shared Library Not Found")


def _no_nvidia_smi(name: str) -> None:
    return None


def test_host_without_pynvml_and_nvidia_smi_has_zero_gpus_and_a_reason():
    facts = gather(load_pynvml=_no_pynvml, which=_no_nvidia_smi)

    assert facts.gpu_count == 0
    assert facts.gpus == []
    assert facts.source is None
    assert facts.reason == f"{NO_PYNVML}; nvidia-smi not found on PATH"


def test_host_without_driver_library_has_zero_gpus_and_a_reason():
    facts = gather(load_pynvml=_PynvmlWithoutLibrary, which=_no_nvidia_smi)

    assert facts.gpu_count == 0
    assert facts.reason == "NVML could not be loaded: NVML Shared Library Not Found; nvidia-smi not found on PATH"
    assert facts.to_dict()["reason"] == facts.reason


def test_missing_pynvml_module_is_reported_not_raised(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes "import pynvml" raise ImportError
    facts = gather(prefer="nvml", fallback=False)

    assert facts.gpu_count == 0
    assert "pynvml (package nvidia-ml-py) is not installed" in facts.reason


def test_nvidia_smi_that_cannot_reach_the_driver_is_reported(tmp_path):
    script = tmp_path / "nvidia-smi"
    script.write_text(
        '#!/bin/sh\necho "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver."\nexit 9\n'
    )
    script.chmod(0o755)

    facts = gather(prefer="nvidia-smi", fallback=False, which=lambda name: str(script))

    assert facts.gpu_count == 0
    assert facts.reason == (
        f"{script} -q -x exited 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    )


def test_nvidia_smi_is_run_with_q_x(tmp_path):
    script = tmp_path / "nvidia-smi"
    xml = tmp_path / "out.xml"
    xml.write_text(H100_XML)
    script.write_text(f'#!/bin/sh\n[ "$1 $2" = "-q -x" ] || exit 2\ncat {xml}\n')
    script.chmod(0o755)

    facts = gather(prefer="nvidia-smi", which=lambda name: str(script))

    assert facts.source == "nvidia-smi"
    assert facts.gpus[0].name == "NVIDIA H100 80GB HBM3"


def test_nvml_failure_falls_back_to_nvidia_smi():
    facts = gather(
        load_pynvml=_no_pynvml, which=lambda name: "/usr/bin/nvidia-smi", run_nvidia_smi=lambda path: H100_XML
    )

    assert facts.source == "nvidia-smi"
    assert facts.gpu_count == 1
    assert facts.reason is None


def test_nvml_is_preferred_when_both_work():
    facts = gather(load_pynvml=_h100_pynvml, which=lambda name: "/usr/bin/nvidia-smi", run_nvidia_smi=lambda path: "")
    assert facts.source == "nvml"


def test_no_fallback_when_asked_for_one_source():
    facts = gather(
        prefer="nvml",
        fallback=False,
        load_pynvml=_no_pynvml,
        which=lambda name: "/usr/bin/nvidia-smi",
        run_nvidia_smi=lambda path: H100_XML,
    )
    assert facts.gpu_count == 0
    assert facts.reason == NO_PYNVML


def test_malformed_nvidia_smi_output_becomes_a_reason_in_gather():
    facts = gather(
        load_pynvml=_no_pynvml, which=lambda name: "/usr/bin/nvidia-smi", run_nvidia_smi=lambda path: "<nvidia"
    )
    assert facts.gpu_count == 0
    assert "did not print valid XML" in facts.reason


def test_driver_with_no_gpus_keeps_its_version():
    raw = _recorded("nvml-raw-h100.json")
    raw["nvmlDeviceGetCount"] = {"value": 0}
    facts = gather(load_pynvml=lambda: FakePynvml(raw, []), which=_no_nvidia_smi)

    assert facts.gpu_count == 0
    assert facts.driver_version == "580.159.04"
    assert facts.source == "nvml"
    assert facts.reason == "NVML loaded (driver 580.159.04) and reports no NVIDIA GPU; nvidia-smi not found on PATH"


def test_unknown_source_is_refused():
    with pytest.raises(ValueError, match="prefer must be one of nvml, nvidia-smi"):
        gather(prefer="dcgm")


def test_module_utils_imports_no_pynvml_at_load():
    # Hosts without nvidia-ml-py must still import the module (the import happens in gather_nvml).
    source = Path(gpu_facts.__file__).read_text()
    assert "\nimport pynvml" not in source and "\nfrom pynvml" not in source
