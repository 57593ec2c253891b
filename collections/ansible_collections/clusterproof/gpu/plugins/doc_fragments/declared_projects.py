"""Documentation of the option the modules that check the declared projects share (validate_projects,
validate_isolation; module_utils/kube/runner.py DECLARED_PROJECTS_ARG_SPEC): the inventory's projects."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  projects:
    description: The declared projects (clusterproof_site.projects).
    type: list
    elements: dict
    required: true
"""
