"""The scheduler backends: one interface, one file per engine, one registry.

Each engine (KAI scheduler, Kueue, Koordinator) says how a project, a quota tree and a workload
become its objects, how its pods are counted and which fair-share policy it follows. ``registry``
is the only place that knows engine names; everything else asks it for a backend.

May import: ``tenancy/``, ``sandbox.control_plane`` (for an engine's local processes on the
sandbox) and the standard library. Touches nothing itself: it returns objects and command lines.
"""
