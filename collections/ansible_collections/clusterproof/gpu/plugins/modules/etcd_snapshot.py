#!/usr/bin/python
"""Ansible module: take a snapshot of a kubeadm control plane's etcd, with its metadata beside it."""

from __future__ import annotations

DOCUMENTATION = r"""
module: etcd_snapshot
short_description: Take a snapshot of a kubeadm control plane's etcd, with its checksum and the cluster's versions
version_added: 0.3.0
author:
  - clusterproof developers
description:
  - On a control plane kubeadm made, saves a snapshot of the running etcd (C(etcdctl snapshot save) against
    U(https://127.0.0.1:2379), with kubeadm's etcd CA and its health-check client certificate) into O(dest), as
    C(<site>-etcd-<UTC timestamp>.db).
  - Writes its metadata beside it, as JSON (C(<same name>.json)) - its sha256 and size, the etcd version the
    server reports, the Kubernetes version of the API server's manifest (read in O(manifest_dir)), the etcd
    members' names, when it was taken, and C(etcdutl snapshot status).
  - Every run takes a new snapshot (changed). Check mode says the name it would write and writes nothing.
  - playbooks/etcd_backup.yml fetches both files to the controller and removes them here.
extends_documentation_fragment:
  - clusterproof.gpu.static_pods
options:
  site:
    description: The site's name (C(clusterproof_site.site_name)), the first part of the snapshot's name.
    type: str
    required: true
  dest:
    description: The directory on the host the snapshot and its metadata are written to (made, mode 0700).
    type: path
    default: /var/lib/clusterproof/etcd-snapshots
requirements:
  - C(etcdctl) and C(etcdutl) (the bundle's package C(etcd-client)), kubeadm's etcd certificates.
"""

EXAMPLES = r"""
- name: Take a snapshot of etcd
  clusterproof.gpu.etcd_snapshot:
    site: "{{ clusterproof_site.site_name }}"
  become: true
  register: snapshot
"""

RETURN = r"""
path:
  description: The snapshot on the host (in check mode, where it would be).
  returned: always
  type: str
  sample: /var/lib/clusterproof/etcd-snapshots/dgx-site-etcd-20261128T020000Z.db
metadata_path:
  description: Its metadata file on the host.
  returned: always
  type: str
name:
  description: The snapshot's file name.
  returned: always
  type: str
metadata:
  description:
    - The metadata written beside it - name, site, sha256, size, etcd_version, kubernetes_version, members,
      created (RFC 3339, UTC), status (etcdutl snapshot status - hash, revision, totalKey, totalSize, version).
    - Empty in check mode.
  returned: always
  type: dict
"""

import datetime
import os

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.maintenance import etcd

OPTIONS = {
    **runner.STATIC_POD_MANIFESTS_ARG_SPEC,
    "site": {"type": "str", "required": True},
    "dest": {"type": "path", "default": "/var/lib/clusterproof/etcd-snapshots"},
}


def _work(module) -> dict:
    params = module.params
    site = params["site"].strip()
    if not site or "/" in site:
        raise ValueError("site: expected the site's name (no slash); found %r" % params["site"])
    now = datetime.datetime.now(datetime.UTC)
    name = etcd.snapshot_name(site, now)
    path = os.path.join(params["dest"], name)
    result = {"changed": True, "name": name, "path": path, "metadata_path": etcd.metadata_name(path), "metadata": {}}
    if module.check_mode:
        return result
    result["metadata"] = etcd.take_snapshot(params["dest"], site, now, params["manifest_dir"]).to_dict()
    return result


def main() -> None:
    runner.run_host_command(OPTIONS, _work, doing="taking a snapshot of etcd")


if __name__ == "__main__":
    main()
