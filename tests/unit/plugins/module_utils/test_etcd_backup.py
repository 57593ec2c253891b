"""etcd's backup and restore: snapshot names, pruning, the choice of a snapshot, what etcdctl and
etcdutl print (recorded from etcd v3.6.8), the metadata, the restore's refusals, the restored
cluster's membership, the report's age check, the filters, the modules' argument errors, and the
static pods moved in and out (in temporary directories)."""

from __future__ import annotations

import datetime
import json
import socket
import types

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.clusterproof.gpu.plugins.filter import maintenance as maintenance_filters
from ansible_collections.clusterproof.gpu.plugins.module_utils.maintenance import certificates, etcd
from ansible_collections.clusterproof.gpu.plugins.modules import (
    control_plane_static_pods,
    etcd_restore,
    etcd_snapshot,
)

UTC = datetime.UTC
NOW = datetime.datetime(2026, 11, 28, 3, 0, 0, tzinfo=UTC)
# What etcdctl and etcdutl v3.6.8 printed for a one-member etcd.
ENDPOINT_STATUS = (
    '[{"Endpoint":"https://127.0.0.1:2379","Status":{"header":{"cluster_id":1166102521418332538,'
    '"member_id":17442344064592532754,"revision":2,"raft_term":2},"version":"3.6.8","dbSize":20480,'
    '"leader":17442344064592532754,"raftIndex":5,"raftTerm":2,"raftAppliedIndex":5,"dbSizeInUse":16384,'
    '"storageVersion":"3.6.0","dbSizeQuota":2147483648,"downgradeInfo":{}}}]'
)
MEMBER_LIST = (
    '{"header":{"cluster_id":1166102521418332538,"member_id":17442344064592532754,"raft_term":2},'
    '"members":[{"ID":17442344064592532754,"name":"cp-2","peerURLs":["https://10.0.0.12:2380"],'
    '"clientURLs":["https://10.0.0.12:2379"]},{"ID":1,"name":"cp-1","peerURLs":["https://10.0.0.11:2380"],'
    '"clientURLs":["https://10.0.0.11:2379"]}]}'
)
SNAPSHOT_STATUS = '{"hash":3659270827,"revision":2,"totalKey":1,"totalSize":20480,"version":"3.6.0"}'
# The parts of kubeadm's etcd.yaml the restore reads (a joined control plane: its --initial-cluster
# lists the members up to itself only).
ETCD_MANIFEST = """apiVersion: v1
kind: Pod
metadata:
  name: etcd
  namespace: kube-system
spec:
  containers:
  - command:
    - etcd
    - --advertise-client-urls=https://10.0.0.12:2379
    - --data-dir=/var/lib/etcd
    - --initial-advertise-peer-urls=https://10.0.0.12:2380
    - --initial-cluster=cp-1=https://10.0.0.11:2380,cp-2=https://10.0.0.12:2380
    - --initial-cluster-state=existing
    - --name=cp-2
    image: registry.k8s.io/etcd:3.6.8-0
"""
APISERVER_MANIFEST = """spec:
  containers:
  - command:
    - kube-apiserver
    image: registry.k8s.io/kube-apiserver:v1.36.3
"""


def member(host="cp-1", name="cp-1", ip="10.0.0.11", etcd_version="3.6.8", kubernetes="v1.36.3"):
    return etcd.Member(host, name, "https://%s:2380" % ip, "/var/lib/etcd", etcd_version, kubernetes)


def metadata(**changes):
    fields = {
        "name": "dgx-site-etcd-20261128T020000Z.db",
        "site": "dgx-site",
        "sha256": "a" * 64,
        "size": 20480,
        "etcd_version": "3.6.8",
        "kubernetes_version": "v1.36.3",
        "members": ("cp-1", "cp-2"),
        "created": "2026-11-28T02:00:00Z",
    }
    fields.update(changes)
    return etcd.Metadata(**fields)


MEMBERS = [member(), member("cp-2", "cp-2", "10.0.0.12")]


# --- names, pruning, choice ---------------------------------------------------------------------------


def test_a_snapshot_is_named_by_its_site_and_utc_time_and_read_back():
    name = etcd.snapshot_name(
        "dgx-site", datetime.datetime(2026, 11, 28, 4, 5, 6, tzinfo=datetime.timezone(datetime.timedelta(hours=1)))
    )
    assert name == "dgx-site-etcd-20261128T030506Z.db"
    assert etcd.snapshot_time(name) == datetime.datetime(2026, 11, 28, 3, 5, 6, tzinfo=UTC)
    assert etcd.snapshot_time("notes.txt") is None
    assert etcd.metadata_name("/b/" + name) == "/b/dgx-site-etcd-20261128T030506Z.json"


