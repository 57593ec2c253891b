"""The site validation report: ``model`` (the data), then ``render`` (JSON, JUnit XML, HTML, files),
and ``history`` (what changed since an earlier run, the baseline).

May import: the standard library. ``model`` imports nothing of the collection; ``render`` and
``history`` import ``model``. Touches: the reports directory, in ``render.write_report`` and
``history`` (reading earlier runs, the ``baseline`` link) alone.
"""
