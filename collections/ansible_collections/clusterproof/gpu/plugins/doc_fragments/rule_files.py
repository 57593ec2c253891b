"""Documentation of the options the modules that load or check clusterproof's rule files share (prometheus_rules,
cluster_monitoring, validate_monitoring; module_utils/kube/runner.py RULES_ARG_SPEC)."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  rules:
    description:
      - The rule files clusterproof ships, each file's name (C(*.yml)) to its text, read on the controller
        (C(query('clusterproof.gpu.rule_files', dir) | first)), so that the module has them on whatever host it runs.
      - One of O(rules) and O(rules_dir) is needed; O(rules) wins where both are given.
    type: dict
  rules_dir:
    description: The folder of the rule files (C(*.yml)) on the host the module runs on.
    type: path
"""
