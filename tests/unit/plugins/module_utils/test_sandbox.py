"""Pure parts of the sandbox: flags, node manifests, the node plan, the build's wrapper go.mod."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import build as sandbox_build
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import control_plane as sandbox
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import gpu_agent, pki
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import kai

NODE = {
    "name": "dgx1-1",
    "gpu_count": 8,
    "gpu_product": "Tesla-V100-SXM2-32GB",
    "gpu_memory_mib": 32768,
    "cpu_cores": 80,
    "memory_gib": 512,
    "labels": {"site": "lab"},
    "taints": [],
}


def test_every_process_listens_on_loopback_only():
    layout = sandbox.Layout(Path("/state"))
    ports = sandbox.Ports(20000)
    for component in sandbox.components(layout, Path("/bin"), ports):
        argv = " ".join(component.argv)
        assert "0.0.0.0" not in argv
        assert "127.0.0.1" in component.ready_url
        for flag in component.argv:
            if "url" in flag.split("=")[0] or "address" in flag.split("=")[0]:
                assert "127.0.0.1" in flag or "node-ip" in flag, flag


def _argv(component: sandbox.Component) -> dict[str, str]:
    return dict(flag.split("=", 1) for flag in component.argv[1:] if "=" in flag)


def test_etcd_serves_tls_to_clients_with_a_certificate_of_the_sandbox_ca_only():
    layout = sandbox.Layout(Path("/state"))
    etcd, apiserver = sandbox.components(layout, Path("/bin"), sandbox.Ports(20000))[:2]
    flags = _argv(etcd)
    for url in ("--listen-client-urls", "--advertise-client-urls", "--listen-peer-urls"):
        assert flags[url] in ("https://127.0.0.1:20000", "https://127.0.0.1:20001"), url
    assert flags["--client-cert-auth"] == flags["--peer-client-cert-auth"] == "true"
    assert flags["--trusted-ca-file"] == flags["--peer-trusted-ca-file"] == "/state/pki/ca.crt"
    assert etcd.ready_url == "https://127.0.0.1:20000/health" and etcd.ready_client == "etcd-healthcheck-client"
    api_flags = _argv(apiserver)
    assert api_flags["--etcd-servers"] == "https://127.0.0.1:20000"
    assert api_flags["--etcd-certfile"] == "/state/pki/apiserver-etcd-client.crt"
    assert api_flags["--etcd-cafile"] == "/state/pki/ca.crt"


def test_kai_components_listen_on_loopback_or_not_at_all():
    """KAI's plugin server has a port flag and no address flag: it would listen on every interface."""
    layout = sandbox.Layout(Path("/state"))
    components = kai.components(layout, Path("/bin"), kai.KaiPorts(20000), Path("/c.yaml"), ("agent",))
    for component in components:
        for flag, value in _argv(component).items():
            if "address" in flag:
                assert value.startswith("127.0.0.1:"), (component.name, flag)
            elif flag.endswith("port"):
                assert not 0 <= int(value) <= 65535, (component.name, flag, "binds every interface")


def test_pki_of_an_earlier_version_gets_the_missing_certificates_from_its_own_ca(tmp_path):
    paths = pki.PkiPaths(tmp_path)
    assert pki.ensure_pki(paths)
    kept = {path: path.read_bytes() for path in (paths.ca_cert, paths.ca_key, paths.apiserver_cert)}
    for path in (paths.etcd_cert, paths.etcd_key, paths.client_cert("apiserver-etcd-client")):
        path.unlink()
    assert pki.ensure_pki(paths)
    assert {path: path.read_bytes() for path in kept} == kept
    ca = x509.load_pem_x509_certificate(paths.ca_cert.read_bytes())
    etcd = x509.load_pem_x509_certificate(paths.etcd_cert.read_bytes())
    etcd.verify_directly_issued_by(ca)
    names = etcd.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    usages = etcd.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert set(usages) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
    client = x509.load_pem_x509_certificate(paths.client_cert("apiserver-etcd-client").read_bytes())
    client.verify_directly_issued_by(ca)
    assert not pki.ensure_pki(paths)


