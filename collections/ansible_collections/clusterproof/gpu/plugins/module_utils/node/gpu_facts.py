"""What a host's NVIDIA GPUs are and what state they are in, as plain data.

Two sources give the same facts: NVML through the ``pynvml`` module (nvidia-ml-py), imported only
when asked for, and the XML report of ``nvidia-smi -q -x``. A field a GPU or driver does not
report becomes ``None``; a host without GPUs, driver or tools becomes ``gpu_count == 0`` with a
``reason`` that says what each source answered. Reads only: nothing here changes a GPU's state.
"""

from __future__ import annotations

import shutil
import subprocess
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

SOURCES = ("nvml", "nvidia-smi")
MIB = 1024 * 1024
NVIDIA_SMI_TIMEOUT_S = 60


class GpuFactsError(RuntimeError):
    """A source of GPU facts could not be used; the message says which and why."""


class NvidiaSmiParseError(GpuFactsError, ValueError):
    """``nvidia-smi -q -x`` printed something that is not the XML report expected."""


@dataclass
class ModeState:
    """A setting that has a current value and one pending until the next GPU reset (MIG, ECC)."""

    current: bool | None = None
    pending: bool | None = None


@dataclass
class ErrorCounts:
    corrected: int | None = None
    uncorrected: int | None = None


@dataclass
class EccErrors:
    """Volatile counts reset with the driver; aggregate counts last for the GPU's lifetime."""

    volatile: ErrorCounts = field(default_factory=ErrorCounts)
    aggregate: ErrorCounts = field(default_factory=ErrorCounts)


@dataclass
class RetiredPages:
    """Pages retired for repeated single-bit or for double-bit ECC errors (GPUs before Ampere), and
    whether a retirement waits for the next driver load or reset."""

    single_bit: int | None = None
    double_bit: int | None = None
    pending: bool | None = None


@dataclass
class RemappedRows:
    """Rows of memory remapped to spares (Ampere and later), by the kind of error that caused it; a
    remap pending until the next GPU reset; a remap that failed (no spare row left)."""

    correctable: int | None = None
    uncorrectable: int | None = None
    pending: bool | None = None
    failure: bool | None = None


@dataclass
class PcieLink:
    """The PCIe link as it runs now and at most. A GPU lowers its link generation when idle to save
    power; its width stays."""

    current_gen: int | None = None
    max_gen: int | None = None
    current_width: int | None = None
    max_width: int | None = None


# NVML's clocks event (formerly "throttle") reason bits and the names nvidia-smi -q -x gives them
# (<clocks_event_reason_NAME>). Older drivers call the section <clocks_throttle_reasons>.
CLOCKS_EVENT_REASONS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clocks_setting",
}


@dataclass
class GpuFacts:
    index: int
    uuid: str | None = None
    name: str | None = None
    pci_bus_id: str | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    mig_mode: ModeState = field(default_factory=ModeState)
    ecc_mode: ModeState = field(default_factory=ModeState)
    ecc_errors: EccErrors = field(default_factory=EccErrors)
    temperature_c: int | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    persistence_mode: bool | None = None
    # Links the driver reports for this GPU, and how many of them are up; None where it reports none.
    nvlink_links_total: int | None = None
    nvlink_links_active: int | None = None
    # The passive health signals (node/gpu_health judges them).
    serial: str | None = None
    retired_pages: RetiredPages = field(default_factory=RetiredPages)
    remapped_rows: RemappedRows = field(default_factory=RemappedRows)
    # The active clocks event reasons by name (CLOCKS_EVENT_REASONS); None where none is reported.
    clocks_event_reasons: list[str] | None = None
    pcie: PcieLink = field(default_factory=PcieLink)
    power_default_limit_w: float | None = None
    sm_clock_mhz: int | None = None
    sm_clock_max_mhz: int | None = None
    applications_clock_mhz: int | None = None
    applications_clock_default_mhz: int | None = None


@dataclass
class HostGpuFacts:
    gpu_count: int = 0
    driver_version: str | None = None
    cuda_version: str | None = None
    source: str | None = None
    gpus: list[GpuFacts] = field(default_factory=list)
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------------------------------------
# nvidia-smi -q -x


