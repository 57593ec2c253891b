"""The scheduler backends: one interface, one file per engine, one registry.

``base``: the :class:`~scheduler.base.Backend` interface every engine implements: how a project, a
quota tree and a workload become its objects, how its pods are counted, how its configured objects
are read back and judged, which fair-share policy it follows, whether it has GPU fractions, and the
hint an API error gets, and what the playbooks and roles ask of it (its install role, whether
projects get queues, whether simulated nodes need the GPU agent, what it leaves on the sandbox).
``kai``, ``kueue``: one file per engine, holding its backend (``BACKEND``) and its sandbox
processes; ``koordinator``: the sandbox's reference for the elastic quota tree (no backend).
``registry`` is the only place that knows engine names; everything else asks it for a backend, and
the playbooks and roles read ``registry.site_engine`` as the site inventory settles it
(``clusterproof_site.engine``).

Outside this package only ``registry`` and ``base`` are imported; the install modules
(``modules/kai_scheduler.py``, ``kueue_scheduler.py``, ``koordinator_scheduler.py``) still import
their engine file for its sandbox processes (tests/unit/test_layers.py lists them).

May import: ``tenancy/``, ``sandbox.control_plane`` (for an engine's local processes and the port
table), ``common.fields`` (to declare an engine's ports and paths), ``common.objects``
(``is_subset``, pure) and the standard library. Touches nothing itself: it returns objects and command lines.
"""
