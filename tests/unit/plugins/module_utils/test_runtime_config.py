"""runtime_config: the nvidia runtime merged into real and representative containerd and Docker configs
(tests/unit/fixtures/runtime_config/README.md says where each came from)."""

from __future__ import annotations

import json
import tomllib

import pytest

from ansible_collections.clusterproof.gpu.plugins.module_utils.install.runtime_config import (
    RuntimeConfigError,
    RuntimeEntry,
    containerd_cni_bin_dir,
    containerd_runtimes,
    merge,
    merge_containerd,
    merge_docker,
)
from tests.unit.plugins.module_utils.helpers import UNIT_FIXTURES

FIXTURES = UNIT_FIXTURES / "runtime_config"
NVIDIA = "/usr/bin/nvidia-container-runtime"
V2 = ("plugins", "io.containerd.grpc.v1.cri", "containerd")
V3 = ("plugins", "io.containerd.cri.v1.runtime", "containerd")


def _fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def _at(document: dict, path: tuple[str, ...]) -> dict:
    for key in path:
        document = document[key]
    return document


def _without_nvidia(document: dict, path: tuple[str, ...]) -> dict:
    """The document as it was before the merge: the nvidia runtime and the default taken out."""
    containerd = _at(document, path)
    containerd["runtimes"].pop("nvidia")
    containerd.pop("default_runtime_name", None)
    return document


@pytest.mark.parametrize(
    ("fixture", "path", "version"),
    [("containerd-1.6-default.toml", V2, 2), ("kubespray-v2.toml", V2, 2), ("containerd-2-v3.toml", V3, 3)],
)
def test_containerd_merge_adds_the_runtime_and_keeps_everything_else(fixture: str, path: tuple[str, ...], version: int):
    before = _fixture(fixture)
    result = merge_containerd(before, RuntimeEntry(set_as_default=True))

    assert result.changed
    assert result.config_version == version
    assert result.runtimes == ["nvidia", "runc"]
    assert result.default_runtime == "nvidia"
    merged = tomllib.loads(result.text)
    nvidia = _at(merged, path)["runtimes"]["nvidia"]
    assert nvidia["runtime_type"] == "io.containerd.runc.v2"
    assert nvidia["options"]["BinaryName"] == NVIDIA
    assert _at(merged, path)["default_runtime_name"] == "nvidia"
    original = tomllib.loads(before)
    original_containerd = _at(original, path)
    original_containerd.pop("default_runtime_name", None)
    assert _without_nvidia(merged, path) == original


@pytest.mark.parametrize("fixture", ["containerd-1.6-default.toml", "kubespray-v2.toml", "containerd-2-v3.toml"])
def test_containerd_merge_keeps_every_original_line(fixture: str):
    before = _fixture(fixture)
    after = merge_containerd(before, RuntimeEntry()).text
    after_lines = after.splitlines()
    assert [line for line in before.splitlines() if line not in after_lines] == []


@pytest.mark.parametrize("fixture", ["containerd-1.6-default.toml", "kubespray-v2.toml", "containerd-2-v3.toml"])
@pytest.mark.parametrize("set_as_default", [True, False])
def test_containerd_merge_twice_changes_nothing(fixture: str, set_as_default: bool):
    entry = RuntimeEntry(set_as_default=set_as_default)
    once = merge_containerd(_fixture(fixture), entry)
    twice = merge_containerd(once.text, entry)
    assert not twice.changed
    assert twice.text == once.text


def test_containerd_runtime_takes_runc_options_but_not_its_binary():
    result = merge_containerd(_fixture("kubespray-v2.toml"), RuntimeEntry())
    options = _at(tomllib.loads(result.text), V2)["runtimes"]["nvidia"]["options"]
    assert options == {"SystemdCgroup": True, "BinaryName": NVIDIA}


def test_containerd_runtime_is_indented_like_its_siblings():
    text = merge_containerd(_fixture("kubespray-v2.toml"), RuntimeEntry()).text
    assert '\n        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n' in text
    assert '\n            BinaryName = "/usr/bin/nvidia-container-runtime"\n' in text


def test_containerd_existing_entry_is_corrected_in_place():
    before = _fixture("kubespray-v2.toml").replace(
        '    [plugins."io.containerd.grpc.v1.cri".registry]',
        '        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
        '          runtime_type = "io.containerd.runc.v2"\n'
        "          # the site's own comment stays\n"
        '          [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n'
        '            BinaryName = "/opt/old/nvidia-container-runtime"\n'
        '    [plugins."io.containerd.grpc.v1.cri".registry]',
    )
    result = merge_containerd(before, RuntimeEntry())
    assert result.changed
    assert "# the site's own comment stays" in result.text
    options = _at(tomllib.loads(result.text), V2)["runtimes"]["nvidia"]["options"]
    assert options == {"BinaryName": NVIDIA, "SystemdCgroup": True}


