"""Documentation of what the two actions that write a host's container runtime files share
(container_runtime_config and containerd_registry_mirrors, plugins/action/container_runtime_config.py
and its subclass): the backup of each file they change, and check and diff mode, as action plugins."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  backup:
    description: Keep a timestamped copy of each file as it was before a change.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  action:
    support: full
"""
