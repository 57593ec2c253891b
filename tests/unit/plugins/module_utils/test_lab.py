"""The lab's pure parts: its declaration's checks, the files a host gets, what is read from /proc."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from ansible_collections.clusterproof.gpu.plugins.module_utils.lab import machines
from ansible_collections.clusterproof.gpu.plugins.module_utils.lab.plan import LabError, LabHost, make_plan

HOSTS = {"lab-cp-1": "10.213.0.10", "lab-worker-1": "10.213.0.11"}


def test_a_lab_as_declared():
    plan = make_plan("cplab0", "10.213.0.1/24", HOSTS)
    assert plan.hosts == (LabHost("lab-cp-1", "10.213.0.10"), LabHost("lab-worker-1", "10.213.0.11"))
    assert (plan.gateway, plan.prefix_length) == ("10.213.0.1", 24)


@pytest.mark.parametrize(
    ("bridge", "host_address", "hosts", "message"),
    [
        ("a-very-long-bridge", "10.213.0.1/24", HOSTS,
         "bridge: expected an interface name of 1 to 15 lower-case letters, digits, -, found 'a-very-long-bridge'"),
        ("cplab0", "8.8.8.1/24", HOSTS,
         "host_address: expected a private IPv4 address with a prefix of /8 to /29, found '8.8.8.1/24'"),
        ("cplab0", "10.213.0.1/24", {"lab-a": "10.213.1.10"},
         "hosts.lab-a: expected a host address in 10.213.0.0/24, found '10.213.1.10'"),
        ("cplab0", "10.213.0.1/24", {"lab-a": "10.213.0.1"},
         "hosts.lab-a: expected an address no other host has (this machine (host_address) has it), found '10.213.0.1'"),
        ("cplab0", "10.213.0.1/24", {"lab-a": "10.213.0.9", "lab-b": "10.213.0.9"},
         "hosts.lab-b: expected an address no other host has (lab-a has it), found '10.213.0.9'"),
        ("cplab0", "10.213.0.1/24", {"Lab_A": "10.213.0.9"},
         "hosts.Lab_A: expected a DNS label (it is the host's name), found 'Lab_A'"),
        ("cplab0", "10.213.0.1/24", {"lab-a": "not-an-address"},
         "hosts.lab-a: expected an IPv4 address in 10.213.0.0/24, found 'not-an-address'"),
        ("cplab0", "10.213.0.1/24", {}, "hosts: expected a mapping of 1 to 16 host names to addresses, found {}"),
        ("cplab0", "10.213.0.1/24", None, "hosts: expected a mapping of 1 to 16 host names to addresses, found None"),
    ],
)  # fmt: skip
def test_a_lab_that_breaks_a_rule_is_refused_naming_the_field(bridge, host_address, hosts, message):
    with pytest.raises(LabError) as refused:
        make_plan(bridge, host_address, hosts)
    assert message in str(refused.value)
    assert str(refused.value).endswith("; nothing was changed")


def test_every_problem_is_listed_at_once():
    with pytest.raises(LabError) as refused:
        make_plan("x" * 20, "10.213.0.1/24", {"lab-a": "10.213.0.9", "lab-b": "10.213.0.9"})
    assert "bridge:" in str(refused.value) and "hosts.lab-b:" in str(refused.value)


def test_a_host_s_files_give_it_its_name_address_route_and_key():
    plan = make_plan("cplab0", "10.213.0.1/24", HOSTS)
    files = machines.host_files(plan, plan.hosts[1], "ssh-ed25519 AAAA lab\n")
    assert files["etc/hostname"] == "lab-worker-1\n"
    assert "10.213.0.10 lab-cp-1\n" in files["etc/hosts"] and "10.213.0.11 lab-worker-1\n" in files["etc/hosts"]
    unit = files["etc/systemd/system/lab-address.service"]
    assert "ExecStart=/usr/sbin/ip address replace 10.213.0.11/24 dev host0" in unit
    assert "ExecStart=/usr/sbin/ip route replace default via 10.213.0.1 dev host0" in unit
    assert "Restart=on-failure" in unit and "DefaultDependencies=no" not in unit
    assert files["root/.ssh/authorized_keys"] == "ssh-ed25519 AAAA lab\n"
    assert len(files["etc/machine-id"].strip()) == 32
    assert files["etc/machine-id"] != machines.host_files(plan, plan.hosts[1], "")["etc/machine-id"]
    # Pods' scopes would hold a host's poweroff for systemd's default 90 s (bench/lab_site_bench.py).
    assert files["etc/systemd/system.conf.d/lab.conf"] == "[Manager]\nDefaultTimeoutStopSec=10s\n"


def test_the_lab_s_cgroups_are_under_this_process_s_own_in_every_v1_hierarchy():
    proc = "9:name=systemd:/\n4:memory:/process_api/abc\n2:cpu,cpuacct:/\n0::/\n"
    assert machines.cgroup_parents(proc) == [
        Path("/sys/fs/cgroup/systemd/clusterproof-lab"),
        Path("/sys/fs/cgroup/memory/process_api/abc/clusterproof-lab"),
        Path("/sys/fs/cgroup/cpu/clusterproof-lab"),
    ]


def test_mounts_under_a_directory_deepest_first():
    mountinfo = (
        "22 1 0:21 / /proc rw - proc proc rw\n"
        "90 1 0:50 / /var/lab/machines/a rw - overlay o rw\n"
        "91 90 0:51 / /var/lab/machines/a/proc rw - proc proc rw\n"
        "92 1 0:52 / /var/laboratory rw - tmpfs t rw\n"
    )
    assert machines.mounts_under(Path("/var/lab"), mountinfo) == ["/var/lab/machines/a/proc", "/var/lab/machines/a"]


def test_the_debian_root_is_keyed_by_its_package_list():
    assert machines.root_key() == machines.root_key(machines.ROOT_PACKAGES)
    assert machines.root_key() != machines.root_key((*machines.ROOT_PACKAGES, "containerd"))


def test_the_lab_site_s_shared_class_lives_on_the_directory_every_lab_host_mounts():
    repo = Path(__file__).resolve().parents[4]
    site = yaml.safe_load((repo / "inventories" / "lab" / "group_vars" / "all" / "site.yml").read_text())
    shared = [cls for cls in site["clusterproof_storage_classes"] if "ReadWriteMany" in cls.get("access_modes", [])]
    assert [cls["local_path"]["shared_path"] for cls in shared] == [machines.SHARED_MOUNT]
    layout = machines.Layout(Path("/state"), Path("/cache"))
    assert layout.shared_dir == Path("/state/shared")


def test_a_machine_that_reboots_is_booted_again_in_its_cgroups_and_one_that_powers_off_is_not(tmp_path):
    # A stand-in for nspawn: records its pid at each boot; exits 133 (reboot) twice, then 0 (poweroff).
    boots, procs = tmp_path / "boots", [tmp_path / "pids" / "cgroup.procs", tmp_path / "blkio" / "cgroup.procs"]
    for path in procs:
        path.parent.mkdir()
    machine = tmp_path / "machine"
    machine.write_text('echo $$ >> "%s"; [ "$(wc -l < "%s")" -ge 3 ] && exit 0; exit 133\n' % (boots, boots))
    done = subprocess.run(machines.supervised(["sh", str(machine)], procs), timeout=30)
    assert done.returncode == 0
    pids = boots.read_text().split()
    assert len(pids) == 3
    # Each boot entered the machine's cgroups itself (the supervisor stays where it was).
    assert [path.read_text() for path in procs] == [pids[-1], pids[-1]]
    # Killed (SIGKILL gives 137) or failed: not booted again, and the status is passed on.
    failing = tmp_path / "failing"
    failing.write_text('echo boot >> "%s"; exit 137\n' % (tmp_path / "failed-boots"))
    assert subprocess.run(machines.supervised(["sh", str(failing)]), timeout=30).returncode == 137
    assert (tmp_path / "failed-boots").read_text().count("boot") == 1


def test_a_boot_after_a_reboot_that_fails_at_once_is_tried_again_in_cgroups_made_again(tmp_path):
    # Boot 1 reboots; boots 2 and 3 fail at once (what the machine that ended still held); boot 4
    # powers off. The machine's cgroup went with its end: each boot makes it again.
    boots, cgroup = tmp_path / "boots", tmp_path / "pids" / "lab-worker-1"
    cgroup.mkdir(parents=True)
    machine = tmp_path / "machine"
    machine.write_text(
        'echo $$ >> "%s"; n=$(wc -l < "%s"); rm -r "%s"; [ "$n" -eq 1 ] && exit 133; [ "$n" -le 3 ] && exit 1; exit 0\n'
        % (boots, boots, cgroup)
    )
    done = subprocess.run(
        machines.supervised(["sh", str(machine)], [cgroup / "cgroup.procs"], retry_delay_s=0),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stdout
    assert len(boots.read_text().split()) == 4
    assert done.stdout.count("made again the cgroup") == 3
    assert "booting again in 0 s (2 of %d)" % machines.BOOT_RETRIES in done.stdout
    assert "exited with status 133" in done.stdout and done.stdout.count("exited with status 1 ") == 2


def test_a_boot_after_the_whole_lab_cgroup_went_makes_the_lab_s_cgroup_and_the_host_s_again(tmp_path):
    # The last host of a lab going takes the lab's parent cgroup with it: both levels are made again,
    # the parent first (where the cpu hierarchy has cpu.shares, with the lab's weight).
    lab = tmp_path / "cpu" / machines.CGROUP_NAME
    cgroup = lab / "lab-worker-1"
    cgroup.mkdir(parents=True)
    boots, machine = tmp_path / "boots", tmp_path / "machine"
    machine.write_text(
        'echo $$ >> "%s"; n=$(wc -l < "%s"); [ "$n" -eq 1 ] && rm -r "%s" && exit 133; exit 0\n' % (boots, boots, lab)
    )
    done = subprocess.run(
        machines.supervised(["sh", str(machine)], [cgroup / "cgroup.procs"], retry_delay_s=0),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stdout
    made = [line for line in done.stdout.splitlines() if "made again the cgroup" in line]
    assert [line.split()[-1] for line in made] == [str(lab), str(cgroup)]
    assert (cgroup / "cgroup.procs").read_text() == boots.read_text().split()[-1]


def test_a_machine_that_keeps_failing_after_a_reboot_ends_with_its_status_after_the_retries(tmp_path):
    boots = tmp_path / "boots"
    machine = tmp_path / "machine"
    machine.write_text('echo boot >> "%s"; [ "$(wc -l < "%s")" -eq 1 ] && exit 133; exit 1\n' % (boots, boots))
    done = subprocess.run(machines.supervised(["sh", str(machine)], retry_delay_s=0), capture_output=True, timeout=30)
    assert done.returncode == 1
    assert len(boots.read_text().split()) == 2 + machines.BOOT_RETRIES


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen(["sleep", "60"])


def _alive(process: subprocess.Popen) -> bool:
    return process.poll() is None


def test_a_lab_s_down_kills_the_workloads_of_its_own_hosts_only(tmp_path):
    # Two labs on one machine share the clusterproof-lab parent: lab-a-1 is this lab's host, b-1 the
    # other lab's. Each runs a kubelet (a sleep stands in for it).
    parent = tmp_path / "pids" / machines.CGROUP_NAME
    ours, theirs = _sleeper(), _sleeper()
    try:
        for host, process in (("lab-a-1", ours), ("b-1", theirs)):
            kubelet = parent / host / "system.slice" / "kubelet.service"
            kubelet.mkdir(parents=True)
            (kubelet / "cgroup.procs").write_text(f"{process.pid}\n")
        assert machines.kill_workloads([parent], ["lab-a-1"]) == 1
        assert ours.wait(timeout=10) == -9
        assert _alive(theirs)
    finally:
        for process in (ours, theirs):
            process.kill()
            process.wait()


def test_removing_a_lab_s_cgroups_leaves_another_running_lab_s_and_the_parent_they_share(tmp_path):
    parent = tmp_path / "pids" / machines.CGROUP_NAME
    # This lab's host (its processes already gone), a host of a lab gone without its down (no
    # process left), and a running host of another lab.
    (parent / "lab-a-1" / "system.slice").mkdir(parents=True)
    (parent / "gone-1" / "kubepods").mkdir(parents=True)
    other = parent / "b-1"
    other.mkdir()
    theirs = _sleeper()
    try:
        (other / "cgroup.procs").write_text(f"{theirs.pid}\n")
        removed = machines.remove_cgroups([parent], ["lab-a-1"])
        assert removed == [
            str(parent / "gone-1" / "kubepods"),
            str(parent / "gone-1"),
            str(parent / "lab-a-1" / "system.slice"),
            str(parent / "lab-a-1"),
        ]
        assert sorted(path.name for path in parent.iterdir()) == ["b-1"]
        assert _alive(theirs)
    finally:
        theirs.kill()
        theirs.wait()
    # Once the other lab is gone too, the parent goes with the last host.
    (other / "cgroup.procs").unlink()
    assert machines.remove_cgroups([parent], []) == [str(other), str(parent)]
    assert not parent.exists()


def test_nspawn_run_files_are_found_by_host_name(tmp_path, monkeypatch):
    monkeypatch.setattr(machines, "NSPAWN_RUN_DIR", tmp_path)
    (tmp_path / "propagate" / "lab-a-1").mkdir(parents=True)
    (tmp_path / "propagate" / "b-1").mkdir()
    assert machines.run_files(["lab-a-2", "lab-a-1"]) == [tmp_path / "propagate" / "lab-a-1"]


def test_inotify_limits_are_raised_only_where_lower_and_their_previous_values_returned(tmp_path):
    proc_sys = tmp_path / "sys"
    (proc_sys / "fs" / "inotify").mkdir(parents=True)
    (proc_sys / "fs" / "inotify" / "max_user_instances").write_text("128\n")
    (proc_sys / "fs" / "inotify" / "max_user_watches").write_text("1048576\n")
    raised = machines.raise_limits(machines.INOTIFY_LIMITS, proc_sys)
    assert raised == {"fs.inotify.max_user_instances": "128"}
    assert (proc_sys / "fs" / "inotify" / "max_user_instances").read_text() == "512"
    assert (proc_sys / "fs" / "inotify" / "max_user_watches").read_text().strip() == "1048576"
    assert machines.raise_limits(machines.INOTIFY_LIMITS, proc_sys) == {}


def test_the_machine_s_settings_are_saved_by_the_first_lab_only_and_put_back_from_there(tmp_path):
    proc_sys, saved = tmp_path / "sys", tmp_path / "run" / "settings.json"
    names = (*machines.KERNEL_SETTINGS, *machines.INOTIFY_LIMITS)
    machine = {"vm.overcommit_memory": "0", "kernel.panic": "0", "kernel.panic_on_oops": "0"}
    machine |= {"fs.inotify.max_user_instances": "128", "fs.inotify.max_user_watches": "192536"}
    for name, value in machine.items():
        proc_sys.joinpath(*name.split(".")).parent.mkdir(parents=True, exist_ok=True)
        proc_sys.joinpath(*name.split(".")).write_text(value + "\n")
    assert machines.save_machine_settings(saved, proc_sys)
    # The first lab's hosts run: the limits raised, a kubelet's settings.
    machines.raise_limits(machines.INOTIFY_LIMITS, proc_sys)
    machines.write_kernel_settings({"vm.overcommit_memory": "1", "kernel.panic": "10"}, proc_sys)
    # A second lab comes up beside it: what it reads now is not the machine's, and it saves nothing.
    assert not machines.save_machine_settings(saved, proc_sys)
    assert machines.load_machine_settings(saved) == machine
    put_back = machines.write_kernel_settings(machines.load_machine_settings(saved), proc_sys)
    assert sorted(put_back) == [*sorted(machines.INOTIFY_LIMITS), "kernel.panic", "vm.overcommit_memory"]
    assert machines.read_kernel_settings(names, proc_sys) == machine
    machines.forget_machine_settings(saved)
    assert machines.load_machine_settings(saved) == {}
    machines.forget_machine_settings(saved)


def test_another_lab_s_running_hosts_are_found_by_their_cgroups_processes(tmp_path):
    parent = tmp_path / "pids" / machines.CGROUP_NAME
    (parent / "lab-a-1").mkdir(parents=True)
    (parent / "gone-1").mkdir()
    (parent / "b-1" / "kubepods").mkdir(parents=True)
    theirs = _sleeper()
    try:
        (parent / "b-1" / "kubepods" / "cgroup.procs").write_text(f"{theirs.pid}\n")
        assert machines.other_hosts_running([parent], ["lab-a-1"]) == ["b-1"]
        assert machines.other_hosts_running([parent], ["lab-a-1", "b-1"]) == []
    finally:
        theirs.kill()
        theirs.wait()


def test_the_lab_s_cgroup_weighs_eight_processes_in_the_cpu_hierarchy_and_nothing_is_written_elsewhere(tmp_path):
    cpu, memory = tmp_path / "cpu" / machines.CGROUP_NAME, tmp_path / "memory" / machines.CGROUP_NAME
    cpu.mkdir(parents=True)
    memory.mkdir(parents=True)
    (cpu / "cpu.shares").write_text("1024\n")  # what the kernel gives a new cgroup
    assert machines.weigh_lab_cgroup(cpu) is True
    assert (cpu / "cpu.shares").read_text() == "8192"
    assert machines.weigh_lab_cgroup(cpu) is False  # a second host's boot changes nothing
    assert machines.weigh_lab_cgroup(memory) is False
    assert list(memory.iterdir()) == []