def _text(node: ElementTree.Element | None, path: str) -> str | None:
    """The stripped text at ``path``, or None where it is absent or says the GPU does not report it."""
    if node is None:
        return None
    found = node.find(path)
    if found is None or found.text is None:
        return None
    value = found.text.strip()
    if not value or value in ("N/A", "[N/A]", "Unknown Error") or value.startswith("[Not Supported]"):
        return None
    return value


def _number(value: str | None) -> float | None:
    """``'81559 MiB'`` -> 81559.0, ``'71.35 W'`` -> 71.35; None where there is no number."""
    if value is None:
        return None
    try:
        return float(value.split()[0])
    except (ValueError, IndexError):
        return None


def _int(value: str | None) -> int | None:
    number = _number(value)
    return None if number is None else int(number)


def _enabled(value: str | None) -> bool | None:
    if value is None:
        return None
    lowered = value.lower()
    if lowered == "enabled":
        return True
    if lowered == "disabled":
        return False
    return None


def _first_number(node: ElementTree.Element, *paths: str) -> float | None:
    for path in paths:
        number = _number(_text(node, path))
        if number is not None:
            return number
    return None


def _sum_counts(node: ElementTree.Element | None, names: list[str]) -> int | None:
    """Sum of the integer counters named; None when none of them is reported."""
    if node is None:
        return None
    values = [_int(_text(node, name)) for name in names]
    present = [value for value in values if value is not None]
    return sum(present) if present else None


def _parse_error_counts(node: ElementTree.Element | None) -> ErrorCounts:
    if node is None:
        return ErrorCounts()
    # Drivers before R525 report single_bit/double_bit totals; later ones split SRAM and DRAM.
    if node.find("single_bit") is not None or node.find("double_bit") is not None:
        return ErrorCounts(
            corrected=_int(_text(node, "single_bit/total")),
            uncorrected=_int(_text(node, "double_bit/total")),
        )
    names = [child.tag for child in node]
    return ErrorCounts(
        corrected=_sum_counts(node, [n for n in names if n.endswith("_correctable")]),
        uncorrected=_sum_counts(node, [n for n in names if "_uncorrectable" in n]),
    )


def _parse_nvlink(gpu: ElementTree.Element) -> tuple[int | None, int | None]:
    """NVLink links from a ``<nvlink>`` section where the driver writes one (not all do)."""
    links = gpu.findall("nvlink/link") or gpu.findall("nvlinks/nvlink")
    if not links:
        return None, None
    states = [(_text(link, "state") or _text(link, "link_state") or "").lower() for link in links]
    return len(states), sum(1 for state in states if state in ("active", "up", "enabled"))


def _yes(value: str | None) -> bool | None:
    if value is None:
        return None
    return {"yes": True, "no": False}.get(value.lower())


def _parse_retired_pages(gpu: ElementTree.Element) -> RetiredPages:
    node = gpu.find("retired_pages")
    if node is None:
        return RetiredPages()
    return RetiredPages(
        single_bit=_int(_text(node, "multiple_single_bit_retirement/retired_count")),
        double_bit=_int(_text(node, "double_bit_retirement/retired_count")),
        pending=_yes(_text(node, "pending_retirement")),
    )


def _parse_remapped_rows(gpu: ElementTree.Element) -> RemappedRows:
    node = gpu.find("remapped_rows")
    if node is None:
        return RemappedRows()
    return RemappedRows(
        correctable=_int(_text(node, "remapped_row_corr")),
        uncorrectable=_int(_text(node, "remapped_row_unc")),
        pending=_yes(_text(node, "remapped_row_pending")),
        failure=_yes(_text(node, "remapped_row_failure")),
    )


def _parse_clocks_event_reasons(gpu: ElementTree.Element) -> list[str] | None:
    for section, prefix in (
        ("clocks_event_reasons", "clocks_event_reason_"),
        ("clocks_throttle_reasons", "clocks_throttle_reason_"),
    ):
        node = gpu.find(section)
        if node is None:
            continue
        active = []
        for child in node:
            name = child.tag.removeprefix(prefix)
            if (child.text or "").strip().lower() == "active":
                active.append(name)
        return active
    return None