def _files(*stamps, site="dgx-site", metadata_too=True):
    names = ["%s-etcd-%s.db" % (site, stamp) for stamp in stamps]
    return names + ([name.replace(".db", ".json") for name in names] if metadata_too else [])


def test_pruning_keeps_the_newest_and_removes_the_others_with_their_metadata():
    files = _files("20261126T020000Z", "20261128T020000Z", "20261127T020000Z") + _files(
        "20261101T000000Z", site="other"
    )
    files += ["/backups/README", "dgx-site-etcd-broken.db"]
    assert etcd.to_prune(files, "dgx-site", 2) == [
        "dgx-site-etcd-20261126T020000Z.db",
        "dgx-site-etcd-20261126T020000Z.json",
    ]
    assert etcd.to_prune(files, "dgx-site", 7) == []
    # A snapshot whose metadata is gone is pruned alone.
    assert etcd.to_prune(_files("20261126T020000Z", "20261127T020000Z", metadata_too=False), "dgx-site", 1) == [
        "dgx-site-etcd-20261126T020000Z.db"
    ]


@pytest.mark.parametrize("keep", [0, -1, True, "7", 1.5])
def test_a_keep_that_is_no_positive_count_is_refused_naming_the_setting(keep):
    with pytest.raises(
        etcd.EtcdError, match="clusterproof_etcd_backup_keep: expected a whole number of snapshots, 1 or more; found"
    ):
        etcd.to_prune(_files("20261126T020000Z"), "dgx-site", keep)


def test_latest_is_the_newest_of_the_site_and_a_name_may_omit_its_suffix():
    files = _files("20261126T020000Z", "20261128T020000Z") + _files("20261129T000000Z", site="other")
    assert etcd.choose("latest", files, "dgx-site") == "dgx-site-etcd-20261128T020000Z.db"
    assert etcd.choose("dgx-site-etcd-20261126T020000Z", files, "dgx-site") == "dgx-site-etcd-20261126T020000Z.db"
    assert (
        etcd.choose("/backups/dgx-site-etcd-20261126T020000Z.db", files, "dgx-site")
        == "dgx-site-etcd-20261126T020000Z.db"
    )


@pytest.mark.parametrize(
    ("requested", "files", "words"),
    [
        (
            "",
            _files("20261126T020000Z"),
            "snapshot: expected -e snapshot=latest or a snapshot's name (the newest: dgx-site-etcd-20261126T020000Z.db); found ''",
        ),
        (None, [], "snapshot: expected -e snapshot=latest or a snapshot's name (the newest: none); found None"),
        (
            "latest",
            _files("20261126T020000Z", site="other"),
            "snapshot: expected a snapshot of site dgx-site to restore; found none",
        ),
        (
            "dgx-site-etcd-20200101T000000Z",
            _files("20261126T020000Z"),
            "snapshot: expected one of the site's snapshots (the newest: dgx-site-etcd-20261126T020000Z.db); found 'dgx-site-etcd-20200101T000000Z'",
        ),
        (
            "other-etcd-20261126T020000Z.db",
            _files("20261126T020000Z", site="other"),
            "found 'other-etcd-20261126T020000Z.db'",
        ),
    ],
)
def test_a_snapshot_that_is_not_there_is_refused_naming_those_that_are(requested, files, words):
    with pytest.raises(etcd.EtcdError) as raised:
        etcd.choose(requested, files, "dgx-site")
    assert words in str(raised.value)


# --- what the commands print ------------------------------------------------------------------------------


def test_etcdctl_and_etcdutl_output_is_read():
    assert etcd.endpoint_version(ENDPOINT_STATUS) == "3.6.8"
    assert etcd.member_names(MEMBER_LIST) == ["cp-1", "cp-2"]
    assert etcd.snapshot_status(SNAPSHOT_STATUS) == {
        "hash": 3659270827,
        "revision": 2,
        "totalKey": 1,
        "totalSize": 20480,
        "version": "3.6.0",
    }


