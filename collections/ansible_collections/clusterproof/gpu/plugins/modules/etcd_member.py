#!/usr/bin/python
"""Ansible module: remove a member of kubeadm's stacked etcd from a control plane that stays."""

from __future__ import annotations

DOCUMENTATION = r"""
module: etcd_member
short_description: Remove a member of kubeadm's stacked etcd (a control plane whose host is gone)
version_added: 0.3.0
author:
  - clusterproof developers
description:
  - Runs on a control plane that stays and removes the etcd member named O(name) through the local etcd's
    JSON gateway (no etcdctl needed), with kubeadm's health-check client certificate. This is what a control
    plane removed by force needs, as its own C(kubeadm reset) cannot run.
  - A member already gone is left alone (a second run changes nothing). Refused, changing nothing, are the member
    of the host it runs on, etcd's last member, and any removal etcd refuses (it keeps its quorum).
    Check mode says whether a member would be removed.
options:
  name:
    description: The member's name (kubeadm names it after the control plane's node).
    type: str
    required: true
  state:
    description: Only C(absent) (the member removed).
    type: str
    choices: [absent]
    default: absent
  etcd_url:
    description: The local etcd's client URL.
    type: str
    default: https://127.0.0.1:2379
  timeout:
    description: Seconds each request to etcd may take.
    type: int
    default: 10
"""

EXAMPLES = r"""
- name: Remove the etcd member of a control plane whose host is gone
  clusterproof.gpu.etcd_member:
    name: cp-3
  become: true
"""

RETURN = r"""
removed:
  description: The removed member's ID (decimal), empty when no member had the name.
  returned: always
  type: str
members:
  description: The members' names before the removal.
  returned: always
  type: list
  elements: str
"""

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.maintenance import control_plane_status, etcd_membership

OPTIONS = {
    "name": {"type": "str", "required": True},
    "state": {"type": "str", "choices": ["absent"], "default": "absent"},
    "etcd_url": {"type": "str", "default": control_plane_status.ETCD_URL},
    "timeout": {"type": "int", "default": 10},
}


def _work(module) -> dict:
    params = module.params
    read = control_plane_status.https_reader(
        params["timeout"],
        control_plane_status.ETCD_CA,
        control_plane_status.ETCD_CLIENT_CERTIFICATE,
        control_plane_status.ETCD_CLIENT_KEY,
    )
    return etcd_membership.remove_member(read, params["etcd_url"], params["name"], module.check_mode)


def main() -> None:
    runner.run_module(
        runner.argument_spec(OPTIONS),
        _work,
        doing="removing an etcd member",
        expected=(ValueError, control_plane_status.ReadFailed),
    )


if __name__ == "__main__":
    main()
