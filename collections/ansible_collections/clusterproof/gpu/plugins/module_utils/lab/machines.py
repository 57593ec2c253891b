"""The lab's machines: the Debian root built once, a copy booted per host, and a ``down`` that
leaves nothing behind.

Each host is a Debian 12 root booted by ``systemd-nspawn -b`` (systemd as PID 1) on the lab's
bridge, in a cgroup subtree of its own in every cgroup v1 hierarchy, with sshd and a key made for
the lab, and one directory of the state that all hosts share (their "NFS export"). A host that
reboots boots again. The settings are the ones ../shared/design/REAL-HOSTS.md measured on machines
of this kind; each says why where it is set. Needs root, ``debootstrap`` and ``systemd-nspawn``
(Debian's ``systemd-container``).

Touches: the lab's state directory (the hosts' roots, the lab key, its records) and cache (the
Debian root), the bridge, the ``clusterproof-lab`` cgroups, the processes it started, and the
kernel settings a kubelet changes and the inotify limits the hosts need (the machine's values saved
in ``/run/clusterproof`` by the first lab ``up``, put back by the last lab ``down``).
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils import versions
from ansible_collections.clusterproof.gpu.plugins.module_utils.common.fields import Below
from ansible_collections.clusterproof.gpu.plugins.module_utils.common.wait import wait_until
from ansible_collections.clusterproof.gpu.plugins.module_utils.lab.plan import LabError, LabHost, LabPlan

# The hosts' Debian: the suite the bundle's packages are of, from Debian's archive.
SUITE = versions.DEBIAN_SUITE.version
DEFAULT_MIRROR = versions.DEBIAN_SUITE.source
# Bump when a step of build_root changes: the cached root is keyed by it and the package list.
RECIPE = 1
# systemd as PID 1 and what Ansible needs to manage the host over SSH (python3, python3-apt, sudo).
ROOT_PACKAGES = (
    "systemd",
    "systemd-sysv",
    "dbus",
    "iproute2",
    "python3",
    "python3-apt",
    "apt",
    "ca-certificates",
    "openssh-server",
    "sudo",
)
# A kubelet sets these for the whole machine, not its container: saved at up, put back at down.
KERNEL_SETTINGS = ("vm.overcommit_memory", "kernel.panic", "kernel.panic_on_oops")
# inotify's limits count per user, and every lab host's systemd, journald, kubelet and containerd take
# theirs from root's (Debian's default: 128 instances): five hosts held 59, and a sandbox's Kueue beside
# them failed with "too many open files". Raised to these while a lab runs (kind's known issues advise
# the same), put back by the last lab down (MACHINE_SETTINGS).
INOTIFY_LIMITS = {"fs.inotify.max_user_instances": "512", "fs.inotify.max_user_watches": "524288"}
# The machine's own values of KERNEL_SETTINGS and INOTIFY_LIMITS, saved by the first lab up and put
# back by the last lab down, whichever lab that is: labs overlap (the tests run two side by side),
# and a lab that came up beside another would read the other's kubelet's values as the machine's.
# In /run, which a reboot empties as it resets the settings themselves.
MACHINE_SETTINGS = Path("/run/clusterproof/lab-machine-settings.json")
CGROUP_NAME = "clusterproof-lab"
# The lab's CPU weight against the machine's other processes (cgroup v1 cpu.shares; each process
# outside a cgroup of its own weighs 1024). At the default 1024 every lab host together weighs as
# much as one process: beside the suite's sandboxes (a load of 15 to 20 on 2 cores) the hosts' API
# servers, kubelets and KAI got about a sixteenth of the CPU, and the lab's tests took 74 min where
# the same tests alone took 54. Eight processes' worth lets the hosts run when they need to; they
# need little (the lab alone kept the machine 21 to 61 % busy), so the sandboxes keep the rest.
LAB_CPU_SHARES = 8192
CGROUP_ROOT = Path("/sys/fs/cgroup")
NSPAWN_RUN_DIR = Path("/run/systemd/nspawn")
# One directory of this machine that every host mounts at the same path, as a real site's hosts mount
# one NFS export: a local-path class with shared_path there serves ReadWriteMany across hosts.
SHARED_MOUNT = "/srv/clusterproof-shared"
# The system calls nspawn filters by default that a kubelet and runc need (REAL-HOSTS.md).
SYSTEM_CALLS = "@keyring bpf @swap @clock @module @raw-io @reboot @obsolete"
# A host with running pods can take this long to power off (systemd waits for the pods' scopes).
STOP_SECONDS = 90
SSH_OPTIONS = ("-o", "BatchMode=yes", "-o", "ConnectTimeout=3", "-o", "LogLevel=ERROR")
STATE_FILE = "lab.json"

Runner = Callable[..., subprocess.CompletedProcess[str]]


def _run(command: Sequence[str], **options: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(command), text=True, capture_output=True, check=False, **options)


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where the lab keeps what it makes: ``state_dir`` goes at ``down``; ``cache_dir`` stays."""

    state_dir: Path
    cache_dir: Path

    key = Below("state_dir", "id_ed25519")
    known_hosts = Below("state_dir", "known_hosts")
    record = Below("state_dir", STATE_FILE)
    # The lab's shared filesystem: every host mounts it at SHARED_MOUNT.
    shared_dir = Below("state_dir", "shared")

    def root_of(self, name: str) -> Path:
        return self.state_dir / "machines" / name

    def log_of(self, name: str) -> Path:
        return self.state_dir / "logs" / f"{name}.log"


