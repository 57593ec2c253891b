"""The report page's Jinja2 templates: the page, its parts (a section, a table, a chart) and the
allocation chart's SVG. ``report.render`` compiles them with autoescaping on, so every value the
page shows is escaped by the engine; a template never marks a value safe.

The templates are Python strings, not ``.j2`` files beside this module, because the report is
written inside the ``site_report`` module: Ansible ships a module with the module_utils it imports
as an AnsiballZ zip of ``.py`` files only (even delegated to localhost), so a template file would
be missing where the page is rendered. ``render`` loads them by name (``TEMPLATES``, a
``jinja2.DictLoader``); pure data, this module imports nothing.

Whitespace: the environment trims a block tag's line (``trim_blocks``, ``lstrip_blocks``), so a
``{% ... %}`` on a line of its own leaves nothing in the page. A backslash at the end of a line is
Python's line continuation: the source reads an element a line, the page has them on one line.

May import: nothing.
"""

from __future__ import annotations

CSS = """
:root { --pass: #1a7f37; --fail: #cf222e; --warn: #9a6700; --skip: #6e7781; --hw: #6639ba; }
* { box-sizing: border-box; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; margin: 0;
  color: #1f2328; background: #f6f8fa; line-height: 1.45; }
main { max-width: 1200px; margin: 0 auto; padding: 1.5rem; }
h1 { font-size: 1.5rem; margin: 0 0 .25rem; }
h2 { font-size: 1.25rem; margin: 0 0 .75rem; }
h3 { font-size: 1rem; margin: 1rem 0 .5rem; }
.banner { border-radius: 8px; padding: 1rem 1.25rem; color: #fff; margin-bottom: 1.25rem; }
.banner.pass { background: var(--pass); }
.banner.fail { background: var(--fail); }
.banner .verdict { font-size: 2rem; font-weight: 700; letter-spacing: .05em; }
.banner dl { display: grid; grid-template-columns: max-content 1fr; gap: .1rem 1rem; margin: .5rem 0 0; }
.banner dt { opacity: .85; }
.banner dd { margin: 0; font-weight: 600; }
.counts { display: flex; flex-wrap: wrap; gap: .5rem; margin-top: .75rem; }
.count { background: rgba(255,255,255,.92); color: #1f2328; border-radius: 999px; padding: .1rem .7rem;
  font-size: .9rem; }
section.card { background: #fff; border: 1px solid #d0d7de; border-radius: 8px; padding: 1rem 1.25rem;
  margin-bottom: 1.25rem; }
table { border-collapse: collapse; width: 100%; font-size: .9rem; }
th, td { border: 1px solid #d0d7de; padding: .35rem .5rem; text-align: left; vertical-align: top; }
th { background: #f6f8fa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.msg { max-width: 32rem; overflow-wrap: anywhere; }
tr.row-fail td { background: #ffebe9; }
tr.row-warn td { background: #fff8c5; }
.status { display: inline-block; min-width: 6.5rem; text-align: center; border-radius: 4px; color: #fff;
  font-weight: 600; font-size: .8rem; padding: .05rem .4rem; text-transform: uppercase; }
.status.pass { background: var(--pass); }
.status.fail { background: var(--fail); }
.status.warn { background: var(--warn); }
.status.skip { background: var(--skip); }
.status.needs-hardware { background: var(--hw); }
.failed-list li { margin: .2rem 0; }
.category { font-size: .8em; font-weight: 600; text-transform: uppercase; padding: 0 .3em;
  border: 1px solid #999; border-radius: 3px; }
.action { font-size: .9em; font-style: italic; }
.chart { margin: .5rem 0 1rem; overflow-x: auto; }
code { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: .85em; }
footer { color: #6e7781; font-size: .8rem; text-align: center; padding: 1rem; }
"""

# The whole page: verdict banner, failed checks, then each section in order. ``report``,
# ``counts``, ``failed`` (the failed checks), ``statuses``, ``generator`` and ``schema_version``.
PAGE = (
    """\
{% from "parts.html" import section_card %}
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{ generator }}: {{ report.verdict | upper }}, site {{ report.site }}</title>
<style>"""
    + CSS
    + """</style>
</head>
<body>
<main>
<header class="banner {{ report.verdict }}" id="verdict">
<div class="verdict">{{ report.verdict | upper }}</div>
<h1>Site validation: {{ report.site }}</h1>
<dl>
<dt>Cluster mode</dt><dd>{{ report.cluster_mode }}</dd>
<dt>Started</dt><dd>{{ report.started or none }}</dd>
<dt>Finished</dt><dd>{{ report.finished or none }}</dd>
</dl>
<div class="counts">\
<span class="count">{{ counts["total"] }} checks</span>\
{% for status in statuses if counts[status] %}<span class="count">{{ counts[status] }} {{ status }}</span>{% endfor %}\
</div>
</header>
{% if failed %}
<section class="card" id="failed-checks"><h2>Failed checks ({{ failed | length }})</h2>
<ul class="failed-list">
{% for check in failed %}
<li><a href="#{{ check.id | anchor }}"><code>{{ check.id }}</code></a> \
<span class="category">{{ check.category }}</span>: {{ check.message or check.title }}\
<br><span class="action">What to do: {{ check.action }}</span></li>
{% endfor %}
</ul></section>
{% endif %}
{% for section in report.sections %}
{{ section_card(section) }}
{% endfor %}
<footer>{{ generator }} report, schema version {{ schema_version }}. Also written as report.json and junit.xml.</footer>
</main>
</body>
</html>
"""
)

