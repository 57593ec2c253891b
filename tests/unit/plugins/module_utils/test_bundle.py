"""The offline bundle's pure parts: what goes in (bundle/contents.py), the wrapper modules the
programs are built through, the registry's configuration, and containerd's registry settings."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import tomlkit
import yaml

from ansible_collections.clusterproof.gpu.plugins.module_utils import versions
from ansible_collections.clusterproof.gpu.plugins.module_utils.bundle import build, contents, serve
from ansible_collections.clusterproof.gpu.plugins.module_utils.bundle.contents import BundleInputError
from ansible_collections.clusterproof.gpu.plugins.module_utils.install import kubeadm_config
from ansible_collections.clusterproof.gpu.plugins.module_utils.install.runtime_config import (
    RuntimeConfigError,
    merge_containerd_registry,
)
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import build as sandbox_build


def kubeadm_listing(kubernetes: str, coredns: str, pause: str, etcd: str) -> str:
    """What ``kubeadm config images list --kubernetes-version <kubernetes>`` prints: its four control-plane
    images at that version, then the CoreDNS, pause and etcd images that release pins."""
    components = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy")
    images = [f"{component}:{kubernetes}" for component in components]
    images += [f"coredns/coredns:{coredns}", f"pause:{pause}", f"etcd:{etcd}"]
    return "".join(f"registry.k8s.io/{image}\n" for image in images)


# What kubeadm v1.36.3 prints for `kubeadm config images list --kubernetes-version v1.36.3`.
KUBEADM_LISTING = kubeadm_listing("v1.36.3", coredns="v1.14.2", pause="3.10.2", etcd="3.6.8-0")
# What kubeadm v1.35.4, the previous minor, prints for its own version: etcd, CoreDNS and pause differ.
PREVIOUS_LISTING = kubeadm_listing("v1.35.4", coredns="v1.13.1", pause="3.10.1", etcd="3.6.6-0")
# Both releases, as the tests below pin them whatever versions.py pins.
BOTH = contents.BundlePins(kubernetes="v1.36.3", kubernetes_previous="v1.35.4")
# containerd's config.toml as Debian 12's containerd package installs it.
DEBIAN_CONTAINERD = """version = 2

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "/etc/cni/net.d"
  [plugins."io.containerd.internal.v1.opt"]
    path = "/var/lib/containerd/opt"