@pytest.mark.parametrize(
    ("reader", "text", "words"),
    [
        (etcd.endpoint_version, "Error: context deadline exceeded", "etcdctl endpoint status: expected JSON"),
        (etcd.endpoint_version, "[]", "etcdctl endpoint status: expected [{Status: {version}}]"),
        (etcd.member_names, '{"members": [{"ID": 1}]}', "etcdctl member list: expected {members: [{name}]}"),
        (
            etcd.snapshot_status,
            '{"hash": 1}',
            "etcdutl snapshot status: expected hash, revision, totalKey, totalSize, version",
        ),
    ],
)
def test_output_that_cannot_be_read_says_which_command_and_what_was_expected(reader, text, words):
    with pytest.raises(RuntimeError, match=words.replace("[", r"\[").replace("{", r"\{")):
        reader(text)


def test_the_member_is_read_from_kubeadm_s_manifests(tmp_path):
    assert etcd.manifest_flags(ETCD_MANIFEST)["name"] == "cp-2"
    assert etcd.manifest_version(ETCD_MANIFEST, "etcd") == "3.6.8"
    assert etcd.manifest_version(APISERVER_MANIFEST, "kube-apiserver") == "v1.36.3"
    (tmp_path / "etcd.yaml").write_text(ETCD_MANIFEST)
    (tmp_path / "kube-apiserver.yaml").write_text(APISERVER_MANIFEST)
    assert etcd.read_member("cp-2", str(tmp_path)) == member("cp-2", "cp-2", "10.0.0.12")
    (tmp_path / "etcd.yaml").write_text(ETCD_MANIFEST.replace("    - --name=cp-2\n", ""))
    with pytest.raises(RuntimeError, match="etcd.yaml: expected the flag --name; found none"):
        etcd.read_member("cp-2", str(tmp_path))
    with pytest.raises(RuntimeError, match="cannot read .*nowhere/etcd.yaml.*is this a control plane kubeadm made"):
        etcd.read_member("cp-2", str(tmp_path / "nowhere"))


def test_the_member_of_a_stopped_etcd_is_read_where_its_manifests_are_parked(tmp_path):
    running, parked = tmp_path / "manifests", tmp_path / "stopped"
    running.mkdir(), parked.mkdir()
    (parked / "etcd.yaml").write_text(ETCD_MANIFEST)
    (parked / "kube-apiserver.yaml").write_text(APISERVER_MANIFEST)
    assert etcd.read_member("cp-2", str(running), str(parked)) == member("cp-2", "cp-2", "10.0.0.12")
    # Where the kubelet runs a manifest, that one is read.
    (running / "etcd.yaml").write_text(ETCD_MANIFEST.replace("cp-2", "cp-9"))
    assert etcd.read_member("cp-2", str(running), str(parked)).name == "cp-9"
    with pytest.raises(RuntimeError, match="cannot read .*manifests/kube-apiserver.yaml"):
        etcd.read_member("cp-2", str(running), str(tmp_path / "nowhere"))


# --- metadata, refusals, membership -----------------------------------------------------------------------


def test_the_metadata_is_written_as_json_and_read_back():
    written = metadata(status=etcd.snapshot_status(SNAPSHOT_STATUS))
    data = json.loads(written.to_json())
    assert data["members"] == ["cp-1", "cp-2"] and data["status"]["revision"] == 2
    assert etcd.Metadata.from_json(written.to_json(), "x.json") == written


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("not json", "x.json: expected the snapshot's metadata as JSON"),
        ("[]", "x.json: expected the snapshot's metadata (a JSON object); found []"),
        (
            '{"name": "a"}',
            "x.json: expected the fields name, site, sha256, size, etcd_version, kubernetes_version, members, created; missing site",
        ),
    ],
)
def test_metadata_that_cannot_be_read_is_refused_naming_the_file(text, words):
    with pytest.raises(etcd.EtcdError) as raised:
        etcd.Metadata.from_json(text, "x.json")
    assert words in str(raised.value)


def test_metadata_with_ill_typed_fields_is_refused_naming_the_field():
    data = metadata().to_dict()
    with pytest.raises(etcd.EtcdError, match="members: expected a list of member names; found 'cp-1'"):
        etcd.Metadata.from_dict({**data, "members": "cp-1"}, "x.json")
    with pytest.raises(etcd.EtcdError, match="size: expected a number of bytes; found '1'"):
        etcd.Metadata.from_dict({**data, "size": "1"}, "x.json")


