"""Documentation of the option every storage module takes: the inventory's declared classes
(module_utils/kube/runner.py STORAGE_CLASSES_ARG_SPEC, read by install/storage.py classes_argument)."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  classes:
    description: The declared classes, as C(clusterproof_site.storage_classes) holds them.
    type: list
    elements: dict
    required: true
"""
