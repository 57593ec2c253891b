"""Passive GPU health: the signals a GPU gives before any load, judged into checks with an action.

May import the standard library, ``node.gpu_facts`` and ``report.model``. Touches: the host's
kernel log, read only (:func:`read_kernel_log`, the only function here that runs anything); the
rest is pure and judges what ``gpu_facts`` gathered (as its ``to_dict()`` data) and the kernel
log's text.

What is checked, per GPU (a failed or warning signal is the check ``gpu-health/<host>/gpu<index>/<signal>``;
the rest are folded into one check per GPU, ``gpu<index>/passive``):

* ``ecc``: uncorrected ECC errors since the driver loaded fail (reset the GPU); uncorrected
  errors only in the lifetime count warn; ECC switched off warns.
* ``memory-repair``: a row remap (Ampere and later) or page retirement (before) waiting for a
  reset fails (reset); a remap that failed, or a retirement table nearly full, fails (replace).
* ``clock-events``: a hardware slowdown (thermal, power brake) or software thermal slowdown
  active on an idle GPU fails (isolate the node, look at cooling and power); the power cap hit
  with no load warns.
* ``pcie``: a link narrower than the GPU's maximum fails (a seating or riser fault); a lower link
  generation is normal while the GPU idles (it saves power) and warns only when it does not idle.
* ``power-limit``: an enforced limit below the GPU's default warns (the GPU will run slower than
  its datasheet).
* ``persistence``: persistence mode off warns.
* ``applications-clocks``: application clocks set away from their default warn.
* ``pending-modes``: a MIG or ECC mode change waiting for a reset warns.
* ``xid``: the XID events the driver logged for the GPU since boot, each by NVIDIA's XID catalog
  (``XIDS``): an application's fault warns; a hardware one fails with its action.

Per host (``gpu-health/<host>/<signal>``): the GPUs visible against those declared (a GPU that
fell off the bus is not listed), the driver branch and CUDA version against the inventory's
pins, and XID events for a PCI address no listed GPU has.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.node import gpu_facts
from ansible_collections.clusterproof.gpu.plugins.module_utils.report.model import (
    ISOLATE_NODE,
    REBOOT_NODE,
    REPLACE_GPU,
    RESET_GPU,
    Check,
    Table,
)

SECTION_ID_PREFIX = "gpu-health"
KERNEL_LOG_SOURCES = ("auto", "journalctl", "dmesg", "none")
KERNEL_LOG_TIMEOUT_S = 60

# A GPU's page retirement table holds 64 pages (NVIDIA's "Dynamic Page Retirement" guide); one that
# is nearly full cannot retire more and is due for replacement.
RETIRED_PAGES_LIMIT = 60
# Clock event reasons that mean the hardware is protecting itself, not a setting or an idle GPU.
HARDWARE_SLOWDOWNS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown")

# What to do about hardware that protects itself or runs a narrow link: the node out of service
# first, then the fix.
COOLING_ACTION = f"{ISOLATE_NODE}; check the node's cooling, fans and power supplies; {REPLACE_GPU} if it persists"
LINK_ACTION = f"{ISOLATE_NODE}; {REBOOT_NODE}; if the link stays narrow, reseat the GPU or {REPLACE_GPU}"
REACH_ACTION = "reach the node (SSH, or its BMC console); reboot it if it hangs, then validate again"


@dataclass(frozen=True)
class Xid:
    """One kind of XID event in NVIDIA's XID catalog: how bad it is and what to do."""

    status: str  # "warn" (an application's fault, or informational) or "fail"
    meaning: str
    action: str | None = None


