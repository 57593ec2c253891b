"""Filters of the site report's sections as the validation roles gather them
(``clusterproof_report_sections``): what a later step adds to a section made earlier.

They run on the controller; the merging is module_utils/monitoring/timeline.py's ``merge``.
"""

from __future__ import annotations

import json

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterproof.gpu.plugins.module_utils.monitoring import timeline


def report_sections_merged(sections, extras):
    """The report's sections with ``extras`` (section id -> checks, charts, tables to add) put into
    the sections of those ids; the others as they are."""
    if not isinstance(sections, list) or not isinstance(extras, dict):
        raise AnsibleFilterError(
            "report_sections_merged: expected a list of sections and a mapping of extras, found %s and %s"
            % (type(sections).__name__, type(extras).__name__)
        )
    # Plain Python: Ansible's values are tagged str and dict subclasses.
    return timeline.merge(json.loads(json.dumps(sections)), json.loads(json.dumps(extras)))


class FilterModule:
    def filters(self):
        return {"report_sections_merged": report_sections_merged}
