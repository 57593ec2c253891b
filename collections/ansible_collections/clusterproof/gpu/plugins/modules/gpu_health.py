#!/usr/bin/python
"""Ansible module: judge a host's GPUs by their passive health signals, before any load (reads only)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_health
short_description: Check the passive health of a host's NVIDIA GPUs before any load
version_added: 0.2.0
author:
  - clusterproof developers
description:
  - Reads each GPU's health signals through NVML (or C(nvidia-smi -q -x), as M(clusterproof.gpu.gpu_facts)
    does) and the XID events in the kernel log since boot, and judges them into checks, each with
    what was expected, what was found and, when it fails or warns, a category and what to do.
  - Per GPU, uncorrected ECC errors (since the driver loaded, and over the GPU's life), row
    remapping or page retirement (pending, failed, nearly full), clock event (throttle) reasons,
    the PCIe link's width and generation against its maximum, the power limit against its default,
    persistence mode, application clocks, MIG or ECC mode changes waiting for a reset, and XID events.
  - Per host, the GPUs the driver lists against O(gpu_count), the driver branch against
    O(driver_branch), the CUDA version the driver supports against O(cuda_version), and XID events
    logged for an address no listed GPU has (a GPU that fell off the bus).
  - Actions follow the escalation of DCGM and the cloud node health checks - isolate the node, reset
    the GPU, reboot the node, replace the GPU.
  - Failed checks do not fail the task; they are returned as a report C(section) for the
    site_report module. The task fails only on invalid options. Reads only, in check mode too.
extends_documentation_fragment:
  - clusterproof.gpu.host_check
options:
  host:
    description: The host's name in the report.
    type: str
    required: true
  source:
    description:
      - Where the GPU facts come from. V(auto) tries NVML first and falls back to C(nvidia-smi).
    type: str
    choices: [auto, nvml, nvidia-smi]
    default: auto
  kernel_log:
    description:
      - How the kernel log is read for XID events. V(auto) tries C(journalctl --dmesg --boot), then
        C(dmesg). V(none) reads nothing, and a warning says the XID events were not checked.
      - Reading it may need the systemd-journal or adm group, or become.
    type: str
    choices: [auto, journalctl, dmesg, none]
    default: auto
  driver_branch:
    description: The driver branch the inventory pins (its major version, C(580)); empty checks none.
    type: str
    default: ""
  cuda_version:
    description: The least CUDA version the driver must support (C(12.4)); empty checks none.
    type: str
    default: ""
  gpu_count:
    description: The GPUs the inventory declares on the host; omitted compares none.
    type: int
requirements:
  - An NVIDIA driver on the host, and C(nvidia-ml-py) or C(nvidia-smi) there (as for gpu_facts).
"""

EXAMPLES = r"""
- name: Check the GPUs' passive health against the inventory's pins
  clusterproof.gpu.gpu_health:
    host: "{{ inventory_hostname }}"
    driver_branch: "580"
    cuda_version: "12.4"
    gpu_count: 8
  become: true  # to read the kernel log
  register: health

- name: Stop before the benchmarks when a GPU is unhealthy
  ansible.builtin.assert:
    that: health.failed_checks == 0
    fail_msg: "{{ health.section.checks | selectattr('status', 'eq', 'fail') | map(attribute='message') | list }}"
"""

RETURN = r"""
section:
  description:
    - The report section C(gpu-health-<host>) - checks C(gpu-health/<host>/gpu<index>/<signal>) and
      C(gpu-health/<host>/<signal>), and a table of the GPUs' signals - for the site_report module.
  returned: always
  type: dict
failed_checks:
  description: How many checks failed.
  returned: always
  type: int
  sample: 0
gpus:
  description: The GPU facts judged, as M(clusterproof.gpu.gpu_facts) returns them; empty where none were read.
  returned: always
  type: dict
"""

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.node import gpu_health

ARGUMENT_SPEC = {
    "host": {"type": "str", "required": True},
    "source": {"type": "str", "choices": ["auto", "nvml", "nvidia-smi"], "default": "auto"},
    "kernel_log": {"type": "str", "choices": list(gpu_health.KERNEL_LOG_SOURCES), "default": "auto"},
    "driver_branch": {"type": "str", "default": ""},
    "cuda_version": {"type": "str", "default": ""},
    "gpu_count": {"type": "int"},
}


def main() -> None:
    runner.run_host_check(
        ARGUMENT_SPEC,
        gpu_health.health_host,
        doing="checking the passive health of the host's GPUs",
        expected=(ValueError,),
    )


if __name__ == "__main__":
    main()