def test_a_snapshot_that_matches_every_control_plane_is_restored_and_the_cluster_lists_every_member():
    assert etcd.restore_refusals(metadata(), "a" * 64, 20480, MEMBERS, "dgx-site") == []
    # kubeadm's manifests hold each member's view when it joined: the restore lists them all, by name.
    assert etcd.initial_cluster(reversed(MEMBERS)) == "cp-1=https://10.0.0.11:2380,cp-2=https://10.0.0.12:2380"


def test_every_refusal_names_the_field_what_was_expected_and_what_was_found():
    found = [member(etcd_version="3.6.9"), member("cp-3", "cp-3", "10.0.0.13", kubernetes="v1.37.0")]
    refusals = etcd.restore_refusals(metadata(), "b" * 64, 10, found, "other-site")
    where = "snapshot dgx-site-etcd-20261128T020000Z.db: "
    assert refusals == [
        where + "site: expected other-site; found dgx-site",
        where
        + "sha256: expected %s (its metadata); found %s (the file is damaged or not this snapshot)"
        % ("a" * 64, "b" * 64),
        where + "size: expected 20480 bytes (its metadata); found 10",
        where
        + "etcd_version: expected the snapshot's 3.6.8; found 3.6.9 on cp-1 (restore with the etcd that wrote it)",
        where
        + "kubernetes_version: expected the snapshot's v1.36.3; found v1.37.0 on cp-3 (the API server must read what it wrote)",
        where + "members: expected the control planes the snapshot was taken with (cp-1, cp-2); found cp-1, cp-3",
    ]


# --- the report ----------------------------------------------------------------------------------------------


def _check(section):
    assert section.id == "etcd-backup" and len(section.checks) == 1
    return section.checks[0]


def test_a_snapshot_younger_than_the_warning_passes_and_an_older_one_warns_saying_what_to_do():
    files = _files("20261127T020000Z", "20261128T020000Z")
    fresh = _check(etcd.age_section(files, "dgx-site", NOW, 24, "/backups"))
    assert fresh.status == "pass" and fresh.observed == "1.0 hours"
    assert "dgx-site-etcd-20261128T020000Z.db in /backups" in fresh.message and "2 kept" in fresh.message
    late = NOW + datetime.timedelta(days=2)
    old = _check(etcd.age_section(files, "dgx-site", late, 24, "/backups"))
    assert old.status == "warn" and old.observed == "49.0 hours" and "playbooks/etcd_backup.yml" in old.action
    assert _check(etcd.age_section(files, "dgx-site", late, 72, "/backups")).status == "pass"


def test_no_snapshot_no_directory_or_a_site_kubeadm_did_not_make_each_say_why():
    none = _check(etcd.age_section(_files("20261128T020000Z", site="other"), "dgx-site", NOW, 24, "/backups"))
    assert none.status == "warn" and "no snapshot of site dgx-site with its metadata in /backups" in none.message
    # A snapshot without its metadata cannot be restored: it does not count.
    lone = _check(etcd.age_section(_files("20261128T020000Z", metadata_too=False), "dgx-site", NOW, 24, "/backups"))
    assert lone.status == "warn"
    undeclared = _check(etcd.age_section([], "dgx-site", NOW, 24, ""))
    assert undeclared.status == "warn" and "clusterproof_etcd_backup_dir" in undeclared.action
    skipped = _check(etcd.age_section([], "dgx-site", NOW, 24, "", skipped="not kubeadm"))
    assert skipped.status == "skip" and skipped.message == "not kubeadm"


# --- filters --------------------------------------------------------------------------------------------------


def test_the_filters_read_find_s_files_and_say_nothing_was_changed():
    found = [{"path": "/backups/" + name} for name in _files("20261126T020000Z", "20261128T020000Z")]
    assert maintenance_filters.etcd_snapshot_prune(found, "dgx-site", 1) == [
        "dgx-site-etcd-20261126T020000Z.db",
        "dgx-site-etcd-20261126T020000Z.json",
    ]
    assert maintenance_filters.etcd_snapshot_choice("latest", found, "dgx-site") == "dgx-site-etcd-20261128T020000Z.db"
    with pytest.raises(
        AnsibleFilterError, match="snapshot: expected one of the site's snapshots.*; nothing was changed"
    ):
        maintenance_filters.etcd_snapshot_choice("yesterday", found, "dgx-site")
    section = maintenance_filters.etcd_backup_section(found, "dgx-site", "2026-11-28T03:00:00Z", 24, "/backups")
    assert section["id"] == "etcd-backup" and section["checks"][0]["status"] == "pass"
    with pytest.raises(
        AnsibleFilterError, match="clusterproof_etcd_backup_warn_hours: expected a number of hours above 0; found 0"
    ):
        maintenance_filters.etcd_backup_section(found, "dgx-site", "2026-11-28T03:00:00Z", 0, "/backups")