"""


def test_an_image_reference_splits_into_host_path_and_tag() -> None:
    ref = contents.parse_ref("registry.k8s.io/coredns/coredns:v1.14.2")
    assert (ref.host, ref.path, ref.tag, ref.name) == ("registry.k8s.io", "coredns/coredns", "v1.14.2", "coredns")
    assert ref.mirror_repository == "registry.k8s.io/coredns/coredns"
    assert contents.parse_ref("nginx:1.27").ref == "docker.io/library/nginx:1.27"
    assert contents.parse_ref("rancher/local-path-provisioner:v0.0.30").host == "docker.io"


@pytest.mark.parametrize("text", ["registry.k8s.io/pause", "registry.k8s.io/Pause:3.10", "registry.k8s.io/pause:"])
def test_a_bad_image_reference_names_the_field_and_what_was_found(text: str) -> None:
    with pytest.raises(BundleInputError, match=r"required_images: expected .*found '%s'" % text.replace(".", r"\.")):
        contents.parse_ref(text, "required_images")


def test_kubeadm_s_listing_gives_its_seven_images_and_their_source_versions() -> None:
    images = contents.kubeadm_images(KUBEADM_LISTING)
    assert set(images) == {
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "kube-proxy",
        "etcd",
        "coredns",
        "pause",
    }
    assert contents.upstream_version(images["etcd"]) == "v3.6.8"
    assert contents.upstream_version(images["coredns"]) == "v1.14.2"
    assert contents.upstream_version(images["pause"]) == "3.10.2"


def test_a_kubeadm_listing_without_an_image_says_which_is_missing() -> None:
    listing = "\n".join(line for line in KUBEADM_LISTING.splitlines() if "etcd" not in line)
    with pytest.raises(BundleInputError, match="etcd missing"):
        contents.kubeadm_images(listing)


FLANNEL = [
    {"kind": "Namespace", "metadata": {"name": "kube-flannel"}},
    {
        "kind": "DaemonSet",
        "metadata": {"name": "kube-flannel-ds"},
        "spec": {
            "template": {
                "spec": {
                    "initContainers": [
                        {
                            "name": "install-cni-plugin",
                            "image": "ghcr.io/flannel-io/flannel-cni-plugin:v1.9.1-flannel1",
                        },
                        {"name": "install-cni", "image": "ghcr.io/flannel-io/flannel:v0.28.4"},
                    ],
                    "containers": [{"name": "kube-flannel", "image": "ghcr.io/flannel-io/flannel:v0.28.4"}],
                }
            }
        },
    },
]


def test_every_image_a_manifest_references_is_found_once_in_order() -> None:
    refs = [ref.ref for ref in contents.manifest_images(FLANNEL)]
    assert refs == ["ghcr.io/flannel-io/flannel-cni-plugin:v1.9.1-flannel1", "ghcr.io/flannel-io/flannel:v0.28.4"]


def test_the_images_built_are_kubeadm_s_the_cni_s_and_the_debian_base() -> None:
    kubeadm = contents.kubeadm_images(KUBEADM_LISTING)
    specs = contents.image_specs(kubeadm, contents.manifest_images(FLANNEL), "bookworm")
    refs = {spec.ref.ref: spec for spec in specs}
    assert set(refs) == {ref.ref for ref in kubeadm.values()} | {
        "ghcr.io/flannel-io/flannel-cni-plugin:v1.9.1-flannel1",
        "ghcr.io/flannel-io/flannel:v0.28.4",
        "clusterproof.local/debian-base:bookworm",
    }
    # kube-proxy and flannel call iptables; the CNI plugin's init container runs cp: they need Debian.
    assert {ref for ref, spec in refs.items() if spec.base == "debian"} == {
        "registry.k8s.io/kube-proxy:v1.36.3",
        "ghcr.io/flannel-io/flannel:v0.28.4",
        "ghcr.io/flannel-io/flannel-cni-plugin:v1.9.1-flannel1",
        "clusterproof.local/debian-base:bookworm",
    }
    assert refs["registry.k8s.io/kube-apiserver:v1.36.3"].entrypoint == ("/usr/local/bin/kube-apiserver",)


def test_an_image_the_bundle_cannot_build_is_refused_by_name() -> None:
    kubeadm = contents.kubeadm_images(KUBEADM_LISTING)
    with pytest.raises(BundleInputError, match="quay.io/calico/node:v3.30.0"):
        contents.image_specs(kubeadm, [contents.parse_ref("quay.io/calico/node:v3.30.0")], "bookworm")


def test_an_image_s_recipe_changes_with_its_inputs() -> None:
    spec = contents.image_specs(contents.kubeadm_images(KUBEADM_LISTING), [], "bookworm")[0]
    assert spec.recipe({"kube-apiserver": "a"}) == spec.recipe({"kube-apiserver": "a"})
    assert spec.recipe({"kube-apiserver": "a"}) != spec.recipe({"kube-apiserver": "b"})


def test_missing_images_are_those_the_manifest_lacks_or_holds_without_a_digest() -> None:
    manifest = {
        "images": [
            {"ref": "registry.k8s.io/pause:3.10.2", "digest": "sha256:aa"},
            {"ref": "registry.k8s.io/etcd:3.6.8-0", "digest": ""},
        ]
    }
    wanted = [contents.parse_ref(ref) for ref in KUBEADM_LISTING.split()]
    missing = contents.missing_images(manifest, wanted)
    assert "registry.k8s.io/pause:3.10.2" not in missing
    assert "registry.k8s.io/etcd:3.6.8-0" in missing
    assert len(missing) == 6


def test_hosts_toml_sends_an_upstream_registry_to_the_mirror_under_its_own_name() -> None:
    text = contents.containerd_hosts_toml("registry.k8s.io", "10.213.0.1:5000", insecure=True)
    assert 'server = "https://registry.k8s.io"' in text
    assert '[host."http://10.213.0.1:5000/v2/registry.k8s.io"]' in text
    assert "override_path = true" in text
    assert 'capabilities = ["pull", "resolve"]' in text
    docker = contents.containerd_hosts_toml("docker.io", "mirror.site.example:5000", insecure=False)
    assert 'server = "https://registry-1.docker.io"' in docker
    assert '[host."https://mirror.site.example:5000/v2/docker.io"]' in docker


def test_packages_take_upstream_s_names_and_versions() -> None:
    specs = {spec.name: spec for spec in contents.package_specs(contents.BundlePins(kubernetes_previous=""))}
    assert {name: spec.version for name, spec in specs.items()} == {
        "kubelet": "1.36.3-1.1",
        "kubeadm": "1.36.3-1.1",
        "kubectl": "1.36.3-1.1",
        "nvidia-container-toolkit-base": "1.20.2-1",
        "nvidia-container-toolkit": "1.20.2-1",
        "helm": "3.22.0-1",
        "etcd-client": "3.6.8-1",
    }
    assert dict(specs["helm"].files) == {"helm": "/usr/bin/helm"}
    assert dict(specs["etcd-client"].files) == {"etcdctl": "/usr/bin/etcdctl", "etcdutl": "/usr/bin/etcdutl"}
    assert dict(specs["kubelet"].texts)["/usr/lib/systemd/system/kubelet.service"].startswith("[Unit]")
    assert "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf" in dict(specs["kubeadm"].texts)
    assert "kubelet" in specs["kubeadm"].depends
    assert dict(specs["nvidia-container-toolkit-base"].files)["nvidia-ctk"] == "/usr/bin/nvidia-ctk"
    control = contents.deb_control("kubectl", "1.36.3-1.1", "client", ("a", "b (= 1)"))
    assert "Depends: a, b (= 1)\n" in control and control.startswith("Package: kubectl\n")


def test_a_program_is_built_through_a_wrapper_module_that_repeats_its_replaces() -> None:
    program = build.GoProgram(
        "flanneld",
        "github.com/flannel-io/flannel",
        "v0.28.4",
        "github.com/flannel-io/flannel",
        True,
        build.FLANNEL_REPLACES,
    )
    gomod = build.wrapper_gomod(program, "1.24.0")
    assert gomod.splitlines()[:5] == [
        "module clusterproof.local/bundle/flanneld",
        "",
        "go 1.24.0",
        "",
        "require github.com/flannel-io/flannel v0.28.4",
    ]
    assert "replace github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/common => " in gomod
    plain = build.GoProgram("coredns", "github.com/coredns/coredns", "v1.14.2", "github.com/coredns/coredns")
    assert "replace" not in build.wrapper_gomod(plain, "1.24")


def test_the_registry_serves_the_bundle_s_storage_read_only() -> None:
    config = yaml.safe_load(serve.registry_config(Path("/b/registry"), "10.213.0.1:5000", read_only=True))
    assert config["storage"]["filesystem"]["rootdirectory"] == "/b/registry"
    assert config["storage"]["maintenance"]["readonly"]["enabled"] is True
    assert config["http"]["addr"] == "10.213.0.1:5000"
    endpoint = serve.Endpoint("10.213.0.1", 8081, 5000)
    assert (endpoint.apt_url, endpoint.charts_url) == ("http://10.213.0.1:8081/", "http://10.213.0.1:8082/")


def test_the_bundle_s_helm_is_the_one_the_sandbox_builds_and_packages_the_charts_with() -> None:
    # The charts are packaged with the sandbox build's helm; the control plane installs them with the
    # bundle's helm package: one version for both.
    assert contents.ChartPins().helm == sandbox_build.SandboxVersions().helm
    assert contents.ChartPins().kai_scheduler == sandbox_build.SandboxVersions().kai_scheduler
    assert kubeadm_config.chart_file("kai-scheduler", "v0.12.0") == "kai-scheduler-0.12.0.tgz"


def test_serving_something_that_is_not_a_bundle_names_what_it_lacks(tmp_path: Path) -> None:
    with pytest.raises(serve.ServeError, match="has no apt/InRelease"):
        serve.start(tmp_path, serve.Endpoint("127.0.0.1", 1, 2), tmp_path / "state")
    assert not (tmp_path / "state").exists()


def test_containerd_is_pointed_at_the_hosts_directory_and_a_second_merge_changes_nothing() -> None:
    merged = merge_containerd_registry(DEBIAN_CONTAINERD, "/etc/containerd/certs.d", {"restrict_oom_score_adj": True})
    assert merged.changed and merged.config_path_before is None and merged.config_version == 2
    document = tomlkit.parse(merged.text).unwrap()
    cri = document["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["registry"]["config_path"] == "/etc/containerd/certs.d"
    assert cri["restrict_oom_score_adj"] is True
    assert cri["cni"]["bin_dir"] == "/usr/lib/cni"  # Debian's own settings are kept
    again = merge_containerd_registry(merged.text, "/etc/containerd/certs.d", {"restrict_oom_score_adj": True})
    assert not again.changed and again.text == merged.text
    assert again.config_path_before == "/etc/containerd/certs.d"


def test_a_new_containerd_config_is_version_2_and_version_3_uses_the_images_plugin() -> None:
    new = tomlkit.parse(merge_containerd_registry(None, "/d").text).unwrap()
    assert new["version"] == 2 and new["plugins"]["io.containerd.grpc.v1.cri"]["registry"]["config_path"] == "/d"
    three = tomlkit.parse(merge_containerd_registry("version = 3\n", "/d").text).unwrap()
    assert three["plugins"]["io.containerd.cri.v1.images"]["registry"]["config_path"] == "/d"


def test_containerd_settings_that_cannot_be_merged_are_refused() -> None:
    with pytest.raises(RuntimeConfigError, match="version 1 has no registry config_path"):
        merge_containerd_registry('[plugins.cri]\nsandbox_image = "x"\n', "/d")
    with pytest.raises(RuntimeConfigError, match="restrict_oom_score_adj: expected a scalar"):
        merge_containerd_registry(None, "/d", {"restrict_oom_score_adj": {"a": 1}})


def test_the_charts_images_are_built_as_upstream_builds_them() -> None:
    specs = {
        spec.ref.ref: spec for spec in contents.chart_image_specs(contents.ChartPins(), ["sh", "mkdir", "busybox"])
    }
    kai = [ref for ref in specs if ref.startswith("ghcr.io/nvidia/kai-scheduler/")]
    assert len(kai) == len(contents.KAI_COMMANDS) + 1
    binder = specs["ghcr.io/nvidia/kai-scheduler/binder:v0.12.0"]
    assert (binder.files, binder.entrypoint, binder.user, binder.workdir) == (
        (("kai-binder", "/workspace/app"),),
        ("/workspace/app",),
        "65532:65532",
        "/workspace",
    )
    upgrader = specs["ghcr.io/nvidia/kai-scheduler/crd-upgrader:v0.12.0"]
    assert upgrader.base == "debian" and upgrader.cmd == ("/apply-crds.sh",)
    assert upgrader.trees == (("kai-crds", "/internal-crds"),)
    assert specs["registry.k8s.io/kueue/kueue:" + versions.KUEUE.version].entrypoint == ("/manager",)
    assert specs["docker.io/rancher/local-path-provisioner:v0.0.30"].cmd == ("local-path-provisioner",)
    busybox = specs["docker.io/library/busybox:1.35"]
    assert busybox.links == (("/bin/mkdir", "busybox"), ("/bin/sh", "busybox"))


def test_an_operator_s_image_settings_are_found_beside_its_pods_images() -> None:
    config = {
        "kind": "Config",
        "metadata": {"name": "kai-config"},
        "spec": {
            "binder": {
                "service": {"image": {"name": "binder", "repository": "ghcr.io/nvidia/kai-scheduler", "tag": "v0.12.0"}}
            },
            "nodeScaleAdjuster": {
                "args": {
                    "scalingPodImage": {
                        "name": "scalingpod",
                        "repository": "ghcr.io/nvidia/kai-scheduler",
                        "tag": "v0.12.0",
                    }
                }
            },
            # The operator fills in what is not given: not an image reference the chart makes.
            "resourceReservation": {"image": {"name": "resourcereservation"}},
        },
    }
    refs = [ref.ref for ref in contents.manifest_images([config])]
    assert refs == ["ghcr.io/nvidia/kai-scheduler/binder:v0.12.0", "ghcr.io/nvidia/kai-scheduler/scalingpod:v0.12.0"]


def test_a_folder_s_digest_follows_its_files(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a/crd.yaml").write_text("kind: CustomResourceDefinition\n")
    first = build.sha256_tree(tmp_path / "a")
    assert build.sha256_tree(tmp_path / "a") == first
    (tmp_path / "a/crd.yaml").write_text("kind: CustomResourceDefinition # changed\n")
    assert build.sha256_tree(tmp_path / "a") != first


@pytest.mark.skipif(shutil.which("gpg") is None, reason="needs gpg (Debian's gnupg)")
def test_signing_the_apt_repository_leaves_no_gpg_agent_running(tmp_path: Path, monkeypatch) -> None:
    """gpg starts a gpg-agent for the key's home that outlives it: none is left once signing ends."""
    layout = build.Layout(cache=tmp_path / "cache", out=tmp_path / "out")
    run = build._run

    def without_apt_ftparchive(cmd, log, cwd=None, env=None):
        if cmd[0] == "apt-ftparchive":  # the index and Release of an empty repository
            return "Origin: clusterproof\nLabel: clusterproof bundle\n" if "release" in cmd else ""
        return run(cmd, log, cwd, env)

    monkeypatch.setattr(build, "_run", without_apt_ftparchive)
    try:
        assert build.apt_repository(layout, [], lambda line: None) == []
        assert (layout.apt / "InRelease").is_file() and (layout.apt / "Release.gpg").is_file()
        assert build.gpg_agents(layout.gnupg) == []
        assert len(build.signing_key(layout)) == 40  # as the manifest reads it
        assert build.gpg_agents(layout.gnupg) == []
        # And the look-up does see an agent of that home while one runs.
        subprocess.run(["gpgconf", "--homedir", str(layout.gnupg), "--launch", "gpg-agent"], check=True)
        assert build.gpg_agents(layout.gnupg) != []
    finally:
        subprocess.run(["gpgconf", "--homedir", str(layout.gnupg), "--kill", "gpg-agent"], check=False)


