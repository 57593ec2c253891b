"""Merge the NVIDIA container runtime into containerd's config.toml and Docker's daemon.json.

Pure functions: text in, text out. The runtime entry is merged into whatever the file already
holds, never replacing it: every other table, key and comment is kept as it was (TOML through
tomlkit, which keeps the file's layout; JSON keeps the keys' order). An already merged file comes
back byte for byte, so the caller can say ``changed`` honestly and a second run changes nothing.

What is written is what ``nvidia-ctk runtime configure`` writes:

- containerd: a runtime ``<name>`` of type ``io.containerd.runc.v2`` whose ``options.BinaryName``
  is the NVIDIA runtime, with the ``runc`` runtime's other options (``SystemdCgroup`` above all)
  copied in where the entry lacks them, so containers started through it land in the same cgroup
  hierarchy as the rest; with ``set_as_default``, ``default_runtime_name = "<name>"``.
- Docker: ``runtimes.<name>.path`` and, with ``set_as_default``, ``default-runtime``.

The containerd table that holds the runtimes depends on the config's ``version``: 1 (no version
key), 2 (containerd 1.x) and 3 (containerd 2.0 to 2.2); 4 (containerd 2.3) is taken to keep the
runtime tables of 3, with a warning. A file that does not exist yet is written as version 2, which
every containerd from 1.6 on reads.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

try:
    import tomlkit
    from tomlkit.items import Table

    TOMLKIT_IMPORT_ERROR: str | None = None
except ImportError as error:  # the action plugin turns this into a clear failure
    TOMLKIT_IMPORT_ERROR = str(error)

RUNC_V2 = "io.containerd.runc.v2"
DEFAULT_BINARY = "/usr/bin/nvidia-container-runtime"
# Where the runtimes table lives, per containerd config version.
CONTAINERD_CRI_PATHS: dict[int, tuple[str, ...]] = {
    1: ("plugins", "cri", "containerd"),
    2: ("plugins", "io.containerd.grpc.v1.cri", "containerd"),
    3: ("plugins", "io.containerd.cri.v1.runtime", "containerd"),
    4: ("plugins", "io.containerd.cri.v1.runtime", "containerd"),
}
NEW_FILE_VERSION = 2


class RuntimeConfigError(ValueError):
    """The existing config cannot be merged into (unparsable, or of a shape this module does not know)."""


@dataclass(frozen=True)
class RuntimeEntry:
    """The runtime to register: its name, the binary it runs, and whether it becomes the default."""

    name: str = "nvidia"
    binary: str = DEFAULT_BINARY
    set_as_default: bool = False
    present: bool = True
    # containerd: runc (and so the nvidia runtime, which copies runc's options) in systemd's cgroup
    # hierarchy, as a kubelet with the systemd cgroup driver (kubeadm's default) needs.
    systemd_cgroup: bool = False


@dataclass
class MergeResult:
    """The merged text, and what the file declared before the merge and declares after it."""

    text: str
    changed: bool
    runtimes: list[str]
    default_runtime: str
    runtimes_before: list[str]
    default_runtime_before: str
    config_version: int | None = None
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Every field but the text, which the caller writes to the file."""
        return {name: value for name, value in asdict(self).items() if name != "text"}


# containerd ---------------------------------------------------------------------------------------


def containerd_config_version(document: dict[str, Any], is_empty: bool) -> int:
    """The config's schema version: its ``version`` key; 1 when a non-empty file has none."""
    version = document.get("version")
    if version is None:
        return NEW_FILE_VERSION if is_empty else 1
    if isinstance(version, bool) or not isinstance(version, int):
        raise RuntimeConfigError("containerd config: 'version' must be an integer, found %r" % (version,))
    if version not in CONTAINERD_CRI_PATHS:
        raise RuntimeConfigError(
            "containerd config version %d is not one this module knows (%s); "
            "check containerd's documentation for where that version keeps the CRI runtimes"
            % (version, ", ".join(str(known) for known in sorted(CONTAINERD_CRI_PATHS)))
        )
    return version