def test_run_record_says_how_to_start_the_process_again():
    component = sandbox.Component("agent", ("python", "-m", "x"), "", env=(("KUBECONFIG", "/k"),))
    record = json.loads(json.dumps(component.record(42, 1.0)))
    assert sandbox.Component.from_record("agent", record) == component
    assert sandbox.Component.from_record("agent", {"pid": 42, "start_time": 1.0, "argv": ["x"]}) is None


SLEEP = shutil.which("sleep") or "/bin/sleep"


def test_up_restarts_a_dead_addon_from_its_record_and_not_one_stopped_on_purpose(tmp_path):
    layout = sandbox.Layout(tmp_path)
    sleeper = sandbox.Component("sleeper", (SLEEP, "60"), "")
    stopped = sandbox.Component("stopped", (SLEEP, "61"), "")
    try:
        first = sandbox.start(layout, sleeper)
        sandbox.start(layout, stopped)
        sandbox.stop(layout, "stopped")
        os.kill(first, signal.SIGKILL)
        os.waitpid(first, 0)
        assert sandbox.restart_recorded(layout, ["etcd"], timeout=5) == ["sleeper"]
        assert sandbox.running_pid(layout, "sleeper") not in (None, first)
        assert sandbox.running_pid(layout, "stopped") is None
        assert [c["name"] for c in sandbox.status(layout, Path("/bin"), sandbox.Ports(20000))][-1] == "sleeper"
        assert sandbox.restart_recorded(layout, ["etcd"], timeout=5) == []
    finally:
        sandbox.stop(layout, "sleeper")


def test_a_component_whose_binary_a_build_replaced_is_started_again_with_the_new_one(tmp_path):
    """A moved pin rebuilds a binary at the same path (written beside it, renamed over it): the
    process still running the old one is not "running as declared", and is started again."""
    layout = sandbox.Layout(tmp_path / "state")
    program = tmp_path / "bin" / "sleeper"
    program.parent.mkdir()
    shutil.copy2(SLEEP, program)
    component = sandbox.Component("sleeper", (str(program), "60"), "")
    try:
        assert sandbox.run_components(layout, [component], timeout=10) == ["sleeper"]
        first = sandbox.running_pid(layout, "sleeper")
        assert sandbox.runs_as_declared(layout, component)
        assert sandbox.run_components(layout, [component], timeout=10) == [], "the same build is left running"
        rebuilt = program.with_name(".sleeper.tmp")
        shutil.copy2(SLEEP, rebuilt)
        os.replace(rebuilt, program)
        assert sandbox.program_replaced(first) and not sandbox.runs_as_declared(layout, component)
        assert sandbox.run_components(layout, [component], timeout=10) == ["sleeper"]
        second = sandbox.running_pid(layout, "sleeper")
        assert second not in (None, first) and not sandbox.program_replaced(second)
        assert sandbox.running_pid(layout, "sleeper") == second
    finally:
        sandbox.stop(layout, "sleeper")


def test_a_component_runs_ahead_of_its_drivers_where_the_niceness_may_be_lowered(tmp_path):
    """The control plane and the engines at ``COMPONENT_NICENESS`` (root may lower it), else at this
    process's own: a sandbox started by another user still comes up."""
    layout = sandbox.Layout(tmp_path)
    own = os.getpriority(os.PRIO_PROCESS, 0)
    expected = sandbox.COMPONENT_NICENESS if os.geteuid() == 0 else own
    try:
        pid = sandbox.start(layout, sandbox.Component("sleeper", (SLEEP, "60"), ""))
        assert os.getpriority(os.PRIO_PROCESS, pid) == expected
        assert os.getpriority(os.PRIO_PROCESS, 0) == own, "the caller's own niceness is left alone"
    finally:
        sandbox.stop(layout, "sleeper")