# A section's card, a table, a chart and the allocation chart's SVG, as macros. A macro's text
# ends without a newline: whoever calls it puts it on its line.
PARTS = """\
{% macro allocation_chart(g) %}
<svg xmlns="http://www.w3.org/2000/svg" width="{{ g.width }}" height="{{ g.height }}" \
viewBox="0 0 {{ g.width }} {{ g.height }}" role="img" aria-label="{{ g.title }}" font-family="sans-serif" \
font-size="12">\
<title>{{ g.title }}</title>\
<rect x="0" y="0" width="{{ g.width }}" height="{{ g.height }}" fill="#fff"/>\
{% if not g.lines %}\
<text x="{{ g.width // 2 }}" y="{{ g.height // 2 }}" text-anchor="middle" fill="#6e7781">no allocation recorded</text>\
{% else %}\
{% for y, label in g.y_ticks %}\
<line x1="{{ g.left }}" y1="{{ y }}" x2="{{ g.right }}" y2="{{ y }}" stroke="#eaeef2"/>\
<text x="{{ g.left - 6 }}" y="{{ y }}" dy="4" text-anchor="end" fill="#57606a">{{ label }}</text>\
{% endfor %}\
{% for x, label in g.x_ticks %}\
<line x1="{{ x }}" y1="{{ g.bottom }}" x2="{{ x }}" y2="{{ g.bottom + 4 }}" stroke="#57606a"/>\
<text x="{{ x }}" y="{{ g.bottom + 17 }}" text-anchor="middle" fill="#57606a">{{ label }}</text>\
{% endfor %}\
<line x1="{{ g.left }}" y1="{{ g.top }}" x2="{{ g.left }}" y2="{{ g.bottom }}" stroke="#57606a"/>\
<line x1="{{ g.left }}" y1="{{ g.bottom }}" x2="{{ g.right }}" y2="{{ g.bottom }}" stroke="#57606a"/>\
<text x="{{ (g.left + g.right) // 2 }}" y="{{ g.height - 8 }}" text-anchor="middle" fill="#1f2328">time (s)</text>\
<text x="14" y="{{ (g.top + g.bottom) // 2 }}" text-anchor="middle" fill="#1f2328" \
transform="rotate(-90 14 {{ (g.top + g.bottom) // 2 }})">{{ g.y_label }}</text>\
{% for line in g.lines %}\
<path d="{{ line.path }}" transform="translate(0 {{ line.nudge }})" fill="none" stroke="{{ line.colour }}" \
stroke-width="2" data-project="{{ line.project }}"><title>{{ line.project }}</title></path>\
<line x1="{{ g.right + 16 }}" y1="{{ line.legend_y }}" x2="{{ g.right + 36 }}" y2="{{ line.legend_y }}" \
stroke="{{ line.colour }}" stroke-width="3"/>\
<text x="{{ g.right + 42 }}" y="{{ line.legend_y + 4 }}" fill="#1f2328">{{ line.project }}</text>\
{% endfor %}\
{% endif %}\
</svg>\
{% endmacro %}

{% macro chart_html(chart) %}
<h3>{{ chart.title }}</h3>\
<div class="chart" id="chart-{{ chart.id }}">{{ allocation_chart(chart_geometry(chart)) }}</div>\
{% endmacro %}

{% macro table_html(table) %}
<h3>{{ table.title }}</h3>
<table id="table-{{ table.id }}"><thead><tr>\
{% for column in table.columns %}<th>{{ column }}</th>{% endfor %}\
</tr></thead><tbody>
{% for row in table.rows %}
{% set status = table.row_status[loop.index0] if table.row_status and loop.index0 < table.row_status | length else '' %}
<tr class="{{ 'row-' ~ status if status else '' }}">\
{% for cell in row %}\
{% if cell is numeric %}<td class="num">{{ cell }}</td>{% else %}<td>{{ cell }}</td>{% endif %}\
{% endfor %}\
</tr>
{% endfor %}
</tbody></table>\
{% endmacro %}

{% macro section_card(section) %}
<section class="card" id="section-{{ section.id }}">
<h2><span class="status {{ section.verdict }}">{{ section.verdict }}</span> {{ section.title }}</h2>
{% for table in section.tables %}
{{ table_html(table) }}
{% endfor %}
{% for chart in section.charts %}
{{ chart_html(chart) }}
{% endfor %}
{% if section.checks %}
<h3>Checks</h3>
<table><thead><tr>\
<th>Status</th><th>Check</th><th>Expected</th><th>Observed</th><th>Message</th>\
</tr></thead><tbody>
{% for check in section.checks %}
<tr id="{{ check.id | anchor }}" class="{{ 'row-' ~ check.status if check.status in ('fail', 'warn') else '' }}">\
<td><span class="status {{ check.status }}">{{ check.status }}</span></td>\
<td>{{ check.title }}<br><code>{{ check.id }}</code></td>\
<td>{{ check.expected }}</td><td>{{ check.observed }}</td>\
<td class="msg">{{ check.message if check.message else '' }}\
{% if check.status in ('fail', 'warn') and check.category %}\
<br><span class="category">{{ check.category }}</span> <span class="action">What to do: {{ check.action }}</span>\
{% endif %}\
</td></tr>
{% endfor %}
</tbody></table>
{% endif %}
</section>\
{% endmacro %}
"""

TEMPLATES = {"page.html": PAGE, "parts.html": PARTS}