def _parse_containerd(existing: str | None) -> tuple[Any, bool, int]:
    """The config as a tomlkit document, whether it is empty, and its version."""
    if TOMLKIT_IMPORT_ERROR is not None:
        raise RuntimeConfigError("the Python package tomlkit is needed on the controller: %s" % TOMLKIT_IMPORT_ERROR)
    try:
        document = tomlkit.parse(existing or "")
    except Exception as error:  # tomlkit raises several ParseError subclasses, each with line and column
        raise RuntimeConfigError("containerd config is not valid TOML: %s" % error) from error
    is_empty = not document.unwrap()
    return document, is_empty, containerd_config_version(document.unwrap(), is_empty)


def _dump_containerd(document: Any, existing: str | None, created: list[tuple[int, Table]], is_empty: bool) -> str:
    """The document as text, the tables the merge made indented as the file indents its own."""
    step = _indent_step(existing or "")
    for depth, table in created:
        _reindent(table, step * depth, step)
    if created and not is_empty:
        # A blank line sets what the merge added apart from the tables around it.
        first = next(table for _, table in created if not table.is_super_table())
        first.trivia.indent = "\n" + first.trivia.indent
    text = tomlkit.dumps(document)
    if existing is None and not text.endswith("\n"):
        text += "\n"
    return text


def merge_containerd(existing: str | None, entry: RuntimeEntry) -> MergeResult:
    """Merge ``entry`` into the text of a containerd config.toml (``None``: the file does not exist)."""
    document, is_empty, version = _parse_containerd(existing)
    before = containerd_runtimes(existing or "")
    warnings = []
    if version == 4:
        warnings.append(
            "containerd config version 4: the nvidia runtime was written where version 3 keeps the CRI "
            "runtimes (plugins.'io.containerd.cri.v1.runtime'); check it with 'containerd config dump'"
        )
    if is_empty and "version" not in document:
        document.add("version", NEW_FILE_VERSION)

    cri_path = CONTAINERD_CRI_PATHS[version]
    created: list[tuple[int, Table]] = []
    if entry.systemd_cgroup:
        containerd = _ensure_table(document, cri_path, created)
        runtimes = _ensure_table(containerd, ("runtimes",), created, depth=len(cri_path))
        _systemd_cgroup(runtimes, "runc", created, depth=len(cri_path) + 1)
    if entry.present:
        containerd = _ensure_table(document, cri_path, created)
        runtimes = _ensure_table(containerd, ("runtimes",), created, depth=len(cri_path))
        _merge_containerd_runtime(runtimes, entry, created, depth=len(cri_path) + 1)
        if entry.systemd_cgroup:
            _systemd_cgroup(runtimes, entry.name, created, depth=len(cri_path) + 1)
        if entry.set_as_default:
            _set(containerd, "default_runtime_name", entry.name)
        elif containerd.get("default_runtime_name") == entry.name:
            del containerd["default_runtime_name"]
    else:
        containerd = _find_table(document, cri_path)
        if containerd is not None:
            runtimes = containerd.get("runtimes")
            if isinstance(runtimes, dict) and entry.name in runtimes:
                del runtimes[entry.name]
            if containerd.get("default_runtime_name") == entry.name:
                del containerd["default_runtime_name"]

    text = _dump_containerd(document, existing, created, is_empty)
    declared = containerd_runtimes(text)
    return MergeResult(
        text=text,
        changed=existing is None or text != existing,
        runtimes=declared["runtimes"],
        default_runtime=declared["default_runtime"],
        runtimes_before=before["runtimes"],
        default_runtime_before=before["default_runtime"],
        config_version=version,
        warnings=warnings,
    )