def test_the_restore_plan_checks_the_controller_s_copy_against_every_control_plane():
    text = metadata().to_json()
    stat = {"exists": True, "checksum": "a" * 64, "size": 20480}
    members = [m.to_dict() for m in MEMBERS]
    plan = maintenance_filters.etcd_restore_plan(text, stat, members, "dgx-site")
    assert plan["initial_cluster"] == "cp-1=https://10.0.0.11:2380,cp-2=https://10.0.0.12:2380"
    assert plan["metadata"]["name"] == "dgx-site-etcd-20261128T020000Z.db"
    with pytest.raises(
        AnsibleFilterError, match=r"sha256: expected a+ \(its metadata\); found c+ .*; nothing was changed$"
    ):
        maintenance_filters.etcd_restore_plan(text, {**stat, "checksum": "c" * 64}, members, "dgx-site")
    with pytest.raises(
        AnsibleFilterError, match="members: expected the control planes .* found cp-1; nothing was changed"
    ):
        maintenance_filters.etcd_restore_plan(text, stat, members[:1], "dgx-site")
    with pytest.raises(AnsibleFilterError, match="the snapshot's metadata: expected the snapshot's metadata as JSON"):
        maintenance_filters.etcd_restore_plan("", stat, members, "dgx-site")
    with pytest.raises(
        AnsibleFilterError, match="snapshot: expected the file dgx-site-etcd-20261128T020000Z.db; found none"
    ):
        maintenance_filters.etcd_restore_plan(text, {"exists": False}, members, "dgx-site")


# --- the modules' argument errors and check mode -----------------------------------------------------------


def _module(options, check_mode=False, **params):
    defaults = {name: spec.get("default") for name, spec in options.items()}
    return types.SimpleNamespace(params={**defaults, **params}, check_mode=check_mode)


def test_the_snapshot_module_refuses_a_site_name_with_a_slash_and_check_mode_writes_nothing(tmp_path):
    with pytest.raises(ValueError, match="site: expected the site's name \\(no slash\\); found '../x'"):
        etcd_snapshot._work(_module(etcd_snapshot.OPTIONS, site="../x"))
    result = etcd_snapshot._work(_module(etcd_snapshot.OPTIONS, check_mode=True, site="dgx-site", dest=str(tmp_path)))
    assert result["changed"] and result["name"].startswith("dgx-site-etcd-") and result["metadata"] == {}
    assert list(tmp_path.iterdir()) == []


def _control_plane(tmp_path):
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "etcd.yaml").write_text(ETCD_MANIFEST)
    (manifests / "kube-apiserver.yaml").write_text(APISERVER_MANIFEST)
    snapshot = tmp_path / "dgx-site-etcd-20261128T020000Z.db"
    snapshot.write_bytes(b"snapshot")
    written = metadata(sha256=etcd.sha256_file(str(snapshot)), size=8)
    return manifests, snapshot, written


def test_the_restore_module_names_what_a_restore_needs_and_refuses_a_bad_copy_before_any_change(tmp_path):
    manifests, snapshot, written = _control_plane(tmp_path)
    with pytest.raises(ValueError, match="snapshot, metadata, site, initial_cluster, stamp: state=restored needs them"):
        etcd_restore._work(_module(etcd_restore.OPTIONS, host="cp-2", state="restored", manifest_dir=str(manifests)))
    restore = dict(
        host="cp-2",
        state="restored",
        manifest_dir=str(manifests),
        snapshot=str(snapshot),
        metadata=written.to_dict(),
        site="dgx-site",
        initial_cluster="cp-1=https://10.0.0.11:2380,cp-2=https://10.0.0.12:2380",
        stamp="20261128T030000Z",
    )
    with pytest.raises(ValueError, match="stamp: expected letters, digits and dashes"):
        etcd_restore._work(_module(etcd_restore.OPTIONS, **{**restore, "stamp": "../x"}))
    result = etcd_restore._work(_module(etcd_restore.OPTIONS, check_mode=True, **restore))
    assert result["changed"] and result["member"]["name"] == "cp-2"
    snapshot.write_bytes(b"damaged!")
    with pytest.raises(etcd.EtcdError, match="sha256: expected .*; nothing was changed"):
        etcd_restore._work(_module(etcd_restore.OPTIONS, check_mode=True, **restore))
    snapshot.write_bytes(b"snapshot")
    with pytest.raises(etcd.EtcdError, match="initial_cluster: expected cp-2=https://10.0.0.12:2380 among its members"):
        etcd_restore._work(
            _module(
                etcd_restore.OPTIONS, check_mode=True, **{**restore, "initial_cluster": "cp-1=https://10.0.0.11:2380"}
            )
        )
    other = {**restore, "metadata": {**written.to_dict(), "members": ["cp-1", "cp-3"]}}
    with pytest.raises(etcd.EtcdError, match="members: expected cp-2 among the snapshot's members \\(cp-1, cp-3\\)"):
        etcd_restore._work(_module(etcd_restore.OPTIONS, check_mode=True, **other))
    assert (manifests / "etcd.yaml").read_text() == ETCD_MANIFEST


