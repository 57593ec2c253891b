"""Lookup: the pinned CNI manifest, from the CNI's Go module, fitted to the site's pod network."""

from __future__ import annotations

import yaml
from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.clusterproof.gpu.plugins.module_utils.install import kubernetes_cni

DOCUMENTATION = r"""
name: cni_manifest
short_description: The pinned CNI manifest of mode kubeadm, fitted to the site's pod network
description:
  - Takes the CNI's manifest from its Go module at the pinned version (C(go mod download) on the
    controller), or from O(manifest_file), and sets the site's pod network in it.
  - Returns the manifest's objects, one list, for kubernetes.core.k8s.
options:
  cni:
    description: The CNI (flannel).
    type: str
    required: true
  version:
    description:
      - Its version, the site's C(clusterproof_cni_version).
      - By default the pin, from C(plugins/module_utils/versions.py).
    type: str
    required: true
  pod_subnet:
    description: The site's pod network (kubeadm's podSubnet).
    type: str
    required: true
  cni_bin_dir:
    description:
      - Where the nodes' containerd looks for CNI plugins; the CNI installs its plugin there. Empty keeps
        the manifest's (/opt/cni/bin).
    type: str
    default: ""
  manifest_file:
    description: A copy of the manifest on the controller, used instead of the Go module (a controller without Go).
    type: str
    default: ""
"""


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        cni = self.get_option("cni")
        try:
            path = self.get_option("manifest_file") or kubernetes_cni.manifest_file(cni, self.get_option("version"))
            with open(path) as handle:
                documents = [document for document in yaml.safe_load_all(handle) if document]
            return [
                kubernetes_cni.fit_flannel(documents, self.get_option("pod_subnet"), self.get_option("cni_bin_dir"))
            ]
        except (OSError, RuntimeError, ValueError, yaml.YAMLError) as error:
            raise AnsibleLookupError("cannot read the %s manifest: %s" % (cni, error)) from error
