"""Tenants, scheduler-neutral: projects (a team with a quota), their workloads, elastic quota trees.

What a project, a workload or a quota-tree node *is*, the rules an inventory's declaration must
follow, and the neutral objects every engine shares (namespaces, member RBAC). How an engine
represents them lives in ``scheduler/``.

May import: the standard library. Never imports an engine (``scheduler/``), the client layer or
Ansible. Touches nothing.
"""
