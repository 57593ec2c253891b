"""Lookup: the rule files (*.yml) of a folder on the controller, each file's name to its text."""

from __future__ import annotations

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.clusterproof.gpu.plugins.module_utils.monitoring import operator

DOCUMENTATION = r"""
name: rule_files
short_description: The rule files of a folder on the controller, for a module that runs on a site's host
description:
  - Returns, for each term (a folder on the controller), a mapping of its C(*.yml) files' names to their text, as the
    modules that load or check clusterproof's rules take them in their C(rules) option, since a module on a site's
    host has no copy of the controller's files.
  - A folder without rule files, or a file that is not YAML, is an error naming it.
options:
  _terms:
    description: Folders of rule files.
    required: true
    type: list
    elements: path
"""

EXAMPLES = r"""
- name: The shipped rules, for the site's Prometheus
  clusterproof.gpu.cluster_monitoring:
    rules: "{{ query('clusterproof.gpu.rule_files', role_path ~ '/files/rules') | first }}"
    scheduler: kai
"""

RETURN = r"""
_raw:
  description: One mapping per term, file name to text.
  type: list
  elements: dict
"""


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        found = []
        for term in terms:
            try:
                texts = operator.rule_file_texts(str(term))
                operator.parse_rule_files(texts, str(term))
            except (ValueError, OSError) as error:
                raise AnsibleLookupError(str(error)) from error
            found.append(texts)
        return found
