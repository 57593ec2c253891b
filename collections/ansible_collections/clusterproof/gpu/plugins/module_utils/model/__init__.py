"""The fair-share model: what a quota scheduler should settle on, for the validator to expect.

Pure logic. ``fairshare`` is the model's front (``predict``, ``fair_shares`` and every public name
the validator and the tests use); behind it the model is built as the engines are:

* ``data`` (the values in and out, the units), ``tree`` (the projects by index), ``shares`` (the
  division of shares: KAI's proportion plugin, a water-fill for Kueue), ``scaling`` (a scenario
  sized to a site);
* ``state`` (placement state, bin packing, gangs, Kueue's reservations), ``rules`` (the limit
  rules: what may start, what fits once victims go), ``victims`` (victim ranking), ``engine`` (the
  three with the policy's levels, running the policy's actions until nothing changes);
* the actions: ``allocate``, ``consolidation``, ``reclaim``, ``preempt`` (KAI's), ``fair_sharing``
  (Kueue's reclaim on one cohort);
* ``policy`` (the ``Policy`` value: what differs between policies) and ``policies`` (runai,
  elastic, kueue as such values).

Where a docstring cites KAI's or Kueue's source (a file, a function, a default), it is the
source of the pinned release, ``versions.KAI_SCHEDULER`` and ``versions.KUEUE``: moving a pin
means reading those citations again.

``quota_lint`` (quota settings worth a warning) stands apart. May import: the standard library (and
``versions``, which every layer may), nothing else of the collection; each module only the modules
below it in that list (``tests/unit/test_layers.py``, ``MODEL_LAYERS``). Only ``quota_lint``
compares a policy's name. Touches nothing.
"""
