#!/usr/bin/python
"""Make the inventory's storage classes exist, exactly one of them the default."""

DOCUMENTATION = r"""
module: storage_classes
short_description: Make the inventory's StorageClasses (and Trident backends) exist, one of them the default
version_added: 0.1.0
author:
  - clusterproof developers
description:
  - Applies one StorageClass per declared class, with the default-class annotation C(true) on the
    one the inventory marks default and C(false) on the others; any other class of the cluster
    that claims to be the default is set to C(false), so that exactly one default remains.
  - For Trident classes, applies a Secret with the backend's credentials and a
    C(TridentBackendConfig) per backend in the Trident namespace (the operator's chart, installed
    by the storage_classes role, must be in place).
  - With O(mode=sandbox), also runs rancher's local-path-provisioner as a local process of the
    sandbox (its namespace, service account and ConfigMap, its config and helper pod template in
    the sandbox's state directory); on the sandbox only C(local-path) classes can be provisioned.
  - Provisioners themselves are installed from their charts by the role on a real cluster, not here.
  - Re-running with nothing changed changes nothing.
extends_documentation_fragment:
  - clusterproof.gpu.kube_auth
  - clusterproof.gpu.storage_classes
options:
  mode:
    description: C(sandbox) also runs local-path-provisioner on the sandbox; C(cluster) only applies objects.
    type: str
    choices: [sandbox, cluster]
    default: cluster
  credentials:
    description:
      - The Trident backends' credentials, by the name of the variable each backend names
        (C(credentials)), each C({username, password}). Needed for Trident classes only.
    type: dict
    default: {}
  state_dir:
    description: The sandbox's state directory; required with O(mode=sandbox).
    type: path
  bin_dir:
    description: Directory holding C(local-path-provisioner) from the sandbox build; required with O(mode=sandbox).
    type: path
  helper_image:
    description:
      - Image of local-path's helper pods (they run nothing on the sandbox).
      - Left out, the pinned busybox, from C(plugins/module_utils/versions.py).
    type: str
  trident_namespace:
    description: Namespace of the Trident operator and of its backends.
    type: str
    default: trident
  timeout:
    description: Seconds to wait for the provisioner process.
    type: int
    default: 60
"""

EXAMPLES = r"""
- name: Make the storage classes exist on the sandbox
  clusterproof.gpu.storage_classes:
    mode: sandbox
    classes: "{{ clusterproof_site.storage_classes }}"
    kubeconfig: "{{ clusterproof_active_kubeconfig }}"
    state_dir: "{{ clusterproof_sandbox_dir }}"
    bin_dir: "{{ sandbox_binaries.bin_dir }}"
"""

RETURN = r"""
applied:
  description: Objects created or changed (kind/name).
  returned: always
  type: list
  elements: str
undefaulted:
  description: Classes not declared default that claimed to be, now annotated not default.
  returned: always
  type: list
  elements: str
started:
  description: Processes started on the sandbox by this run.
  returned: always
  type: list
  elements: str
default_class:
  description: The default class's name (empty when no class is declared).
  returned: always
  type: str
"""

from pathlib import Path

from ansible_collections.clusterproof.gpu.plugins.module_utils import versions
from ansible_collections.clusterproof.gpu.plugins.module_utils.install import storage
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import runner
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import install, local_path
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox.control_plane import Layout, SandboxError


def _declared(params):
    """The declared classes and the objects they need, or why not."""
    classes = storage.classes_argument(params["classes"])
    if params["mode"] == "sandbox":
        others = sorted(cls.name for cls in classes if cls.provisioner != "local-path")
        if others:
            raise runner.ModuleError(
                "the sandbox provisions local-path classes only; these need a real cluster: %s" % ", ".join(others)
            )
    wanted = []
    for cls in classes:
        if cls.provisioner == "trident":
            try:
                wanted += storage.trident_backend_objects(cls, params["credentials"], params["trident_namespace"])
            except ValueError as error:
                raise runner.ModuleError(str(error)) from error
    return classes, wanted + [storage.storage_class_manifest(cls) for cls in classes]


def _apply(step, manifest):
    try:
        step.apply([manifest])
    except kube.ApiException as error:
        if manifest["kind"] != "StorageClass" or error.status != 422:
            raise
        # A class's provisioner, parameters, reclaim policy and binding mode are fixed once it
        # exists; only the operator can decide to replace it.
        fixed = {key: manifest.get(key) for key in ("provisioner", "reclaimPolicy", "volumeBindingMode")}
        raise runner.ModuleError(
            "StorageClass %s exists with settings that cannot change in place (provisioner, parameters, "
            "reclaimPolicy, volumeBindingMode); the inventory asks for %s. Delete the class (its volumes stay) "
            "and run again. The API server said: %s" % (manifest["metadata"]["name"], fixed, error.body or error.reason)
        ) from error


def _undefault_others(applier, declared):
    """Set the default annotation to false on every class the inventory does not declare."""
    resource = applier.dynamic.resources.get(api_version="storage.k8s.io/v1", kind="StorageClass")
    undefaulted = []
    for item in resource.get().items:
        name = item.metadata.name
        annotations = dict(item.metadata.annotations or {})
        if name in declared or annotations.get(storage.DEFAULT_CLASS_ANNOTATION) != "true":
            continue
        undefaulted.append(name)
        if not applier.check_mode:
            patch = {"metadata": {"annotations": {storage.DEFAULT_CLASS_ANNOTATION: "false"}}}
            resource.patch(name=name, body=patch, content_type="application/merge-patch+json")
    return undefaulted


def run(module):
    params = module.params
    classes, wanted = _declared(params)
    default = storage.default_class(classes)
    started = []
    if params["mode"] == "sandbox":
        layout = Layout(Path(params["state_dir"]))
        step = install.InstallStep.on(layout, module.check_mode, params["kubeconfig"], params["context"])
        helper_image = params["helper_image"] or versions.BUSYBOX.image
        local_path.install(step, classes, Path(params["bin_dir"]), helper_image, params["timeout"])
        started = step.started
    else:
        # On a cluster the provisioners come from their charts: only the objects are clusterproof's.
        step = kube.Changes.connect(params["kubeconfig"], params["context"], module.check_mode)
    for manifest in wanted:
        _apply(step, manifest)
    undefaulted = _undefault_others(step.applier, {cls.name for cls in classes}) if default else []
    return {
        "changed": bool(step.applied or started or undefaulted),
        "applied": step.applied,
        "undefaulted": undefaulted,
        "started": started,
        "default_class": default.name if default else "",
    }


def main():
    runner.run_cluster_module(
        runner.STORAGE_CLASSES_ARG_SPEC,
        {
            "mode": {"type": "str", "choices": ["sandbox", "cluster"], "default": "cluster"},
            "credentials": {"type": "dict", "default": {}, "no_log": True},
            "state_dir": {"type": "path"},
            "bin_dir": {"type": "path"},
            # Left out: the pinned busybox.
            "helper_image": {"type": "str"},
            "trident_namespace": {"type": "str", "default": storage.TRIDENT_NAMESPACE},
            "timeout": {"type": "int", "default": 60},
        },
        work=run,
        doing="making the storage classes",
        expected=(SandboxError, OSError, storage.ClassesArgumentError),
        required_if=[("mode", "sandbox", ("state_dir", "bin_dir"))],
    )


if __name__ == "__main__":
    main()