# From NVIDIA's XID catalog (docs.nvidia.com/deploy/xid-errors). Codes not listed warn, naming the
# catalog; the application faults (13, 31, 43, 45) warn, since a bad job raises them on a healthy GPU.
XIDS: dict[int, Xid] = {
    13: Xid("warn", "graphics engine exception (usually the application)"),
    31: Xid("warn", "GPU memory page fault (usually the application)"),
    43: Xid("warn", "GPU stopped processing (usually the application)"),
    45: Xid("warn", "preemptive cleanup, after an earlier error"),
    48: Xid("fail", "double-bit ECC error", RESET_GPU),
    61: Xid("fail", "internal micro-controller breakpoint", RESET_GPU),
    62: Xid("fail", "internal micro-controller halt", RESET_GPU),
    63: Xid("warn", "ECC page retirement or row remap recorded (the memory-repair check says if a reset waits)"),
    64: Xid("fail", "ECC page retirement or row remap failed", REPLACE_GPU),
    74: Xid("fail", "NVLink error", RESET_GPU),
    79: Xid("fail", "GPU has fallen off the bus", REBOOT_NODE),
    92: Xid("warn", "high single-bit ECC error rate"),
    94: Xid("fail", "contained ECC error (the application was stopped)", RESET_GPU),
    95: Xid("fail", "uncontained ECC error", RESET_GPU),
    119: Xid("fail", "GSP firmware timed out", RESET_GPU),
    120: Xid("fail", "GSP firmware error", RESET_GPU),
    140: Xid("fail", "unrecovered ECC error", RESET_GPU),
}
# XID 154 (R550 and later) names the recovery the driver asks for: "... changed from 0x0 (None) to
# 0x1 (GPU Reset Required)". Its action replaces the code's.
RECOVERY_ACTIONS: dict[int, str | None] = {
    0: None,
    1: RESET_GPU,
    2: REBOOT_NODE,
    3: ISOLATE_NODE,
    4: f"{ISOLATE_NODE}, then {RESET_GPU}",
}
# "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
XID_LINE = re.compile(
    r"NVRM: Xid \(PCI:(?P<domain>[0-9a-fA-F]{4,8}):(?P<bus>[0-9a-fA-F]{2}):(?P<device>[0-9a-fA-F]{2})"
    r"(?:\.[0-9a-fA-F])?\): (?P<code>\d+),\s*(?P<text>.*)"
)
RECOVERY = re.compile(r"to 0x(?P<value>[0-9a-fA-F]+)")
# Actions from mildest to gravest: a GPU with several events gets the gravest one.
_ACTION_ORDER = (ISOLATE_NODE, RESET_GPU, f"{ISOLATE_NODE}, then {RESET_GPU}", REBOOT_NODE, REPLACE_GPU)


class KernelLogError(RuntimeError):
    """The kernel log could not be read; the message says how it was tried."""


@dataclass(frozen=True)
class HealthPins:
    """What the inventory pins: the driver branch (its major version, "580") and the least CUDA
    version the driver must support ("12.4"); empty where nothing is pinned."""

    driver_branch: str = ""
    cuda_version: str = ""
    gpu_count: int | None = None


@dataclass(frozen=True)
class XidEvent:
    code: int
    pci: tuple[int, int, int]  # domain, bus, device
    text: str

    @property
    def kind(self) -> Xid:
        known = XIDS.get(self.code)
        if self.code == 154:
            found = RECOVERY.search(self.text)
            action = RECOVERY_ACTIONS.get(int(found["value"], 16)) if found else None
            return Xid("fail" if action else "warn", "GPU recovery action changed", action)
        return known or Xid("warn", "not in this validator's table; look it up in NVIDIA's XID catalog")

    def describe(self) -> str:
        return f"XID {self.code} ({self.kind.meaning}): {self.text[:160]}"


def parse_xids(kernel_log: str) -> list[XidEvent]:
    """The XID events in a kernel log's text, in order."""
    events = []
    for line in kernel_log.splitlines():
        found = XID_LINE.search(line)
        if found:
            pci = (int(found["domain"], 16), int(found["bus"], 16), int(found["device"], 16))
            events.append(XidEvent(int(found["code"]), pci, found["text"].strip()))
    return events


def pci_address(bus_id: str | None) -> tuple[int, int, int] | None:
    """``"00000000:3B:00.0"`` -> (0, 0x3b, 0); None where it is not a PCI bus id."""
    if not bus_id:
        return None
    found = re.fullmatch(r"([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.[0-9a-fA-F])?", bus_id.strip())
    if not found:
        return None
    return int(found[1], 16), int(found[2], 16), int(found[3], 16)


