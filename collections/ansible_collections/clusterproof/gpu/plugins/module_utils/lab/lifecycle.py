"""The lab's up, status and down, as the lab_hosts module runs them.

``up`` makes what is missing and changes nothing on a lab that runs as declared; a host left
half-made by a crash (its root without a machine, a machine that no longer answers) is removed and
made again. ``down`` stops every machine the lab started (also ones it has no record of) and
removes the bridge, the cgroups, the mounts, nspawn's run files and the state directory, and puts
back the kernel settings saved at the first ``up``. May import: ``lab.plan``, ``lab.machines``.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.lab import machines
from ansible_collections.clusterproof.gpu.plugins.module_utils.lab.machines import Layout
from ansible_collections.clusterproof.gpu.plugins.module_utils.lab.plan import LabError, LabPlan


def status(layout: Layout, plan: LabPlan) -> dict[str, str]:
    """Each declared host's state: systemd's word for it, or ``stopped``."""
    running = machines.nspawn_processes(layout)
    return {
        host.name: machines.system_state(layout, host) if host.name in running else "stopped" for host in plan.hosts
    }


def _running_as_declared(layout: Layout, plan: LabPlan) -> bool:
    running = machines.nspawn_processes(layout)
    if not machines.bridge_exists(plan.bridge) or set(running) != {host.name for host in plan.hosts}:
        return False
    return all(state == "running" for state in status(layout, plan).values())


def up(layout: Layout, plan: LabPlan, mirror: str, timeout: float, check_mode: bool = False) -> dict[str, Any]:
    """Bring the lab to its plan; returns changed, what was cleaned, made and started, and each
    host's state."""
    result: dict[str, Any] = {"changed": False, "cleaned": [], "started": [], "root_built": False}
    if _running_as_declared(layout, plan):
        result["hosts"] = {host.name: "running" for host in plan.hosts}
        return result
    result["changed"] = True
    if check_mode:
        result["hosts"] = status(layout, plan)
        return result
    record = machines.load_record(layout)
    if record.get("bridge") and record["bridge"] != plan.bridge:
        raise LabError(
            f"bridge: the running lab uses {record['bridge']}, the declaration says {plan.bridge}: "
            "run 'lab down' first; nothing was changed"
        )
    source, result["root_built"] = machines.build_root(layout, mirror)
    parents = machines.cgroup_parents()
    # Hosts that do not answer as they should, and hosts no longer declared, go first.
    running = machines.nspawn_processes(layout)
    declared = {host.name for host in plan.hosts}
    states = status(layout, plan)
    unwanted = {name: pid for name, pid in running.items() if name not in declared or states.get(name) != "running"}
    machines.stop(unwanted)
    leftover_roots = set(_roots(layout))
    for name in sorted((set(unwanted) | leftover_roots) - (set(running) - set(unwanted))):
        _remove_host(layout, name, parents)
        result["cleaned"].append(name)

    machines.save_machine_settings()
    machines.raise_limits(machines.INOTIFY_LIMITS)
    record["bridge"] = plan.bridge
    machines.save_record(layout, record)
    machines.make_key(layout)
    machines.make_bridge(plan)

    alive = machines.nspawn_processes(layout)
    host_keys = _known_host_lines(layout)
    to_start = [host for host in plan.hosts if host.name not in alive]
    for host in to_start:
        host_keys[host.name] = machines.make_host(layout, plan, host, source)
    layout.known_hosts.write_text("".join(line + "\n" for line in host_keys.values()))
    for host in to_start:
        machines.boot(layout, plan, host, parents)
        result["started"].append(host.name)
    states, result["restarted_units"] = machines.wait_running(layout, list(plan.hosts), timeout)
    result["hosts"] = states
    late = {name: state for name, state in states.items() if state != "running"}
    if late:
        for name in late:
            host = next(host for host in plan.hosts if host.name == name)
            failed = machines.failed_units(layout, host) if late[name] == "degraded" else []
            if failed:
                late[name] += " (failed units: %s)" % ", ".join(failed)
        logs = ", ".join(str(layout.log_of(name)) for name in late)
        raise LabError(
            "lab hosts not running after %d s: %s (their consoles: %s)"
            % (timeout, "; ".join(f"{name}: {state}" for name, state in late.items()), logs)
        )
    return result


