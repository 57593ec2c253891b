"""The site inventory: what an admin may declare, checked before anything runs.

May import: the pure declaration checks of the concerns it covers (``install/``, ``tenancy/``,
``scheduler.registry`` for the backend names, ``monitoring.settings`` for the monitoring stage's),
and ``common/`` (``bounds``: the size of a value
whose YAML aliases are expanded). Touches nothing: plain data in, errors out. ``files``: the
inventory's files checked to be UTF-8 before Ansible reads them (reads them, writes nothing).
"""
