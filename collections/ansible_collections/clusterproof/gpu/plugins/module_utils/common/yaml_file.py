"""The one loader of the project's own YAML files (scenario files): input that cannot hurt.

A file is read as the admin wrote it and nothing more: at most ``MAX_BYTES``, UTF-8 only, one
document, no aliases (``*name``, ``<<: *name``: a few lines of aliases expand to billions of
values, the "billion laughs"), no key written twice in a mapping (the second would silently win),
and at most ``MAX_DEPTH`` levels of nesting. Every refusal is a :class:`YamlFileError` whose
message names the file, and the line where the parser knows it.

The inventory is not read here: Ansible loads it (``inventory/schema.py`` bounds what it hands on).

May import: the standard library and PyYAML. Touches nothing but the file it reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

# A scenario file is a few KiB; a file a thousand times that is a mistake or an attack.
MAX_BYTES = 1024 * 1024
MAX_DEPTH = 64


class YamlFileError(ValueError):
    """A file the loader refuses; the message names the file, the line where known, and why."""


class _Loader(yaml.SafeLoader):
    """SafeLoader (plain data only) that refuses aliases, repeated keys and deep nesting."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.MarkedYAMLError(
                problem="an alias (*%s): aliases are not accepted (they can expand without bound); "
                "write the value out" % event.anchor,
                problem_mark=event.start_mark,
            )
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.MarkedYAMLError(
                    problem="more than %d levels of nesting" % MAX_DEPTH, problem_mark=self.peek_event().start_mark
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                repeated = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key: construct_mapping below refuses it with its mark
                continue
            if repeated:
                raise yaml.MarkedYAMLError(
                    problem="the key %r written twice in one mapping" % (key,), problem_mark=key_node.start_mark
                )
        return super().construct_mapping(node, deep=deep)


_Loader.add_constructor("tag:yaml.org,2002:map", _Loader.construct_yaml_map)


def _line(error: yaml.YAMLError) -> str:
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    return "" if mark is None else " line %d, column %d" % (mark.line + 1, mark.column + 1)


def _reason(error: yaml.YAMLError) -> str:
    if isinstance(error, yaml.MarkedYAMLError):
        parts = (error.context, error.problem)
        return ": ".join(str(part) for part in parts if part) or str(error)
    return str(error)


def loads(text: bytes, name: str) -> Any:
    """``text`` (the file's bytes) parsed; ``name`` (the file's path) goes into every refusal."""
    if len(text) > MAX_BYTES:
        raise YamlFileError("%s: expected a file of at most %d bytes, found %d bytes" % (name, MAX_BYTES, len(text)))
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError as error:
        line = text[: error.start].count(b"\n") + 1
        raise YamlFileError(
            "%s line %d: expected UTF-8 text, found the byte 0x%02x (at byte %d)"
            % (name, line, text[error.start], error.start)
        ) from None
    try:
        return yaml.load(decoded, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader
    except yaml.YAMLError as error:
        raise YamlFileError("%s%s: expected plain YAML, found %s" % (name, _line(error), _reason(error))) from None
    except RecursionError:
        raise YamlFileError("%s: expected plain YAML, found nesting too deep to read" % name) from None


def load(path: Path | str) -> Any:
    """The YAML document of the file at ``path``; raises YamlFileError (or OSError: no such file,
    not readable) naming the file."""
    path = Path(path)
    with path.open("rb") as handle:
        # One byte over the limit is enough to refuse; a huge file is not read whole.
        text = handle.read(MAX_BYTES + 1)
    if len(text) > MAX_BYTES:
        raise YamlFileError("%s: expected a file of at most %d bytes, found more" % (path, MAX_BYTES))
    return loads(text, str(path))