def _run(argv: Sequence[str]) -> str:
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=KERNEL_LOG_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise KernelLogError(f"{argv[0]} could not be run: {error}") from error
    if done.returncode != 0:
        said = " ".join((done.stderr or done.stdout).split())[:200]
        raise KernelLogError(f"{' '.join(argv)} exited {done.returncode}: {said or 'no output'}")
    return done.stdout


# The kernel's messages since boot: the journal's (this boot), else the ring buffer's.
KERNEL_LOG_COMMANDS = {
    "journalctl": ("journalctl", "--dmesg", "--boot", "--no-pager", "--quiet", "--output=short-monotonic"),
    "dmesg": ("dmesg",),
}


def read_kernel_log(source: str = "auto", run: Callable[[Sequence[str]], str] = _run) -> str:
    """The kernel log's text since boot; raises KernelLogError with how each way failed."""
    if source not in KERNEL_LOG_SOURCES or source == "none":
        raise ValueError(f"kernel log source must be one of auto, journalctl, dmesg, not {source!r}")
    order = ["journalctl", "dmesg"] if source == "auto" else [source]
    failures = []
    for name in order:
        try:
            return run(KERNEL_LOG_COMMANDS[name])
        except KernelLogError as error:
            failures.append(str(error))
    raise KernelLogError("; ".join(failures))


# ---------------------------------------------------------------------------------------------
# Judging one GPU


@dataclass(frozen=True)
class _Signal:
    """One signal of one GPU, or of the host, being judged: what every verdict on it shares."""

    host: str
    where: str  # "gpu<index>"; empty for a signal of the host
    name: str
    title: str
    expected: Any = None

    def verdict(
        self, status: str, observed: Any, message: str, category: str | None = None, action: str | None = None
    ) -> Check:
        """The check of this signal. Only a failure or a warning keeps a category (hardware unless
        said) and an action: nothing is to be done about a signal that passed or was not read."""
        if status in ("fail", "warn"):
            category = category or "hardware"
        else:
            category, action = None, None
        return Check(
            id=(
                f"{SECTION_ID_PREFIX}/{self.host}/{self.where}/{self.name}"
                if self.where
                else f"{SECTION_ID_PREFIX}/{self.host}/{self.name}"
            ),
            title=self.title,
            status=status,
            expected=self.expected,
            observed=observed,
            message=message,
            category=category,
            action=action,
        )

    def not_reported(self, what: str) -> Check:
        # Nothing was read, so the check claims no expected value either.
        return replace(self, expected=None).verdict("skip", None, f"{what} not reported by this GPU or driver")

    def pass_or_fail(self, ok: bool, observed: Any, passed: str, failed: str, category: str, action: str) -> Check:
        """A check that holds or fails, with a message for each."""
        if ok:
            return self.verdict("pass", observed, passed)
        return self.verdict("fail", observed, failed, category, action)


def _ecc(host: str, where: str, label: str, gpu: Mapping[str, Any]) -> Check:
    errors, mode = gpu.get("ecc_errors") or {}, gpu.get("ecc_mode") or {}
    volatile = (errors.get("volatile") or {}).get("uncorrected")
    aggregate = (errors.get("aggregate") or {}).get("uncorrected")
    observed = {"volatile": errors.get("volatile"), "aggregate": errors.get("aggregate"), "ecc": mode.get("current")}
    signal = _Signal(
        host, where, "ecc", f"{label}: no uncorrected ECC errors", {"volatile uncorrected": 0, "ecc": True}
    )
    if volatile:
        message = f"{volatile} uncorrected ECC errors since the driver loaded: the GPU's memory returned bad data"
        return signal.verdict("fail", observed, message, action=RESET_GPU)
    if mode.get("current") is False:
        action = f"enable ECC (nvidia-smi -e 1), then {RESET_GPU}"
        return signal.verdict("warn", observed, "ECC is off: memory errors go undetected", "configuration", action)
    if volatile is None and aggregate is None:
        return signal.not_reported("ECC error counts")
    if aggregate:
        message = (
            f"{aggregate} uncorrected ECC errors over the GPU's life, none since the driver loaded; "
            "its memory repair check says whether the memory was repaired"
        )
        return signal.verdict("warn", observed, message, action=f"watch the count; {REPLACE_GPU} if it grows")
    return signal.verdict("pass", observed, "no uncorrected ECC error")


