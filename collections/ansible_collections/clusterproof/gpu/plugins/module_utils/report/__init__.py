"""The site validation report: ``model`` (the data), then ``render`` (JSON, JUnit XML, HTML, files).

May import: the standard library. ``model`` imports nothing of the collection; ``render`` imports
``model``. Touches: the reports directory, in ``render.write_report`` alone.
"""
