"""Action plugin: pull a host's images through the site's registry mirror (containerd hosts.toml).

Writes ``<certs_dir>/<registry>/hosts.toml`` for each upstream registry (the text comes from
module_utils/bundle/contents.py) and points containerd's CRI plugin at ``certs_dir``
(module_utils/install/runtime_config.py, merged on the controller as the container_runtime_config
action does). Files go through the copy action, which brings check mode, diff and backups.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from ansible import constants as C

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
    TRANSFERS_FILES = True

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(RuntimeConfig, self).run(tmp, task_vars)
        try:
            _, params = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
            return self._mirrors(params, result, task_vars)
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)

    def _mirrors(self, params, result, task_vars):
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
            written = self._put(destination, text, params, task_vars)
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

    def _put(self, path, text, params, task_vars):
        """Write ``text`` to ``path`` on the host through the copy action (its parent made first)."""
        made = self._execute_module(
            module_name="ansible.legacy.file",
            module_args={"path": str(Path(path).parent), "state": "directory", "mode": "0755"},
            task_vars=task_vars,
        )
        if made.get("failed"):
            return made
        local_dir = tempfile.mkdtemp(dir=C.DEFAULT_LOCAL_TMP)
        try:
            source = Path(local_dir) / Path(path).name
            source.write_text(text, encoding="utf-8")
            copy_task = self._task.copy()
            copy_task.args = {"src": str(source), "dest": path, "mode": "0644", "backup": params["backup"]}
            copy_action = self._shared_loader_obj.action_loader.get(
                "ansible.legacy.copy",
                task=copy_task,
                connection=self._connection,
                play_context=self._play_context,
                loader=self._loader,
                templar=self._templar,
                shared_loader_obj=self._shared_loader_obj,
            )
            return copy_action.run(task_vars=task_vars)
        finally:
            shutil.rmtree(local_dir, ignore_errors=True)