def _memory_repair(host: str, where: str, label: str, gpu: Mapping[str, Any]) -> Check:
    title = f"{label}: memory repair (row remapping, page retirement) has room and nothing pending"
    rows, pages = gpu.get("remapped_rows") or {}, gpu.get("retired_pages") or {}
    if any(value is not None for value in rows.values()):
        signal = _Signal(host, where, "memory-repair", title, {"pending": False, "failure": False})
        if rows.get("failure"):
            message = "a row remap failed: the GPU has no spare row left for a bad one"
            return signal.verdict("fail", rows, message, action=REPLACE_GPU)
        if rows.get("pending"):
            message = "a row remap waits for a GPU reset; until then the bad row stays in use"
            return signal.verdict("fail", rows, message, action=RESET_GPU)
        remapped = (rows.get("correctable") or 0) + (rows.get("uncorrectable") or 0)
        return signal.verdict("pass", rows, f"{remapped} rows remapped, none pending, no failure")
    signal = _Signal(host, where, "memory-repair", title, {"pending": False, "retired": f"< {RETIRED_PAGES_LIMIT}"})
    if not any(value is not None for value in pages.values()):
        return signal.not_reported("row remapping and page retirement")
    retired = (pages.get("single_bit") or 0) + (pages.get("double_bit") or 0)
    if pages.get("pending"):
        message = "a page retirement waits for the driver to reload (a GPU reset)"
        return signal.verdict("fail", pages, message, action=RESET_GPU)
    if retired >= RETIRED_PAGES_LIMIT:
        message = f"{retired} pages retired: the retirement table (64 pages) is nearly full"
        return signal.verdict("fail", pages, message, action=REPLACE_GPU)
    return signal.verdict("pass", pages, f"{retired} pages retired, none pending")


def _clock_events(host: str, where: str, label: str, gpu: Mapping[str, Any]) -> Check:
    reasons = gpu.get("clocks_event_reasons")
    expected = "none of " + ", ".join(HARDWARE_SLOWDOWNS)
    signal = _Signal(host, where, "clock-events", f"{label}: no hardware slowdown", expected)
    if reasons is None:
        return signal.not_reported("clock event (throttle) reasons")
    slowdowns = [reason for reason in reasons if reason in HARDWARE_SLOWDOWNS]
    if slowdowns:
        message = f"the GPU slows itself down ({', '.join(slowdowns)}) before any load: it is too hot or short of power"
        return signal.verdict("fail", reasons, message, action=COOLING_ACTION)
    if "sw_power_cap" in reasons:
        message = "the power cap holds the clocks down with no load: is the power limit set low?"
        action = "compare the power limit with the default (nvidia-smi -q -d POWER)"
        return signal.verdict("warn", reasons, message, "configuration", action)
    return signal.verdict("pass", reasons, ", ".join(reasons) or "none active")


def _pcie(host: str, where: str, label: str, gpu: Mapping[str, Any]) -> Check:
    link = gpu.get("pcie") or {}
    now_width, max_width = link.get("current_width"), link.get("max_width")
    now_gen, max_gen = link.get("current_gen"), link.get("max_gen")
    title = f"{label}: PCIe link at its full width and generation"
    signal = _Signal(host, where, "pcie", title, {"width": max_width, "gen": max_gen})
    if None in (now_width, max_width) and None in (now_gen, max_gen):
        return signal.not_reported("the PCIe link")
    observed = {"width": now_width, "gen": now_gen}
    if now_width is not None and max_width is not None and now_width < max_width:
        message = f"the link runs x{now_width} of x{max_width}: host-to-GPU copies get that fraction of the bandwidth"
        return signal.verdict("fail", observed, message, action=LINK_ACTION)
    if now_gen is not None and max_gen is not None and now_gen < max_gen:
        if "gpu_idle" in (gpu.get("clocks_event_reasons") or []):
            message = f"generation {now_gen} of {max_gen} while the GPU idles (it lowers the link to save power)"
            return signal.verdict("pass", observed, message)
        message = (
            f"the link runs at generation {now_gen} of {max_gen} and the GPU is not idle; "
            "the benchmark's copy figure shows whether it costs bandwidth"
        )
        return signal.verdict("warn", observed, message, action=LINK_ACTION)
    return signal.verdict("pass", observed, f"x{now_width}, generation {now_gen}")


