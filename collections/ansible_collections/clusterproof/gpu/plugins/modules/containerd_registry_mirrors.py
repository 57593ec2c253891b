#!/usr/bin/python
"""Ansible module: pull a host's images through the site's registry mirror (the action plugin runs it)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: containerd_registry_mirrors
short_description: Pull a host's container images through the site's registry mirror
version_added: 0.2.0
author:
  - clusterproof developers
description:
  - Writes C(<certs_dir>/<registry>/hosts.toml) for each upstream registry in O(registries), naming the
    mirror O(mirror) with C(override_path), so that an image such as C(registry.k8s.io/pause:<tag>) is asked
    of the mirror as C(registry.k8s.io/pause:<tag>) (the offline bundle's registry keeps images so; see
    docs/bundle.md). Upstream stays the fallback, which an air-gapped site cannot reach.
  - Points containerd's CRI plugin at O(certs_dir) (C(registry.config_path)) in O(path), merged into what the
    file holds (every other table, key and comment kept), and sets O(cri_settings) beside it.
  - The merge runs on the controller (tomlkit from the pinned requirements); the host needs nothing beyond
    Python for Ansible. containerd is not restarted; notify a handler on RV(ignore:changed).
extends_documentation_fragment:
  - clusterproof.gpu.runtime_config_action
options:
  mirror:
    description: The registry mirror, as host:port.
    type: str
    required: true
  registries:
    description: The upstream registries pulled through the mirror.
    type: list
    elements: str
    default: [registry.k8s.io, docker.io, ghcr.io, nvcr.io, quay.io, clusterproof.local]
  insecure:
    description: The mirror speaks plain HTTP (the lab's bundle server).
    type: bool
    default: false
  certs_dir:
    description: Where containerd reads the registries' hosts.toml files.
    type: path
    default: /etc/containerd/certs.d
  path:
    description: containerd's configuration file (config version 2 or later).
    type: path
    default: /etc/containerd/config.toml
  cri_settings:
    description: Other scalar keys of the CRI plugin to set, such as C(restrict_oom_score_adj).
    type: dict
    default: {}
notes:
  - This is an action plugin; the merge is C(module_utils/install/runtime_config.py), the hosts.toml text
    C(module_utils/bundle/contents.py).
requirements:
  - tomlkit on the controller.
"""

EXAMPLES = r"""
- name: Pull every image through the site's mirror
  clusterproof.gpu.containerd_registry_mirrors:
    mirror: mirror.site.example:5000
  notify: Restart containerd
"""

RETURN = r"""
changed_files:
  description: The files written.
  returned: success
  type: list
  elements: str
config_path:
  description: containerd's registry hosts directory after the merge.
  returned: success
  type: str
  sample: /etc/containerd/certs.d
config_path_before:
  description: The directory the file named before, or null.
  returned: success
  type: str
config_version:
  description: The containerd config version.
  returned: success
  type: int
  sample: 2
"""
