"""Action plugin: pull a host's images through the site's registry mirror (containerd hosts.toml).

Writes ``<certs_dir>/<registry>/hosts.toml`` for each upstream registry (the text comes from
module_utils/bundle/contents.py) and points containerd's CRI plugin at ``certs_dir``
(module_utils/install/runtime_config.py, merged on the controller as the container_runtime_config
action does). Files go through that action's copy step, which brings check mode, diff and backups.
"""

from __future__ import annotations

from pathlib import Path

from ansible_collections.clusterproof.gpu.plugins.action.container_runtime_config import ActionModule as RuntimeConfig
from ansible_collections.clusterproof.gpu.plugins.module_utils.bundle import contents
from ansible_collections.clusterproof.gpu.plugins.module_utils.install.runtime_config import (
    RuntimeConfigError,
    merge_containerd_registry,
)

ARGUMENT_SPEC = {
    "mirror": {"type": "str", "required": True},
    "registries": {"type": "list", "elements": "str", "default": list(contents.MIRRORED_REGISTRIES)},
    "insecure": {"type": "bool", "default": False},
    "certs_dir": {"type": "path", "default": "/etc/containerd/certs.d"},
    "path": {"type": "path", "default": "/etc/containerd/config.toml"},
    "cri_settings": {"type": "dict", "default": {}},
    "backup": {"type": "bool", "default": False},
}


class ActionModule(RuntimeConfig):
    """The container_runtime_config action's run (options checked, then _run) and its read and
    write steps, with options and a _run of its own."""

    ARGUMENT_SPEC = ARGUMENT_SPEC

    def _run(self, params, result, task_vars):
        mirror = params["mirror"]
        host, _, port = mirror.rpartition(":")
        if not host or not port.isdigit() or "/" in mirror:
            result.update(
                failed=True,
                msg="mirror: expected the registry as host:port, such as '10.213.0.1:5000'; found %r" % mirror,
            )
            return result
        path = params["path"]
        existing, error = self._read(path, task_vars)
        if error:
            result.update(failed=True, msg="could not read %s on the host: %s" % (path, error))
            return result
        try:
            merged = merge_containerd_registry(existing, params["certs_dir"], params["cri_settings"])
        except RuntimeConfigError as failure:
            result.update(failed=True, msg="%s: %s. Nothing was changed." % (path, failure))
            return result

        files = {path: merged.text}
        for registry in params["registries"]:
            hosts = contents.containerd_hosts_toml(registry, mirror, params["insecure"])
            files[str(Path(params["certs_dir"]) / registry / "hosts.toml")] = hosts
        changed_files = []
        diffs = []
        for destination, text in files.items():
            # The copy action the NVIDIA runtime's action writes through (parent made, mode, backup).
            written = self._write(destination, text, {"backup": params["backup"], "mode": "0644"}, task_vars)
            if written.get("failed"):
                result.update(failed=True, msg="could not write %s: %s" % (destination, written.get("msg")))
                return result
            if written.get("changed"):
                changed_files.append(destination)
                if "diff" in written:
                    diffs.extend(written["diff"] if isinstance(written["diff"], list) else [written["diff"]])
        result.update(
            changed=bool(changed_files),
            changed_files=changed_files,
            config_path=merged.config_path,
            config_path_before=merged.config_path_before,
            config_version=merged.config_version,
            registries=params["registries"],
            mirror=mirror,
        )
        if self._task.diff and diffs:
            result["diff"] = diffs
        return result