def power_on(layout: Layout, plan: LabPlan, names: Iterable[str], timeout: float) -> list[str]:
    """Boot the named hosts that are powered off (``systemctl poweroff`` inside, or their machine
    killed) with their disk as they left it, as a real host is powered on; ``up`` would make them
    again from the root, as it does a crash's leftovers. Returns the hosts booted; a host running
    already is left alone, a host without a root is an error."""
    running = machines.nspawn_processes(layout)
    wanted = [host for host in plan.hosts if host.name in set(names)]
    unknown = sorted(set(names) - {host.name for host in wanted})
    if unknown:
        raise LabError("hosts: not declared in the lab: %s" % ", ".join(unknown))
    missing = [host.name for host in wanted if not layout.root_of(host.name).is_dir()]
    if missing:
        raise LabError("hosts: no root to boot (run 'lab up' to make them): %s" % ", ".join(missing))
    parents = machines.cgroup_parents()
    booted = [host for host in wanted if host.name not in running]
    for host in booted:
        _remove_run_files([host.name])
        machines.boot(layout, plan, host, parents)
    states, _ = machines.wait_running(layout, booted, timeout)
    late = {name: state for name, state in states.items() if state != "running"}
    if late:
        raise LabError("hosts not running after %d s: %s" % (timeout, late))
    return [host.name for host in booted]


def _roots(layout: Layout) -> list[str]:
    """The hosts that have a root in the state directory (nspawn's lock files beside them are not)."""
    machines_dir = layout.state_dir / "machines"
    return sorted(path.name for path in machines_dir.iterdir() if path.is_dir()) if machines_dir.is_dir() else []


def _host_names(layout: Layout, running: dict[str, int]) -> set[str]:
    """This lab's hosts on this machine: those with a running machine or a root in its state
    directory (another lab's, under another state directory, are not among them)."""
    return {*running, *_roots(layout)}


def _known_host_lines(layout: Layout) -> dict[str, str]:
    try:
        lines = layout.known_hosts.read_text().splitlines()
    except OSError:
        return {}
    return {line.split(",", 1)[0]: line for line in lines if line.strip()}


def _remove_host(layout: Layout, name: str, parents: list[Path]) -> None:
    root = layout.root_of(name)
    machines.unmount_under(root)
    machines.remove_cgroups(parents, [name])
    _remove_run_files([name])
    if root.exists():
        shutil.rmtree(root)


def down(layout: Layout, bridge: str, check_mode: bool = False) -> dict[str, Any]:
    """Remove the lab whole; returns changed and what was stopped, killed and put back."""
    record = machines.load_record(layout)
    running = machines.nspawn_processes(layout)
    bridge = record.get("bridge") or bridge
    parents = machines.cgroup_parents()
    # Only this lab's hosts: another lab on this machine keeps running.
    names = _host_names(layout, running)
    present = (
        bool(running)
        or layout.state_dir.exists()
        or machines.bridge_exists(bridge)
        or any((parent / name).exists() for parent in parents for name in names)
    )
    result: dict[str, Any] = {
        "changed": present,
        "stopped": sorted(running),
        "killed": [],
        "restored": [],
        "kept_for": [],
        "settings": "untouched",
    }
    if not present or check_mode:
        return result
    machines.kill_workloads(parents, names)
    result["killed"] = machines.stop(running)
    machines.unmount_under(layout.state_dir)
    machines.remove_cgroups(parents, names)
    _remove_run_files(names)
    machines.remove_bridge(bridge)
    # The last lab down puts the machine's settings back; while another lab runs, its kubelets want
    # theirs and its hosts the raised limits (that lab puts them back when it goes).
    others = machines.other_hosts_running(parents, names)
    if others:
        result["kept_for"] = others
        result["settings"] = "kept as they are while another lab runs (%s)" % ", ".join(others)
    else:
        result["restored"] = machines.write_kernel_settings(machines.load_machine_settings())
        machines.forget_machine_settings()
        result["settings"] = "put back: %s" % (", ".join(result["restored"]) or "none")
    if machines.mounts_under(layout.state_dir):
        raise LabError(
            f"mounts under {layout.state_dir} remain after unmounting: {machines.mounts_under(layout.state_dir)}"
        )
    shutil.rmtree(layout.state_dir, ignore_errors=True)
    return result


def _remove_run_files(names: Iterable[str]) -> None:
    for path in machines.run_files(names):
        try:
            shutil.rmtree(path)
        except OSError as error:
            raise LabError(f"nspawn's run files {path} of a stopped host cannot be removed: {error}") from error


def leftovers(layout: Layout, bridge: str, hosts: Iterable[str] = ()) -> list[str]:
    """What of a lab is on this machine (empty after ``down``): processes, mounts, the bridge, the
    cgroups and nspawn's run files of its hosts (``hosts``, and those with a root or a process now),
    the state directory. Another lab's hosts are not this lab's leftovers."""
    running = machines.nspawn_processes(layout)
    names = {*hosts, *_host_names(layout, running)}
    found = [f"nspawn process of {name} (pid {pid})" for name, pid in running.items()]
    found += [f"mount {point}" for point in machines.mounts_under(layout.state_dir)]
    if machines.bridge_exists(bridge):
        found.append(f"bridge {bridge}")
    found += [
        f"cgroup {parent / name}"
        for parent in machines.cgroup_parents()
        for name in sorted(names)
        if (parent / name).exists()
    ]
    found += [f"nspawn run files {path}" for path in machines.run_files(names)]
    if layout.state_dir.exists():
        found.append(f"state directory {layout.state_dir}")
    return found
