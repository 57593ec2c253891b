"""Tenants, scheduler-neutral: projects (a team with a quota), their workloads, elastic quota trees,
and the boundary around each project (``isolation``: Pod Security, NetworkPolicy, declared exceptions;
``admission``: the admission policy's CEL, from the engine's ``AdmissionRules``).

What a project, a workload or a quota-tree node *is*, the rules an inventory's declaration must
follow (``names``: the one DNS-label rule; ``projects.problems``: the project rules), and the
neutral objects every engine shares (namespaces, member RBAC, the base Job of a workload). How an
engine represents them lives in ``scheduler/``.

May import: the standard library, ``common/``, ``versions`` (a workload's default image) and
``tenancy/`` itself. Never imports an engine (``scheduler/``), the client layer or Ansible. Touches
nothing.
"""
