"""kubeadm's configuration as mode kubeadm renders it from the checked inventory."""

from __future__ import annotations

import pytest
import yaml

from ansible_collections.clusterproof.gpu.plugins.module_utils.install import kubeadm_config
from ansible_collections.clusterproof.gpu.plugins.module_utils.inventory.schema import validate_site

JOIN_COMMAND = (
    "kubeadm join 10.0.0.10:6443 --token abcdef.0123456789abcdef "
    "--discovery-token-ca-cert-hash sha256:" + "ab" * 32 + " \n"
)


def site(gpu_node_taint=False, control_plane=("cp-1",), **variables):
    declaration, errors = validate_site(*site_inventory(gpu_node_taint, control_plane, **variables))
    assert errors == []
    return declaration.to_dict()


def site_inventory(gpu_node_taint=False, control_plane=("cp-1",), **variables):
    common = {
        "clusterproof_site_name": "dgx-site",
        "clusterproof_cluster_mode": "kubeadm",
        "clusterproof_gpu_node_taint": gpu_node_taint,
        **variables,
    }
    hostvars = {host: dict(common) for host in control_plane}
    hostvars["dgx-1"] = {**common, "gpu_count": 8, "node_labels": {"site.example/rack": "r1"}}
    hostvars["dgx-2"] = {
        **common,
        "gpu_count": 8,
        "node_taints": [{"key": "site.example/reserved", "effect": "NoSchedule"}],
    }
    hostvars["cpu-1"] = dict(common)
    groups = {
        "all": list(hostvars),
        "kube_control_plane": list(control_plane),
        "gpu_nodes": ["dgx-1", "dgx-2"],
        "kube_workers": ["cpu-1"],
    }
    return groups, hostvars


def test_init_configuration_follows_the_inventory():
    init, cluster, kubelet = kubeadm_config.init_documents(
        site(clusterproof_pod_subnet="10.32.0.0/16"), "cp-1", "10.0.0.10"
    )
    assert init["kind"] == "InitConfiguration" and init["apiVersion"] == "kubeadm.k8s.io/v1beta4"
    assert init["localAPIEndpoint"] == {"advertiseAddress": "10.0.0.10", "bindPort": 6443}
    assert init["nodeRegistration"] == {"name": "cp-1", "criSocket": "unix:///run/containerd/containerd.sock"}
    assert cluster["kubernetesVersion"] == "v1.36.3"
    assert cluster["clusterName"] == "dgx-site"
    assert cluster["controlPlaneEndpoint"] == "10.0.0.10:6443"
    assert cluster["networking"] == {"podSubnet": "10.32.0.0/16", "serviceSubnet": "10.96.0.0/12"}
    assert kubelet == {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "cgroupDriver": "systemd",
    }


@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [("api.site.example", "api.site.example:6443"), ("api.site.example:8443", "api.site.example:8443")],
)
def test_a_declared_endpoint_is_used_with_the_default_port(endpoint, expected):
    documents = kubeadm_config.init_documents(site(clusterproof_control_plane_endpoint=endpoint), "cp-1", "10.0.0.10")
    assert documents[1]["controlPlaneEndpoint"] == expected


def test_without_a_vip_the_api_servers_certificate_gets_no_extra_name():
    (_, cluster, _) = kubeadm_config.init_documents(site(), "cp-1", "10.0.0.10")
    assert "apiServer" not in cluster


def test_a_vip_is_the_clusters_endpoint_and_a_name_in_the_api_servers_certificate():
    declared = site(control_plane=("cp-1", "cp-2", "cp-3"), clusterproof_control_plane_vip="10.0.0.100")
    _, cluster, _ = kubeadm_config.init_documents(declared, "cp-1", "10.0.0.10")
    assert cluster["controlPlaneEndpoint"] == "10.0.0.100:8443"
    assert cluster["apiServer"] == {"certSANs": ["10.0.0.100"]}
    settings = kubeadm_config.settings_of(declared)
    assert kubeadm_config.endpoint_of(settings, "10.0.0.10") == "10.0.0.100:8443"


