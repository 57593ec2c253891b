"""etcd's backup and restore on a kubeadm site: snapshots, what is written beside them, and the refusals.

A kubeadm control plane keeps the whole cluster in etcd; a snapshot of it is what brings a cluster
back after a lost control plane or a deletion nobody meant. A snapshot is one file,
``<site>-etcd-<UTC timestamp>.db``, with its metadata beside it as JSON (``<same name>.json``): its
sha256 and size, the etcd and Kubernetes versions that wrote it, the control plane's member names,
when it was made, and what ``etcdutl snapshot status`` says of it (hash, revision, keys, storage
version).

The pure half: the names (``snapshot_name``, ``snapshot_time``), the metadata (``Metadata``), what the
commands print (``endpoint_version``, ``member_names``, ``snapshot_status``, ``manifest_flags``,
``manifest_version``), which snapshots to prune (``to_prune``), which one a restore means
(``choose``), the refusals of a restore (``restore_refusals``, each naming the field, what was
expected and what was found, before any change), the restored cluster's membership
(``initial_cluster``) and the report's check of the newest snapshot's age (``age_section``).

The host half (``take_snapshot``, ``read_member``, ``restore``) runs etcdctl and etcdutl on the
control plane it runs on, with kubeadm's certificates, and touches its etcd data directory (a restore
keeps the old one aside). May import: the standard library, ``report.model``, ``host_command``.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import os
import re
import shutil
import socket
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.maintenance import host_command
from ansible_collections.clusterproof.gpu.plugins.module_utils.report.model import Check, Section

SECTION_ID = "etcd-backup"
SNAPSHOT_SUFFIX = ".db"
METADATA_SUFFIX = ".json"
_STAMP = "%Y%m%dT%H%M%SZ"
_NAME = re.compile(r"^(?P<site>.+)-etcd-(?P<stamp>\d{8}T\d{6}Z)\.db$")
LATEST = "latest"
BACKUP_PLAYBOOK = "playbooks/etcd_backup.yml"
# kubeadm's etcd: its client port on loopback, and the client certificate kubeadm makes for its own
# health check (a client of etcd's CA, which is all etcdctl needs).
ENDPOINT = "https://127.0.0.1:2379"
ETCD_CLIENT_PORT = 2379
PKI = "/etc/kubernetes/pki/etcd"
CACERT = PKI + "/ca.crt"
CERT = PKI + "/healthcheck-client.crt"
KEY = PKI + "/healthcheck-client.key"
MANIFEST_DIR = "/etc/kubernetes/manifests"
# Where control_plane_static_pods parks the manifests of the static pods it stops: a restore reads the
# member there once etcd and the API server are stopped (or after a run stopped half-way).
PARKING_DIR = "/etc/kubernetes/clusterproof/stopped"
# The revision a restore adds to the snapshot's, and the compaction it marks: the kubelets' and
# controllers' watches hold revisions of the cluster before the restore; a revision they have not
# seen, marked compacted, makes each of them list again instead of trusting its cache (etcd's and
# Kubernetes' manuals on restoring a cluster that serves Kubernetes).
BUMP_REVISION = 1_000_000_000
METADATA_FIELDS = ("name", "site", "sha256", "size", "etcd_version", "kubernetes_version", "members", "created")


class EtcdError(ValueError):
    """Bad input, or a snapshot that must not be restored; the message names the field, what was
    expected and what was found."""


# --- names -------------------------------------------------------------------------------------------


def snapshot_name(site: str, when: datetime.datetime) -> str:
    """``<site>-etcd-<YYYYmmddTHHMMSSZ>.db`` for a snapshot taken at ``when`` (UTC)."""
    return "%s-etcd-%s%s" % (site, when.astimezone(datetime.UTC).strftime(_STAMP), SNAPSHOT_SUFFIX)


def snapshot_time(name: str) -> datetime.datetime | None:
    """When the snapshot ``name`` was taken (from its name); None for a file that is no snapshot."""
    match = _NAME.match(os.path.basename(name))
    if match is None:
        return None
    return datetime.datetime.strptime(match["stamp"], _STAMP).replace(tzinfo=datetime.UTC)


def snapshots(names: Iterable[str], site: str) -> list[str]:
    """The snapshot files among ``names`` (paths or file names) that are ``site``'s, oldest first."""
    found = []
    for name in names:
        base = os.path.basename(str(name))
        match = _NAME.match(base)
        if match is not None and match["site"] == site:
            found.append(base)
    return sorted(found, key=lambda base: (snapshot_time(base), base))


