#!/usr/bin/python
"""Ansible module: register the NVIDIA runtime in containerd's or Docker's config (the action plugin runs it)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: container_runtime_config
short_description: Merge the NVIDIA container runtime into containerd's or Docker's config
version_added: 0.1.0
author:
  - clusterproof developers
description:
  - Registers the NVIDIA container runtime in C(/etc/containerd/config.toml) or C(/etc/docker/daemon.json),
    and makes it the default runtime where asked, as C(nvidia-ctk runtime configure) does.
  - The entry is merged into what the file holds, never replacing it; every other table, key and comment
    is kept. Run on a file that already has the entry, it changes nothing.
  - For containerd, the new runtime is of type C(io.containerd.runc.v2) with C(options.BinaryName) set to
    O(binary), and takes the C(runc) runtime's other options (such as C(SystemdCgroup)) where it lacks them.
    The config's C(version) decides where the runtimes live (1, 2 and 3; 4 is treated as 3, with a warning);
    a file that does not exist yet is written as version 2.
  - The merge runs on the controller (it needs the Python package C(tomlkit) there, which the pinned
    requirements bring); the host needs nothing beyond Python for Ansible.
  - A later tool that re-templates the file (Kubespray's containerd role does, kubernetes-sigs/kubespray
    issue 12277) removes the entry; run this module again afterwards, or in check mode to detect the loss.
  - The runtime is not restarted; notify a handler on RV(ignore:changed).
extends_documentation_fragment:
  - clusterproof.gpu.runtime_config_action
options:
  runtime:
    description: Whose config to edit.
    type: str
    required: true
    choices: [containerd, docker]
  path:
    description:
      - The config file.
      - Defaults to C(/etc/containerd/config.toml) for containerd and C(/etc/docker/daemon.json) for Docker.
    type: path
  name:
    description: Name of the runtime (the RuntimeClass handler in Kubernetes).
    type: str
    default: nvidia
  binary:
    description: The NVIDIA runtime executable that the entry points at.
    type: path
    default: /usr/bin/nvidia-container-runtime
  set_as_default:
    description:
      - Make the runtime the default one (containerd C(default_runtime_name), Docker C(default-runtime)).
      - When false and the runtime is the default now, the default goes back to the runtime's own (runc).
    type: bool
    default: false
  systemd_cgroup:
    description:
      - containerd only. Set C(SystemdCgroup = true) in the options of the C(runc) runtime (made where
        missing) and of this runtime, as a kubelet with the systemd cgroup driver (kubeadm's default) needs;
        works with either O(state) (on hosts without GPUs, V(absent) leaves just runc's setting).
      - When false, nothing about cgroups is changed.
    type: bool
    default: false
  state:
    description: V(present) merges the entry in; V(absent) removes it (and the default, where it was this runtime).
    type: str
    choices: [present, absent]
    default: present
  mode:
    description: Mode of the file; an existing file keeps its mode when unset, a new one gets C(0644).
    type: raw
notes:
  - This is an action plugin; the merge logic is C(module_utils/install/runtime_config.py).
requirements:
  - tomlkit on the controller, for containerd.
"""

EXAMPLES = r"""
- name: Register the nvidia runtime for containerd and make it the default
  clusterproof.gpu.container_runtime_config:
    runtime: containerd
    set_as_default: true
  notify: Restart containerd

- name: Register the nvidia runtime for Docker, leaving runc the default
  clusterproof.gpu.container_runtime_config:
    runtime: docker
    path: /etc/docker/daemon.json

- name: After the Kubernetes roles, check that the runtime is still there (changes nothing)
  clusterproof.gpu.container_runtime_config:
    runtime: containerd
    set_as_default: true
  check_mode: true
  register: runtime_drift

- name: Fail when something removed it
  ansible.builtin.assert:
    that: runtime_drift is not changed
    fail_msg: "{{ runtime_drift.path }} lost the nvidia runtime; re-run the nvidia_container_toolkit role"
"""

RETURN = r"""
path:
  description: The config file.
  returned: always
  type: str
  sample: /etc/containerd/config.toml
runtime:
  description: Whose config it is.
  returned: always
  type: str
  sample: containerd
runtimes:
  description: Runtimes the file declares after the merge, sorted.
  returned: success
  type: list
  elements: str
  sample: [nvidia, runc]
default_runtime:
  description: The default runtime after the merge (V(runc) where the file sets none).
  returned: success
  type: str
  sample: nvidia
runtimes_before:
  description: Runtimes the file declared before the merge, sorted (what a check-mode run finds on the host).
  returned: success
  type: list
  elements: str
  sample: [runc]
default_runtime_before:
  description: The default runtime before the merge.
  returned: success
  type: str
  sample: runc
config_version:
  description: The containerd config version; null for Docker.
  returned: success
  type: int
  sample: 2
backup_file:
  description: Where the previous file was saved, with O(backup=true) and a change.
  returned: changed and backup requested
  type: str
"""
