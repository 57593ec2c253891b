"""Attributes of the sandbox's path and port tables, declared one line each.

A table of the sandbox's files or ports (``PkiPaths``, ``Layout``, ``BuildPlan``, ``Ports``, an
engine's ports) is a base (a root folder, a port base) and names derived from it. Written as a
``@property`` each, such a table is mostly boilerplate; with these descriptors an entry reads as
what it is: ``ca_cert = Below("root", "ca.crt")``, ``etcd_client = PortAt(block, 0)``.

May import: the standard library only (``pki`` and ``control_plane`` import it). Touches nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, overload


class Below:
    """A path below another attribute: ``bin_dir = Below("key_dir", "bin")`` is ``self.key_dir / "bin"``."""

    def __init__(self, base: str, *parts: str) -> None:
        self.base = base
        self.parts = parts

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> Below: ...
    @overload
    def __get__(self, instance: object, owner: type | None = None) -> Path: ...
    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        return getattr(instance, self.base).joinpath(*self.parts)


class PortAt:
    """A port at ``offset`` in a block of loopback ports: ``webhook = PortAt(port_block("kueue"), 0)``
    is ``self.base + port_block("kueue").start``; the instance holds the sandbox's port base."""

    def __init__(self, block: range, offset: int) -> None:
        if offset not in range(len(block)):
            raise ValueError("offset %d is outside the block %r" % (offset, block))
        self.block = block
        self.offset = offset

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> PortAt: ...
    @overload
    def __get__(self, instance: object, owner: type | None = None) -> int: ...
    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        return instance.base + self.block.start + self.offset
