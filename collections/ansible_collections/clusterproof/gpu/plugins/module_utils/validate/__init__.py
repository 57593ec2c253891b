"""The validator: the live cluster compared with what the inventory declares.

Nodes, projects, storage, quota trees, tenant isolation and the fairness scenarios. Pure comparisons over API
objects as JSON, returning ``report.model`` checks; the cluster is read by the modules through the
client layer and handed in. One exception: ``scenario_runner`` runs a scenario on the cluster
(through ``kube.client``), creating and removing objects of its own.

May import: ``common/``, ``versions`` (the probes' images), ``tenancy/``, ``model/``, ``report.model``,
``install/`` (storage declarations), ``scheduler.registry`` and ``scheduler.base`` (the engine through
its backend), and
``kube.client`` and ``sandbox.control_plane`` (the engine's process records, read on the sandbox
to tell a stopped scheduler) in ``scenario_runner`` alone. Never imports an engine file directly.
"""