def test_containerd_new_file_is_version_2_with_only_the_runtime():
    result = merge_containerd(None, RuntimeEntry(set_as_default=True))
    assert result.changed
    assert tomllib.loads(result.text) == {
        "version": 2,
        "plugins": {
            "io.containerd.grpc.v1.cri": {
                "containerd": {
                    "default_runtime_name": "nvidia",
                    "runtimes": {
                        "nvidia": {"runtime_type": "io.containerd.runc.v2", "options": {"BinaryName": NVIDIA}}
                    },
                }
            }
        },
    }
    assert result.text.startswith("version = 2\n")
    assert not merge_containerd(result.text, RuntimeEntry(set_as_default=True)).changed


def test_containerd_version_1_file_uses_the_cri_plugin():
    before = '[plugins.cri.containerd]\n  snapshotter = "overlayfs"\n'
    result = merge_containerd(before, RuntimeEntry())
    assert result.config_version == 1
    merged = tomllib.loads(result.text)
    assert merged["plugins"]["cri"]["containerd"]["runtimes"]["nvidia"]["options"]["BinaryName"] == NVIDIA
    assert merged["plugins"]["cri"]["containerd"]["snapshotter"] == "overlayfs"


def test_containerd_version_4_is_written_like_3_with_a_warning():
    result = merge_containerd(_fixture("containerd-2-v3.toml").replace("version = 3", "version = 4"), RuntimeEntry())
    assert "nvidia" in _at(tomllib.loads(result.text), V3)["runtimes"]
    assert result.warnings and "version 4" in result.warnings[0]


def test_containerd_default_given_back_when_no_longer_asked():
    as_default = merge_containerd(_fixture("kubespray-v2.toml"), RuntimeEntry(set_as_default=True)).text
    result = merge_containerd(as_default, RuntimeEntry(set_as_default=False))
    assert result.changed
    assert result.default_runtime == "runc"
    assert "nvidia" in result.runtimes


def test_containerd_default_of_another_runtime_is_left_alone():
    before = _fixture("kubespray-v2.toml").replace('default_runtime_name = "runc"', 'default_runtime_name = "kata"')
    assert merge_containerd(before, RuntimeEntry()).default_runtime == "kata"