def test_a_program_s_build_line_gives_its_own_cold_build_time_or_none(tmp_path: Path, monkeypatch) -> None:
    class Stop(Exception):
        pass

    def download(*args, **kwargs):
        raise Stop  # the line is said before the build starts

    monkeypatch.setattr(build.go_modules, "download", download)
    layout = build.Layout(cache=tmp_path / "cache", out=tmp_path / "out")
    lines: list[str] = []
    for program in (
        build.GoProgram("coredns", "github.com/coredns/coredns", "v1.14.2", "github.com/coredns/coredns"),
        build.GoProgram("flanneld", "github.com/flannel-io/flannel", "v0.27.4", "github.com/flannel-io/flannel"),
        # The previous minor's CoreDNS: its line names the program as the pinned one's does.
        build.GoProgram("coredns@v1.13.1", "github.com/coredns/coredns", "v1.13.1", "github.com/coredns/coredns"),
    ):
        with pytest.raises(Stop):
            build._build_go_program(layout, program, lines.append)
    assert lines == [
        "building coredns v1.14.2 (go build; about 8 minutes cold on 2 cores)",
        "building flanneld v0.27.4 (go build)",
        "building coredns v1.13.1 (go build; about 8 minutes cold on 2 cores)",
    ]


def test_the_repository_holds_kubeadm_kubelet_and_kubectl_at_both_releases() -> None:
    specs = contents.package_specs(BOTH)
    versions_of: dict[str, list[str]] = {}
    for spec in specs:
        versions_of.setdefault(spec.name, []).append(spec.version)
    for name in ("kubeadm", "kubelet", "kubectl"):
        # apt installs the one the kubernetes_packages role pins (<name>=<version>).
        assert versions_of[name] == ["1.36.3-1.1", "1.35.4-1.1"], name
    assert versions_of["helm"] == ["3.22.0-1"] and len(versions_of["nvidia-container-toolkit"]) == 1
    files = {(spec.name, spec.version): dict(spec.files) for spec in specs}
    # The pinned release's programs go by their names (its packages' recipes are as they were), the
    # previous minor's by <name>@<version>; each package file is its own.
    assert files[("kubeadm", "1.36.3-1.1")] == {"kubeadm": "/usr/bin/kubeadm"}
    assert files[("kubeadm", "1.35.4-1.1")] == {"kubeadm@v1.35.4": "/usr/bin/kubeadm"}
    assert files[("kubelet", "1.35.4-1.1")] == {"kubelet@v1.35.4": "/usr/bin/kubelet"}
    assert len({spec.filename for spec in specs}) == len(specs)
    previous = next(spec for spec in specs if spec.filename == "kubelet_1.35.4-1.1_amd64.deb")
    assert "v1.35.4" in previous.description and dict(previous.texts) == dict(specs[0].texts)
    assert [spec.name for spec in contents.package_specs(contents.BundlePins(kubernetes_previous=""))].count(
        "kubeadm"
    ) == 1