def _power_limit(host: str, where: str, label: str, gpu: Mapping[str, Any]) -> Check:
    limit, default = gpu.get("power_limit_w"), gpu.get("power_default_limit_w")
    signal = _Signal(host, where, "power-limit", f"{label}: power limit at its default", default)
    if limit is None or default is None:
        return signal.not_reported("the power limit or its default")
    if limit < default:
        message = (
            f"the power limit is {limit:g} W, below the default {default:g} W: the GPU runs slower than its datasheet"
        )
        action = f"restore it (nvidia-smi -pl {default:g}) unless the site caps power on purpose"
        return signal.verdict("warn", limit, message, "configuration", action)
    return signal.verdict("pass", limit, f"{limit:g} W")


def _setting(signal: _Signal, ok: bool | None, observed: Any, message: str, action: str) -> Check:
    """A setting that is as expected, or a configuration warning; not reported where ``ok`` is None."""
    if ok is None:
        return signal.not_reported(signal.title.split(": ", 1)[1])
    if ok:
        return signal.verdict("pass", observed, "as expected")
    return signal.verdict("warn", observed, message, "configuration", action)


def _settings(host: str, where: str, label: str, gpu: Mapping[str, Any]) -> list[Check]:
    persistence = gpu.get("persistence_mode")
    clock, default_clock = gpu.get("applications_clock_mhz"), gpu.get("applications_clock_default_mhz")
    modes = {name: gpu.get(name) or {} for name in ("mig_mode", "ecc_mode")}
    pending = [
        name.split("_")[0].upper()
        for name, mode in modes.items()
        if mode.get("pending") is not None and mode.get("current") is not None and mode["pending"] != mode["current"]
    ]
    reported = any(mode.get("pending") is not None for mode in modes.values())
    return [
        _setting(
            _Signal(host, where, "persistence", f"{label}: persistence mode", True),
            persistence,
            persistence,
            "persistence mode is off: the driver tears the GPU down between jobs, and the first call of each waits",
            "enable the nvidia-persistenced service",
        ),
        _setting(
            _Signal(host, where, "applications-clocks", f"{label}: application clocks", default_clock),
            None if clock is None or default_clock is None else clock == default_clock,
            clock,
            f"application clocks set to {clock} MHz, the default is {default_clock} MHz",
            "reset them (nvidia-smi -rac) unless the site sets them on purpose",
        ),
        _setting(
            _Signal(host, where, "pending-modes", f"{label}: no MIG or ECC mode change waiting", []),
            None if not reported else not pending,
            pending,
            f"a {' and '.join(pending)} mode change waits for a GPU reset",
            RESET_GPU,
        ),
    ]


def _gravest(actions: Iterable[str | None]) -> str | None:
    chosen = [action for action in actions if action]
    if not chosen:
        return None
    return max(chosen, key=lambda action: _ACTION_ORDER.index(action) if action in _ACTION_ORDER else -1)


def _xid_check(host: str, where: str, title: str, events: Sequence[XidEvent], scope: str) -> Check:
    signal = _Signal(host, where, "xid", title, [])
    if not events:
        return signal.verdict("pass", [], f"no XID event {scope} since boot")
    observed = [event.describe() for event in events]
    status = "fail" if any(event.kind.status == "fail" for event in events) else "warn"
    codes = ", ".join(str(code) for code in sorted({event.code for event in events}))
    action = _gravest(event.kind.action for event in events) or "look at the jobs that ran on it (an application fault)"
    message = f"{len(events)} XID events {scope} since boot (codes {codes}): {observed[-1]}"
    return signal.verdict(status, observed, message, action=action)


