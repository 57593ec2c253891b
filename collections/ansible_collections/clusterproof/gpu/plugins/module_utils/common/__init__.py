"""Pure building blocks that every layer may use.

``problems``: the one shape of a declared field that breaks a rule (field, expected, found), which
the inventory's checks of projects, the GPU device layer and the rest report.

May import: the standard library only. Touches nothing.
"""
