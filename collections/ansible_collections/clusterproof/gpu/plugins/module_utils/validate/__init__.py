"""The validator: the live cluster compared with what the inventory declares.

Nodes, projects, storage, quota trees and the fairness scenarios. Pure comparisons over API
objects as JSON, returning ``report.model`` checks; the cluster is read by the modules through the
client layer and handed in.

May import: ``tenancy/``, ``model/``, ``report.model``, ``install/`` (storage declarations) and
``scheduler.registry``. Never imports an engine file directly.
"""
