"""Attributes of path and port tables, declared one line each.

A table of files or ports (the sandbox's ``PkiPaths``, ``Layout``, ``BuildPlan``, ``Ports``, an
engine's ports; the bundle build's and the lab's ``Layout``; the monitoring's ``PrometheusPrograms``)
is a base (a root folder, a port base) and names derived from it. Written as a ``@property`` each,
such a table is mostly boilerplate; with these descriptors an entry reads as what it is:
``ca_cert = Below("root", "ca.crt")``, ``etcd_client = PortAt(block, 0)``.

May import: the standard library only. Touches nothing.
"""

from __future__ import annotations

import abc
from pathlib import Path
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class _Derived(abc.ABC, Generic[T]):
    """A read-only attribute computed from the instance (``value``); the class itself gets the descriptor."""

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        return self if instance is None else self.value(instance)

    @abc.abstractmethod
    def value(self, instance: Any) -> T:
        """The attribute's value for ``instance``."""


class Below(_Derived[Path]):
    """A path below another attribute: ``bin_dir = Below("key_dir", "bin")`` is ``self.key_dir / "bin"``."""

    def __init__(self, base: str, *parts: str) -> None:
        self.base = base
        self.parts = parts

    def value(self, instance: Any) -> Path:
        return getattr(instance, self.base).joinpath(*self.parts)


class PortAt(_Derived[int]):
    """A port at ``offset`` in a block of loopback ports: ``webhook = PortAt(port_block("kueue"), 0)``
    is ``self.base + port_block("kueue").start``; the instance holds the sandbox's port base."""

    def __init__(self, block: range, offset: int) -> None:
        if offset not in range(len(block)):
            raise ValueError("offset %d is outside the block %r" % (offset, block))
        self.block = block
        self.offset = offset

    def value(self, instance: Any) -> int:
        return instance.base + self.block.start + self.offset
