"""The inventory's files, checked to be UTF-8 before Ansible reads them.

Ansible reads a file that is not UTF-8 with its bad bytes escaped, and its YAML loader then fails
on them naming no file ("'utf-8' codec can't encode character '\\udce9'"). The entry point checks
every file of the inventory sources before the playbook starts, and the preamble's site_inventory
action again (for a run that did not come through the entry point); each refusal names the file,
the line, the byte's offset in the file and its value.

The files are those Ansible reads for a source: a file source itself; in a directory source, every
file but those Ansible ignores (hidden, backups, ``.md``, ``.retry``...); and beside either, the
``group_vars`` and ``host_vars`` files (``.yml``, ``.yaml``, ``.json`` or no extension, in folders
too). A source that is neither (a host list such as ``a,b,``, a missing path) is left to Ansible.

May import: the standard library. Reads the files of the sources it is given; writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

# What Ansible leaves out of a directory source (its REJECT_EXTS and INVENTORY_IGNORE_EXTS).
IGNORED_SUFFIXES = (".pyc", ".pyo", ".swp", ".bak", "~", ".rpm", ".md", ".txt", ".rst", ".orig", ".cfg", ".retry")
# Folders of a directory source that Ansible does not read as inventory sources.
NOT_SOURCES = ("group_vars", "host_vars", "vars_plugins")
VARS_DIRS = ("group_vars", "host_vars")
VARS_SUFFIXES = ("", ".yml", ".yaml", ".json")


def _source_files(directory: Path) -> Iterator[Path]:
    for path in sorted(directory.iterdir()):
        if path.name.startswith(".") or path.name in NOT_SOURCES or path.name.endswith(IGNORED_SUFFIXES):
            continue
        if path.is_dir():
            yield from _source_files(path)
        elif path.is_file():
            yield path


def _vars_files(directory: Path, top: bool = True) -> Iterator[Path]:
    if not directory.is_dir():
        return
    for path in sorted(directory.iterdir()):
        if path.name.startswith(".") or path.name.endswith("~"):
            continue
        if path.is_dir() and (top or not path.suffix):
            yield from _vars_files(path, top=False)
        elif path.is_file() and path.suffix in VARS_SUFFIXES:
            yield path


def inventory_files(source: Path) -> list[Path]:
    """The files Ansible reads for the inventory source ``source``."""
    if source.is_dir():
        found, base = list(_source_files(source)), source
    elif source.is_file():
        found, base = [source], source.parent
    else:
        return []
    for name in VARS_DIRS:
        found += _vars_files(base / name)
    return found


def not_utf8(text: bytes, name: str) -> str | None:
    """Where ``text`` (the bytes of the file ``name``) is not UTF-8: the line, the byte's offset in
    the file and its value; None when it is UTF-8."""
    try:
        text.decode("utf-8")
    except UnicodeDecodeError as error:
        line = text.count(b"\n", 0, error.start) + 1
        return "%s: line %d, byte %d: expected UTF-8 text, found the byte 0x%02x; save the file as UTF-8" % (
            name,
            line,
            error.start,
            text[error.start],
        )
    return None


def encoding_errors(sources: Iterable[str | Path], root: Path | None = None) -> list[str]:
    """Every file of the inventory ``sources`` that is not UTF-8, each named as the source names it;
    a relative source is read below ``root`` when given (where ansible-playbook runs)."""
    errors = []
    seen: set[Path] = set()
    for source in sources:
        given = Path(source)
        where = given if root is None or given.is_absolute() else root / given
        # Named from the source's folder as the source is written: inventories/x/group_vars/all/site.yml.
        base, shown_base = (where, given) if where.is_dir() else (where.parent, given.parent)
        for path in inventory_files(where):
            if path.resolve() in seen:
                continue
            seen.add(path.resolve())
            shown = shown_base / path.relative_to(base)
            try:
                problem = not_utf8(path.read_bytes(), str(shown))
            except OSError as error:
                problem = "%s: expected a file Ansible can read, found %s" % (shown, error.strerror or error)
            if problem:
                errors.append(problem)
    return errors
