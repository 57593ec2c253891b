"""The offline bundle (docs/bundle.md): built from the pins, it holds every image kubeadm and the CNI
ask for; served to a lab host, it installs containerd, the Kubernetes packages and the NVIDIA
container toolkit, and a pod whose image comes from its registry runs through containerd with the
nvidia runtime as the default. Bad input (a bundle missing an image, a mirror the host cannot reach)
stops before anything changes.

One lab host on a bridge and subnet of its own, in the same xdist group as test_lab.py: a kubelet
changes kernel settings of the whole machine, which test_lab.py asserts are put back.
"""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import jinja2
import pytest
import yaml

from ansible_collections.clusterproof.gpu.plugins.module_utils import versions
from ansible_collections.clusterproof.gpu.plugins.module_utils.bundle import build, contents, serve
from ansible_collections.clusterproof.gpu.plugins.module_utils.lab import lifecycle, machines
from ansible_collections.clusterproof.gpu.plugins.module_utils.monitoring import cluster
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import build as sandbox_build
from tests.e2e import lab_site
from tests.e2e.conftest import REPO, ad_hoc, run_playbook

pytestmark = pytest.mark.xdist_group("lab")

BRIDGE = "cpbundle0"
GATEWAY = "10.216.0.1"
HOST, ADDRESS = "lab-node-1", "10.216.0.10"
LAB = str(REPO / "playbooks" / "lab.yml")
NODE_STACK = str(REPO / "tests" / "e2e" / "playbooks" / "bundle_node_stack.yml")


@pytest.fixture(scope="module")
def bundle() -> Path:
    """The bundle, built (or brought up to date) in the machine's cache: a few minutes cold."""
    layout = build.Layout(build.default_cache(), build.default_cache() / "out")
    build.build(layout, progress=lambda message: print("[bundle]", message, flush=True))
    return layout.out


class BundleLab:
    def __init__(self, base: Path, bundle: Path) -> None:
        self.state_dir = base / "state"
        self.inventory = base / "hosts.yml"
        self.layout = machines.Layout(self.state_dir, Path.home() / ".cache" / "clusterproof" / "lab")
        self.inventory.write_text(yaml.safe_dump(self.declaration(bundle)))

    def declaration(self, bundle: Path, **extra: object) -> dict:
        # The mirror's settings, which a test may replace (a mirror the host cannot reach).
        settings = {
            "lab_bundle": str(bundle),
            "bundle_apt_url": "http://%s:8081/" % GATEWAY,
            "bundle_registry": "%s:5000" % GATEWAY,
            **extra,
        }
        return {
            "all": {
                "vars": lab_site.lab_vars(self.state_dir, BRIDGE, GATEWAY, **settings),
                "children": lab_site.lab_hosts({HOST: ADDRESS}),
            }
        }

    def ssh(self, command: str) -> str:
        return machines.ssh(self.layout, ADDRESS, command, timeout=60).stdout


@pytest.fixture(scope="module")
def lab(bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BundleLab]:
    the_lab = BundleLab(tmp_path_factory.mktemp("bundle-lab"), bundle)
    try:
        up = run_playbook(LAB, inventory=the_lab.inventory, timeout=600)
        assert up.returncode == 0, up.tail(3000)
        yield the_lab
    finally:
        down = run_playbook(LAB, "-e", "lab_state=down", inventory=the_lab.inventory, timeout=600)
        assert down.returncode == 0, down.tail(3000)