# Where containerd's CRI looks for CNI plugins when its config does not say: upstream's default.
# Debian's and Ubuntu's packages say /usr/lib/cni, where containernetworking-plugins installs.
CONTAINERD_DEFAULT_CNI_BIN_DIR = "/opt/cni/bin"


def containerd_cni_bin_dir(text: str) -> str:
    """The directory a containerd config has its CRI look in for CNI plugins (the CNI's own plugin must
    be installed there). Versions 1 and 2 keep it under the CRI plugin's ``cni`` table; version 3 under
    ``io.containerd.cri.v1.runtime``'s, as ``bin_dirs`` (a list: its first entry) or ``bin_dir``."""
    document, _is_empty, version = _parse_containerd(text)
    node = _find_table(document.unwrap(), CONTAINERD_CRI_PATHS[version][:-1] + ("cni",))
    if not isinstance(node, dict):
        return CONTAINERD_DEFAULT_CNI_BIN_DIR
    bin_dirs = node.get("bin_dirs")
    if isinstance(bin_dirs, list) and bin_dirs and isinstance(bin_dirs[0], str):
        return bin_dirs[0]
    bin_dir = node.get("bin_dir")
    return bin_dir if isinstance(bin_dir, str) and bin_dir else CONTAINERD_DEFAULT_CNI_BIN_DIR


def containerd_runtimes(text: str) -> dict[str, Any]:
    """The CRI runtimes a containerd config declares, and its default runtime (``runc`` when unset)."""
    if TOMLKIT_IMPORT_ERROR is not None:
        raise RuntimeConfigError("the Python package tomlkit is needed on the controller: %s" % TOMLKIT_IMPORT_ERROR)
    plain = tomlkit.parse(text).unwrap()
    version = containerd_config_version(plain, not plain)
    node: Any = plain
    for key in CONTAINERD_CRI_PATHS[version]:
        node = node.get(key, {}) if isinstance(node, dict) else {}
    if not isinstance(node, dict):
        node = {}
    runtimes = node.get("runtimes", {})
    return {
        "runtimes": sorted(runtimes) if isinstance(runtimes, dict) else [],
        "default_runtime": node.get("default_runtime_name") or "runc",
        "config_version": version,
    }


def _systemd_cgroup(runtimes: Table, name: str, created: list, depth: int) -> None:
    """``runtimes.<name>`` (a runc v2 runtime, made where missing) with ``options.SystemdCgroup = true``."""
    runtime = _ensure_table(runtimes, (name,), created, depth=depth)
    if "runtime_type" not in runtime:
        runtime["runtime_type"] = RUNC_V2
    options = _ensure_table(runtime, ("options",), created, depth=depth + 1)
    _set(options, "SystemdCgroup", True)


def _merge_containerd_runtime(runtimes: Table, entry: RuntimeEntry, created: list, depth: int) -> None:
    runc_options = _plain(runtimes.get("runc", {})).get("options", {})
    runtime = runtimes.get(entry.name)
    if runtime is None:
        runtime = tomlkit.table()
        runtime.add("runtime_type", RUNC_V2)
        options = tomlkit.table()
        for key, value in runc_options.items():
            if key != "BinaryName":
                options.add(key, copy.deepcopy(value))
        options.add("BinaryName", entry.binary)
        runtime.add("options", options)
        runtimes[entry.name] = runtime
        created.append((depth, runtimes[entry.name]))
        return
    if not isinstance(runtime, dict):
        raise RuntimeConfigError("containerd config: runtimes.%s is not a table" % entry.name)
    _set(runtime, "runtime_type", RUNC_V2)
    options = runtime.get("options")
    if options is None:
        options = tomlkit.table()
        runtime.add("options", options)
        created.append((depth + 1, runtime["options"]))
    elif not isinstance(options, dict):
        raise RuntimeConfigError("containerd config: runtimes.%s.options is not a table" % entry.name)
    for key, value in runc_options.items():
        if key != "BinaryName" and key not in options:
            options[key] = copy.deepcopy(value)
    _set(options, "BinaryName", entry.binary)