# Exits only at a second SIGTERM, as Kubernetes' components do while they drain requests; says
# when its handler is in place.
DRAINING = """
import signal, sys, time
seen = []
def on_term(*_):
    seen.append(1)
    if len(seen) == 2:
        sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
open(sys.argv[1], "w").close()
while True:
    time.sleep(0.05)
"""


def test_stop_signals_a_draining_process_again_rather_than_waiting_to_kill_it(tmp_path, monkeypatch):
    import sys
    import time

    monkeypatch.setattr(sandbox, "SECOND_SIGNAL_AFTER", 0.3)
    layout = sandbox.Layout(tmp_path)
    armed = tmp_path / "armed"
    pid = sandbox.start(layout, sandbox.Component("draining", (sys.executable, "-c", DRAINING, str(armed)), ""))
    deadline = time.monotonic() + 20
    while not armed.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    began = time.monotonic()
    assert sandbox.stop(layout, "draining", timeout=30)
    # Without the second signal it would have been killed after the 30 s timeout.
    assert time.monotonic() - began < 10
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    assert not layout.record("draining").exists()


def test_a_dead_addon_of_an_earlier_version_is_named_not_guessed_at(tmp_path):
    layout = sandbox.Layout(tmp_path)
    layout.record("kai-binder").parent.mkdir(parents=True)
    layout.record("kai-binder").write_text(json.dumps({"pid": 1, "start_time": -1.0, "argv": ["kai-binder"]}))
    assert sandbox.restart_recorded(layout, ["etcd"], timeout=5) == []
    assert sandbox.not_restartable(layout, ["etcd"]) == ["kai-binder"]
    assert [c["name"] for c in sandbox.status(layout, Path("/bin"), sandbox.Ports(20000)) if not c["running"]][-1] == (
        "kai-binder"
    )


def test_gpu_agent_backs_off_doubling_up_to_its_cap():
    waits = [gpu_agent.backoff(failures) for failures in range(1, 8)]
    assert waits == sorted(waits) and waits[0] == gpu_agent.BACKOFF_FIRST
    assert waits[-1] == gpu_agent.BACKOFF_MAX


def test_ports_derive_from_the_base():
    ports = sandbox.Ports(20000)
    assert (ports.etcd_client, ports.apiserver, ports.kwok) == (20000, 20003, 20006)
    assert len(set(ports.all())) == len(ports.all()) == 6


def test_node_manifest_carries_gpu_feature_discovery_labels_and_capacity():
    manifest = sandbox.node_manifest(NODE)
    labels = manifest["metadata"]["labels"]
    assert labels["nvidia.com/gpu.product"] == "Tesla-V100-SXM2-32GB"
    assert labels["nvidia.com/gpu.memory"] == "32768"
    assert labels["nvidia.com/gpu.count"] == "8"
    assert labels["site"] == "lab"
    assert manifest["metadata"]["annotations"][sandbox.KWOK_NODE_ANNOTATION] == "fake"
    assert manifest["status"]["allocatable"] == {"cpu": "80", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"}


def test_node_without_gpus_has_no_gpu_labels():
    manifest = sandbox.node_manifest({**NODE, "gpu_count": 0})
    assert not any(key.startswith("nvidia.com/") for key in manifest["metadata"]["labels"])
    assert manifest["status"]["allocatable"]["nvidia.com/gpu"] == "0"


def _as_existing(manifest, extra_taints=()):
    existing = {**manifest, "spec": {"taints": list(manifest["spec"]["taints"]) + list(extra_taints)}}
    existing["metadata"] = {**manifest["metadata"], "labels": {**manifest["metadata"]["labels"], "added-by": "someone"}}
    return existing


def test_node_plan_is_empty_when_nodes_match_even_with_system_taints():
    existing = [
        _as_existing(sandbox.node_manifest(NODE), [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}])
    ]
    plan = sandbox.plan_nodes([NODE], existing)
    assert not plan.changed


