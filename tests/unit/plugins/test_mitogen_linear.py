"""plugins/strategy/mitogen_linear.py, through real ansible-playbook runs with the repository's
ansible.cfg: a play on the controller runs under Mitogen with every CPU of the machine (Mitogen's
own policy pinned what a module started to one CPU, and the lab's kubeadm refused to init), and a
play with an SSH host runs under Ansible's own linear."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
INVENTORY = """\
all:
  hosts:
    localhost:
      ansible_connection: local
      ansible_python_interpreter: "{{ ansible_playbook_python }}"
  children:
    remote:
      hosts:
        unreachable-host: {ansible_host: 127.0.0.9, ansible_port: 9, ansible_ssh_timeout: 3}
"""
PLAYBOOK = """\
- name: On the controller
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Say which process runs the task and its CPUs
      ansible.builtin.shell: "grep Cpus_allowed_list /proc/self/status; ps -o args= -p $PPID"
      register: where
      changed_when: false
    - name: Show it
      ansible.builtin.debug:
        msg: "WHERE {{ where.stdout_lines | join(' | ') }}"
- name: Over SSH
  hosts: remote
  gather_facts: false
  tasks:
    - name: Reach the host
      ansible.builtin.ping:
"""


def run(tmp_path: Path) -> str:
    (tmp_path / "hosts.yml").write_text(INVENTORY)
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    env.pop("ANSIBLE_STRATEGY", None)
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            str(tmp_path / "hosts.yml"),
            str(tmp_path / "play.yml"),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.stdout + done.stderr


def test_a_play_on_the_controller_runs_under_mitogen_on_every_cpu_and_one_over_ssh_as_linear(tmp_path):
    output = run(tmp_path)
    (where,) = [line for line in output.splitlines() if "WHERE " in line]
    cpus = where.split("Cpus_allowed_list:", 1)[1].split("|", 1)[0].replace("\\t", "").strip()
    everything = sorted(os.sched_getaffinity(0))
    assert cpus == ("%d-%d" % (everything[0], everything[-1]) if len(everything) > 1 else str(everything[0])), where
    assert "(mitogen:" in where, where
    # Ansible's own ssh connection plugin words its failure so; Mitogen's says "EOF on stream".
    assert "Failed to connect to the host via ssh" in output, output[-2000:]