def metadata_name(snapshot: str) -> str:
    """The metadata file beside ``snapshot``: the same name, .json for .db."""
    return snapshot.removesuffix(SNAPSHOT_SUFFIX) + METADATA_SUFFIX


def to_prune(names: Iterable[str], site: str, keep: int) -> list[str]:
    """The snapshots of ``site`` beyond the newest ``keep``, and their metadata files: what a backup
    removes after writing a new one."""
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise EtcdError(
            "clusterproof_etcd_backup_keep: expected a whole number of snapshots, 1 or more; found %r" % keep
        )
    names = list(names)
    old = snapshots(names, site)[:-keep]
    present = {os.path.basename(str(name)) for name in names}
    return [file for snapshot in old for file in (snapshot, metadata_name(snapshot)) if file in present]


def choose(requested: Any, names: Iterable[str], site: str) -> str:
    """The snapshot a restore means: ``latest`` (the newest of ``site``'s), or one named, with or
    without its .db. An empty request, or a name that is not there, names the snapshots there are."""
    there = snapshots(names, site)
    listed = ", ".join(there[-5:]) if there else "none"
    if not isinstance(requested, str) or not requested.strip():
        raise EtcdError(
            "snapshot: expected -e snapshot=latest or a snapshot's name (the newest: %s); found %r"
            % (listed, requested)
        )
    wanted = os.path.basename(requested.strip())
    if wanted == LATEST:
        if not there:
            raise EtcdError("snapshot: expected a snapshot of site %s to restore; found none" % site)
        return there[-1]
    if not wanted.endswith(SNAPSHOT_SUFFIX):
        wanted += SNAPSHOT_SUFFIX
    if wanted not in there:
        raise EtcdError(
            "snapshot: expected one of the site's snapshots (the newest: %s); found %r" % (listed, requested)
        )
    return wanted


# --- what the commands print -------------------------------------------------------------------------


def _json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as error:
        raise RuntimeError("%s: expected JSON; found %r (%s)" % (what, text[:200], error)) from error


def endpoint_version(text: str) -> str:
    """``etcdctl endpoint status -w json`` -> the server's version (x.y.z, without a v)."""
    status = _json(text, "etcdctl endpoint status")
    try:
        return str(status[0]["Status"]["version"])
    except (KeyError, IndexError, TypeError) as error:
        raise RuntimeError("etcdctl endpoint status: expected [{Status: {version}}]; found %r" % text[:200]) from error


def member_names(text: str) -> list[str]:
    """``etcdctl member list -w json`` -> the members' names, sorted."""
    listing = _json(text, "etcdctl member list")
    try:
        return sorted(str(member["name"]) for member in listing["members"])
    except (KeyError, TypeError) as error:
        raise RuntimeError("etcdctl member list: expected {members: [{name}]}; found %r" % text[:200]) from error


def snapshot_status(text: str) -> dict[str, Any]:
    """``etcdutl snapshot status -w json`` -> hash, revision, totalKey, totalSize, version (the storage's)."""
    status = _json(text, "etcdutl snapshot status")
    wanted = ("hash", "revision", "totalKey", "totalSize", "version")
    if not isinstance(status, dict) or any(key not in status for key in wanted):
        raise RuntimeError("etcdutl snapshot status: expected %s; found %r" % (", ".join(wanted), text[:200]))
    return {key: status[key] for key in wanted}


def manifest_flags(text: str) -> dict[str, str]:
    """The ``--flag=value`` arguments of a static pod manifest kubeadm wrote (one ``- --flag=value``
    line each). Read line by line rather than as YAML: the control planes other than the first have
    no PyYAML (nothing else there needs it), and kubeadm writes every flag this way."""
    flags = {}
    for line in text.splitlines():
        match = re.match(r"^\s*-\s+--([A-Za-z0-9-]+)=(.*?)\s*$", line)
        if match:
            flags[match[1]] = match[2].strip("'\"")
    return flags


