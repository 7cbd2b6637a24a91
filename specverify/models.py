"""Small models whose laws are exact: the targets and drafts the checks pose and the replay uses.

:class:`Model` is the interface (next-token laws of the target and the draft given a context);
:class:`ChainModel` is an order-``n`` Markov chain per model, :class:`TableModel` one table per
position, :class:`MarkovLM` a logits-level Markov model for generation loops.  Import it as
``from specverify import models``; it imports torch.
"""

from __future__ import annotations

from ._laws.models import ChainModel, Model, TableModel
from ._loop import MarkovLM

__all__ = ["ChainModel", "MarkovLM", "Model", "TableModel"]
