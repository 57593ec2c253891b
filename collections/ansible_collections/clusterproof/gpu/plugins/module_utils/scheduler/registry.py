"""The scheduler backends by name: the only place outside the engine files that knows engine names.

``backend(name)`` gives an engine's :class:`~scheduler.base.Backend`; ``names()`` are the engines an
inventory may name (``clusterproof_scheduler``) and a module may be given (its ``scheduler``
choices); ``site_engine(name)`` is what the playbooks and roles ask of the site's engine, which the
site inventory settles once (``clusterproof_site.engine``). A new engine is one file with its
backend and one line here (``_BACKENDS``); no playbook or role names it.

Koordinator (``koordinator.py``) is no backend: clusterproof runs it on the sandbox only, as the
reference implementation the elastic quota tree is checked against (tests/e2e/test_koordinator.py).
"""

from __future__ import annotations

from typing import Any

from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler import kai, kueue
from ansible_collections.clusterproof.gpu.plugins.module_utils.scheduler.base import Backend

_BACKENDS: dict[str, Backend] = {backend.name: backend for backend in (kai.BACKEND, kueue.BACKEND)}
# The engine a module acts on unless told otherwise, and an inventory's unless it names one.
DEFAULT = kai.BACKEND.name
# What an inventory may say instead of an engine: no scheduler is installed.
NONE = "none"
# The ``scheduler`` option of every module that acts on the site's engine (its choices: ``names()``).
ARG_SPEC = {"scheduler": {"type": "str", "default": DEFAULT, "choices": sorted(_BACKENDS)}}


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
    return tuple(process for name in names() if name != other_than for process in _BACKENDS[name].sandbox_processes)


def site_engine(name: str) -> dict[str, Any]:
    """What the playbooks and roles ask of the site's engine ``name`` (an engine, or ``NONE``), as
    the site inventory settles it (``clusterproof_site.engine``), so that none compares names:

    - ``name``, ``display_name``;
    - ``install_role``: the role that installs it (empty: none is installed);
    - ``has_queues``: whether each project gets a queue of its own, so that the projects, their
      admission policy, the quota tree, the isolation checks and the fairness scenarios apply;
    - ``gpu_agent``: whether simulated GPU nodes must answer its GPU reservation pods;
    - ``sandbox_stop_roles``: the install roles of the other engines that left something on the
      sandbox which would stand in the way of this one (``Backend.sandbox_leftovers``), each
      removed by its role's tasks/absent.yml (a no-op where that engine never ran).

    A ValueError for a name that is neither an engine nor ``NONE``."""
    stop_roles = [
        _BACKENDS[other].install_role for other in names() if other != name and _BACKENDS[other].sandbox_leftovers
    ]
    if name == NONE:
        return {
            "name": NONE,
            "display_name": "no scheduler",
            "install_role": "",
            "has_queues": False,
            "gpu_agent": False,
            "sandbox_stop_roles": stop_roles,
        }
    engine = backend(name)
    return {
        "name": engine.name,
        "display_name": engine.display_name,
        "install_role": engine.install_role,
        "has_queues": engine.has_queues,
        "gpu_agent": engine.gpu_agent,
        "sandbox_stop_roles": stop_roles,
    }