def manifest_version(text: str, component: str) -> str:
    """The version of ``component``'s image in its manifest, as the component reports it: etcd's tag
    <x.y.z>-0 is x.y.z (what etcd says), kube-apiserver's vX.Y.Z stays so."""
    match = re.search(r"^\s*image:\s*['\"]?\S*/%s:([^\s'\"]+)" % re.escape(component), text, re.MULTILINE)
    if match is None:
        raise RuntimeError("the %s manifest names no %s image" % (component, component))
    tag = match[1]
    return tag.split("-", 1)[0].removeprefix("v") if component == "etcd" else tag


# --- the metadata ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Metadata:
    """What is written beside a snapshot, as JSON."""

    name: str
    site: str
    sha256: str
    size: int
    etcd_version: str
    kubernetes_version: str
    members: tuple[str, ...]
    created: str
    status: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["members"] = list(self.members)
        data["status"] = dict(self.status)
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_dict(cls, data: Any, where: str) -> Metadata:
        """The metadata read from ``where`` (its file); a missing or ill-typed field is named."""
        if not isinstance(data, Mapping):
            raise EtcdError("%s: expected the snapshot's metadata (a JSON object); found %r" % (where, data))
        missing = [field for field in METADATA_FIELDS if field not in data]
        if missing:
            raise EtcdError(
                "%s: expected the fields %s; missing %s" % (where, ", ".join(METADATA_FIELDS), ", ".join(missing))
            )
        members = data["members"]
        if not isinstance(members, list) or not all(isinstance(member, str) for member in members):
            raise EtcdError("%s: members: expected a list of member names; found %r" % (where, members))
        size = data["size"]
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise EtcdError("%s: size: expected a number of bytes; found %r" % (where, size))
        return cls(
            name=str(data["name"]),
            site=str(data["site"]),
            sha256=str(data["sha256"]),
            size=size,
            etcd_version=str(data["etcd_version"]),
            kubernetes_version=str(data["kubernetes_version"]),
            members=tuple(members),
            created=str(data["created"]),
            status=dict(data.get("status") or {}),
        )

    @classmethod
    def from_json(cls, text: str, where: str) -> Metadata:
        try:
            data = json.loads(text)
        except ValueError as error:
            raise EtcdError(
                "%s: expected the snapshot's metadata as JSON; found %r (%s)" % (where, text[:80], error)
            ) from error
        return cls.from_dict(data, where)


@dataclasses.dataclass(frozen=True)
class Member:
    """One control plane's etcd as its manifests declare it: the member's name, its peer URL, its
    data directory, and the versions of etcd and the API server its static pods run."""

    host: str
    name: str
    peer_url: str
    data_dir: str
    etcd_version: str
    kubernetes_version: str

    def to_dict(self) -> dict[str, str]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Member:
        return cls(**{field.name: str(data[field.name]) for field in dataclasses.fields(cls)})


def restore_refusals(metadata: Metadata, sha256: str, size: int, members: Sequence[Member], site: str) -> list[str]:
    """Why the snapshot must not be restored on ``members`` (every control plane, as read from their
    manifests), each naming the field, what was expected and what was found; empty: restore it.
    ``sha256`` and ``size``: of the snapshot file as it is now."""
    refusals = []
    where = "snapshot %s" % metadata.name
    if metadata.site != site:
        refusals.append("%s: site: expected %s; found %s" % (where, site, metadata.site))
    if sha256 != metadata.sha256:
        refusals.append(
            "%s: sha256: expected %s (its metadata); found %s (the file is damaged or not this snapshot)"
            % (where, metadata.sha256, sha256)
        )
    if size != metadata.size:
        refusals.append("%s: size: expected %d bytes (its metadata); found %d" % (where, metadata.size, size))
    for member in members:
        if member.etcd_version != metadata.etcd_version:
            refusals.append(
                "%s: etcd_version: expected the snapshot's %s; found %s on %s (restore with the etcd that wrote it)"
                % (where, metadata.etcd_version, member.etcd_version, member.host)
            )
        if member.kubernetes_version != metadata.kubernetes_version:
            refusals.append(
                "%s: kubernetes_version: expected the snapshot's %s; found %s on %s (the API server must read "
                "what it wrote)" % (where, metadata.kubernetes_version, member.kubernetes_version, member.host)
            )
    found = sorted(member.name for member in members)
    if found != sorted(metadata.members):
        refusals.append(
            "%s: members: expected the control planes the snapshot was taken with (%s); found %s"
            % (where, ", ".join(sorted(metadata.members)), ", ".join(found) or "none")
        )
    return refusals


