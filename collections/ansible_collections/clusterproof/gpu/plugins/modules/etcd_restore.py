#!/usr/bin/python
"""Ansible module: read a control plane's etcd member, and restore a snapshot into its data directory."""

from __future__ import annotations

DOCUMENTATION = r"""
module: etcd_restore
short_description: Read a kubeadm control plane's etcd member, or restore an etcd snapshot on it
version_added: 0.3.0
author:
  - clusterproof developers
description:
  - With O(state=read), reads from the host's static pod manifests its etcd member - the member's name, its
    peer URL, its data directory, and the etcd and Kubernetes versions its static pods run. Changes nothing.
  - With O(state=restored), checks the snapshot O(snapshot) against its O(metadata) (sha256 and size, the etcd
    and Kubernetes versions of this host, this member among the snapshot's), refusing before any change with
    the field, what was expected and what was found; refuses while etcd still answers on 127.0.0.1:2379 (stop
    the control plane first); then C(etcdutl snapshot restore) into a new directory beside the data directory
    as this member of O(initial_cluster), moves the old data directory aside (C(<data dir>.before-restore-<stamp>))
    and puts the new one in its place.
  - A restore is never a no-op - every run with O(state=restored) replaces the data directory (changed); the
    playbook playbooks/etcd_restore.yml asks for it once per host. Check mode makes the checks and changes
    nothing.
extends_documentation_fragment:
  - clusterproof.gpu.static_pods
options:
  host:
    description: The host's name in the inventory, as the refusals name it.
    type: str
    required: true
  state:
    description: C(read) reads the member; C(restored) restores the snapshot.
    type: str
    choices: [read, restored]
    default: read
  snapshot:
    description: With O(state=restored), the snapshot file on the host.
    type: path
  metadata:
    description: With O(state=restored), the snapshot's metadata (the JSON written beside it, as a mapping).
    type: dict
  site:
    description: With O(state=restored), the site's name; a snapshot of another site is refused.
    type: str
  initial_cluster:
    description:
      - With O(state=restored), every member of the restored cluster, C(name=peer URL) separated by commas
        (the filter C(clusterproof.gpu.etcd_restore_plan) makes it from every control plane's O(state=read)).
    type: str
  stamp:
    description: With O(state=restored), the suffix of the data directory kept aside (the run's UTC time).
    type: str
  parking_dir:
    description:
      - Where M(clusterproof.gpu.control_plane_static_pods) parks the manifests of stopped static pods (its
        default). A manifest not in O(manifest_dir) is read there, so the member is known with etcd stopped.
    type: path
    default: /etc/kubernetes/clusterproof/stopped
requirements:
  - C(etcdutl) (the bundle's package C(etcd-client)) for O(state=restored).
"""

EXAMPLES = r"""
- name: Read this control plane's etcd member
  clusterproof.gpu.etcd_restore:
    host: "{{ inventory_hostname }}"
  become: true
  register: member

- name: Restore the snapshot on this control plane (its etcd stopped)
  clusterproof.gpu.etcd_restore:
    host: "{{ inventory_hostname }}"
    state: restored
    snapshot: /var/lib/clusterproof/etcd-restore/dgx-site-etcd-20261128T020000Z.db
    metadata: "{{ snapshot_metadata }}"
    site: dgx-site
    initial_cluster: cp-1=https://10.0.0.11:2380,cp-2=https://10.0.0.12:2380
    stamp: 20261128T030000Z
  become: true
"""

RETURN = r"""
member:
  description: The host's etcd member - host, name, peer_url, data_dir, etcd_version, kubernetes_version.
  returned: always
  type: dict
data_dir:
  description: With O(state=restored), the data directory now holding the restored snapshot.
  returned: when state is restored
  type: str
kept:
  description: With O(state=restored), where the data directory before the restore was moved.
  returned: when state is restored
  type: str
"""

import os
import re

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.maintenance import etcd

OPTIONS = {
    **runner.STATIC_POD_MANIFESTS_ARG_SPEC,
    "host": {"type": "str", "required": True},
    "state": {"type": "str", "choices": ["read", "restored"], "default": "read"},
    "snapshot": {"type": "path"},
    "metadata": {"type": "dict"},
    "site": {"type": "str"},
    "initial_cluster": {"type": "str"},
    "stamp": {"type": "str"},
    "parking_dir": {"type": "path", "default": etcd.PARKING_DIR},
}
RESTORE_NEEDS = ("snapshot", "metadata", "site", "initial_cluster", "stamp")


def _work(module) -> dict:
    params = module.params
    if params["state"] == "restored":
        missing = [field for field in RESTORE_NEEDS if not params[field]]
        if missing:
            raise ValueError("%s: state=restored needs them; found none" % ", ".join(missing))
        if not re.fullmatch(r"[0-9A-Za-z-]+", params["stamp"]):
            raise ValueError("stamp: expected letters, digits and dashes (a UTC time); found %r" % params["stamp"])
    member = etcd.read_member(params["host"], params["manifest_dir"], params["parking_dir"])
    result = {"member": member.to_dict()}
    if params["state"] == "read":
        return result
    metadata = etcd.Metadata.from_dict(params["metadata"], "metadata")
    snapshot = params["snapshot"]
    if not os.path.isfile(snapshot):
        raise ValueError("snapshot: expected the snapshot file on %s; found no file %s" % (params["host"], snapshot))
    # This member alone: the playbook checked the membership of every control plane before.
    refusals = etcd.restore_refusals(
        metadata, etcd.sha256_file(snapshot), os.path.getsize(snapshot), [member], params["site"]
    )
    refusals = [refusal for refusal in refusals if ": members: " not in refusal]
    if member.name not in metadata.members:
        refusals.append(
            "snapshot %s: members: expected %s among the snapshot's members (%s); found it is not"
            % (metadata.name, member.name, ", ".join(metadata.members))
        )
    if "%s=%s" % (member.name, member.peer_url) not in params["initial_cluster"].split(","):
        refusals.append(
            "initial_cluster: expected %s=%s among its members; found %s"
            % (member.name, member.peer_url, params["initial_cluster"])
        )
    if refusals:
        raise etcd.EtcdError("; ".join(refusals) + "; nothing was changed")
    result["changed"] = True
    if module.check_mode:
        return result
    result.update(etcd.restore(snapshot, member, params["initial_cluster"], params["stamp"]))
    return result


def main() -> None:
    runner.run_host_command(OPTIONS, _work, doing="restoring etcd")


if __name__ == "__main__":
    main()
