"""Documentation of the ``scheduler`` option (module_utils/scheduler/registry.py ARG_SPEC)."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  scheduler:
    description:
      - The site's GPU scheduler (engine), as the inventory's C(clusterproof_scheduler) names it.
      - Its backend (module_utils/scheduler/) says what the module makes or reads of it - KAI Queues,
        or Kueue Cohorts, ClusterQueues and LocalQueues - and which fairness policy it follows.
    type: str
    default: kai
    choices: [kai, kueue]
"""