def _parse_pcie(gpu: ElementTree.Element) -> PcieLink:
    link = gpu.find("pci/pci_gpu_link_info")

    def width(path: str) -> int | None:  # "16x"
        return _int((_text(link, path) or "").rstrip("x"))

    return PcieLink(
        current_gen=_int(_text(link, "pcie_gen/current_link_gen")),
        max_gen=_int(_text(link, "pcie_gen/max_link_gen")),
        current_width=width("link_widths/current_link_width"),
        max_width=width("link_widths/max_link_width"),
    )


def _parse_gpu(gpu: ElementTree.Element, index: int, driver: str | None, cuda: str | None) -> GpuFacts:
    # nvidia-smi lists GPUs in PCI order, which is NVML's index order; minor_number is the /dev node.
    nvlink_total, nvlink_active = _parse_nvlink(gpu)
    return GpuFacts(
        index=index,
        uuid=_text(gpu, "uuid"),
        name=_text(gpu, "product_name"),
        pci_bus_id=gpu.get("id") or _text(gpu, "pci/pci_bus_id"),
        memory_total_mib=_int(_text(gpu, "fb_memory_usage/total")),
        memory_used_mib=_int(_text(gpu, "fb_memory_usage/used")),
        driver_version=driver,
        cuda_version=cuda,
        mig_mode=ModeState(
            current=_enabled(_text(gpu, "mig_mode/current_mig")),
            pending=_enabled(_text(gpu, "mig_mode/pending_mig")),
        ),
        ecc_mode=ModeState(
            current=_enabled(_text(gpu, "ecc_mode/current_ecc")),
            pending=_enabled(_text(gpu, "ecc_mode/pending_ecc")),
        ),
        ecc_errors=EccErrors(
            volatile=_parse_error_counts(gpu.find("ecc_errors/volatile")),
            aggregate=_parse_error_counts(gpu.find("ecc_errors/aggregate")),
        ),
        temperature_c=_int(_text(gpu, "temperature/gpu_temp")),
        # R535+ writes gpu_power_readings; older drivers write power_readings.
        power_draw_w=_first_number(
            gpu, "gpu_power_readings/power_draw", "gpu_power_readings/instant_power_draw", "power_readings/power_draw"
        ),
        power_limit_w=_first_number(
            gpu,
            "gpu_power_readings/current_power_limit",
            "gpu_power_readings/enforced_power_limit",
            "power_readings/enforced_power_limit",
            "power_readings/power_limit",
        ),
        persistence_mode=_enabled(_text(gpu, "persistence_mode")),
        nvlink_links_total=nvlink_total,
        nvlink_links_active=nvlink_active,
        serial=_text(gpu, "serial"),
        retired_pages=_parse_retired_pages(gpu),
        remapped_rows=_parse_remapped_rows(gpu),
        clocks_event_reasons=_parse_clocks_event_reasons(gpu),
        pcie=_parse_pcie(gpu),
        power_default_limit_w=_first_number(
            gpu, "gpu_power_readings/default_power_limit", "power_readings/default_power_limit"
        ),
        sm_clock_mhz=_int(_text(gpu, "clocks/sm_clock")),
        sm_clock_max_mhz=_int(_text(gpu, "max_clocks/sm_clock")),
        applications_clock_mhz=_int(_text(gpu, "applications_clocks/graphics_clock")),
        applications_clock_default_mhz=_int(_text(gpu, "default_applications_clocks/graphics_clock")),
    )


def parse_nvidia_smi_xml(text: str) -> HostGpuFacts:
    """Facts from the output of ``nvidia-smi -q -x``; raises NvidiaSmiParseError on anything else."""
    if not text or not text.strip():
        raise NvidiaSmiParseError("nvidia-smi -q -x printed nothing; expected an <nvidia_smi_log> XML report")
    try:
        root = ElementTree.fromstring(text.strip())
    except ElementTree.ParseError as error:
        first_line = text.strip().splitlines()[0][:200]
        raise NvidiaSmiParseError(
            f"nvidia-smi -q -x did not print valid XML ({error}); its output began with: {first_line!r}"
        ) from error
    if root.tag != "nvidia_smi_log":
        raise NvidiaSmiParseError(f"nvidia-smi -q -x printed XML whose root is <{root.tag}>; expected <nvidia_smi_log>")
    driver = _text(root, "driver_version")
    cuda = _text(root, "cuda_version")
    gpus = [_parse_gpu(gpu, index, driver, cuda) for index, gpu in enumerate(root.findall("gpu"))]
    attached = _int(_text(root, "attached_gpus"))
    if attached is not None and attached != len(gpus):
        raise NvidiaSmiParseError(
            f"nvidia-smi -q -x says attached_gpus={attached} but lists {len(gpus)} <gpu> elements"
        )
    facts = HostGpuFacts(gpu_count=len(gpus), driver_version=driver, cuda_version=cuda, source="nvidia-smi", gpus=gpus)
    if not gpus:
        facts.reason = f"nvidia-smi ran (driver {driver or 'unknown'}) and reports no NVIDIA GPU"
    return facts