# --- the Debian root, once per machine -------------------------------------------------------------


def root_key(packages: Iterable[str] = ROOT_PACKAGES) -> str:
    return hashlib.sha256("\n".join([SUITE, str(RECIPE), *packages]).encode()).hexdigest()[:12]


def cached_root(layout: Layout) -> Path:
    return layout.cache_dir / f"debian12-root-{root_key()}"


def build_root(layout: Layout, mirror: str = DEFAULT_MIRROR, run: Runner = _run) -> tuple[Path, bool]:
    """The Debian root every host is copied from, built by debootstrap if the cache lacks it (a few
    minutes); returns its path and whether it was built now."""
    target = cached_root(layout)
    if (target / "usr/bin/python3").exists():
        return target, False
    layout.cache_dir.mkdir(parents=True, exist_ok=True)
    # Two labs coming up at once (the tests run two side by side) build it once: the second waits.
    with (layout.cache_dir / ".root.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / "usr/bin/python3").exists():
            return target, False
        return _debootstrap(layout, target, mirror, run), True


def _debootstrap(layout: Layout, target: Path, mirror: str, run: Runner) -> Path:
    for tool in ("debootstrap", "systemd-nspawn"):
        if shutil.which(tool) is None:
            package = "systemd-container" if tool == "systemd-nspawn" else tool
            raise LabError(f"the lab needs {tool}: apt-get install {package}")
    work = Path(tempfile.mkdtemp(prefix="build.", dir=layout.cache_dir))
    try:
        root = work / "root"
        result = run(
            [
                "debootstrap",
                "--variant=minbase",
                "--include=" + ",".join(ROOT_PACKAGES),
                SUITE,
                str(root),
                mirror,
            ]
        )
        (layout.cache_dir / "build.log").write_text(result.stdout + result.stderr)
        if result.returncode != 0 or not (root / "usr/bin/python3").exists():
            tail = (result.stdout + result.stderr).strip().splitlines()[-3:]
            raise LabError(f"debootstrap {SUITE} from {mirror} failed: {' | '.join(tail)}")
        # Each host gets host keys and a machine id of its own when it is made (make_host).
        for key in (root / "etc/ssh").glob("ssh_host_*"):
            key.unlink()
        (root / "etc/machine-id").write_text("")
        # An air-gapped host: apt knows only the sources the roles write (the bundle's mirror).
        (root / "etc/apt/sources.list").write_text("")
        shutil.rmtree(root / "var/lib/apt/lists", ignore_errors=True)
        (root / "var/lib/apt/lists/partial").mkdir(parents=True)
        root.rename(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for old in layout.cache_dir.glob("debian12-root-*"):
        if old != target:
            shutil.rmtree(old, ignore_errors=True)
    return target


# --- one host's root ----------------------------------------------------------------------------


def make_key(layout: Layout, run: Runner = _run) -> bool:
    """The lab's SSH key (Ansible's way in to every host), made at the first up; True if made now."""
    if layout.key.exists():
        return False
    layout.state_dir.mkdir(parents=True, exist_ok=True)
    made = run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "clusterproof-lab", "-f", str(layout.key)])
    if made.returncode != 0:
        raise LabError(f"making the lab's SSH key failed: {made.stderr.strip()}")
    return True


