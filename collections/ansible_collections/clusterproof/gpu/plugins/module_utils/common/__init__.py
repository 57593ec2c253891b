"""Pure building blocks that every layer may use.

``problems``: the one shape of a declared field that breaks a rule (field, expected, found), which
the inventory's checks of projects, the GPU device layer and the rest report. ``yaml_file``: the one
loader of the project's own YAML files (UTF-8, no aliases, bounded), refusing with the file's name.
``bounds``: how large a value is once its shared references are expanded (an inventory's aliases).
``objects``: whether an object holds every field clusterproof wants of it (``is_subset``).
``steps``: whether an amount is a whole number of steps (hundredths, millicores, MiB), decided on
the decimal written, not within a float tolerance.
``fields``: one-line attributes of path and port tables (``Below``, ``PortAt``).
``wait``: the one waiter, until what is looked at holds or the time runs out (``wait_until``),
with the last value seen as the reason when it runs out.
``pods``: what a pod holds as the API lists it (its whole GPUs, bound and running, its controller).

May import: the standard library, and PyYAML for ``yaml_file``. Touches nothing but the file
``yaml_file`` is asked to read.
"""
