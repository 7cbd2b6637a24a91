"""The check families, in the order a run performs them.

A module of its own, importing nothing, so that reading a run's JSON (the report) needs the names of
the families but not the checks, and so neither torch nor Hypothesis.
"""

__all__ = ["FAMILIES"]

FAMILIES = ("contract", "support", "exact", "fit", "efficiency", "robustness", "shapes", "trees")