# The oneshot units every lab host runs at boot (host_files writes them).
LAB_UNITS = ("lab-address.service", "lab-cgroups.service")


def _unit(description: str, commands: Sequence[str], before: str) -> str:
    # Default dependencies (after sysinit.target): a unit started earlier in a container's boot may
    # find its cgroup not made yet in some v1 hierarchy ("Failed to attach to cgroup ... No such
    # file or directory", seen on about one boot in three with three machines booting at once); and
    # should that still happen, systemd tries again a second later.
    lines = [
        "[Unit]",
        f"Description={description}",
        f"Before={before}",
        "[Service]",
        "Type=oneshot",
        "RemainAfterExit=yes",
        "Restart=on-failure",
        "RestartSec=1",
        *(f"ExecStart={command}" for command in commands),
        "[Install]",
        "WantedBy=multi-user.target",
        "",
    ]
    return "\n".join(lines)


def host_files(plan: LabPlan, host: LabHost, public_key: str) -> dict[str, str]:
    """The files a host's root gets on top of the Debian root, by path inside it."""
    hosts = "127.0.0.1 localhost\n" + "".join(f"{other.address} {other.name}\n" for other in plan.hosts)
    # systemd-networkd waits forever without udev in a container: a oneshot unit sets the address.
    # The default route points at this machine, which forwards nothing: kubeadm and the kubelet
    # find their node address by it, and nothing leaves the lab.
    address = _unit(
        "The lab host's address on the lab bridge",
        [
            "/usr/sbin/ip link set host0 up",
            f"/usr/sbin/ip address replace {host.address}/{plan.prefix_length} dev host0",
            f"/usr/sbin/ip route replace default via {plan.gateway} dev host0",
        ],
        "network.target ssh.service",
    )
    # nspawn mounts the cgroup v1 controllers read-only inside the machine; a kubelet and runc make
    # their cgroups there, so they are remounted read-write before containerd and the kubelet start.
    cgroups = _unit(
        "The lab host's cgroup controllers, writable for containerd and the kubelet",
        [
            # The read-only flag is the bind mount's own: remount,bind changes it alone.
            "/bin/sh -c 'for d in /sys/fs/cgroup/*/; do "
            'mountpoint -q "$d" && mount -o remount,bind,rw "$d"; done; true\'',
        ],
        "containerd.service kubelet.service",
    )
    return {
        "etc/hostname": host.name + "\n",
        "etc/hosts": hosts,
        "etc/machine-id": uuid.uuid4().hex + "\n",
        "root/.ssh/authorized_keys": public_key,
        "etc/ssh/sshd_config.d/lab.conf": "HostKey /etc/ssh/ssh_host_ed25519_key\nPermitRootLogin prohibit-password\n",
        "etc/systemd/system/lab-address.service": address,
        "etc/systemd/system/lab-cgroups.service": cgroups,
        # A pod's scope whose processes are gone stays "stopping" until its timeout (90 s by default): in
        # a container on cgroup v1, systemd is not told that the scope's cgroup emptied. A host with pods
        # would take 90 s to power off; a lab host waits 10 s at most for any unit.
        "etc/systemd/system.conf.d/lab.conf": "[Manager]\nDefaultTimeoutStopSec=10s\n",
    }


