#!/usr/bin/python
"""Make the inventory's storage classes exist, exactly one of them the default."""

DOCUMENTATION = r"""
module: storage_classes
short_description: Make the inventory's StorageClasses (and Trident backends) exist, one of them the default
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
version_added: 0.1.0
extends_documentation_fragment:
  - clusterproof.gpu.kube_auth
options:
  mode:
    description: C(sandbox) also runs local-path-provisioner on the sandbox; C(cluster) only applies objects.
    type: str
    choices: [sandbox, cluster]
    default: cluster
  classes:
    description: The declared classes, as C(clusterproof_site.storage_classes) holds them.
    type: list
    elements: dict
    required: true
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
    description: Image of local-path's helper pods (they run nothing on the sandbox).
    type: str
    default: busybox:1.36
  trident_namespace:
    description: Namespace of the Trident operator and of its backends.
    type: str
    default: trident
  timeout:
    description: Seconds to wait for the provisioner process.
    type: int
    default: 60
author:
  - clusterproof developers
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

import copy
from pathlib import Path

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterproof.gpu.plugins.module_utils.install import storage
from ansible_collections.clusterproof.gpu.plugins.module_utils.kube import client as kube
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import control_plane as sandbox
from ansible_collections.clusterproof.gpu.plugins.module_utils.sandbox import local_path as storage_sandbox


def _name(manifest):
    return "%s/%s" % (manifest["kind"], manifest["metadata"]["name"])


def main():
    argument_spec = copy.deepcopy(kube.AUTH_ARG_SPEC)
    argument_spec.update(
        mode={"type": "str", "choices": ["sandbox", "cluster"], "default": "cluster"},
        classes={"type": "list", "elements": "dict", "required": True},
        credentials={"type": "dict", "default": {}, "no_log": True},
        state_dir={"type": "path"},
        bin_dir={"type": "path"},
        helper_image={"type": "str", "default": "busybox:1.36"},
        trident_namespace={"type": "str", "default": storage.TRIDENT_NAMESPACE},
        timeout={"type": "int", "default": 60},
    )
    module = AnsibleModule(
        argument_spec=argument_spec,
        required_if=[("mode", "sandbox", ("state_dir", "bin_dir"))],
        supports_check_mode=True,
    )
    params = module.params
    result = {"changed": False, "applied": [], "undefaulted": [], "started": [], "default_class": ""}
    try:
        classes = storage.from_dicts(params["classes"])
    except TypeError as error:
        module.fail_json(msg="classes: expected clusterproof_site.storage_classes, found: %s" % error, **result)
    default = storage.default_class(classes)
    result["default_class"] = default.name if default else ""
    if params["mode"] == "sandbox":
        others = sorted(cls.name for cls in classes if cls.provisioner != "local-path")
        if others:
            module.fail_json(
                msg="the sandbox provisions local-path classes only; these need a real cluster: %s" % ", ".join(others),
                **result,
            )
    wanted = []
    for cls in classes:
        if cls.provisioner == "trident":
            try:
                wanted += storage.trident_backend_objects(cls, params["credentials"], params["trident_namespace"])
            except ValueError as error:
                module.fail_json(msg=str(error), **result)
    wanted += [storage.storage_class_manifest(cls) for cls in classes]

    kubeconfig = params["kubeconfig"]
    layout = None
    if params["mode"] == "sandbox":
        layout = sandbox.Layout(Path(params["state_dir"]))
        kubeconfig = kubeconfig or str(layout.kubeconfig)
        if not layout.kubeconfig.exists():
            module.fail_json(
                msg="no sandbox at %s: bring it up first (clusterproof.gpu.sandbox_cluster state=up)" % layout.root,
                **result,
            )
    try:
        applier = kube.Applier(kube.api_client(kubeconfig, params["context"]), check_mode=module.check_mode)
        if layout is not None:
            _run_local_path(module, applier, layout, classes, result)
        for manifest in wanted:
            try:
                changed = applier.apply(manifest)[0]
            except kube.ApiException as error:
                if manifest["kind"] == "StorageClass" and error.status == 422:
                    # A class's provisioner, parameters, reclaim policy and binding mode are fixed
                    # once it exists; only the operator can decide to replace it.
                    module.fail_json(
                        msg="StorageClass %s exists with settings that cannot change in place (provisioner, "
                        "parameters, reclaimPolicy, volumeBindingMode); the inventory asks for %s. Delete the "
                        "class (its volumes stay) and run again. The API server said: %s"
                        % (
                            manifest["metadata"]["name"],
                            {key: manifest.get(key) for key in ("provisioner", "reclaimPolicy", "volumeBindingMode")},
                            error.body or error.reason,
                        ),
                        **result,
                    )
                raise
            if changed:
                result["applied"].append(_name(manifest))
        declared = {cls.name for cls in classes}
        if default is not None:
            result["undefaulted"] = _undefault_others(applier, declared)
    except (sandbox.SandboxError, kube.KubeError, OSError) as error:
        module.fail_json(msg=str(error), **result)
    except kube.ApiException as error:
        module.fail_json(
            msg="the API server refused a request: %s %s %s" % (error.status, error.reason, error.body or ""), **result
        )
    result["changed"] = bool(result["applied"] or result["undefaulted"] or result["started"])
    module.exit_json(**result)


def _run_local_path(module, applier, layout, classes, result):
    contents = storage_sandbox.files(classes, module.params["helper_image"])
    for manifest in storage_sandbox.cluster_objects(contents):
        if applier.apply(manifest)[0]:
            result["applied"].append(_name(manifest))
    written = storage_sandbox.write_files(layout, contents, module.check_mode)
    result["applied"] += ["file %s" % path for path in written]
    process = storage_sandbox.component(layout, Path(module.params["bin_dir"]))
    running = sandbox.running_pid(layout, process.name, process.argv) is not None
    if module.check_mode:
        if not running or written:
            result["started"].append(process.name)
        return
    if running and written:
        # It reads its helper pod template only when it starts.
        sandbox.stop(layout, process.name)
    result["started"] = sandbox.run_components(layout, [process], module.params["timeout"])


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


if __name__ == "__main__":
    main()
