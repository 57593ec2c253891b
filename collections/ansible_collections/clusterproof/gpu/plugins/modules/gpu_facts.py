#!/usr/bin/python
"""Ansible module: report a node's NVIDIA GPUs as the fact clusterproof_gpus (reads only)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_facts
short_description: Gather facts about the NVIDIA GPUs of a host
version_added: 0.1.0
author:
  - clusterproof developers
description:
  - Reads the host's NVIDIA GPUs through NVML (the C(pynvml) module of C(nvidia-ml-py)) or the XML
    report of C(nvidia-smi -q -x), and returns them as the fact C(clusterproof_gpus).
  - Per GPU, the index, UUID, model, PCI bus id, memory, driver and CUDA versions, MIG and ECC modes,
    ECC error counts, temperature, power draw and limit, persistence mode and NVLink links.
  - A field that the GPU or driver does not report is null. A host without GPUs, driver or tools gets
    C(gpu_count=0) and a C(reason) saying what each source answered; the module fails only when
    O(required=true).
  - Reads only; nothing on the host changes.
options:
  source:
    description:
      - Where the facts come from.
      - V(auto) tries NVML first and falls back to C(nvidia-smi).
      - V(nvml) and V(nvidia-smi) use that source only.
    type: str
    choices: [auto, nvml, nvidia-smi]
    default: auto
  required:
    description:
      - Fail when no NVIDIA GPU is found, with the reason each source gave.
    type: bool
    default: false
requirements:
  - An NVIDIA driver on the host.
  - For O(source=nvml), the Python package C(nvidia-ml-py) for the interpreter Ansible uses on the host.
  - For O(source=nvidia-smi), C(nvidia-smi) on the PATH.
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  facts:
    support: full
"""

EXAMPLES = r"""
- name: Gather GPU facts, from NVML where the host has pynvml, else from nvidia-smi
  clusterproof.gpu.gpu_facts:

- name: Every GPU node must show its GPUs
  clusterproof.gpu.gpu_facts:
    required: true
  when: "'gpu_nodes' in group_names"

- name: Check that MIG is off on every GPU
  ansible.builtin.assert:
    that: ansible_facts.clusterproof_gpus.gpus | selectattr('mig_mode.current') | list | length == 0
    fail_msg: "MIG mode is enabled on {{ inventory_hostname }}; this profile expects whole GPUs"

- name: Read the facts from nvidia-smi only
  clusterproof.gpu.gpu_facts:
    source: nvidia-smi
"""

RETURN = r"""
ansible_facts:
  description: Facts added to the host.
  returned: always
  type: dict
  contains:
    clusterproof_gpus:
      description: The host's NVIDIA GPUs.
      returned: always
      type: dict
      contains:
        gpu_count:
          description: Number of GPUs found; 0 where none was found, with O(reason) saying why.
          type: int
          sample: 1
        driver_version:
          description: NVIDIA driver version; null where no driver answered.
          type: str
          sample: "580.159.04"
        cuda_version:
          description: Newest CUDA version the driver supports.
          type: str
          sample: "13.0"
        source:
          description: Where the facts came from, V(nvml) or V(nvidia-smi); null where neither answered.
          type: str
          sample: nvml
        reason:
          description: Why no GPU was found, one clause per source tried; null when GPUs were found.
          type: str
          sample: "NVML could not be loaded: NVML Shared Library Not Found; nvidia-smi not found on PATH"
        gpus:
          description: One entry per GPU, in NVML index order. Any field can be null where it is not reported.
          type: list
          elements: dict
          contains:
            index:
              description: NVML index of the GPU.
              type: int
            uuid:
              description: GPU UUID.
              type: str
              sample: GPU-00000000-0000-4000-8000-000000000001
            name:
              description: Model name.
              type: str
              sample: NVIDIA H100 80GB HBM3
            pci_bus_id:
              description: PCI bus id, domain first.
              type: str
              sample: "00000000:00:06.0"
            memory_total_mib:
              description: Framebuffer memory, MiB.
              type: int
              sample: 81559
            memory_used_mib:
              description: Framebuffer memory in use, MiB, leaving out what the driver reserves.
              type: int
              sample: 0
            driver_version:
              description: NVIDIA driver version.
              type: str
            cuda_version:
              description: Newest CUDA version the driver supports.
              type: str
            mig_mode:
              description: MIG mode now (V(current)) and after the next GPU reset (V(pending)), true when enabled.
              type: dict
              sample: {current: false, pending: false}
            ecc_mode:
              description: ECC mode now and after the next reset, true when enabled.
              type: dict
              sample: {current: true, pending: true}
            ecc_errors:
              description:
                - ECC error counts, V(volatile) since the driver loaded and V(aggregate) over the GPU's life,
                  each with V(corrected) and V(uncorrected) totals (SRAM and DRAM together).
              type: dict
              sample: {volatile: {corrected: 0, uncorrected: 0}, aggregate: {corrected: 0, uncorrected: 0}}
            temperature_c:
              description: GPU core temperature, degrees Celsius.
              type: int
              sample: 31
            power_draw_w:
              description: Power draw, watts.
              type: float
              sample: 68.96
            power_limit_w:
              description: Enforced power limit, watts.
              type: float
              sample: 700.0
            persistence_mode:
              description: Whether persistence mode is enabled.
              type: bool
            nvlink_links_total:
              description:
                - NVLink links the driver reports; null where it reports none (PCIe cards, and GPUs passed
                  through to a VM without their NVLink, like the recorded H100).
              type: int
            nvlink_links_active:
              description: NVLink links that are up; null where the driver reports no links.
              type: int
"""

import sys

from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.node.gpu_facts import gather

ARGUMENT_SPEC = {
    "source": {"type": "str", "choices": ["auto", "nvml", "nvidia-smi"], "default": "auto"},
    "required": {"type": "bool", "default": False},
}


def run(module):
    source = module.params["source"]
    facts = gather(prefer="nvml", fallback=True) if source == "auto" else gather(prefer=source, fallback=False)
    result = facts.to_dict()
    if module.params["required"] and facts.gpu_count == 0:
        raise runner.ModuleError(
            f"Expected at least one NVIDIA GPU (required=true, source={source}), found none: {facts.reason}. "
            "Check that the NVIDIA driver is loaded (nvidia-smi, lsmod | grep nvidia) and, for NVML, "
            f"that nvidia-ml-py is installed for {sys.executable}.",
            clusterproof_gpus=result,
        )
    return {"ansible_facts": {"clusterproof_gpus": result}}


def main() -> None:
    runner.run_module(ARGUMENT_SPEC, run, doing="gathering the GPU facts")


if __name__ == "__main__":
    main()