def initial_cluster(members: Iterable[Member]) -> str:
    """etcd's --initial-cluster of the restored cluster: every member, ``name=peer URL``, by name.
    kubeadm's manifests cannot give it: each holds the members that were there when it joined."""
    return ",".join("%s=%s" % (member.name, member.peer_url) for member in sorted(members, key=lambda m: m.name))


# --- the report ----------------------------------------------------------------------------------------


def age_section(
    names: Iterable[str],
    site: str,
    now: datetime.datetime,
    warn_hours: float,
    backup_dir: str = "",
    skipped: str = "",
) -> Section:
    """The report's section: one check of the newest snapshot's age in ``backup_dir`` (``names``: the
    files there), a warning past ``warn_hours``, with none, or with no directory declared."""
    title = "etcd backup"
    check_id = SECTION_ID + "/newest"
    check_title = "the newest etcd snapshot is under %g hours old" % warn_hours
    expected = "a snapshot younger than %g hours" % warn_hours
    take = "take one: ansible-playbook -i <inventory> %s (daily, e.g. from cron)" % BACKUP_PLAYBOOK
    if skipped:
        return Section(SECTION_ID, title, [Check(check_id, check_title, "skip", message=skipped)])
    if not backup_dir:
        check = Check(
            check_id, check_title, "warn", expected=expected, observed="no backup directory",
            message="no etcd snapshot is kept: the inventory declares no clusterproof_etcd_backup_dir",
            category="configuration",
            action="declare clusterproof_etcd_backup_dir (a directory on the controller), then " + take,
        )  # fmt: skip
        return Section(SECTION_ID, title, [check])
    names = list(names)
    found = snapshots(names, site)
    complete = [name for name in found if metadata_name(name) in {os.path.basename(str(n)) for n in names}]
    if not complete:
        check = Check(
            check_id, check_title, "warn", expected=expected, observed="none",
            message="no snapshot of site %s with its metadata in %s" % (site, backup_dir),
            category="configuration", action=take,
        )  # fmt: skip
        return Section(SECTION_ID, title, [check])
    newest = complete[-1]
    # snapshots() keeps only the names it can read a time from.
    taken = snapshot_time(newest) or now
    hours = (now - taken).total_seconds() / 3600
    status = "warn" if hours > warn_hours else "pass"
    message = "%s in %s, taken %s: %.1f hours ago; %d kept" % (
        newest,
        backup_dir,
        taken.strftime("%Y-%m-%dT%H:%M:%SZ"),
        hours,
        len(complete),
    )
    return Section(
        SECTION_ID,
        title,
        [
            Check(
                check_id, check_title, status, expected=expected, observed="%.1f hours" % hours, message=message,
                category="configuration" if status == "warn" else None, action=take if status == "warn" else None,
            )
        ],
    )  # fmt: skip


# --- on the control plane ------------------------------------------------------------------------------


def sha256_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _etcdctl(*args: str) -> list[str]:
    return ["etcdctl", "--endpoints", ENDPOINT, "--cacert", CACERT, "--cert", CERT, "--key", KEY, *args]


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as error:
        raise RuntimeError("cannot read %s (%s): is this a control plane kubeadm made?" % (path, error)) from error


def _manifest(name: str, manifest_dir: str, parking_dir: str) -> tuple[str, str]:
    """The static pod manifest ``name`` where the kubelet runs it, or where it is parked while its pod
    is stopped: (its directory, its text)."""
    parked = os.path.join(parking_dir, name) if parking_dir else ""
    if parked and not os.path.exists(os.path.join(manifest_dir, name)) and os.path.exists(parked):
        return parking_dir, _read(parked)
    return manifest_dir, _read(os.path.join(manifest_dir, name))