def gpu_checks(host: str, gpu: Mapping[str, Any], xids: Sequence[XidEvent] | None) -> list[Check]:
    """The passive checks of one GPU (``gpu_facts``' data); ``xids`` None where the kernel log
    could not be read (the host's own check says why). A signal that failed or warned is a check
    of its own; the signals that passed or are not reported are folded into one check,
    ``gpu<index>/passive``, which lists them with what was read: a site of 80,000 GPUs gets one
    check per healthy GPU rather than nine (see bench/gpu_health_bench.py)."""
    where = f"gpu{gpu.get('index', 0)}"
    label = f"{host} GPU {gpu.get('index', 0)}"
    checks = [
        _ecc(host, where, label, gpu),
        _memory_repair(host, where, label, gpu),
        _clock_events(host, where, label, gpu),
        _pcie(host, where, label, gpu),
        _power_limit(host, where, label, gpu),
        *_settings(host, where, label, gpu),
    ]
    if xids is not None:
        checks.append(_xid_check(host, where, f"{label}: no XID event", xids, "for this GPU"))
    return fold_passing(host, where, label, checks)


def signal_of(check: Check) -> str:
    return check.id.rsplit("/", 1)[1]


def fold_passing(host: str, where: str, label: str, checks: Sequence[Check]) -> list[Check]:
    """The failed and warning checks as they are, and one check for all the others."""
    kept = [check for check in checks if check.status in ("fail", "warn")]
    passed = [check for check in checks if check.status == "pass"]
    unreported = [check for check in checks if check.status == "skip"]
    if not passed and not unreported:
        return kept
    parts = []
    if passed:
        parts.append("healthy: " + ", ".join(signal_of(check) for check in passed))
    if unreported:
        parts.append("not reported by this GPU or driver: " + ", ".join(signal_of(check) for check in unreported))
    expected = {signal_of(check): check.expected for check in passed}
    folded = _Signal(host, where, "passive", f"{label}: passive health signals", expected).verdict(
        "pass" if passed else "skip", {signal_of(check): check.observed for check in passed}, "; ".join(parts)
    )
    return [folded, *kept]


# ---------------------------------------------------------------------------------------------
# One host


def _version_tuple(version: str) -> tuple[int, ...] | None:
    try:
        return tuple(int(part) for part in version.split("."))
    except ValueError:
        return None


def host_checks(
    host: str, facts: Mapping[str, Any], pins: HealthPins, xids: Sequence[XidEvent] | None, kernel_log_error: str
) -> list[Check]:
    """The host-wide checks: GPUs visible, driver and CUDA pins, the kernel log and its stray XIDs."""
    checks = []
    visible = int(facts.get("gpu_count") or 0)
    if pins.gpu_count is not None:
        title = f"{host}: the driver lists the {pins.gpu_count} GPUs declared"
        signal = _Signal(host, "", "gpus-visible", title, pins.gpu_count)
        reason = f" ({facts['reason']})" if facts.get("reason") else ""
        failed = (
            f"the driver lists {visible} GPUs, the inventory declares {pins.gpu_count}{reason}; "
            "a GPU that fell off the bus is not listed (look for XID 79)"
        )
        action = f"{ISOLATE_NODE}, then {REBOOT_NODE}; {REPLACE_GPU} if it stays missing"
        ok = visible == pins.gpu_count
        checks.append(signal.pass_or_fail(ok, visible, f"{visible} GPUs listed", failed, "capacity", action))
    driver = facts.get("driver_version")
    if pins.driver_branch:
        title = f"{host}: NVIDIA driver of branch {pins.driver_branch}"
        signal = _Signal(host, "", "driver", title, f"{pins.driver_branch}.x")
        failed = (
            f"driver {driver or 'not found'}, the inventory pins branch {pins.driver_branch} (nvidia_driver_branch)"
        )
        action = "install the pinned branch (playbooks/install.yml, role nvidia_driver) or change the pin"
        ok = bool(driver) and str(driver).split(".")[0] == pins.driver_branch
        checks.append(signal.pass_or_fail(ok, driver, f"driver {driver}", failed, "configuration", action))
    cuda = facts.get("cuda_version")
    if pins.cuda_version:
        title = f"{host}: the driver supports CUDA {pins.cuda_version} or later"
        signal = _Signal(host, "", "cuda", title, f">= {pins.cuda_version}")
        have, need = _version_tuple(str(cuda or "")), _version_tuple(pins.cuda_version)
        ok = have is not None and need is not None and have >= need
        failed = f"the driver supports CUDA {cuda or 'unknown'}, the inventory needs {pins.cuda_version}"
        checks.append(
            signal.pass_or_fail(ok, cuda, f"CUDA {cuda}", failed, "configuration", "install a newer driver branch")
        )
    if xids is None:
        signal = _Signal(host, "", "kernel-log", f"{host}: kernel log read for XID events", "readable")
        action = "let the validating user read the kernel log (the systemd-journal or adm group, or become)"
        message = f"XID events were not checked: {kernel_log_error}"
        checks.append(signal.verdict("warn", None, message, "configuration", action))
    else:
        addresses = {pci_address(gpu.get("pci_bus_id")) for gpu in facts.get("gpus") or []}
        stray = [event for event in xids if event.pci not in addresses]
        title = f"{host}: no XID event for a GPU the driver no longer lists"
        checks.append(_xid_check(host, "", title, stray, "for a PCI address no listed GPU has"))
    return checks


