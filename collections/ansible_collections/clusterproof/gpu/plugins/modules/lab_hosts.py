#!/usr/bin/python
"""Bring the lab's Debian hosts up on this machine, report on them, or remove them."""

DOCUMENTATION = r"""
module: lab_hosts
short_description: Run the lab, Debian 12 hosts booted with systemd on this machine (systemd-nspawn)
version_added: 0.2.0
author:
  - clusterproof developers
description:
  - Builds a Debian 12 root once per machine with debootstrap (cached under O(cache_dir), keyed by
    its package list), copies it per host, and boots each host with C(systemd-nspawn -b) on the lab
    bridge O(bridge), with its own address, its own SSH host key, the lab's SSH key for root, and
    its own cgroup subtree in every cgroup v1 hierarchy.
  - The hosts reach one another and this machine, and nothing beyond it (this machine forwards
    nothing for them).
  - C(up) on a lab that runs as declared changes nothing. C(up) and C(down) clean up a lab left
    half-made by a crash (roots without a machine, machines that do not answer).
  - C(down) stops every machine the lab started, removes the bridge, the cgroups, the mounts and
    O(state_dir), and puts back the kernel settings a kubelet changes (C(vm.overcommit_memory),
    C(kernel.panic), C(kernel.panic_on_oops)) as they were at the first C(up).
  - Needs root, C(debootstrap) and C(systemd-nspawn) (Debian's C(systemd-container)), and for the
    first C(up) Debian's package mirror O(mirror).
options:
  state:
    description: C(up) to run the lab as declared, C(status) to report on it, C(down) to remove it.
    type: str
    choices: [up, status, down]
    default: up
  state_dir:
    description: The lab's state (hosts' roots, the lab's SSH key and known_hosts, consoles, records).
    type: path
    required: true
  cache_dir:
    description: Where the Debian root is kept between labs.
    type: path
    required: true
  bridge:
    description: Name of the lab's bridge on this machine.
    type: str
    default: cplab0
  host_address:
    description: This machine's address on the bridge, with the lab's prefix length; the hosts' default route.
    type: str
    default: 10.213.0.1/24
  hosts:
    description: The lab's hosts, name to IPv4 address on the bridge. Required with O(state=up) and O(state=status).
    type: dict
  mirror:
    description: Debian's package mirror, for the first build of the Debian root.
    type: str
    default: http://deb.debian.org/debian
  timeout:
    description: Seconds to wait for every host's systemd to say C(running).
    type: int
    default: 120
"""

EXAMPLES = r"""
- name: Bring the lab up
  clusterproof.gpu.lab_hosts:
    state: up
    state_dir: ~/.local/state/clusterproof/lab
    cache_dir: ~/.cache/clusterproof/lab
    hosts: {lab-cp-1: 10.213.0.10, lab-worker-1: 10.213.0.11}
"""

RETURN = r"""
hosts:
  description: Each host's state as its systemd says it (C(running)), or C(stopped).
  returned: with state up or status
  type: dict
started:
  description: The hosts started by this run.
  returned: with state up
  type: list
cleaned:
  description: Hosts of a half-made lab removed before starting (a crash's leftovers).
  returned: with state up
  type: list
root_built:
  description: Whether the Debian root was built by this run (false when it came from the cache).
  returned: with state up
  type: bool
stopped:
  description: The hosts that were running and were powered off.
  returned: with state down
  type: list
killed:
  description: The hosts that did not power off in 90 s and were killed.
  returned: with state down
  type: list
restored:
  description: The kernel settings and inotify limits put back to the machine's values, by the last lab down.
  returned: with state down
  type: list
kept_for:
  description: The hosts of other labs still running, for which the settings were left as they are.
  returned: with state down
  type: list
settings:
  description: What the down did with the machine's settings, in words.
  returned: with state down
  type: str
"""

from pathlib import Path

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.lab import lifecycle
from ansible_collections.clusterproof.gpu.plugins.module_utils.lab.machines import Layout
from ansible_collections.clusterproof.gpu.plugins.module_utils.lab.plan import LabError, make_plan


def run(module):
    params = module.params
    layout = Layout(Path(params["state_dir"]), Path(params["cache_dir"]))
    if params["state"] == "down":
        return lifecycle.down(layout, params["bridge"], module.check_mode)
    plan = make_plan(params["bridge"], params["host_address"], params["hosts"])
    if params["state"] == "status":
        return {"changed": False, "hosts": lifecycle.status(layout, plan)}
    return lifecycle.up(layout, plan, params["mirror"], params["timeout"], module.check_mode)


def main():
    spec = runner.argument_spec(
        {
            "state": {"type": "str", "choices": ["up", "status", "down"], "default": "up"},
            "state_dir": {"type": "path", "required": True},
            "cache_dir": {"type": "path", "required": True},
            "bridge": {"type": "str", "default": "cplab0"},
            "host_address": {"type": "str", "default": "10.213.0.1/24"},
            "hosts": {"type": "dict"},
            "mirror": {"type": "str", "default": "http://deb.debian.org/debian"},
            "timeout": {"type": "int", "default": 120},
        }
    )
    runner.run_module(
        spec,
        run,
        doing="running the lab",
        expected=(LabError, OSError),
        required_if=[("state", "up", ("hosts",)), ("state", "status", ("hosts",))],
    )


if __name__ == "__main__":
    main()