def test_a_restore_while_etcd_answers_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(etcd, "etcd_answers", lambda port=etcd.ETCD_CLIENT_PORT: True)
    with pytest.raises(RuntimeError, match="etcd answers on 127.0.0.1:2379: a restore needs the control plane stopped"):
        etcd.restore(str(tmp_path / "s.db"), member(), "cp-1=https://10.0.0.11:2380", "20261128T030000Z")


def test_a_restore_keeps_the_old_data_directory_aside(tmp_path, monkeypatch):
    data = tmp_path / "etcd"
    (data / "member").mkdir(parents=True)
    ran = []

    def etcdutl(command, stdin=None):
        ran.append(command)
        (tmp_path / ("etcd.restoring-20261128T030000Z/member")).mkdir(parents=True)
        return ""

    monkeypatch.setattr(etcd, "etcd_answers", lambda port=etcd.ETCD_CLIENT_PORT: False)
    monkeypatch.setattr(etcd.host_command, "run", etcdutl)
    restored = etcd.restore(
        "/s.db",
        etcd.Member("cp-1", "cp-1", "https://10.0.0.11:2380", str(data), "3.6.8", "v1.36.3"),
        "cp-1=https://10.0.0.11:2380",
        "20261128T030000Z",
    )
    assert restored == {"data_dir": str(data), "kept": str(data) + ".before-restore-20261128T030000Z"}
    assert (tmp_path / "etcd.before-restore-20261128T030000Z" / "member").is_dir() and (data / "member").is_dir()
    command = ran[0]
    assert command[:4] == ["etcdutl", "snapshot", "restore", "/s.db"]
    assert command[command.index("--name") + 1] == "cp-1" and "--mark-compacted" in command
    assert command[command.index("--data-dir") + 1] == str(data) + ".restoring-20261128T030000Z"


def test_static_pods_are_moved_out_until_their_port_closes_and_back_until_it_opens(tmp_path, monkeypatch):
    manifests, parking = tmp_path / "manifests", tmp_path / "parked"
    manifests.mkdir()
    (manifests / "etcd.yaml").write_text(ETCD_MANIFEST)
    # Nothing listens on the port the test gives etcd: it is "stopped" at once; then a listener "starts" it.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setattr(certificates, "STATIC_PODS", (("etcd", port),))
    options = dict(manifest_dir=str(manifests), parking_dir=str(parking), components=["etcd"], timeout=5)
    would = control_plane_static_pods._work(
        _module(control_plane_static_pods.OPTIONS, check_mode=True, state="stopped", **options)
    )
    assert would == {"changed": True, "moved": ["etcd"]} and (manifests / "etcd.yaml").exists()
    stopped = control_plane_static_pods._work(_module(control_plane_static_pods.OPTIONS, state="stopped", **options))
    assert stopped == {"changed": True, "moved": ["etcd"]} and (parking / "etcd.yaml").exists()
    again = control_plane_static_pods._work(_module(control_plane_static_pods.OPTIONS, state="stopped", **options))
    assert again == {"changed": False, "moved": []}
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", port))
        listener.listen()
        started = control_plane_static_pods._work(
            _module(control_plane_static_pods.OPTIONS, state="started", **options)
        )
    assert started == {"changed": True, "moved": ["etcd"]} and (manifests / "etcd.yaml").read_text() == ETCD_MANIFEST
    with pytest.raises(ValueError, match="timeout: expected 1 second or more; found 0"):
        control_plane_static_pods._work(
            _module(control_plane_static_pods.OPTIONS, state="started", **{**options, "timeout": 0})
        )