TABLE_COLUMNS = (
    "GPU",
    "Model",
    "Driver",
    "Serial",
    "Uncorrected ECC (now / life)",
    "Memory repair",
    "Clock events",
    "PCIe",
    "Power limit (W)",
    "Persistence",
    "XID events",
)


def _repair_cell(gpu: Mapping[str, Any]) -> str:
    rows, pages = gpu.get("remapped_rows") or {}, gpu.get("retired_pages") or {}
    if any(value is not None for value in rows.values()):
        flags = [name for name in ("pending", "failure") if rows.get(name)]
        return f"rows {rows.get('correctable') or 0}+{rows.get('uncorrectable') or 0}" + (
            f" ({', '.join(flags)})" if flags else ""
        )
    if any(value is not None for value in pages.values()):
        return f"pages {(pages.get('single_bit') or 0) + (pages.get('double_bit') or 0)}" + (
            " (pending)" if pages.get("pending") else ""
        )
    return "—"


def _row(gpu: Mapping[str, Any], xids: Sequence[XidEvent] | None) -> list[Any]:
    errors = gpu.get("ecc_errors") or {}
    link = gpu.get("pcie") or {}
    limit, default = gpu.get("power_limit_w"), gpu.get("power_default_limit_w")
    return [
        gpu.get("index"),
        gpu.get("name") or "—",
        gpu.get("driver_version") or "—",
        gpu.get("serial") or "—",
        "%s / %s"
        % ((errors.get("volatile") or {}).get("uncorrected"), (errors.get("aggregate") or {}).get("uncorrected")),
        _repair_cell(gpu),
        ", ".join(gpu.get("clocks_event_reasons") or []) or "—",
        "x%s gen %s (max x%s gen %s)"
        % (link.get("current_width"), link.get("current_gen"), link.get("max_width"), link.get("max_gen")),
        "—" if limit is None else f"{limit:g}" + ("" if default is None else f" of {default:g}"),
        {True: "on", False: "off"}.get(gpu.get("persistence_mode"), "—"),
        "not read" if xids is None else ", ".join(str(event.code) for event in xids) or "none",
    ]


_RANK = {"pass": 0, "skip": 0, "needs-hardware": 0, "warn": 1, "fail": 2}


