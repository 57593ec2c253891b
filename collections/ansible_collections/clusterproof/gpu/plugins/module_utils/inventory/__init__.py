"""The site inventory: what an admin may declare, checked before anything runs.

May import: the pure declaration checks of the concerns it covers (``install/``, ``tenancy/``,
``scheduler.registry`` for the backend names). Touches nothing: plain data in, errors out.
"""
