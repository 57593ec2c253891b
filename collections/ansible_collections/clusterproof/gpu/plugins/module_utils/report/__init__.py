"""The site validation report: ``model`` (the data), then ``render`` (JSON, JUnit XML, HTML, files)
with the HTML page's Jinja2 ``templates``, and ``history`` (what changed since an earlier run, the
baseline).

May import: the standard library, and ``jinja2`` in ``render`` alone. ``model`` and ``templates``
import nothing of the collection; ``render`` imports ``model`` and ``templates``, ``history`` imports
``model``. Touches: the reports directory, in ``render.write_report`` and
``history`` (reading earlier runs, the ``baseline`` link) alone.
"""
