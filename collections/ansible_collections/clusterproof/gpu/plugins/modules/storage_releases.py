#!/usr/bin/python
"""Say which provisioner charts a cluster needs for its storage classes, with what values, from where."""

DOCUMENTATION = r"""
module: storage_releases
short_description: The provisioner chart releases the declared storage classes need, and where each chart is
version_added: 0.1.0
author:
  - clusterproof developers
description:
  - From the declared storage classes, lists the Helm releases a real cluster needs (one
    local-path-provisioner release for all local-path classes, one nfs-subdir-external-provisioner
    release per NFS class, one Trident operator) with the values clusterproof gives each; the
    charts never create StorageClasses (C(clusterproof.gpu.storage_classes) does).
  - Finds each chart inside its project's Go module at the pinned version (C(go mod download)),
    unless O(charts) gives a reference for it (a chart repository's C(repo/chart), a path or a URL).
  - For local-path, also gives the helper pod template to write into the chart's ConfigMap (the chart has
    no value for it; clusterproof's keeps the helper pods off simulated nodes) and its digest, which the
    provisioner's pod template carries so that a new template restarts it.
  - Also names the variables the Trident backends take their credentials from.
  - Changes nothing (the Go module cache aside); C(changed) is always false.
extends_documentation_fragment:
  - clusterproof.gpu.storage_classes
options:
  charts:
    description:
      - A chart reference per provisioner (C(local-path), C(nfs), C(trident)) to use instead of the Go module's.
    type: dict
    default: {}
  namespaces:
    description: Release namespace per provisioner; by default C(local-path-storage), C(nfs-provisioner), C(trident).
    type: dict
    default: {}
  helper_image:
    description:
      - Image of local-path's helper pods.
      - Left out, the pinned busybox, from C(plugins/module_utils/versions.py).
    type: str
"""

EXAMPLES = r"""
- name: Find the provisioner charts and their values
  clusterproof.gpu.storage_releases:
    classes: "{{ clusterproof_site.storage_classes }}"
  register: storage_plan
"""

RETURN = r"""
releases:
  description:
    - One entry per release (C(provisioner), C(name), C(namespace), C(chart_ref), C(values)).
    - local-path's also has C(configmap) (the chart's ConfigMap), C(helper_pod) (the helper pod template as
      YAML text, for the ConfigMap's C(helperPod.yaml)), C(helper_pod_digest) (its SHA-256) and
      C(digest_annotation) (the provisioner pod template's annotation that carries the digest).
  returned: always
  type: list
  elements: dict
credential_variables:
  description: Names of the variables holding the Trident backends' credentials.
  returned: always
  type: list
  elements: str
"""

import hashlib

import yaml

from ansible_collections.clusterproof.gpu.plugins.module_utils import versions
from ansible_collections.clusterproof.gpu.plugins.module_utils.install import chart_source, storage
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner

ARGUMENT_SPEC = {
    "charts": {"type": "dict", "default": {}},
    "namespaces": {"type": "dict", "default": {}},
    # Left out: the pinned busybox.
    "helper_image": {"type": "str"},
}


def _chart_ref(kind, charts, releases):
    """The chart the inventory gives for ``kind``, or the one inside its pinned Go module."""
    if charts.get(kind):
        return charts[kind]
    try:
        return str(chart_source.chart_in_module(storage.CHART_SOURCES[kind]))
    except chart_source.ChartSourceError as error:
        raise runner.ModuleError(
            "%s; give the %s chart as a reference instead (storage_classes_charts.%s: a chart repository's "
            "repo/chart, a path or a URL)" % (error, kind, kind),
            releases=releases,
        ) from error


def run(module):
    params = module.params
    for argument in ("charts", "namespaces"):
        unknown = sorted(set(params[argument]) - set(storage.PROVISIONERS))
        if unknown:
            raise runner.ModuleError(
                "%s: expected keys among %s, found %s" % (argument, ", ".join(storage.PROVISIONERS), unknown[0])
            )
    classes = storage.classes_argument(params["classes"])
    helper_image = params["helper_image"] or versions.BUSYBOX.image
    releases = storage.releases(classes, helper_image, params["namespaces"])
    for release in releases:
        release["chart_ref"] = _chart_ref(release["provisioner"], params["charts"], releases)
        if "helper_pod" in release:
            text = yaml.safe_dump(release["helper_pod"], sort_keys=False)
            release.update(
                helper_pod=text,
                helper_pod_digest=hashlib.sha256(text.encode()).hexdigest(),
                configmap=storage.LOCAL_PATH_CONFIGMAP,
                digest_annotation=storage.HELPER_POD_DIGEST_ANNOTATION,
            )
    return {"releases": releases, "credential_variables": storage.credential_variables(classes)}


def main():
    runner.run_module(
        runner.argument_spec(runner.STORAGE_CLASSES_ARG_SPEC, ARGUMENT_SPEC),
        run,
        doing="finding the storage charts",
        expected=(storage.ClassesArgumentError,),
    )


if __name__ == "__main__":
    main()
