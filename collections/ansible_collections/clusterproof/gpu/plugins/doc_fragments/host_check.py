"""Documentation of what every module that checks a GPU host shares (module_utils/kube/runner.py
HOST_CHECK_ARG_SPEC): whether the host is real, why it could not be checked, and that check mode
runs nothing but still returns every check."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  hardware:
    description:
      - Whether the host is real. V(false) for a simulated host (the sandbox's KWOK nodes) runs nothing
        and returns every check as needs-hardware.
    type: bool
    default: true
  failure:
    description:
      - Why the host cannot be checked (it was unreachable, or an earlier task failed there). Nothing
        runs; every check is failed with this message.
    type: str
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""