def make_host(layout: Layout, plan: LabPlan, host: LabHost, source: Path, run: Runner = _run) -> str:
    """A fresh root for ``host`` (a copy of ``source`` with the host's files); returns its SSH host
    key line for the lab's known_hosts."""
    root = layout.root_of(host.name)
    if root.exists():
        shutil.rmtree(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    copied = run(["cp", "-a", "--reflink=auto", str(source), str(root)])
    if copied.returncode != 0:
        raise LabError(f"copying the Debian root for {host.name} failed: {copied.stderr.strip()}")
    public_key = layout.key.with_suffix(".pub").read_text()
    for relative, text in host_files(plan, host, public_key).items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / "root/.ssh").chmod(0o700)
    (root / "root/.ssh/authorized_keys").chmod(0o600)
    wants = root / "etc/systemd/system/multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    for unit in LAB_UNITS:
        link = wants / unit
        if not link.is_symlink():
            link.symlink_to("/etc/systemd/system/" + unit)
    host_key = root / "etc/ssh/ssh_host_ed25519_key"
    made = run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"root@{host.name}", "-f", str(host_key)])
    if made.returncode != 0:
        raise LabError(f"making {host.name}'s SSH host key failed: {made.stderr.strip()}")
    kind, key = host_key.with_suffix(".pub").read_text().split()[:2]
    return f"{host.name},{host.address} {kind} {key}"


# --- the machine's side: bridge, cgroups, kernel settings ----------------------------------------


def bridge_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()


def make_bridge(plan: LabPlan, run: Runner = _run) -> bool:
    if bridge_exists(plan.bridge):
        return False
    for command in (
        ["ip", "link", "add", plan.bridge, "type", "bridge"],
        ["ip", "address", "add", plan.host_address, "dev", plan.bridge],
        ["ip", "link", "set", plan.bridge, "up"],
    ):
        result = run(command)
        if result.returncode != 0:
            raise LabError(
                f"making the lab bridge {plan.bridge} failed at '{' '.join(command)}': {result.stderr.strip()}"
            )
    return True


def remove_bridge(name: str, run: Runner = _run) -> bool:
    if not bridge_exists(name):
        return False
    result = run(["ip", "link", "delete", name])
    if result.returncode != 0:
        raise LabError(f"removing the lab bridge {name} failed: {result.stderr.strip()}")
    return True


def cgroup_parents(proc_cgroup: str | None = None) -> list[Path]:
    """``clusterproof-lab`` in every cgroup v1 hierarchy, under this process's own cgroup there:
    each host gets its own subtree below it (with a shared one, one kubelet removes the other's
    pod cgroups)."""
    text = proc_cgroup if proc_cgroup is not None else Path("/proc/self/cgroup").read_text()
    parents = []
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        if not controllers:
            continue  # the unified hierarchy: nothing is mounted there that the lab can use
        hierarchy = controllers.split(",")[0].removeprefix("name=")
        parents.append(CGROUP_ROOT / hierarchy / path.lstrip("/") / CGROUP_NAME)
    return parents


def make_cgroup(path: Path) -> None:
    """A cgroup and the ones above it that are missing. A new cpuset cgroup has no CPUs and no
    memory nodes, and takes no process until it has: each gets its parent's."""
    if not path.parent.is_dir():
        make_cgroup(path.parent)
    path.mkdir(exist_ok=True)
    for setting in ("cpuset.cpus", "cpuset.mems"):
        own, inherited = path / setting, path.parent / setting
        if own.exists() and inherited.exists() and not own.read_text().strip():
            own.write_text(inherited.read_text().strip())


def weigh_lab_cgroup(parent: Path, shares: int = LAB_CPU_SHARES) -> bool:
    """Give the lab's cgroup ``parent`` its CPU weight, where it is in the cpu hierarchy; True when
    this changed it."""
    setting = parent / "cpu.shares"
    if not setting.exists() or setting.read_text().strip() == str(shares):
        return False
    setting.write_text(str(shares))
    return True


