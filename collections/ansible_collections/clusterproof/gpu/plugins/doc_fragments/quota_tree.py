"""Documentation of the option every quota-tree module takes: the inventory's declared tree
(module_utils/kube/runner.py QUOTA_TREE_ARG_SPEC, checked by tenancy/quota_tree.py check_tree)."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  tree:
    description: The tree's nodes, parents first (name, parent, min, max, namespaces).
    type: list
    elements: dict
    required: true
"""