def test_containerd_absent_removes_the_runtime_and_its_default():
    as_default = merge_containerd(_fixture("kubespray-v2.toml"), RuntimeEntry(set_as_default=True)).text
    result = merge_containerd(as_default, RuntimeEntry(present=False))
    assert result.runtimes == ["runc"]
    assert result.default_runtime == "runc"
    assert tomllib.loads(result.text)["plugins"]["io.containerd.grpc.v1.cri"]["sandbox_image"] == (
        "registry.k8s.io/pause:3.10"
    )
    assert not merge_containerd(result.text, RuntimeEntry(present=False)).changed


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("version = 2\n[plugins\n", "not valid TOML"),
        ("version = 9\n", "version 9 is not one this module knows (1, 2, 3, 4)"),
        ('version = "2"\n', "'version' must be an integer"),
        ('version = 2\n[plugins."io.containerd.grpc.v1.cri"]\ncontainerd = "x"\n', "is not a table"),
    ],
)
def test_containerd_bad_config_is_refused_with_the_reason(text: str, message: str):
    with pytest.raises(RuntimeConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        merge_containerd(text, RuntimeEntry())


def test_containerd_runtimes_reads_what_a_config_declares():
    declared = containerd_runtimes(_fixture("containerd-1.6-default.toml"))
    assert declared == {"runtimes": ["runc"], "default_runtime": "runc", "config_version": 2}


DAEMON_JSON = '{\n    "log-driver": "json-file",\n    "log-opts": {"max-size": "100m"},\n    "exec-opts": ["native.cgroupdriver=systemd"]\n}\n'


def test_docker_merge_adds_the_runtime_and_keeps_everything_else():
    result = merge_docker(DAEMON_JSON, RuntimeEntry(set_as_default=True))
    merged = json.loads(result.text)
    assert merged == {
        "log-driver": "json-file",
        "log-opts": {"max-size": "100m"},
        "exec-opts": ["native.cgroupdriver=systemd"],
        "runtimes": {"nvidia": {"path": NVIDIA}},
        "default-runtime": "nvidia",
    }
    assert list(merged)[:3] == ["log-driver", "log-opts", "exec-opts"]
    assert result.runtimes == ["nvidia"]
    assert result.default_runtime == "nvidia"


def test_docker_merge_twice_changes_nothing_and_keeps_the_layout():
    once = merge_docker(DAEMON_JSON, RuntimeEntry(set_as_default=True))
    twice = merge_docker(once.text, RuntimeEntry(set_as_default=True))
    assert not twice.changed and twice.text == once.text
    compact = '{"runtimes": {"nvidia": {"path": "/usr/bin/nvidia-container-runtime", "args": []}}}'
    kept = merge_docker(compact, RuntimeEntry())
    assert not kept.changed and kept.text == compact


def test_docker_new_file_and_empty_file():
    for existing in (None, "", "\n"):
        result = merge_docker(existing, RuntimeEntry())
        assert result.changed
        assert json.loads(result.text) == {"runtimes": {"nvidia": {"path": NVIDIA}}}


def test_docker_keeps_runtime_args_and_other_runtimes():
    before = json.dumps(
        {"runtimes": {"nvidia": {"path": "/old", "runtimeArgs": ["--debug"]}, "crun": {"path": "/usr/bin/crun"}}}
    )
    merged = json.loads(merge_docker(before, RuntimeEntry()).text)
    assert merged["runtimes"] == {
        "nvidia": {"path": NVIDIA, "runtimeArgs": ["--debug"]},
        "crun": {"path": "/usr/bin/crun"},
    }


def test_docker_absent_and_default_given_back():
    as_default = merge_docker(DAEMON_JSON, RuntimeEntry(set_as_default=True)).text
    not_default = json.loads(merge_docker(as_default, RuntimeEntry()).text)
    assert "default-runtime" not in not_default and "nvidia" in not_default["runtimes"]
    gone = json.loads(merge_docker(as_default, RuntimeEntry(present=False)).text)
    assert gone == json.loads(DAEMON_JSON)


@pytest.mark.parametrize(
    ("text", "message"),
    [("{", "not valid JSON"), ("[]", "must be a JSON object"), ('{"runtimes": []}', "'runtimes' must be an object")],
)
def test_docker_bad_config_is_refused_with_the_reason(text: str, message: str):
    with pytest.raises(RuntimeConfigError, match=message):
        merge_docker(text, RuntimeEntry())


def test_merge_dispatches_by_runtime():
    assert merge("docker", None, RuntimeEntry()).runtimes == ["nvidia"]
    assert merge("containerd", None, RuntimeEntry()).runtimes == ["nvidia"]
    with pytest.raises(RuntimeConfigError, match="unknown container runtime 'crio'"):
        merge("crio", None, RuntimeEntry())


def test_results_say_what_the_file_declared_before():
    containerd = merge_containerd(_fixture("kubespray-v2.toml"), RuntimeEntry(set_as_default=True))
    assert (containerd.runtimes_before, containerd.default_runtime_before) == (["runc"], "runc")
    docker = merge_docker(None, RuntimeEntry(set_as_default=True))
    assert (docker.runtimes_before, docker.default_runtime_before) == ([], "runc")
    assert docker.to_dict()["default_runtime"] == "nvidia"


# --- the systemd cgroup driver (kubeadm's kubelet) -------------------------------------------------

# Debian's containerd 1.6 default config: runc with SystemdCgroup = false, a kubelet on systemd's driver.
DEBIAN_CONTAINERD = (FIXTURES / "containerd-1.6-default.toml").read_text()


def test_systemd_cgroup_is_set_on_runc_and_on_the_nvidia_runtime_and_holds():
    entry = RuntimeEntry(systemd_cgroup=True)
    merged = merge_containerd(DEBIAN_CONTAINERD, entry)
    runtimes = tomllib.loads(merged.text)["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]
    assert runtimes["runc"]["options"]["SystemdCgroup"] is True
    assert runtimes["nvidia"]["options"]["SystemdCgroup"] is True
    assert runtimes["nvidia"]["options"]["BinaryName"] == NVIDIA
    assert merged.changed and not merge_containerd(merged.text, entry).changed


def test_systemd_cgroup_alone_on_a_host_without_gpus():
    merged = merge_containerd(None, RuntimeEntry(present=False, systemd_cgroup=True))
    runtimes = tomllib.loads(merged.text)["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]
    assert runtimes == {"runc": {"runtime_type": "io.containerd.runc.v2", "options": {"SystemdCgroup": True}}}


def test_without_the_switch_cgroups_are_left_alone():
    merged = merge_containerd(DEBIAN_CONTAINERD, RuntimeEntry())
    runtimes = tomllib.loads(merged.text)["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]
    assert runtimes["runc"]["options"]["SystemdCgroup"] is False


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Debian 12's containerd 1.6 package ships this file: its plugins are in containernetworking-plugins'.
        (
            'version = 2\n[plugins]\n  [plugins."io.containerd.grpc.v1.cri"]\n'
            '    [plugins."io.containerd.grpc.v1.cri".cni]\n      bin_dir = "/usr/lib/cni"\n',
            "/usr/lib/cni",
        ),
        (
            'version = 3\n[plugins."io.containerd.cri.v1.runtime".cni]\nbin_dirs = ["/usr/libexec/cni", "/opt/cni/bin"]\n',
            "/usr/libexec/cni",
        ),
        ('[plugins.cri.cni]\nbin_dir = "/usr/local/cni"\n', "/usr/local/cni"),
        # No file, or one that does not say: containerd's own default.
        ("", "/opt/cni/bin"),
        (
            'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\ndefault_runtime_name = "nvidia"\n',
            "/opt/cni/bin",
        ),
    ],
)
def test_containerd_cni_bin_dir_is_where_its_cri_looks_for_plugins(text: str, expected: str):
    assert containerd_cni_bin_dir(text) == expected


def test_containerd_cni_bin_dir_of_a_broken_config_says_why():
    with pytest.raises(RuntimeConfigError, match="not valid TOML"):
        containerd_cni_bin_dir("[plugins\n")
