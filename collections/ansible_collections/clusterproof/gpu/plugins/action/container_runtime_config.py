"""Action plugin: merge the NVIDIA runtime into a host's containerd or Docker config.

The merge runs on the controller (module_utils/install/runtime_config.py, with tomlkit from the pinned
controller requirements), so the GPU host needs no Python package beyond what Ansible needs: the
host's file is read with slurp and, when the merge changed it, written back through the copy action
(which brings mode, backup and check mode with it).
"""

from __future__ import annotations

import base64
import os
import shutil
import tempfile

from ansible import constants as C
from ansible.plugins.action import ActionBase

from ansible_collections.clusterproof.gpu.plugins.module_utils.install.runtime_config import (
    DEFAULT_BINARY,
    RuntimeConfigError,
    RuntimeEntry,
    merge,
)

DEFAULT_PATHS = {"containerd": "/etc/containerd/config.toml", "docker": "/etc/docker/daemon.json"}

ARGUMENT_SPEC = {
    "runtime": {"type": "str", "required": True, "choices": ["containerd", "docker"]},
    "path": {"type": "path"},
    "name": {"type": "str", "default": "nvidia"},
    "binary": {"type": "path", "default": DEFAULT_BINARY},
    "set_as_default": {"type": "bool", "default": False},
    "systemd_cgroup": {"type": "bool", "default": False},
    "state": {"type": "str", "default": "present", "choices": ["present", "absent"]},
    "mode": {"type": "raw"},
    "backup": {"type": "bool", "default": False},
}


class ActionModule(ActionBase):
    TRANSFERS_FILES = True
    # What run() checks the task's options against before _run() acts on them; the
    # containerd_registry_mirrors action, a subclass, has its own options and _run().
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        try:
            _, params = self.validate_argument_spec(argument_spec=self.ARGUMENT_SPEC)
            return self._run(params, result, task_vars)
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)

    def _run(self, params, result, task_vars):
        runtime = params["runtime"]
        path = params["path"] or DEFAULT_PATHS[runtime]
        entry = RuntimeEntry(
            name=params["name"],
            binary=params["binary"],
            set_as_default=params["set_as_default"],
            systemd_cgroup=params["systemd_cgroup"] and runtime == "containerd",
            present=params["state"] == "present",
        )

        existing, error = self._read(path, task_vars)
        if error:
            result.update(failed=True, msg="could not read %s on the host: %s" % (path, error))
            return result
        try:
            merged = merge(runtime, existing, entry)
        except RuntimeConfigError as failure:
            result.update(
                failed=True,
                msg="%s: %s. Nothing was changed; fix the file by hand or move it aside." % (path, failure),
            )
            return result

        result.update(merged.to_dict())
        result["path"] = path
        result["runtime"] = runtime
        for warning in merged.warnings:
            self._display.warning("%s: %s" % (path, warning))
        if self._task.diff and merged.changed:
            result["diff"] = {
                "before_header": path if existing is not None else "%s (absent)" % path,
                "after_header": path,
                "before": existing or "",
                "after": merged.text,
            }
        if not merged.changed or self._task.check_mode:
            return result

        written = self._write(path, merged.text, params, task_vars)
        if written.get("failed"):
            result.update(failed=True, msg="could not write %s: %s" % (path, written.get("msg")))
            return result
        if "backup_file" in written:
            result["backup_file"] = written["backup_file"]
        return result

    def _read(self, path, task_vars):
        """The file's text, ``None`` where it does not exist; or an error message."""
        stat = self._execute_module(
            module_name="ansible.legacy.stat",
            module_args={"path": path, "follow": True, "get_checksum": False},
            task_vars=task_vars,
        )
        if stat.get("failed"):
            return None, stat.get("msg")
        if not stat["stat"]["exists"]:
            return None, None
        if not stat["stat"].get("isreg", True):
            return None, "it is not a regular file"
        slurped = self._execute_module(
            module_name="ansible.legacy.slurp", module_args={"src": path}, task_vars=task_vars
        )
        if slurped.get("failed"):
            return None, slurped.get("msg")
        try:
            return base64.b64decode(slurped["content"]).decode("utf-8"), None
        except UnicodeDecodeError as error:
            return None, "it is not UTF-8 text (%s)" % error

    def _write(self, path, text, params, task_vars):
        """Write through the copy action: the parent directory is made where it is missing."""
        parent = os.path.dirname(path)
        made = self._execute_module(
            module_name="ansible.legacy.file",
            module_args={"path": parent, "state": "directory"},
            task_vars=task_vars,
        )
        if made.get("failed"):
            return made
        local_dir = tempfile.mkdtemp(dir=C.DEFAULT_LOCAL_TMP)
        try:
            source = os.path.join(local_dir, os.path.basename(path))
            with open(source, "w", encoding="utf-8") as handle:
                handle.write(text)
            copy_task = self._task.copy()
            copy_task.args = {"src": source, "dest": path, "backup": params["backup"]}
            if params["mode"] is not None:
                copy_task.args["mode"] = params["mode"]
            elif not self._exists_now(path, task_vars):
                copy_task.args["mode"] = "0644"
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

    def _exists_now(self, path, task_vars):
        stat = self._execute_module(
            module_name="ansible.legacy.stat",
            module_args={"path": path, "get_checksum": False},
            task_vars=task_vars,
        )
        return bool(stat.get("stat", {}).get("exists"))