def assess_host(
    host: str, facts: Mapping[str, Any], pins: HealthPins, kernel_log: str | None, kernel_log_error: str = ""
) -> dict[str, Any]:
    """The host's health section (report data): ``facts`` as ``gpu_facts`` gathers them, the
    kernel log's text (None where it could not be read, ``kernel_log_error`` saying why)."""
    events = None if kernel_log is None else parse_xids(kernel_log)
    checks = host_checks(host, facts, pins, events, kernel_log_error)
    rows, row_status = [], []
    for gpu in facts.get("gpus") or []:
        address = pci_address(gpu.get("pci_bus_id"))
        own = None if events is None else [event for event in events if event.pci == address]
        gpu_checks_ = gpu_checks(host, gpu, own)
        checks.extend(gpu_checks_)
        rows.append(_row(gpu, own))
        row_status.append(max((check.status for check in gpu_checks_), key=lambda status: _RANK[status]))
    table = Table(
        id=f"{SECTION_ID_PREFIX}-{host}",
        title=f"Passive GPU health on {host}, read before any load (source: {facts.get('source') or 'none'})",
        columns=list(TABLE_COLUMNS),
        rows=rows,
        row_status=[{"skip": "pass"}.get(status, status) for status in row_status],
    )
    return section(host, checks, [table] if rows else [])


def section(host: str, checks: Sequence[Check], tables: Sequence[Table] = ()) -> dict[str, Any]:
    return {
        "id": f"{SECTION_ID_PREFIX}-{host}",
        "title": f"GPU health: {host}",
        "checks": [check.to_dict() for check in checks],
        "tables": [table.to_dict() for table in tables],
    }


def not_assessed(host: str, status: str, reason: str) -> dict[str, Any]:
    """The section of a host that was not looked at: simulated (needs-hardware), unreachable or
    failed (fail, with the reason), or check mode (skip)."""
    action = REACH_ACTION if status == "fail" else None
    signal = _Signal(host, "", "assessed", f"{host}: passive GPU health read", "read")
    return section(host, [signal.verdict(status, None, reason, category="hardware", action=action)])


def checked_pins(params: Mapping[str, Any]) -> HealthPins:
    """The pins from the module's options; raises ValueError naming the option that is malformed."""
    branch = str(params.get("driver_branch") or "").strip()
    cuda = str(params.get("cuda_version") or "").strip()
    count = params.get("gpu_count")
    if branch and not branch.isdigit():
        raise ValueError(f"driver_branch: expected the driver's major version, digits such as '580'; found {branch!r}")
    if cuda and _version_tuple(cuda) is None:
        raise ValueError(f"cuda_version: expected a version such as '12.4'; found {cuda!r}")
    if count is not None and count < 0:
        raise ValueError(f"gpu_count: expected 0 or more GPUs; found {count}")
    return HealthPins(driver_branch=branch, cuda_version=cuda, gpu_count=count)


def health_host(
    params: Mapping[str, Any],
    check_mode: bool,
    workdir: str | None = None,
    gather: Callable[..., Any] | None = None,
    read_log: Callable[[str], str] | None = None,
) -> dict[str, Any]:
    """What the gpu_health module returns for its options: the host's GPU facts and kernel log
    read (unless the host is simulated or failed before) and judged. Reading changes nothing, so
    check mode reads too."""
    del workdir, check_mode  # nothing is written, and reading is safe in check mode
    pins = checked_pins(params)
    host = params["host"]
    facts: dict[str, Any] = {}
    if params["failure"]:
        result = not_assessed(host, "fail", params["failure"])
    elif not params["hardware"]:
        reason = f"{host} is a simulated host (hardware=false): its GPUs' health needs a real GPU host"
        result = not_assessed(host, "needs-hardware", reason)
    else:
        gather = gather or gpu_facts.gather
        source = params["source"]
        found = gather(prefer="nvml", fallback=True) if source == "auto" else gather(prefer=source, fallback=False)
        facts = found.to_dict()
        kernel_log, error = None, ""
        if params["kernel_log"] == "none":
            error = "kernel_log=none: the kernel log was not read"
        else:
            try:
                kernel_log = (read_log or read_kernel_log)(params["kernel_log"])
            except KernelLogError as failure:
                error = str(failure)
        result = assess_host(host, facts, pins, kernel_log, error)
    failed = sum(1 for check in result["checks"] if check["status"] == "fail")
    return {"section": result, "failed_checks": failed, "gpus": facts}
