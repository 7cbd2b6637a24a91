"""The check families, in the order reports show them.

A module of its own, importing nothing, so that reading a run's JSON (the report) needs the names of
the families but not the checks, and so neither torch nor Hypothesis.  The batteries check
themselves against these names (:func:`specverify.checks._base.registered`), so the two cannot drift.
"""

__all__ = ["ENGINE_FAMILY", "FAMILIES", "LOOP_FAMILY"]

#: The samplers' families: the chain battery's, then the tree battery's.
FAMILIES = ("contract", "support", "exact", "fit", "efficiency", "robustness", "shapes", "trees")
#: The generation loops' family (``specverify loop``), shown after the samplers' where a table has both.
LOOP_FAMILY = "loop"
#: The engines' family (``specverify engine``): speculation on against off, shown after the loops'.
ENGINE_FAMILY = "engine"
