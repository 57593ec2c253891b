"""The scheduler backends by name: the only place outside the engine files that knows engine names.

``backend(name)`` gives an engine's :class:`~scheduler.base.Backend`; ``names()`` are the engines an
inventory may name (``clusterproof_scheduler``) and a module may be given (its ``scheduler``
choices). A new engine is one file with its backend and one line here.

Koordinator (``koordinator.py``) is no backend: clusterproof runs it on the sandbox only, as the
reference implementation the elastic quota tree is checked against (tests/e2e/test_koordinator.py).
"""

from __future__ import annotations

from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import kai, kueue
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler.base import Backend

_BACKENDS: dict[str, Backend] = {backend.name: backend for backend in (kai.BACKEND, kueue.BACKEND)}
# The engine a module acts on unless told otherwise, and an inventory's unless it names one.
DEFAULT = kai.BACKEND.name
# What an inventory may say instead of an engine: no scheduler is installed.
NONE = "none"
# The ``scheduler`` option of every module that acts on the site's engine (its choices: ``names()``).
ARG_SPEC = {"scheduler": {"type": "str", "default": DEFAULT, "choices": sorted(_BACKENDS)}}
# Every engine's processes on the sandbox, so that installing one can stop the others.
_SANDBOX_PROCESSES = {kai.BACKEND.name: kai.SANDBOX_PROCESSES, kueue.BACKEND.name: kueue.SANDBOX_PROCESSES}


def names() -> tuple[str, ...]:
    """The engines' names, sorted."""
    return tuple(sorted(_BACKENDS))


def backend(name: str) -> Backend:
    """The backend of engine ``name``; a ValueError naming the known engines otherwise."""
    try:
        return _BACKENDS[name]
    except KeyError:
        raise ValueError("unknown scheduler %r: expected one of %s" % (name, ", ".join(names()))) from None


def lenders() -> tuple[str, ...]:
    """The engines on which a project may declare a lending limit."""
    return tuple(name for name in names() if _BACKENDS[name].lends_quota)


def own_namespaces() -> tuple[str, ...]:
    """Namespaces whose pods belong to an engine, not to workloads (whichever engine runs)."""
    return tuple(namespace for name in names() for namespace in _BACKENDS[name].own_namespaces)


def sandbox_processes(other_than: str) -> tuple[str, ...]:
    """The sandbox processes of every engine but ``other_than``: they must not run beside it."""
    return tuple(process for name, owned in _SANDBOX_PROCESSES.items() if name != other_than for process in owned)