def _run_nvidia_smi(path: str) -> str:
    try:
        completed = subprocess.run(
            [path, "-q", "-x"], capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as error:
        raise GpuFactsError(f"{path} -q -x did not answer within {NVIDIA_SMI_TIMEOUT_S} s") from error
    except OSError as error:
        raise GpuFactsError(f"{path} could not be run: {error}") from error
    if completed.returncode != 0:
        # nvidia-smi writes why (e.g. "couldn't communicate with the NVIDIA driver") on stdout.
        said = " ".join((completed.stdout + " " + completed.stderr).split())[:300]
        raise GpuFactsError(f"{path} -q -x exited {completed.returncode}: {said or 'no output'}")
    return completed.stdout


def gather_nvidia_smi(
    which: Callable[[str], str | None] = shutil.which, run: Callable[[str], str] = _run_nvidia_smi
) -> HostGpuFacts:
    """Facts from ``nvidia-smi -q -x``; raises GpuFactsError where nvidia-smi is missing or fails."""
    path = which("nvidia-smi")
    if path is None:
        raise GpuFactsError("nvidia-smi not found on PATH")
    return parse_nvidia_smi_xml(run(path))


# ---------------------------------------------------------------------------------------------
# NVML


def _load_pynvml() -> Any:
    try:
        import pynvml  # nvidia-ml-py; only hosts that are asked for NVML facts need it
    except ImportError as error:
        raise GpuFactsError(f"the Python module pynvml (package nvidia-ml-py) is not installed: {error}") from error
    return pynvml


def _decode(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


def _describe(error: Exception) -> str:
    return str(error) or type(error).__name__


def _nvml_field(call: Callable[[], Any]) -> Any:
    """The call's answer, or None where this GPU or driver does not report the field."""
    try:
        return _decode(call())
    except Exception:  # pynvml raises one NVMLError subclass per return code; all mean "no value" here
        return None


def _nvml_cuda_version(nvml: Any) -> str | None:
    version = _nvml_field(nvml.nvmlSystemGetCudaDriverVersion)
    if not isinstance(version, int) or version <= 0:
        return None
    # NVML encodes 13.0 as 13000 and 12.4 as 12040.
    return f"{version // 1000}.{(version % 1000) // 10}"


def _nvml_memory(nvml: Any, handle: Any) -> tuple[int | None, int | None]:
    # The v2 structure leaves driver-reserved memory out of "used", as nvidia-smi does.
    version = getattr(nvml, "nvmlMemory_v2", None)
    memory = _nvml_field(lambda: nvml.nvmlDeviceGetMemoryInfo(handle, version=version)) if version else None
    if memory is None:
        memory = _nvml_field(lambda: nvml.nvmlDeviceGetMemoryInfo(handle))
    if memory is None:
        return None, None
    return int(memory.total) // MIB, int(memory.used) // MIB


def _nvml_mode(nvml: Any, call: Callable[[], Any]) -> ModeState:
    pair = _nvml_field(call)
    if not pair or len(pair) != 2:
        return ModeState()
    enabled = getattr(nvml, "NVML_FEATURE_ENABLED", 1)
    return ModeState(current=pair[0] == enabled, pending=pair[1] == enabled)


def _nvml_counts(nvml: Any, handle: Any, counter: int) -> ErrorCounts:
    return ErrorCounts(
        corrected=_nvml_field(
            lambda: nvml.nvmlDeviceGetTotalEccErrors(handle, nvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, counter)
        ),
        uncorrected=_nvml_field(
            lambda: nvml.nvmlDeviceGetTotalEccErrors(handle, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, counter)
        ),
    )


def _nvml_nvlink(nvml: Any, handle: Any) -> tuple[int | None, int | None]:
    states = []
    for link in range(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
        state = _nvml_field(lambda link=link: nvml.nvmlDeviceGetNvLinkState(handle, link))
        if state is not None:
            states.append(state)
    if not states:
        return None, None
    return len(states), sum(1 for state in states if state == getattr(nvml, "NVML_FEATURE_ENABLED", 1))


def _watts(milliwatts: Any) -> float | None:
    return None if milliwatts is None else round(milliwatts / 1000.0, 2)


def _nvml_retired_pages(nvml: Any, handle: Any) -> RetiredPages:
    def count(cause: int) -> int | None:
        pages = _nvml_field(lambda: nvml.nvmlDeviceGetRetiredPages(handle, cause))
        return None if pages is None else len(pages)

    pending = _nvml_field(lambda: nvml.nvmlDeviceGetRetiredPagesPendingStatus(handle))
    return RetiredPages(
        single_bit=count(getattr(nvml, "NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS", 0)),
        double_bit=count(getattr(nvml, "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", 1)),
        pending=None if pending is None else pending == getattr(nvml, "NVML_FEATURE_ENABLED", 1),
    )


def _nvml_remapped_rows(nvml: Any, handle: Any) -> RemappedRows:
    # (corrRows, uncRows, isPending, failureOccurred)
    rows = _nvml_field(lambda: nvml.nvmlDeviceGetRemappedRows(handle))
    if not rows or len(rows) != 4:
        return RemappedRows()
    return RemappedRows(
        correctable=int(rows[0]), uncorrectable=int(rows[1]), pending=bool(rows[2]), failure=bool(rows[3])
    )


def _nvml_clocks_event_reasons(nvml: Any, handle: Any) -> list[str] | None:
    # nvidia-ml-py 12.535 renamed "throttle" to "clocks event"; older releases have only the old name.
    call = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
    )
    mask = None if call is None else _nvml_field(lambda: call(handle))
    if not isinstance(mask, int):
        return None
    return [name for bit, name in CLOCKS_EVENT_REASONS.items() if mask & bit]


def _nvml_pcie(nvml: Any, handle: Any) -> PcieLink:
    return PcieLink(
        current_gen=_nvml_field(lambda: nvml.nvmlDeviceGetCurrPcieLinkGeneration(handle)),
        max_gen=_nvml_field(lambda: nvml.nvmlDeviceGetMaxPcieLinkGeneration(handle)),
        current_width=_nvml_field(lambda: nvml.nvmlDeviceGetCurrPcieLinkWidth(handle)),
        max_width=_nvml_field(lambda: nvml.nvmlDeviceGetMaxPcieLinkWidth(handle)),
    )


def _nvml_gpu(nvml: Any, index: int, driver: str | None, cuda: str | None) -> GpuFacts:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    pci = _nvml_field(lambda: nvml.nvmlDeviceGetPciInfo(handle))
    persistence = _nvml_field(lambda: nvml.nvmlDeviceGetPersistenceMode(handle))
    memory_total, memory_used = _nvml_memory(nvml, handle)
    nvlink_total, nvlink_active = _nvml_nvlink(nvml, handle)
    enabled = getattr(nvml, "NVML_FEATURE_ENABLED", 1)
    sm_clock = getattr(nvml, "NVML_CLOCK_SM", 1)
    graphics_clock = getattr(nvml, "NVML_CLOCK_GRAPHICS", 0)
    return GpuFacts(
        index=index,
        uuid=_nvml_field(lambda: nvml.nvmlDeviceGetUUID(handle)),
        name=_nvml_field(lambda: nvml.nvmlDeviceGetName(handle)),
        pci_bus_id=None if pci is None else _decode(pci.busId),
        memory_total_mib=memory_total,
        memory_used_mib=memory_used,
        driver_version=driver,
        cuda_version=cuda,
        mig_mode=_nvml_mode(nvml, lambda: nvml.nvmlDeviceGetMigMode(handle)),
        ecc_mode=_nvml_mode(nvml, lambda: nvml.nvmlDeviceGetEccMode(handle)),
        ecc_errors=EccErrors(
            volatile=_nvml_counts(nvml, handle, nvml.NVML_VOLATILE_ECC),
            aggregate=_nvml_counts(nvml, handle, nvml.NVML_AGGREGATE_ECC),
        ),
        temperature_c=_nvml_field(lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)),
        power_draw_w=_watts(_nvml_field(lambda: nvml.nvmlDeviceGetPowerUsage(handle))),
        power_limit_w=_watts(_nvml_field(lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle))),
        persistence_mode=None if persistence is None else persistence == enabled,
        nvlink_links_total=nvlink_total,
        nvlink_links_active=nvlink_active,
        serial=_nvml_field(lambda: nvml.nvmlDeviceGetSerial(handle)),
        retired_pages=_nvml_retired_pages(nvml, handle),
        remapped_rows=_nvml_remapped_rows(nvml, handle),
        clocks_event_reasons=_nvml_clocks_event_reasons(nvml, handle),
        pcie=_nvml_pcie(nvml, handle),
        power_default_limit_w=_watts(_nvml_field(lambda: nvml.nvmlDeviceGetPowerManagementDefaultLimit(handle))),
        sm_clock_mhz=_nvml_field(lambda: nvml.nvmlDeviceGetClockInfo(handle, sm_clock)),
        sm_clock_max_mhz=_nvml_field(lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, sm_clock)),
        applications_clock_mhz=_nvml_field(lambda: nvml.nvmlDeviceGetApplicationsClock(handle, graphics_clock)),
        applications_clock_default_mhz=_nvml_field(
            lambda: nvml.nvmlDeviceGetDefaultApplicationsClock(handle, graphics_clock)
        ),
    )