def _role_default(role: str, variable: str):
    """A role's default as Ansible gives it: its ``lookup('clusterproof.gpu.versions', ...)`` resolved
    from versions.py (the roles' defaults write no version themselves), and its references to the
    role's other defaults resolved (the Kueue image tag is ``kueue_scheduler_version``). A default that
    needs a site's variable stays unresolved, so a value that needs one fails here, naming it."""
    environment = jinja2.Environment(undefined=jinja2.StrictUndefined)
    defaults = yaml.safe_load((REPO / "roles" / role / "defaults/main.yml").read_text())

    def lookup(plugin: str, term: str) -> str:
        assert plugin == "clusterproof.gpu.versions", plugin
        return versions.value(term)

    def rendered(value, known: dict):
        if isinstance(value, dict):
            return {key: rendered(item, known) for key, item in value.items()}
        if isinstance(value, list):
            return [rendered(item, known) for item in value]
        if isinstance(value, str) and "{{" in value:
            return environment.from_string(value).render(lookup=lookup, **known)
        return value

    # Resolve the role's scalar defaults in passes: each pass adds those whose references are known.
    known: dict = {}
    while True:
        added = {}
        for name, value in defaults.items():
            if name in known or name == variable or not isinstance(value, (str, int, float, bool)):
                continue
            try:
                added[name] = rendered(value, known)
            except jinja2.exceptions.UndefinedError:
                continue
        if not added:
            break
        known.update(added)
    return rendered(defaults[variable], known)


def _listening(port: int) -> bool:
    try:
        socket.create_connection((GATEWAY, port), timeout=1).close()
        return True
    except OSError:
        return False