def test_the_pinned_release_s_specs_do_not_change_with_a_previous_minor() -> None:
    # The cache keys of what the bundle held before stay valid: nothing of the pinned release rebuilds.
    alone = contents.BundlePins(kubernetes="v1.36.3", kubernetes_previous="")
    assert contents.package_specs(alone) == [
        spec for spec in contents.package_specs(BOTH) if "1.35.4" not in spec.version
    ]
    kubeadm = contents.kubeadm_images(KUBEADM_LISTING)
    assert contents.kubeadm_image_specs(kubeadm) == contents.image_specs(kubeadm, [], "bookworm")[:7]
    assert [spec.files for spec in contents.kubeadm_image_specs(kubeadm)][0] == (
        ("kube-apiserver", "/usr/local/bin/kube-apiserver"),
    )


def test_the_previous_minor_adds_its_control_plane_and_the_etcd_coredns_and_pause_that_differ() -> None:
    pinned = contents.kubeadm_images(KUBEADM_LISTING)
    previous = contents.kubeadm_images(PREVIOUS_LISTING)
    specs = {spec.ref.ref: spec for spec in contents.previous_image_specs(previous, pinned)}
    assert set(specs) == {ref.ref for ref in previous.values()}
    assert dict(specs["registry.k8s.io/kube-apiserver:v1.35.4"].files) == {
        "kube-apiserver@v1.35.4": "/usr/local/bin/kube-apiserver"
    }
    assert dict(specs["registry.k8s.io/etcd:3.6.6-0"].files) == {"etcd@3.6.6-0": "/usr/local/bin/etcd"}
    assert dict(specs["registry.k8s.io/coredns/coredns:v1.13.1"].files) == {"coredns@v1.13.1": "/coredns"}
    assert dict(specs["registry.k8s.io/pause:3.10.1"].files) == {"pause@3.10.1": "/pause"}
    assert specs["registry.k8s.io/kube-proxy:v1.35.4"].base == "debian"
    # What the two releases share is held once, the pinned release's.
    shared = PREVIOUS_LISTING.replace("coredns:v1.13.1", "coredns:v1.14.2").replace("pause:3.10.1", "pause:3.10.2")
    refs = [spec.ref.ref for spec in contents.previous_image_specs(contents.kubeadm_images(shared), pinned)]
    assert "registry.k8s.io/coredns/coredns:v1.14.2" not in refs and "registry.k8s.io/pause:3.10.2" not in refs
    assert len(refs) == 5