def remove_cgroups(parents: Sequence[Path], names: Iterable[str]) -> list[str]:
    """Remove the cgroups of the hosts ``names``, deepest first, killing what a crashed host left in
    them; then a host's cgroup that holds no process at all (what a lab gone without its ``down``
    left), and the lab's parent once nothing is below it. A cgroup with processes of a host not
    named is another lab's, running on this machine too: it stays. Returns the ones removed."""
    removed = []
    names = set(names)
    for parent in parents:
        if not parent.is_dir():
            continue
        for top in sorted(path for path in parent.iterdir() if path.is_dir()):
            # os.walk passes over a cgroup that goes while it reads (the host's own systemd may remove
            # an emptied one): rglob raised there and the lab's down failed.
            subtree = [Path(directory) for directory, _, _ in os.walk(top, topdown=False)]
            if top.name not in names and any(_pids(directory) for directory in subtree):
                continue
            for directory in subtree:
                for pid in _pids(directory):
                    _kill(pid, signal.SIGKILL)
                _rmdir(directory)
                removed.append(str(directory))
        if not any(path.is_dir() for path in parent.iterdir()):
            _rmdir(parent)
            removed.append(str(parent))
    return removed


def _rmdir(cgroup: Path) -> None:
    """Remove a cgroup whose processes were just killed: the kernel may take a moment to see them go."""
    try:
        cgroup.rmdir()
    except FileNotFoundError:  # removed meanwhile: what was wanted
        return
    except OSError:
        time.sleep(0.2)
        try:
            cgroup.rmdir()
        except FileNotFoundError:
            return


def run_files(names: Iterable[str]) -> list[Path]:
    """nspawn's run files of the machines ``names`` that are on this machine: nspawn removes them
    when it exits, not when it is killed."""
    return [path for path in (NSPAWN_RUN_DIR / "propagate" / name for name in sorted(names)) if path.exists()]


def _pids(cgroup: Path) -> list[int]:
    try:
        return [int(line) for line in (cgroup / "cgroup.procs").read_text().split()]
    except OSError:
        return []


def _kill(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def read_kernel_settings(names: Iterable[str] = KERNEL_SETTINGS, proc_sys: Path = Path("/proc/sys")) -> dict[str, str]:
    return {name: proc_sys.joinpath(*name.split(".")).read_text().strip() for name in names}


def save_machine_settings(path: Path = MACHINE_SETTINGS, proc_sys: Path = Path("/proc/sys")) -> bool:
    """Save the machine's values of the settings labs change, unless saved already (by a lab that
    still runs, or one that crashed: the values now may be a kubelet's). True when saved now."""
    if path.exists():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(read_kernel_settings((*KERNEL_SETTINGS, *INOTIFY_LIMITS), proc_sys), indent=2))
    partial.replace(path)
    return True


def forget_machine_settings(path: Path = MACHINE_SETTINGS) -> None:
    """Once put back: the next lab up saves the machine's values afresh."""
    path.unlink(missing_ok=True)