def gather_nvml(load: Callable[[], Any] = _load_pynvml) -> HostGpuFacts:
    """Facts from NVML; raises GpuFactsError where pynvml, the library or the driver is missing."""
    nvml = load()
    try:
        nvml.nvmlInit()
    except Exception as error:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...
        raise GpuFactsError(f"NVML could not be loaded: {_describe(error)}") from error
    try:
        driver = _nvml_field(nvml.nvmlSystemGetDriverVersion)
        cuda = _nvml_cuda_version(nvml)
        try:
            count = int(nvml.nvmlDeviceGetCount())
            gpus = [_nvml_gpu(nvml, index, driver, cuda) for index in range(count)]
        except Exception as error:
            raise GpuFactsError(f"NVML could not list the GPUs: {_describe(error)}") from error
    finally:
        _nvml_field(nvml.nvmlShutdown)
    facts = HostGpuFacts(gpu_count=len(gpus), driver_version=driver, cuda_version=cuda, source="nvml", gpus=gpus)
    if not gpus:
        facts.reason = f"NVML loaded (driver {driver or 'unknown'}) and reports no NVIDIA GPU"
    return facts


# ---------------------------------------------------------------------------------------------


def gather(
    prefer: str = "nvml",
    fallback: bool = True,
    load_pynvml: Callable[[], Any] = _load_pynvml,
    which: Callable[[str], str | None] = shutil.which,
    run_nvidia_smi: Callable[[str], str] = _run_nvidia_smi,
) -> HostGpuFacts:
    """Facts from the preferred source, then (with fallback) the other; never raises for a host
    without GPUs, driver or tools: gpu_count is 0 and reason says what each source answered."""
    if prefer not in SOURCES:
        raise ValueError(f"prefer must be one of {', '.join(SOURCES)}, not {prefer!r}")
    readers: dict[str, Callable[[], HostGpuFacts]] = {
        "nvml": lambda: gather_nvml(load_pynvml),
        "nvidia-smi": lambda: gather_nvidia_smi(which, run_nvidia_smi),
    }
    order = [prefer] + ([s for s in SOURCES if s != prefer] if fallback else [])
    reasons = []
    empty: HostGpuFacts | None = None
    for source in order:
        try:
            facts = readers[source]()
        except GpuFactsError as error:
            reasons.append(str(error))
            continue
        if facts.gpu_count > 0:
            return facts
        reasons.append(facts.reason or f"{source} reports no NVIDIA GPU")
        empty = empty or facts
    result = empty or HostGpuFacts()
    result.reason = "; ".join(reasons)
    return result