def _ensure_table(parent: Any, path: tuple[str, ...], created: list, depth: int = 0) -> Any:
    """The table at ``path`` under ``parent``, made where missing (recorded in ``created`` with its depth)."""
    node = parent
    for offset, key in enumerate(path):
        child = node.get(key)
        if child is None:
            # Intermediate tables that hold only tables print no header of their own.
            node.add(key, tomlkit.table(is_super_table=offset < len(path) - 1 or key == "runtimes"))
            child = node[key]
            if not any(table is child for _, table in created):
                created.append((depth + offset, child))
        elif not isinstance(child, dict):
            raise RuntimeConfigError("containerd config: %s is not a table" % ".".join(path[: offset + 1]))
        node = child
    return node


def _find_table(parent: Any, path: tuple[str, ...]) -> Any:
    node = parent
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
        if node is None:
            return None
    return node


def _set(table: Any, key: str, value: Any) -> None:
    """Assign only when the value differs, so an unchanged key keeps its formatting and comments."""
    if key in table and _plain(table[key]) == value:
        return
    table[key] = value


def _plain(value: Any) -> Any:
    return value.unwrap() if hasattr(value, "unwrap") else value


_KEY = r"(?:\"[^\"]*\"|'[^']*'|[A-Za-z0-9_-]+)"
_HEADER = re.compile(r"^([ \t]+)\[\[?\s*(%s(?:\s*\.\s*%s)*)" % (_KEY, _KEY))
_KEY_PART = re.compile(_KEY)