def test_a_vip_with_a_named_endpoint_names_both_in_the_certificate():
    declared = site(
        control_plane=("cp-1", "cp-2"),
        clusterproof_control_plane_vip="10.0.0.100",
        clusterproof_control_plane_endpoint="api.site.example",
    )
    _, cluster, _ = kubeadm_config.init_documents(declared, "cp-1", "10.0.0.10")
    # kubeadm adds the endpoint's host itself; the VIP is the one clusterproof adds.
    assert cluster["controlPlaneEndpoint"] == "api.site.example:8443"
    assert cluster["apiServer"] == {"certSANs": ["10.0.0.100"]}


def test_gpu_worker_joins_with_its_labels_and_the_gpu_taint():
    (join,) = kubeadm_config.join_documents(
        site(gpu_node_taint=True), "dgx-2", kubeadm_config.parse_join_command(JOIN_COMMAND)
    )
    assert join["discovery"]["bootstrapToken"] == {
        "apiServerEndpoint": "10.0.0.10:6443",
        "token": "abcdef.0123456789abcdef",
        "caCertHashes": ["sha256:" + "ab" * 32],
    }
    registration = join["nodeRegistration"]
    assert registration["taints"] == [
        {"key": "site.example/reserved", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
    ]
    assert registration["kubeletExtraArgs"] == [{"name": "node-labels", "value": "nvidia.com/gpu.present=true"}]
    assert "controlPlane" not in join


def test_without_the_gpu_taint_gpu_nodes_keep_only_their_own():
    documents = kubeadm_config.join_documents(site(), "dgx-1", kubeadm_config.parse_join_command(JOIN_COMMAND))
    registration = documents[0]["nodeRegistration"]
    assert registration["taints"] == []
    assert registration["kubeletExtraArgs"][0]["value"] == "nvidia.com/gpu.present=true,site.example/rack=r1"


def test_a_cpu_worker_gets_no_gpu_label():
    documents = kubeadm_config.join_documents(
        site(gpu_node_taint=True), "cpu-1", kubeadm_config.parse_join_command(JOIN_COMMAND)
    )
    assert documents[0]["nodeRegistration"] == {"name": "cpu-1", "criSocket": "unix:///run/containerd/containerd.sock"}


def test_a_second_control_plane_joins_as_one():
    declared = site(control_plane=("cp-1", "cp-2"), clusterproof_control_plane_endpoint="api.site.example")
    key = kubeadm_config.parse_certificate_key("[upload-certs] Using certificate key:\n" + "0f" * 32 + "\n")
    (join,) = kubeadm_config.join_documents(
        declared, "cp-2", kubeadm_config.parse_join_command(JOIN_COMMAND), "10.0.0.11", key
    )
    assert join["controlPlane"] == {
        "localAPIEndpoint": {"advertiseAddress": "10.0.0.11", "bindPort": 6443},
        "certificateKey": "0f" * 32,
    }


def test_a_join_command_without_a_token_is_refused():
    with pytest.raises(ValueError, match="lacks token"):
        kubeadm_config.parse_join_command(
            "kubeadm join 10.0.0.10:6443 --discovery-token-ca-cert-hash sha256:" + "ab" * 32
        )


def test_no_certificate_key_is_refused():
    with pytest.raises(ValueError, match="no certificate key"):
        kubeadm_config.parse_certificate_key("error uploading certs")


def test_yaml_is_one_document_per_object_in_order():
    documents = kubeadm_config.init_documents(site(), "cp-1", "10.0.0.10")
    text = kubeadm_config.to_yaml(documents)
    assert [document["kind"] for document in yaml.safe_load_all(text)] == [
        "InitConfiguration",
        "ClusterConfiguration",
        "KubeletConfiguration",
    ]
    assert list(yaml.safe_load_all(text)) == documents


def test_a_joined_gpu_node_is_patched_to_the_declared_labels_and_taints():
    existing = [
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": "2026-11-22T10:00:00Z"},
        {"key": "site.example/reserved", "value": "old", "effect": "NoExecute"},
    ]
    patch = kubeadm_config.node_patch(site(gpu_node_taint=True), "dgx-2", existing)
    assert patch["metadata"]["labels"] == {"nvidia.com/gpu.present": "true"}
    assert patch["spec"]["taints"] == [
        existing[0],
        {"key": "site.example/reserved", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
    ]


def test_patching_a_node_already_as_declared_keeps_its_taints_as_they_are():
    declared = kubeadm_config.node_patch(site(), "dgx-1", [])
    assert declared == {
        "metadata": {"labels": {"nvidia.com/gpu.present": "true", "site.example/rack": "r1"}},
        "spec": {"taints": []},
    }
    assert kubeadm_config.node_patch(site(), "dgx-1", declared["spec"]["taints"]) == declared


def test_host_groups_of_the_playbook():
    declared = site(control_plane=("cp-1", "cp-2"), clusterproof_control_plane_endpoint="api.site.example")
    assert kubeadm_config.host_groups(declared) == [
        {"host": "cp-1", "groups": ["clusterproof_kubeadm", "clusterproof_kubeadm_init"]},
        {"host": "cp-2", "groups": ["clusterproof_kubeadm", "clusterproof_kubeadm_control_plane_join"]},
        {"host": "dgx-1", "groups": ["clusterproof_kubeadm", "clusterproof_kubeadm_worker_join"]},
        {"host": "dgx-2", "groups": ["clusterproof_kubeadm", "clusterproof_kubeadm_worker_join"]},
        {"host": "cpu-1", "groups": ["clusterproof_kubeadm", "clusterproof_kubeadm_worker_join"]},
    ]
    assert kubeadm_config.host_groups({**declared, "cluster_mode": "sandbox"}) == []


def test_the_pins_agree_with_the_sandbox_and_the_package_role():
    """Mode kubeadm installs the Kubernetes the sandbox runs; the package role's defaults, which ask the
    versions lookup, name it too."""
    import re
    from pathlib import Path

    from ansible_collections.clusterproof.gpu.plugins.module_utils import versions
    from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox.build import SandboxVersions

    settings, errors = kubeadm_config.check_settings({}, {"kube_control_plane": ["cp-1"]})
    assert errors == [] and settings.version == SandboxVersions().kubernetes == versions.KUBERNETES.version
    text = (Path(__file__).resolve().parents[4] / "roles/kubernetes_packages/defaults/main.yml").read_text()
    lookup = re.compile(r"\{\{ lookup\('clusterproof\.gpu\.versions', '([\w.]+)'\) \}\}")
    assert len(lookup.findall(text)) == 4
    defaults = yaml.safe_load(lookup.sub(lambda match: versions.value(match.group(1)), text))
    assert defaults["kubernetes_packages_version"] == settings.package_version
    assert defaults["kubernetes_packages_repo_url"] == settings.package_repo
    assert defaults["kubernetes_packages_repo_key_url"] == settings.package_key
    # etcdctl and etcdutl at the version of the etcd kubeadm runs (the bundle's etcd-client package).
    assert defaults["kubernetes_packages_etcd_client_version"] == versions.ETCD.package_version


def test_a_test_bed_adds_kubelet_and_kube_proxy_fields_and_ignored_preflight_checks():
    # The lab's settings (inventories/lab): cgroup v1 only, and no nf_conntrack_max to set.
    declared = site(
        clusterproof_kubelet_config={"failCgroupV1": False},
        clusterproof_kube_proxy_config={"conntrack": {"maxPerCore": 0}},
        clusterproof_kubeadm_ignore_preflight_errors=["SystemVerification"],
    )
    init, _cluster, kubelet, proxy = kubeadm_config.init_documents(declared, "cp-1", "10.0.0.10")
    assert init["nodeRegistration"]["ignorePreflightErrors"] == ["SystemVerification"]
    assert kubelet == {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": False,
        "cgroupDriver": "systemd",
    }
    assert proxy == {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "conntrack": {"maxPerCore": 0},
    }
    join = kubeadm_config.parse_join_command(JOIN_COMMAND)
    (document,) = kubeadm_config.join_documents(declared, "dgx-1", join)
    assert document["nodeRegistration"]["ignorePreflightErrors"] == ["SystemVerification"]


def test_component_settings_are_kept_as_plain_data():
    # Ansible hands the inventory's values over as subclasses of dict, list and str; the declaration
    # (dataclasses.asdict, then Ansible's fact cache) must hold plain ones.
    class Tagged(dict):
        pass

    class TaggedStr(str):
        pass

    declared = site(
        clusterproof_kube_proxy_config=Tagged(conntrack=Tagged(maxPerCore=0)),
        clusterproof_kubeadm_ignore_preflight_errors=[TaggedStr("SystemVerification")],
    )
    proxy = declared["kubernetes"]["kube_proxy_config"]
    assert type(proxy) is dict and type(proxy["conntrack"]) is dict
    assert [type(check) for check in declared["kubernetes"]["ignore_preflight_errors"]] == [str]


def test_kube_scheduler_bin_packs_gpus_from_the_file_its_static_pod_mounts():
    _, cluster, _ = kubeadm_config.init_documents(site(), "cp-1", "10.0.0.10")
    scheduler = cluster["scheduler"]
    # On every address: Prometheus, a pod, scrapes its /metrics/resources (monitoring.cluster).
    assert scheduler["extraArgs"] == [
        {"name": "config", "value": kubeadm_config.SCHEDULER_CONFIG_PATH},
        {"name": "bind-address", "value": "0.0.0.0"},
    ]
    (volume,) = scheduler["extraVolumes"]
    assert volume["hostPath"] == volume["mountPath"] == kubeadm_config.SCHEDULER_CONFIG_PATH
    config = yaml.safe_load(kubeadm_config.scheduler_config_text())
    # With --config kube-scheduler ignores kubeadm's --kubeconfig and --leader-elect: the file says both.
    assert config["clientConnection"]["kubeconfig"] == "/etc/kubernetes/scheduler.conf"
    assert config["leaderElection"]["leaderElect"] is True
    (fit,) = config["profiles"][0]["pluginConfig"]
    strategy = fit["args"]["scoringStrategy"]
    assert strategy["type"] == "MostAllocated"
    weights = {resource["name"]: resource["weight"] for resource in strategy["resources"]}
    assert weights["nvidia.com/gpu"] > weights["cpu"] == weights["memory"]
    # The file's digest is in the pod, so that a new file restarts the scheduler.
    assert scheduler["extraEnvs"] == [
        {"name": "CLUSTERPROOF_SCHEDULER_CONFIG_SHA256", "value": kubeadm_config.scheduler_config_digest()}
    ]


def test_the_sandbox_s_scheduler_has_the_same_profile_without_leader_election(tmp_path):
    from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import control_plane

    sandbox = yaml.safe_load(control_plane.scheduler_configuration(tmp_path / "kubeconfig"))
    kubeadm = yaml.safe_load(kubeadm_config.scheduler_config_text())
    assert sandbox["profiles"] == kubeadm["profiles"]
    assert sandbox["leaderElection"] == {"leaderElect": False}
    assert sandbox["clientConnection"]["kubeconfig"] == str(tmp_path / "kubeconfig")


MIRROR = {"packages": "http://10.213.0.1:8081/", "registry": "10.213.0.1:5000", "insecure": True}


def test_a_mirror_site_installs_the_previous_minor_when_it_declares_it():
    # The bundle carries the previous minor so that a site can be installed at it and upgraded.
    from ansible_collections.clusterproof.gpu.plugins.module_utils import versions

    previous = versions.KUBERNETES_PREVIOUS
    declared = site(clusterproof_kubernetes_version=previous.version, clusterproof_mirror=MIRROR)
    kubernetes = declared["kubernetes"]
    assert kubernetes["version"] == previous.version
    # What the kubernetes_packages role pins apt to, the bundle's packages at that version.
    assert kubernetes["package_version"] == previous.package_version == previous.bare + "-1.1"
    assert kubernetes["package_repo"] == MIRROR["packages"]
    # containerd's sandbox image is the pause the previous kubeadm asks for, which the bundle holds.
    assert kubernetes["sandbox_image"] == versions.PAUSE_PREVIOUS.image
    _, cluster, _ = kubeadm_config.init_documents(declared, "cp-1", "10.0.0.10")
    assert cluster["kubernetesVersion"] == previous.version


@pytest.mark.parametrize("version", ["v1.34.2", "v1.36.2", "v1.37.0"])
def test_a_mirror_site_at_a_release_the_bundle_does_not_carry_is_refused(version):
    from ansible_collections.clusterproof.gpu.plugins.module_utils import versions

    _, errors = validate_site(*site_inventory(clusterproof_kubernetes_version=version, clusterproof_mirror=MIRROR))
    assert [str(error) for error in errors] == [
        "group all: clusterproof_kubernetes_version: expected on a site with clusterproof_mirror, a release the bundle "
        "carries: %s (pinned) or %s (the previous minor, to upgrade from), found %r"
        % (versions.KUBERNETES.version, versions.KUBERNETES_PREVIOUS.version, version)
    ]
    # Without a mirror, upstream's repository for the minor is the source: any release is declared.
    assert validate_site(*site_inventory(clusterproof_kubernetes_version=version))[1] == []