def load_machine_settings(path: Path = MACHINE_SETTINGS) -> dict[str, str]:
    """The values saved by the first lab up; none when no lab saved them."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return {}


def raise_limits(limits: dict[str, str], proc_sys: Path = Path("/proc/sys")) -> dict[str, str]:
    """Raise each setting of ``limits`` that is below its value there; returns the previous values of
    those raised (a setting already as high or higher is left alone)."""
    raised = {}
    for name, value in limits.items():
        path = proc_sys.joinpath(*name.split("."))
        before = path.read_text().strip()
        if int(before) < int(value):
            path.write_text(value)
            raised[name] = before
    return raised


def other_hosts_running(parents: Sequence[Path], names: Iterable[str]) -> list[str]:
    """The hosts of other labs on this machine (their cgroups hold processes), not among ``names``."""
    mine = set(names)
    return sorted(
        {
            top.name
            for parent in parents
            if parent.is_dir()
            for top in parent.iterdir()
            if top.is_dir() and top.name not in mine and any(_pids(Path(d)) for d, _, _ in os.walk(top))
        }
    )


def write_kernel_settings(values: dict[str, str], proc_sys: Path = Path("/proc/sys")) -> list[str]:
    """Put the settings back; returns those that differed."""
    changed = []
    for name, value in values.items():
        path = proc_sys.joinpath(*name.split("."))
        if path.read_text().strip() != value:
            path.write_text(value)
            changed.append(name)
    return changed


# --- records and processes ------------------------------------------------------------------------


def load_record(layout: Layout) -> dict[str, Any]:
    try:
        return json.loads(layout.record.read_text())
    except (OSError, ValueError):
        return {}


def save_record(layout: Layout, record: dict[str, Any]) -> None:
    layout.state_dir.mkdir(parents=True, exist_ok=True)
    temporary = layout.record.with_suffix(".tmp")
    temporary.write_text(json.dumps(record, indent=2, sort_keys=True))
    temporary.replace(layout.record)


def nspawn_processes(layout: Layout) -> dict[str, int]:
    """The nspawn processes that boot a root under the lab's state directory, by host name: found
    from /proc, so that a host whose start was never recorded (a crash) is found too."""
    machines = str(layout.state_dir / "machines") + "/"
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if not argv or not argv[0].endswith(b"systemd-nspawn"):
            continue
        for index, argument in enumerate(argv[:-1]):
            if argument == b"-D" and argv[index + 1].decode(errors="replace").startswith(machines):
                found[argv[index + 1].decode()[len(machines) :].rstrip("/")] = int(entry.name)
    return found


# nspawn's exit status when the machine asked to reboot (systemd-nspawn(1)); nspawn does not boot it
# again by itself (systemd-nspawn@.service does, with RestartForceExitStatus=133).
REBOOT_EXIT_STATUS = 133


# How often, and how soon after its start, a boot that follows a reboot and fails is tried again:
# the machine that just ended may still hold what the next one needs for a moment (its network
# namespace, its veth's name, a cgroup), most under load.
BOOT_RETRIES, BOOT_FAILED_WITHIN_S, BOOT_RETRY_DELAY_S = 5, 30, 3


# The machine's supervisor: boots it (nspawn, in the host's cgroups) and boots it again each time it
# exits with REBOOT_EXIT_STATUS; any other exit ends it with that status, unless it is a boot after
# a reboot that failed within BOOT_FAILED_WITHIN_S (tried again, BOOT_RETRIES times). It says each
# exit in the machine's log (its standard output). It stays in the caller's cgroups: a process of its
# own inside the machine's cgroup root upsets the systemd in there. Before each boot it makes the
# machine's cgroups again where they went, as make_cgroup and weigh_lab_cgroup do (the script has
# no module_utils to import): a new cpuset cgroup takes its parent's CPUs and memory nodes, a new
# lab cgroup its CPU weight.
_SUPERVISOR = """
import os, sys, time
procs, delay, command = [path for path in sys.argv[1].split("\\n") if path], float(sys.argv[2]), sys.argv[3:]
reboot, retries, failed_within, lab_shares = %d, %d, %d, %d
def say(message):
    print("[lab supervisor] " + message, flush=True)
def make_cgroup(directory):
    say("made again the cgroup %%s" %% directory)
    os.mkdir(directory)
    for setting in ("cpuset.cpus", "cpuset.mems"):
        own, inherited = os.path.join(directory, setting), os.path.join(os.path.dirname(directory), setting)
        if os.path.exists(own) and os.path.exists(inherited):
            with open(inherited) as source, open(own, "w") as target:
                target.write(source.read().strip())
def make_cgroups():
    for path in procs:
        host = os.path.dirname(path)
        lab = os.path.dirname(host)
        if not os.path.isdir(lab):
            make_cgroup(lab)
            if os.path.exists(os.path.join(lab, "cpu.shares")):
                with open(os.path.join(lab, "cpu.shares"), "w") as shares:
                    shares.write(str(lab_shares))
        if not os.path.isdir(host):
            make_cgroup(host)