def test_the_bundle_holds_the_previous_minor_s_packages_and_every_image_its_kubeadm_asks_for(bundle: Path) -> None:
    manifest = json.loads((bundle / "manifest.json").read_text())
    pins = contents.BundlePins(**manifest["pins"])
    assert manifest["kubernetes_versions"] == [pins.kubernetes, pins.kubernetes_previous]
    release = sandbox_build.release_plan(pins.kubernetes_previous, versions.ETCD_PREVIOUS.version)
    kubeadm = str(release.binary("kubeadm"))
    said = subprocess.run([kubeadm, "version", "-o", "short"], capture_output=True, text=True, check=True).stdout
    assert said.strip() == pins.kubernetes_previous
    listing = subprocess.run(
        [kubeadm, "config", "images", "list", "--kubernetes-version", pins.kubernetes_previous],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert contents.missing_images(manifest, contents.kubeadm_images(listing).values()) == []
    held = {(package["name"], package["version"]) for package in manifest["packages"]}
    for version in pins.kubernetes_versions:
        for name in ("kubeadm", "kubelet", "kubectl"):
            assert (name, pins.package_version(version)) in held
            assert (bundle / "apt" / ("%s_%s_amd64.deb" % (name, pins.package_version(version)))).is_file()


def test_the_bundle_holds_every_image_kubeadm_and_the_cni_ask_for(bundle: Path) -> None:
    manifest = json.loads((bundle / "manifest.json").read_text())
    plan = sandbox_build.plan()
    listing = subprocess.run(
        [str(plan.binary("kubeadm")), "config", "images", "list", "--kubernetes-version", manifest["kubernetes"]],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    wanted = list(contents.kubeadm_images(listing).values())
    wanted += build.cni_images(contents.BundlePins(**manifest["pins"]))
    assert len(wanted) == 9
    assert contents.missing_images(manifest, wanted) == []
    # Every image the bundle's charts reference, rendered with the values the roles install them with.
    charts = {chart["name"]: bundle / chart["file"] for chart in manifest["charts"]}
    assert set(charts) == {"kai-scheduler", "kueue", "local-path-provisioner"}
    helper = _role_default("storage_classes", "storage_classes_helper_image")
    repository, tag = helper.rsplit(":", 1)
    values = {
        "kai-scheduler": _role_default("kai_scheduler", "kai_scheduler_helm_values"),
        "kueue": _role_default("kueue_scheduler", "kueue_scheduler_helm_values"),
        "local-path-provisioner": {"helperImage": {"repository": repository, "tag": tag}},
    }
    referenced = []
    for name, chart in charts.items():
        assert build.sha256_file(chart) == next(c["sha256"] for c in manifest["charts"] if c["name"] == name)
        rendered = subprocess.run(
            [str(plan.binary("helm")), "template", name, str(chart), "--values", "-"],
            input=json.dumps(values[name]),
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        referenced += contents.manifest_images(doc for doc in yaml.safe_load_all(rendered) if doc)
    referenced.append(contents.parse_ref(helper))
    # The monitoring stage's pods on a kubeadm site (monitoring.cluster).
    referenced += contents.manifest_images(cluster.objects(cluster.ClusterMonitoring("kai", {})))
    assert {ref.ref for ref in referenced} >= {
        versions.PROMETHEUS_IMAGE,
        versions.KUBE_STATE_METRICS_IMAGE,
        "ghcr.io/nvidia/kai-scheduler/operator:v0.12.0",
        "ghcr.io/nvidia/kai-scheduler/scheduler:v0.12.0",
        "registry.k8s.io/kueue/kueue:" + versions.KUEUE.version,
        "docker.io/rancher/local-path-provisioner:v0.0.30",
        "docker.io/library/busybox:1.35",
    }
    assert contents.missing_images(manifest, referenced) == []
    packages = {package["name"]: package["version"] for package in manifest["packages"]}
    for name in ("kubeadm", "kubelet", "kubectl"):
        assert packages[name] == contents.BundlePins().package_version()
    for name in ("containerd", "runc", "nvidia-container-toolkit", "nvidia-container-toolkit-base", "iptables"):
        assert name in packages
    # Every package the manifest lists is in the repository with the digest it gives.
    for package in manifest["packages"]:
        assert build.sha256_file(bundle / "apt" / package["file"]) == package["sha256"]


def test_the_apt_repository_is_signed_by_the_key_it_carries(bundle: Path, tmp_path: Path) -> None:
    keyring = tmp_path / "key.gpg"
    subprocess.run(
        ["gpg", "--batch", "--yes", "--dearmor", "-o", str(keyring), str(bundle / "apt/key.asc")], check=True
    )
    verified = subprocess.run(
        ["gpgv", "--keyring", str(keyring), str(bundle / "apt/InRelease")], capture_output=True, text=True
    )
    assert verified.returncode == 0, verified.stderr
    tampered = tmp_path / "InRelease"
    tampered.write_text((bundle / "apt/InRelease").read_text().replace("Packages", "Packagez", 1))
    assert subprocess.run(["gpgv", "--keyring", str(keyring), str(tampered)], capture_output=True).returncode != 0


def test_a_second_build_rebuilds_nothing(bundle: Path) -> None:
    said: list[str] = []
    started = time.monotonic()
    build.build(build.Layout(build.default_cache(), bundle), progress=said.append)
    assert time.monotonic() - started < 60
    assert not [
        line for line in said if line.startswith(("building", "packaging", "making image", "copying", "writing"))
    ], said


def test_a_bundle_missing_an_image_is_not_served(bundle: Path, tmp_path: Path) -> None:
    result = ad_hoc(
        "clusterproof.gpu.bundle_server",
        {
            "bundle": str(bundle),
            "state_dir": str(tmp_path / "state"),
            "address": "127.0.0.1",
            "required_images": ["registry.k8s.io/pause:3.10.2", "quay.io/calico/node:v3.30.0"],
        },
    )
    assert result.returncode != 0
    assert "missing: quay.io/calico/node:v3.30.0" in result.stdout
    assert "Nothing was started" in result.stdout
    assert not (tmp_path / "state").exists()


def test_a_pod_pulls_its_image_from_the_bundle_and_runs_through_the_nvidia_runtime(
    bundle: Path, lab: BundleLab
) -> None:
    assert _listening(8081) and _listening(5000)
    run = run_playbook(NODE_STACK, inventory=lab.inventory, timeout=900)
    assert run.returncode == 0, run.tail(3000)
    assert run.recap(HOST)["failed"] == 0
    # The kubelet starts the static pod: wait for its container to say what it was told to.
    deadline = time.monotonic() + 120
    log = ""
    while time.monotonic() < deadline and "bundle-probe-ok" not in log:
        time.sleep(3)
        log = lab.ssh("cat /var/log/pods/default_bundle-probe-*/probe/0.log 2>/dev/null")
    assert "bundle-probe-ok" in log
    images = lab.ssh("ctr -n k8s.io images ls -q").split()
    assert "clusterproof.local/debian-base:bookworm" in images
    assert "registry.k8s.io/pause:3.10.2" in images
    # The host reaches nothing but the lab: the images can only have come from the bundle's registry.
    containers = [
        json.loads(lab.ssh("ctr -n k8s.io containers info " + cid))
        for cid in lab.ssh("ctr -n k8s.io containers ls -q").split()
    ]
    probe = next(c for c in containers if c["Labels"].get("io.kubernetes.container.name") == "probe")
    options = base64.b64decode(probe["Runtime"]["Options"]["value"])
    assert b"/usr/bin/nvidia-container-runtime" in options
    config = lab.ssh("cat /etc/containerd/config.toml")
    assert 'default_runtime_name = "nvidia"' in config
    assert 'config_path = "/etc/containerd/certs.d"' in config
    hosts = lab.ssh("cat /etc/containerd/certs.d/registry.k8s.io/hosts.toml")
    assert '[host."http://%s:5000/v2/registry.k8s.io"]' % GATEWAY in hosts


def test_a_second_install_from_the_bundle_changes_nothing(bundle: Path, lab: BundleLab) -> None:
    run = run_playbook(NODE_STACK, inventory=lab.inventory, timeout=900)
    assert run.returncode == 0, run.tail(3000)
    assert run.recap(HOST)["changed"] == 0, run.changed_tasks()
    assert 'default_runtime_name = "nvidia"' in lab.ssh("cat /etc/containerd/config.toml")


def test_a_mirror_the_host_cannot_reach_stops_before_anything_changes(
    bundle: Path, lab: BundleLab, tmp_path: Path
) -> None:
    inventory = tmp_path / "hosts.yml"
    declaration = lab.declaration(bundle, bundle_apt_url="http://%s:9/" % GATEWAY)
    inventory.write_text(yaml.safe_dump(declaration))
    before = lab.ssh("sha256sum /etc/apt/sources.list.d/clusterproof-mirror.sources /etc/containerd/config.toml")
    run = run_playbook(NODE_STACK, inventory=inventory, timeout=300)
    assert run.returncode != 0
    assert "%s: site_mirror_packages_url: expected a reachable apt repository" % HOST in run.output
    assert "http://%s:9/InRelease" % GATEWAY in run.output
    assert "Nothing was changed on the host" in run.output
    assert run.recap(HOST)["changed"] == 0
    assert (
        lab.ssh("sha256sum /etc/apt/sources.list.d/clusterproof-mirror.sources /etc/containerd/config.toml") == before
    )


def _servers_of(state_dir: Path) -> list[int]:
    """Processes whose command line names the lab's bundle state (its registry's configuration)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and str(state_dir / "bundle") in (proc / "cmdline").read_bytes().decode(
                errors="replace"
            ):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def test_down_stops_the_bundle_servers_and_leaves_nothing(bundle: Path, lab: BundleLab) -> None:
    record = serve.running(lab.state_dir / "bundle")
    assert record is not None and _servers_of(lab.state_dir)
    down = run_playbook(LAB, "-e", "lab_state=down", inventory=lab.inventory, timeout=600)
    assert down.returncode == 0, down.tail(3000)
    assert _servers_of(lab.state_dir) == []
    assert all(serve._start_time(process["pid"]) != process["start"] for process in record["processes"])
    assert lifecycle.leftovers(lab.layout, BRIDGE, [HOST]) == []
