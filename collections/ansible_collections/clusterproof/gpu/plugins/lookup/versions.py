"""Lookup: a pinned component's version (or one of its attributes), from module_utils/versions.py."""

from __future__ import annotations

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.clusterproof.gpu.plugins.module_utils import versions

DOCUMENTATION = r"""
name: versions
short_description: A pinned component's version, from the collection's one versions file
description:
  - Returns, for each term, the version pinned in C(plugins/module_utils/versions.py), the one place
    every pinned component is written (Kubernetes, etcd, KAI scheduler, Kueue, helm, busybox, ...).
  - A term is a pin's name (C(kai_scheduler)) for its version, or C(<name>.<attribute>) for one of
    C(version), C(bare) (without the leading v), C(minor) (vX.Y), C(pin) (module@version), C(image)
    (repository:tag of an image pin), C(package_version) (<version>-<revision> of its packages),
    C(source), C(path).
  - The roles' defaults take their versions from here instead of writing them again.
options:
  _terms:
    description: Pin names, or C(<name>.<attribute>).
    required: true
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: KAI's images at the pinned version
  ansible.builtin.debug:
    msg: "ghcr.io/nvidia/kai-scheduler/scheduler:{{ lookup('clusterproof.gpu.versions', 'kai_scheduler') }}"

- name: The Kubernetes package repository of the pinned minor
  ansible.builtin.debug:
    msg: "https://pkgs.k8s.io/core:/stable:/{{ lookup('clusterproof.gpu.versions', 'kubernetes.minor') }}/deb/"
"""

RETURN = r"""
_raw:
  description: One string per term.
  type: list
  elements: str
"""


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        try:
            return [versions.value(str(term)) for term in terms]
        except ValueError as error:
            raise AnsibleLookupError(str(error)) from error