def test_a_previous_kubeadm_that_asks_for_another_etcd_names_the_pin_to_set() -> None:
    previous = contents.kubeadm_images(PREVIOUS_LISTING)
    contents.check_previous_images(previous, "v1.35.4")
    other = contents.kubeadm_images(PREVIOUS_LISTING.replace("etcd:3.6.6-0", "etcd:3.6.7-0"))
    with pytest.raises(
        BundleInputError,
        match=r"etcd: kubeadm v1.35.4 asks for registry.k8s.io/etcd:3.6.7-0.*"
        r"set ETCD_PREVIOUS in module_utils/versions.py to v3.6.7",
    ):
        contents.check_previous_images(other, "v1.35.4")


def test_the_build_s_plan_holds_both_releases() -> None:
    # What bundle.build makes, worked out without building: both releases' packages and images, and
    # the previous minor's own CoreDNS and pause programs.
    pinned = contents.kubeadm_images(KUBEADM_LISTING)
    previous = contents.kubeadm_images(PREVIOUS_LISTING)
    cni = contents.manifest_images(FLANNEL)
    made = build.planned(BOTH, pinned, previous, cni, contents.ChartPins(), ["sh"])
    images = {spec.ref.ref for spec in made.images}
    for version in ("v1.36.3", "v1.35.4"):
        for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy"):
            assert "registry.k8s.io/%s:%s" % (name, version) in images
    for ref in ("etcd:3.6.8-0", "etcd:3.6.6-0", "coredns/coredns:v1.14.2", "coredns/coredns:v1.13.1"):
        assert "registry.k8s.io/" + ref in images
    assert {"registry.k8s.io/pause:3.10.2", "registry.k8s.io/pause:3.10.1"} <= images
    assert len(images) == len(made.images)
    programs = {program.name: program for program in made.programs}
    assert programs["coredns"].version == "v1.14.2" and programs["coredns@v1.13.1"].version == "v1.13.1"
    assert programs["coredns@v1.13.1"].folder == "coredns-v1.13.1"
    assert "module clusterproof.local/bundle/coredns-v1.13.1" in build.wrapper_gomod(
        programs["coredns@v1.13.1"], "1.24"
    )
    assert [(name, kubernetes, ref.tag) for name, kubernetes, ref in made.pauses] == [
        ("pause", "v1.36.3", "3.10.2"),
        ("pause@3.10.1", "v1.35.4", "3.10.1"),
    ]
    debs = {spec.filename for spec in made.packages}
    assert {"kubeadm_1.36.3-1.1_amd64.deb", "kubeadm_1.35.4-1.1_amd64.deb"} <= debs
    # Every program an image or a package is made of is one the build has: built here, or the sandbox's.
    built = set(programs) | {name for name, _, _ in made.pauses}
    sandbox = set(sandbox_build.RELEASE_BINARIES)
    previous_sandbox = {contents.release_program(name, "v1.35.4") for name in sandbox - {"etcd"}} | {"etcd@3.6.6-0"}
    for spec in [*made.images[:7], *contents.previous_image_specs(previous, pinned)]:
        for name, _ in spec.files:
            assert name in built | sandbox | previous_sandbox, name
    without = build.planned(
        contents.BundlePins(kubernetes_previous=""), pinned, None, cni, contents.ChartPins(), ["sh"]
    )
    assert not any("1.35.4" in spec.ref.ref for spec in without.images) and len(without.pauses) == 1


