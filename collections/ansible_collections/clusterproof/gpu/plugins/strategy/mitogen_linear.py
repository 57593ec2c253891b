"""Strategy: Ansible's ``linear``, with Mitogen for Ansible (the ``mitogen`` package, pinned in
requirements.txt) running the tasks.

Every task of a run otherwise forks a worker, builds the module's AnsiballZ payload again and starts
a new Python that compiles the collection's module_utils from that zip before it imports the
Kubernetes client: measured with py-spy on the sandbox, 3 Dec, that was most of a playbook run's
CPU, and Ansible was about half of the test suite's (tests/timings.py's CPU by program). Mitogen
keeps one interpreter per target for the run, with the modules' code cached in it: a validation
used 6.7 CPU seconds instead of 8.9 to 10.0, the scheduler stage 3.5 instead of 7.1 to 7.7, the
same tasks with the same results. Connections Mitogen does not serve (the molecule scenarios'
chroots) run as they would under ``linear``.

``ansible.cfg`` names it (``strategy = clusterproof.gpu.mitogen_linear``); a play or a run may
still choose another (``ANSIBLE_STRATEGY=linear``).
"""

from __future__ import annotations

import ansible_mitogen.affinity
import ansible_mitogen.loaders
import ansible_mitogen.strategy


def _written(play, keyword: str):  # noqa: ANN001, ANN202
    """What the play's own text sets ``keyword`` to (None where it says nothing)."""
    text = getattr(play, "_ds", None)
    return text.get(keyword) if isinstance(text, dict) else None


# Mitogen pins its processes each to one CPU (its LinuxPolicy), and whatever a module starts
# inherits the pin: the sandbox's control plane and engines, and the lab's hosts, whose kubeadm
# then refused to init ("[ERROR NumCPU]: the number of available CPUs 1 is less than the required
# 2", 3 Dec). Its base Policy pins nothing: every process keeps the machine's CPUs.
ansible_mitogen.affinity.policy = ansible_mitogen.affinity.Policy()

DOCUMENTATION = r"""
name: mitogen_linear
short_description: Ansible's linear strategy, with Mitogen running the tasks
description:
  - The tasks of each play run in order on all its hosts, as under C(ansible.builtin.linear).
  - Mitogen keeps one Python interpreter per target for the run and runs the modules in it, instead
    of one new process per task.
author: clusterproof
"""

_Linear = ansible_mitogen.loaders.strategy_loader.get("linear", class_only=True)
LOCAL = "local"


class StrategyModule(ansible_mitogen.strategy.StrategyMixin, _Linear):  # type: ignore[misc, valid-type]
    """``linear``, with Mitogen's connection and task handling mixed in for plays on the controller."""

    def run(self, iterator, play_context):  # noqa: ANN001, ANN201 - Ansible's signature
        if self._on_the_controller(iterator._play):
            return super().run(iterator, play_context)
        # Not Mitogen's run: its wrappers stay out, and the play's tasks run as under linear.
        return _Linear.run(self, iterator, play_context)

    def _on_the_controller(self, play) -> bool:  # noqa: ANN001
        """The play has hosts, each reached by the local connection (the host's ``ansible_connection``,
        else the play's ``connection``, else SSH: Ansible's precedence), and its text says no
        ``become``: Mitogen runs sudo even where the user is already the one to become (Ansible's
        ``become_allow_same_user`` false skips it), and a controller without sudo failed
        gpu_nodes.yml's first task. The first host that is not local ends the look."""
        if _written(play, "become"):
            return False
        hosts = self._inventory.get_hosts(play.hosts)
        default = _written(play, "connection") or "ssh"

        def connection(host) -> str:  # noqa: ANN001
            return str(self._variable_manager.get_vars(play=play, host=host).get("ansible_connection") or default)

        return bool(hosts) and all(connection(host) == LOCAL for host in hosts)