def test_node_plan_creates_updates_and_deletes():
    other = {**NODE, "name": "dgx1-2"}
    stale = sandbox.node_manifest({**NODE, "name": "old-node"})
    changed = _as_existing(sandbox.node_manifest({**NODE, "gpu_count": 4}))
    plan = sandbox.plan_nodes([NODE, other], [changed, stale])
    assert [m["metadata"]["name"] for m in plan.create] == ["dgx1-2"]
    assert [m["metadata"]["name"] for m in plan.replace] == ["dgx1-1"]
    assert plan.delete == ["old-node"]


GOMOD = """module k8s.io/kubernetes

go 1.26.0

require (
\tk8s.io/api v0.0.0
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
\tgithub.com/other/thing => github.com/fork/thing v1.0.0
)
"""


def test_wrapper_gomod_replaces_each_staging_module_with_its_published_version():
    text = sandbox_build.kubernetes_wrapper_gomod("v1.36.3", GOMOD, sandbox_build.go_directive_of(GOMOD))
    assert "require k8s.io/kubernetes v1.36.3" in text
    assert "\tk8s.io/api => k8s.io/api v0.36.3" in text
    assert "\tk8s.io/client-go => k8s.io/client-go v0.36.3" in text
    assert "github.com/other/thing" not in text
    assert "go 1.26.0" in text


def test_staging_list_comes_from_the_gomod():
    assert sandbox_build.staging_modules(GOMOD) == ["k8s.io/api", "k8s.io/client-go"]
    with pytest.raises(ValueError, match="no './staging/src/k8s.io/...' replace"):
        sandbox_build.staging_modules("module x\n")


@pytest.mark.parametrize("version", ["1.36.3", "v2.0.0", "v1.36", "latest"])
def test_bad_kubernetes_version_is_refused(version):
    with pytest.raises(ValueError, match="expected v1.<minor>.<patch>"):
        sandbox_build.staging_version(version)


def test_version_is_stamped():
    flags = sandbox_build.kubernetes_version_ldflags("v1.36.3", "2026-01-01T00:00:00Z")
    assert "-X k8s.io/component-base/version.gitVersion=v1.36.3" in flags
    assert "-X k8s.io/component-base/version.gitMinor=36" in flags


def test_cache_dir_is_keyed_by_toolchain_and_recipe():
    assert sandbox_build.cache_key("go1.26.8") != sandbox_build.cache_key("go1.26.9")
    assert sandbox_build.cache_key("go1.26.8") == sandbox_build.cache_key("go1.26.8")


def _fake_binaries(plan, names):
    """Install a stand-in script for each of ``names`` the way the build does (plan.install stamps it)."""
    plan.bin_dir.mkdir(parents=True)
    for name in names:
        built = plan.build_target(name)
        built.write_text("#!/bin/sh\n")
        built.chmod(0o755)
        plan.install(built, name)


def test_two_builds_at_once_write_their_binaries_to_names_of_their_own(tmp_path):
    """``./clusterproof build`` beside ``./clusterproof bundle`` (which builds the sandbox's binaries
    too) once failed: one build moved the other's ``kai-scheduler.tmp`` into place before it could."""
    plan = sandbox_build.BuildPlan(sandbox_build.SandboxVersions(), tmp_path, "go1.26.8")
    mine = plan.build_target("kai-scheduler")
    assert mine.parent == plan.bin_dir
    assert str(os.getpid()) in mine.name
    _fake_binaries(plan, ["kai-scheduler"])
    assert plan.is_current("kai-scheduler")
    assert not mine.exists()


def _fake_build(plan):
    _fake_binaries(plan, sandbox_build.ALL_BINARIES)
    plan.kai_chart.mkdir(parents=True)
    (plan.kai_chart / "Chart.yaml").write_text("name: kai-scheduler\n")
    (plan.kai_chart.parent / ".version").write_text(plan.versions.kai_scheduler + "\n")
    (plan.share_dir / "kueue").mkdir()
    (plan.share_dir / "kueue" / ".version").write_text(plan.versions.kueue + "\n")
    (plan.share_dir / "koordinator").mkdir()
    (plan.share_dir / "koordinator" / ".version").write_text(plan.versions.koordinator + "\n")