def test_etcdctl_and_etcdutl_are_built_from_their_modules_at_the_etcd_kubeadm_runs() -> None:
    pinned = contents.kubeadm_images(KUBEADM_LISTING)
    made = build.planned(BOTH, pinned, None, [], contents.ChartPins(), ["sh"])
    programs = {program.name: program for program in made.programs}
    for command in ("etcdctl", "etcdutl"):
        # Each module's main package is its root; no cgo, no replaces: a static program.
        module = "go.etcd.io/etcd/%s/v3" % command
        assert programs[command] == build.GoProgram(command, module, "v3.6.8", module)
        assert "require %s v3.6.8" % module in build.wrapper_gomod(programs[command], "1.24")
    package = next(spec for spec in made.packages if spec.name == "etcd-client")
    assert package.filename == "etcd-client_3.6.8-1_amd64.deb"
    assert "go.etcd.io/etcd/etcdctl/v3, go.etcd.io/etcd/etcdutl/v3 v3.6.8" in package.description
    # Every program a package is made of is one the build makes (or the sandbox's, for Kubernetes').
    built = set(programs) | set(sandbox_build.RELEASE_BINARIES) | {"helm"}
    for spec in made.packages:
        for name, _ in spec.files:
            assert name in built or "@" in name, (spec.name, name)
    contents.check_etcd_client(BOTH, pinned)