rebooted, failed = False, 0
while True:
    make_cgroups()
    started = time.monotonic()
    child = os.fork()
    if child == 0:
        for path in procs:
            with open(path, "w") as file:
                file.write(str(os.getpid()))
        os.execvp(command[0], command)
    code = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
    code = code if code >= 0 else 128 - code
    lasted = time.monotonic() - started
    say("the machine exited with status %%d after %%.0f s" %% (code, lasted))
    if code == reboot:
        rebooted, failed = True, 0
        continue
    if rebooted and code != 0 and lasted < failed_within and failed < retries:
        failed += 1
        say("a boot after a reboot failed: booting again in %%.0f s (%%d of %%d)" %% (delay, failed, retries))
        time.sleep(delay)
        continue
    sys.exit(code)
""" % (REBOOT_EXIT_STATUS, BOOT_RETRIES, BOOT_FAILED_WITHIN_S, LAB_CPU_SHARES)


def supervised(
    command: Sequence[str], cgroup_procs: Sequence[Path] = (), retry_delay_s: float = BOOT_RETRY_DELAY_S
) -> list[str]:
    """``command`` run in the cgroups whose ``cgroup.procs`` files are given, again each time it
    exits with REBOOT_EXIT_STATUS, as a host that reboots comes back with its disk as it was; a boot
    after a reboot that fails at once is tried again (BOOT_RETRIES); any other exit (a poweroff,
    SIGKILL) ends it, with that status. Pure."""
    procs = "\n".join(str(path) for path in cgroup_procs)
    return [sys.executable, "-c", _SUPERVISOR, procs, str(retry_delay_s), *command]


def boot(layout: Layout, plan: LabPlan, host: LabHost, parents: Sequence[Path]) -> int:
    """Start ``host``'s machine in the background (supervised: a reboot inside boots it again);
    returns the supervisor's pid."""
    for parent in parents:
        make_cgroup(parent)
        weigh_lab_cgroup(parent)
        make_cgroup(parent / host.name)
    log = layout.log_of(host.name)
    log.parent.mkdir(parents=True, exist_ok=True)
    layout.shared_dir.mkdir(parents=True, exist_ok=True)
    command = [
        "systemd-nspawn",
        "-D",
        str(layout.root_of(host.name)),
        "-M",
        host.name,
        # No systemd runs this machine: nspawn registers nothing and stays in the cgroup it is given.
        "--register=no",
        "--keep-unit",
        "-b",
        f"--network-bridge={plan.bridge}",
        # containerd, runc and the kubelet inside need what a real host's root has.
        "--capability=all",
        "--bind=/dev/kmsg",
        f"--bind={layout.shared_dir}:{SHARED_MOUNT}",
        "--resolv-conf=replace-host",
        f"--system-call-filter={SYSTEM_CALLS}",
    ]
    environment = dict(os.environ, SYSTEMD_NSPAWN_API_VFS_WRITABLE="1")
    with open(log, "ab") as output:
        process = subprocess.Popen(  # noqa: S603 - the lab's own command line
            supervised(command, [parent / host.name / "cgroup.procs" for parent in parents]),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            env=environment,
            start_new_session=True,
        )
    return process.pid


def ssh(
    layout: Layout, address: str, command: str, timeout: float = 30, run: Runner = _run
) -> subprocess.CompletedProcess[str]:
    return run(
        [
            "ssh",
            "-i",
            str(layout.key),
            *SSH_OPTIONS,
            "-o",
            f"UserKnownHostsFile={layout.known_hosts}",
            "-o",
            "StrictHostKeyChecking=yes",
            f"root@{address}",
            command,
        ],
        timeout=timeout,
    )


def system_state(layout: Layout, host: LabHost) -> str:
    """systemd's own word for the host (``running``, ``starting``, ``degraded``...), or why none came."""
    try:
        result = ssh(layout, host.address, "systemctl is-system-running", timeout=10)
    except subprocess.TimeoutExpired:
        return "no answer over SSH in 10 s"
    return result.stdout.strip() or result.stderr.strip() or f"ssh exited {result.returncode}"


