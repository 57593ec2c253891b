#!/usr/bin/python
"""Ansible module: stop or start a kubeadm control plane's static pods by moving their manifests."""

from __future__ import annotations

DOCUMENTATION = r"""
module: control_plane_static_pods
short_description: Stop or start a kubeadm control plane's static pods (etcd, the API server, ...)
version_added: 0.3.0
author:
  - clusterproof developers
description:
  - The kubelet runs a static pod while its manifest is in O(manifest_dir). With O(state=stopped), moves each
    of O(components), in the order given, to O(parking_dir) and waits until the component's local port closes
    (etcd 2381, kube-apiserver 6443, kube-controller-manager 10257, kube-scheduler 10259), as kubeadm's manual
    stops them. With O(state=started), puts each back, in the order given, and waits until its port opens.
  - A component already where O(state) wants it is left alone, so a second run changes nothing, and a run
    after an interrupted one finishes its work. Check mode says what would move.
extends_documentation_fragment:
  - clusterproof.gpu.static_pods
options:
  state:
    description: C(stopped) parks the manifests; C(started) puts them back.
    type: str
    choices: [stopped, started]
    required: true
  components:
    description: The static pods, in the order to stop or start them.
    type: list
    elements: str
    choices: [etcd, kube-apiserver, kube-controller-manager, kube-scheduler]
    required: true
  parking_dir:
    description: Where the manifests of the stopped components wait (outside O(manifest_dir)).
    type: path
    default: /etc/kubernetes/clusterproof/stopped
  timeout:
    description: Seconds each component may take to stop, or to start.
    type: int
    default: 180
"""

EXAMPLES = r"""
- name: Stop the API server, then etcd
  clusterproof.gpu.control_plane_static_pods:
    state: stopped
    components: [kube-apiserver, etcd]
  become: true

- name: Start etcd, then the API server
  clusterproof.gpu.control_plane_static_pods:
    state: started
    components: [etcd, kube-apiserver]
  become: true
"""

RETURN = r"""
moved:
  description: The components whose manifests were moved (or would be, in check mode), in order.
  returned: always
  type: list
  elements: str
"""

import os

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.maintenance import certificates, etcd

OPTIONS = {
    **runner.STATIC_POD_MANIFESTS_ARG_SPEC,
    "state": {"type": "str", "choices": ["stopped", "started"], "required": True},
    "components": {
        "type": "list",
        "elements": "str",
        "choices": [component for component, _ in certificates.STATIC_PODS],
        "required": True,
    },
    "parking_dir": {"type": "path", "default": etcd.PARKING_DIR},
    "timeout": {"type": "int", "default": 180},
}


def _work(module) -> dict:
    params = module.params
    if params["timeout"] < 1:
        raise ValueError("timeout: expected 1 second or more; found %r" % params["timeout"])
    if os.path.abspath(params["parking_dir"]) == os.path.abspath(params["manifest_dir"]):
        raise ValueError("parking_dir: expected a directory other than manifest_dir; found %s" % params["parking_dir"])
    stopping = params["state"] == "stopped"
    # Where each manifest is now decides whether it moves.
    source = params["manifest_dir"] if stopping else params["parking_dir"]
    to_move = [c for c in params["components"] if os.path.exists(os.path.join(source, c + ".yaml"))]
    if module.check_mode:
        return {"changed": bool(to_move), "moved": to_move}
    move = certificates.stop_static_pod if stopping else certificates.start_static_pod
    moved = [
        c for c in params["components"] if move(c, params["manifest_dir"], params["parking_dir"], params["timeout"])
    ]
    return {"changed": bool(moved), "moved": moved}


def main() -> None:
    runner.run_host_command(OPTIONS, _work, doing="moving the control plane's static pods")


if __name__ == "__main__":
    main()