def test_an_etcd_client_pin_other_than_the_etcd_kubeadm_runs_is_refused_naming_both() -> None:
    pinned = contents.kubeadm_images(KUBEADM_LISTING)
    other = contents.BundlePins(kubernetes_previous="", etcd_client="v3.6.7")
    with pytest.raises(
        BundleInputError,
        match=r"etcd_client: expected the version of the etcd kubeadm v1.36.3 runs "
        r"\(v3.6.8, registry.k8s.io/etcd:3.6.8-0\); found v3.6.7",
    ):
        contents.check_etcd_client(other, pinned)


def test_the_manifest_lists_both_releases() -> None:
    packages = [{"name": "kubeadm", "version": "1.36.3-1.1"}, {"name": "kubeadm", "version": "1.35.4-1.1"}]
    manifest = build.manifest_of(BOTH, "ABCD", packages, [], [])
    assert manifest["kubernetes"] == "v1.36.3"
    assert manifest["kubernetes_versions"] == ["v1.36.3", "v1.35.4"]
    assert manifest["pins"]["kubernetes_previous"] == "v1.35.4"
    assert manifest["packages"] == packages and manifest["apt"]["fingerprint"] == "ABCD"
    # A manifest of a bundle built before the previous minor was carried still reads as pins.
    older = {key: value for key, value in manifest["pins"].items() if key != "kubernetes_previous"}
    assert contents.BundlePins(**older).kubernetes == "v1.36.3"