def failed_units(layout: Layout, host: LabHost) -> list[str]:
    result = ssh(layout, host.address, "systemctl list-units --failed --plain --no-legend", timeout=10)
    return [line.split()[0] for line in result.stdout.splitlines() if line.strip()]


def wait_running(
    layout: Layout, hosts: Sequence[LabHost], timeout: float
) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Wait until systemd says ``running`` on every host; returns each host's last state, and the
    units restarted on the way. A unit that failed at boot is restarted once: with several
    machines booting at once, systemd inside may lose a race for its cgroup ("Failed to attach to
    cgroup"), and the unit then starts on a second try."""
    states = {host.name: "not reached yet" for host in hosts}
    restarted: dict[str, list[str]] = {}

    def look() -> dict[str, str]:
        for host in hosts:
            if states[host.name] == "running":
                continue
            states[host.name] = system_state(layout, host)
            if states[host.name] == "degraded" and host.name not in restarted:
                restarted[host.name] = failed_units(layout, host)
                if restarted[host.name]:
                    units = " ".join(restarted[host.name])
                    ssh(layout, host.address, f"systemctl reset-failed {units}; systemctl restart {units}", timeout=60)
                    states[host.name] = system_state(layout, host)
        return states

    wait_until(look, lambda seen: all(state == "running" for state in seen.values()), timeout=timeout, interval=1)
    return states, {name: units for name, units in restarted.items() if units}


# What a host runs that makes its poweroff slow: the kubelet (which restarts pods), containerd and
# its shims, and the pods. Globs below each host's cgroup, in every hierarchy.
WORKLOAD_CGROUPS = ("system.slice/kubelet.service", "system.slice/containerd.service", "kubepods*")


def kill_workloads(parents: Iterable[Path], names: Iterable[str]) -> int:
    """SIGKILL the kubelet, containerd and the pods of the hosts ``names`` before they power off:
    systemd inside waits for pod scopes, up to 90 s a host, for pods the lab removes anyway (the
    kubelet first, so that it restarts nothing). Returns how many processes were signalled."""
    signalled = 0
    names = sorted(names)
    for pattern in WORKLOAD_CGROUPS:
        pids: set[int] = set()
        for parent in parents:
            if not parent.exists():
                continue
            for cgroup in (match for name in names for match in (parent / name).glob(pattern)):
                for procs in cgroup.rglob("cgroup.procs"):
                    try:
                        pids.update(int(pid) for pid in procs.read_text().split())
                    except OSError:
                        continue
        for pid in pids:
            _kill(pid, signal.SIGKILL)
        signalled += len(pids)
    return signalled


def stop(pids: dict[str, int], seconds: float = STOP_SECONDS) -> list[str]:
    """Power the machines off (nspawn turns SIGTERM into the container's poweroff), SIGKILL after
    ``seconds``; returns the names of those that had to be killed."""
    for pid in pids.values():
        _kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + seconds
    killed = []
    for name, pid in pids.items():
        # One deadline for them all: each machine is given what is left of it.
        wait_until(lambda pid=pid: not _alive(pid), timeout=deadline - time.monotonic(), interval=0.2)
        if _alive(pid):
            _kill(pid, signal.SIGKILL)
            killed.append(name)
    for pid in pids.values():
        while _alive(pid):
            time.sleep(0.1)
    return killed


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    if state == "Z":
        try:
            os.waitpid(pid, os.WNOHANG)  # our own child, when up and down run in one process
        except ChildProcessError:
            pass
        return False
    return True


def mounts_under(path: Path, mountinfo: str | None = None) -> list[str]:
    text = mountinfo if mountinfo is not None else Path("/proc/self/mountinfo").read_text()
    prefix = str(path).rstrip("/") + "/"
    points = [line.split()[4] for line in text.splitlines() if len(line.split()) > 4]
    return sorted((point for point in points if point.startswith(prefix)), key=len, reverse=True)


def unmount_under(path: Path, run: Runner = _run) -> list[str]:
    points = mounts_under(path)
    for point in points:
        run(["umount", "--lazy", point])
    return points
