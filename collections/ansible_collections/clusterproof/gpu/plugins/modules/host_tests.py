#!/usr/bin/python
"""Ansible module: run the GPU host suite (tests/hosts) against one host and return its report section.

Runs on the controller (the role delegates it there): it starts pytest with testinfra's Ansible
backend, which reaches the GPU host through the same inventory; or it reads a JUnit XML file the
suite wrote earlier. The parsing is ``module_utils/node/host_tests.py``.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: host_tests
short_description: Run the GPU host suite against a host and return its results as report checks
version_added: 0.1.0
author:
  - clusterproof developers
description:
  - Runs C(python -m pytest <suite> --hosts=ansible://<host> --ansible-inventory=<inventory>) on the
    machine the module runs on (the Ansible controller; delegate the task to it), and turns the
    JUnit XML the run writes into one check per test case, in a report section
    C(host-tests-<host>) for the site_report module. With O(junit_file) it reads that file instead
    of running anything.
  - The suite (C(tests/hosts)) checks that the host is what the inventory says - the driver of the
    pinned branch loaded, the declared number of GPUs in persistence mode, the nvidia runtime in the
    container runtimes, a container that sees the GPUs.
  - A passed test is a C(pass) check, a failure or an error a C(fail) with the test's own message,
    a skipped test a C(skip) with its reason. Failed checks do not fail the task.
  - V(hardware=false) (a simulated host) and O(failure) (the host could not be reached) run
    nothing; every test of the suite is returned as C(needs-hardware), or as C(fail) with the
    reason, respectively. In check mode the suite is not run (its container test pulls an image on
    the host) and every check is a skip; a O(junit_file) is still read.
extends_documentation_fragment:
  - clusterproof.gpu.host_check
options:
  host:
    description: The inventory name of the host to test; the tests run against C(ansible://<host>).
    type: str
    required: true
  suite:
    description: The suite's directory on the controller (the project's C(tests/hosts)).
    type: path
    required: true
  project_dir:
    description:
      - Where pytest runs (the project root, whose C(ansible.cfg) and C(pyproject.toml) apply).
        Defaults to the directory two levels above O(suite).
    type: path
  inventory:
    description: The inventory file or directory that declares O(host); required when the suite runs.
    type: path
  python:
    description:
      - The controller's interpreter that has pytest and pytest-testinfra; its own directory goes
        first on PATH, for the C(ansible-inventory) testinfra calls. Defaults to the interpreter
        running this module.
    type: str
  sudo:
    description: Run the tests' commands with sudo on the host (a non-root Ansible user).
    type: bool
    default: false
  pytest_args:
    description: More pytest arguments, e.g. C(["-k", "not container"]).
    type: list
    elements: str
    default: []
  junit_file:
    description: Read the results from this JUnit XML file (written by the suite before) instead of running it.
    type: path
  failure:
    description:
      - Why the suite cannot run against the host (it was unreachable, or an earlier task failed
        there). Nothing runs; every test of the suite is a failed check with this message.
  timeout:
    description: Seconds pytest may take.
    type: int
    default: 900
requirements:
  - pytest and pytest-testinfra on the controller (requirements.txt), and ansible-inventory beside them.
"""

EXAMPLES = r"""
- name: Run the GPU host suite against this host, from the controller
  clusterproof.gpu.host_tests:
    host: "{{ inventory_hostname }}"
    suite: "{{ playbook_dir | dirname }}/tests/hosts"
    inventory: "{{ ansible_inventory_sources | first }}"
    python: "{{ ansible_playbook_python }}"
  delegate_to: localhost
  register: gpu_host_tests_result

- name: Report what CI's run of the suite found for this host
  clusterproof.gpu.host_tests:
    host: "{{ inventory_hostname }}"
    suite: /srv/clusterproof/tests/hosts
    junit_file: /srv/ci/gpu-hosts.xml
  delegate_to: localhost
"""

RETURN = r"""
checks:
  description: One check per test case run against the host, in the report's check shape.
  returned: always
  type: list
  elements: dict
  sample:
    - id: host-tests/gpu-1/gpu-count-is-the-inventorys
      title: "gpu-1: GPU count is the inventorys"
      status: fail
      expected: pass
      observed: "failed: AssertionError at tests/hosts/test_gpu_host.py:103"
      message: "gpu-1 shows 7 GPU(s) (...); the inventory declares gpu_count: 8"
      duration_s: 0.03
failed_checks:
  description: How many checks failed.
  returned: always
  type: int
section:
  description: The report section (id C(host-tests-<host>)) for clusterproof_report_sections.
  returned: always
  type: dict
command:
  description: The pytest command that ran; empty when nothing ran.
  returned: always
  type: list
  elements: str
pytest_rc:
  description: pytest's exit status (0 all passed, 1 some failed, 2 collection errors); null when nothing ran.
  returned: always
  type: int
pytest_output:
  description: The last lines pytest printed, for diagnosis.
  returned: always
  type: str
"""

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.node import host_tests

ARGUMENT_SPEC = {
    "host": {"type": "str", "required": True},
    "suite": {"type": "path", "required": True},
    "project_dir": {"type": "path"},
    "inventory": {"type": "path"},
    "python": {"type": "str"},
    "sudo": {"type": "bool", "default": False},
    "pytest_args": {"type": "list", "elements": "str", "default": []},
    "junit_file": {"type": "path"},
    "timeout": {"type": "int", "default": 900},
}


def main() -> None:
    runner.run_host_check(
        ARGUMENT_SPEC,
        host_tests.host_suite_result,
        doing="running the GPU host suite",
        expected=(host_tests.SuiteOptionsError,),
    )


if __name__ == "__main__":
    main()