def test_a_build_waits_for_the_one_under_way_into_its_cache_and_builds_nothing_that_one_made(tmp_path):
    plan_ = sandbox_build.BuildPlan(sandbox_build.SandboxVersions(), tmp_path, "go1.26.8")
    said: list[str] = []
    results: list[bool] = []
    with sandbox_build.build_lock(plan_.key_dir):  # the other build
        waiting = threading.Thread(target=lambda: results.append(sandbox_build.ensure_built(plan_, said.append)))
        waiting.start()
        deadline = time.monotonic() + 10
        while not said and time.monotonic() < deadline:
            time.sleep(0.05)
        assert said and said[0].startswith(
            "waiting for the build under way into %s (pid %d)" % (plan_.key_dir, os.getpid())
        )
        assert waiting.is_alive() and results == []
        _fake_build(plan_)
    waiting.join(10)
    assert results == [False], "what the other build made is not built again"
    assert not (plan_.key_dir / "build.log").exists()


def test_a_new_pin_rebuilds_only_its_component(tmp_path):
    built = sandbox_build.BuildPlan(sandbox_build.SandboxVersions(), tmp_path, "go1.26.8")
    _fake_build(built)
    assert built.missing() == []
    kwok_bumped = sandbox_build.BuildPlan(sandbox_build.SandboxVersions(kwok="v0.7.0"), tmp_path, "go1.26.8")
    assert kwok_bumped.missing() == ["kwok"]
    kai_bumped = sandbox_build.BuildPlan(sandbox_build.SandboxVersions(kai_scheduler="v0.11.0"), tmp_path, "go1.26.8")
    assert kai_bumped.missing() == [*sandbox_build.KAI_COMMANDS, sandbox_build.KAI_CHART_ITEM]
    kueue_bumped = sandbox_build.BuildPlan(sandbox_build.SandboxVersions(kueue="v0.16.2"), tmp_path, "go1.26.8")
    assert kueue_bumped.missing() == ["kueue", sandbox_build.KUEUE_MANIFESTS_ITEM]
    (built.bin_dir / "kube-scheduler").unlink()
    assert built.missing() == ["kube-scheduler"]


def test_another_release_builds_into_a_folder_of_its_own_and_leaves_the_pinned_binaries_be(tmp_path):
    pinned = sandbox_build.BuildPlan(sandbox_build.SandboxVersions(), tmp_path, "go1.26.8")
    _fake_build(pinned)
    release = sandbox_build.ReleasePlan(
        sandbox_build.SandboxVersions(kubernetes="v1.35.4", etcd="v3.6.6"), tmp_path, "go1.26.8"
    )
    # Under the same cache key (toolchain and recipe), keyed by its version.
    assert release.bin_dir == pinned.key_dir / "kubernetes" / "v1.35.4" / "bin"
    # What the bundle needs of it: kubeadm's packages and images, and the etcd its kubeadm asks for.
    assert release.missing() == [
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "kubeadm",
        "kubelet",
        "kubectl",
        "kube-proxy",
        "etcd",
    ]
    _fake_binaries(release, sandbox_build.RELEASE_BINARIES)
    assert release.missing() == []
    assert release.stamp("kubeadm").read_text() == "v1.35.4\n" and release.stamp("etcd").read_text() == "v3.6.6\n"
    assert pinned.missing() == [] and pinned.stamp("kubeadm").read_text() != "v1.35.4\n"
    assert release.record() == {"kubernetes": "v1.35.4", "etcd": "v3.6.6", "go": "go1.26.8"}


def test_a_release_that_is_not_a_kubernetes_version_is_refused():
    with pytest.raises(ValueError, match="expected v1.<minor>.<patch>, found 'v2.0'"):
        sandbox_build.release_plan("v2.0", "v3.6.6")