def _indent_step(text: str) -> str:
    """The file's indentation per table level, as containerd's own dumps and Kubespray indent
    (a table of N dotted keys indented N-1 steps); empty for a file that does not indent."""
    for line in text.splitlines():
        match = _HEADER.match(line)
        if match:
            levels = len(_KEY_PART.findall(match.group(2))) - 1
            if levels > 0 and len(match.group(1)) % levels == 0:
                return match.group(1)[: len(match.group(1)) // levels]
    return ""


def _reindent(table: Table, header: str, step: str) -> None:
    """Indent a table made by the merge, its keys one step in, its subtables one level down."""
    table.trivia.indent = header
    for key, item in table.value.body:
        if key is None:
            continue
        if isinstance(item, Table):
            _reindent(item, header + step, step)
        else:
            item.trivia.indent = header + step


# containerd's registry hosts (the site's mirror) -------------------------------------------------

# Where the CRI plugin's registry table lives, per containerd config version (version 1 predates
# hosts.toml directories).
CONTAINERD_REGISTRY_PATHS: dict[int, tuple[str, ...]] = {
    2: ("plugins", "io.containerd.grpc.v1.cri", "registry"),
    3: ("plugins", "io.containerd.cri.v1.images", "registry"),
    4: ("plugins", "io.containerd.cri.v1.images", "registry"),
}
# Where the CRI plugin's own settings (restrict_oom_score_adj, ...) live, per config version.
CONTAINERD_CRI_SETTINGS_PATHS: dict[int, tuple[str, ...]] = {
    2: ("plugins", "io.containerd.grpc.v1.cri"),
    3: ("plugins", "io.containerd.cri.v1.runtime"),
    4: ("plugins", "io.containerd.cri.v1.runtime"),
}


@dataclass
class RegistryMergeResult:
    """The merged text, and the registry hosts directory before and after."""

    text: str
    changed: bool
    config_path: str
    config_path_before: str | None
    config_version: int


def merge_containerd_registry(
    existing: str | None, config_path: str, cri_settings: dict[str, Any] | None = None
) -> RegistryMergeResult:
    """Point containerd's CRI plugin at a directory of hosts.toml files (``registry.config_path``),
    where the site's registry mirrors are declared, and set ``cri_settings`` (scalar keys of the CRI
    plugin the site needs); every other table, key and comment is kept."""
    document, is_empty, version = _parse_containerd(existing)
    if version not in CONTAINERD_REGISTRY_PATHS:
        raise RuntimeConfigError(
            "containerd config version %d has no registry config_path (hosts.toml directories came with "
            "version 2, containerd 1.5); move the file to version 2 ('containerd config migrate')" % version
        )
    if is_empty and "version" not in document:
        document.add("version", NEW_FILE_VERSION)
    path = CONTAINERD_REGISTRY_PATHS[version]
    found = _find_table(document, path)
    before = _plain(found.get("config_path")) if isinstance(found, dict) else None
    created: list[tuple[int, Table]] = []
    for key, value in sorted((cri_settings or {}).items()):
        if isinstance(value, (dict, list)):
            raise RuntimeConfigError("containerd CRI setting %s: expected a scalar value, found %r" % (key, value))
        _set(_ensure_table(document, CONTAINERD_CRI_SETTINGS_PATHS[version], created), key, value)
    registry = _ensure_table(document, path, created)
    _set(registry, "config_path", config_path)
    text = _dump_containerd(document, existing, created, is_empty)
    return RegistryMergeResult(
        text=text,
        changed=existing is None or text != existing,
        config_path=config_path,
        config_path_before=before,
        config_version=version,
    )


# Docker -------------------------------------------------------------------------------------------


def merge_docker(existing: str | None, entry: RuntimeEntry) -> MergeResult:
    """Merge ``entry`` into the text of a Docker daemon.json (``None``: the file does not exist)."""
    if existing is None or not existing.strip():
        data: dict[str, Any] = {}
    else:
        try:
            data = json.loads(existing)
        except json.JSONDecodeError as error:
            raise RuntimeConfigError("Docker daemon config is not valid JSON: %s" % error) from error
        if not isinstance(data, dict):
            raise RuntimeConfigError("Docker daemon config must be a JSON object, found %s" % type(data).__name__)
    before = copy.deepcopy(data)
    before_runtimes = before.get("runtimes")

    runtimes = data.get("runtimes")
    if runtimes is not None and not isinstance(runtimes, dict):
        raise RuntimeConfigError("Docker daemon config: 'runtimes' must be an object")
    if entry.present:
        runtimes = data.setdefault("runtimes", {})
        runtime = runtimes.get(entry.name)
        if not isinstance(runtime, dict):
            runtime = {}
        # Keep what else the entry says (runtimeArgs, or the "args" that nvidia-ctk writes).
        runtimes[entry.name] = {**runtime, "path": entry.binary}
        if entry.set_as_default:
            data["default-runtime"] = entry.name
        elif data.get("default-runtime") == entry.name:
            del data["default-runtime"]
    else:
        if runtimes is not None:
            runtimes.pop(entry.name, None)
            if not runtimes:
                del data["runtimes"]
        if data.get("default-runtime") == entry.name:
            del data["default-runtime"]

    if existing is not None and data == before:
        text = existing
    else:
        text = json.dumps(data, indent=2) + "\n"
    return MergeResult(
        text=text,
        changed=existing is None or text != existing,
        runtimes=sorted(data.get("runtimes", {})),
        default_runtime=data.get("default-runtime") or "runc",
        runtimes_before=sorted(before_runtimes) if isinstance(before_runtimes, dict) else [],
        default_runtime_before=before.get("default-runtime") or "runc",
    )


def merge(runtime: str, existing: str | None, entry: RuntimeEntry) -> MergeResult:
    """Merge ``entry`` into the config of ``runtime`` (``containerd`` or ``docker``)."""
    if runtime == "containerd":
        return merge_containerd(existing, entry)
    if runtime == "docker":
        return merge_docker(existing, entry)
    raise RuntimeConfigError("unknown container runtime %r: expected containerd or docker" % runtime)