def read_member(host: str, manifest_dir: str = MANIFEST_DIR, parking_dir: str = "") -> Member:
    """This control plane's etcd as its static pod manifests declare it (a manifest missing from
    ``manifest_dir`` is read in ``parking_dir``, where a stopped static pod's waits)."""
    where, etcd = _manifest("etcd.yaml", manifest_dir, parking_dir)
    flags = manifest_flags(etcd)
    for flag in ("name", "initial-advertise-peer-urls", "data-dir"):
        if not flags.get(flag):
            raise RuntimeError("%s/etcd.yaml: expected the flag --%s; found none" % (where, flag))
    return Member(
        host=host,
        name=flags["name"],
        peer_url=flags["initial-advertise-peer-urls"].split(",")[0],
        data_dir=flags["data-dir"],
        etcd_version=manifest_version(etcd, "etcd"),
        kubernetes_version=manifest_version(
            _manifest("kube-apiserver.yaml", manifest_dir, parking_dir)[1], "kube-apiserver"
        ),
    )


def take_snapshot(directory: str, site: str, now: datetime.datetime, manifest_dir: str = MANIFEST_DIR) -> Metadata:
    """A snapshot of the running etcd into ``directory``, with its metadata file beside it."""
    name = snapshot_name(site, now)
    path = os.path.join(directory, name)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    etcd_version = endpoint_version(host_command.run(_etcdctl("endpoint", "status", "-w", "json")))
    members = member_names(host_command.run(_etcdctl("member", "list", "-w", "json")))
    kubernetes_version = manifest_version(_read(os.path.join(manifest_dir, "kube-apiserver.yaml")), "kube-apiserver")
    # etcdctl writes <path>.part and renames it when the snapshot is whole.
    host_command.run(_etcdctl("snapshot", "save", path))
    os.chmod(path, 0o600)
    status = snapshot_status(host_command.run(["etcdutl", "snapshot", "status", path, "-w", "json"]))
    metadata = Metadata(
        name=name,
        site=site,
        sha256=sha256_file(path),
        size=os.path.getsize(path),
        etcd_version=etcd_version,
        kubernetes_version=kubernetes_version,
        members=tuple(members),
        created=now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        status=status,
    )
    Path(metadata_name(path)).write_text(metadata.to_json())
    return metadata


def etcd_answers(port: int = ETCD_CLIENT_PORT) -> bool:
    """Whether something listens on etcd's client port on this host."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


def restore(snapshot: str, member: Member, cluster: str, stamp: str) -> dict[str, str]:
    """Restore ``snapshot`` as ``member`` of the cluster ``cluster`` (initial_cluster): into a new
    directory beside the data directory, then the old one moved aside (``<data dir>.before-restore-
    <stamp>``) and the new one put in its place. Refused while etcd still answers here."""
    if etcd_answers():
        raise RuntimeError(
            "etcd answers on 127.0.0.1:%d: a restore needs the control plane stopped (playbooks/etcd_restore.yml "
            "stops it); nothing was changed" % ETCD_CLIENT_PORT
        )
    data_dir = member.data_dir.rstrip("/")
    restoring = "%s.restoring-%s" % (data_dir, stamp)
    kept = "%s.before-restore-%s" % (data_dir, stamp)
    if os.path.exists(restoring):
        # What an interrupted restore left: etcdutl refuses a directory that exists.
        shutil.rmtree(restoring)
    host_command.run(
        [
            "etcdutl", "snapshot", "restore", snapshot,
            "--name", member.name,
            "--initial-cluster", cluster,
            "--initial-advertise-peer-urls", member.peer_url,
            "--data-dir", restoring,
            "--bump-revision", str(BUMP_REVISION),
            "--mark-compacted",
        ]
    )  # fmt: skip
    if os.path.exists(data_dir):
        os.replace(data_dir, kept)
    os.replace(restoring, data_dir)
    os.chmod(data_dir, 0o700)
    return {"data_dir": data_dir, "kept": kept}
