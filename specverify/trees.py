"""Tree samplers: the tree contract, its declaration, the converters for real layouts, the references.

A tree sampler is ``sampler(tree: TreeBatch, generator, *, uniforms=None) -> (path, token)``
(docs/trees.md); declare one with :func:`specverify.tree_sampler` (or ``sampler.contract = "tree"``) and
:func:`specverify.check` puts it through the trees family.

* :class:`TreeBatch`: one tree of candidate nodes per row (parents, tokens, target and draft laws);
  ``PADDING`` marks padding nodes, ``ALGORITHMS`` names the lossless algorithms.
* Converters, so an adapter to an engine's own layout is about twenty lines, each a typed layout
  with ``to_path``/``from_path`` for the outputs: :class:`SGLangTree` (:func:`to_sglang`,
  :func:`from_sglang`, :func:`sglang_arrays`: first-child / next-sibling arrays),
  :class:`EagleTree` (:func:`to_eagle`, :func:`from_eagle`: leaf-path matrices with per-parent draft
  rows), :class:`MedusaTree` (:func:`to_medusa`, :func:`from_medusa`: candidate buffers),
  :class:`SequoiaTree` (:func:`to_sequoia`, :func:`from_sequoia`: successor lists with prefix
  offsets); :func:`as_chain_sampler` and :func:`chain_output` between the chain and the tree
  contracts.
* Exact laws: :func:`tree_law` (the law of the accepted path and the token after it under an
  algorithm), :func:`block_law`, :func:`expected_accepted`; :func:`draw_tree` draws a tree's
  candidates from a model as a drafter does.
* References: ``tree_specinfer`` (also ``tree_reference``), ``tree_without_replacement``,
  ``tree_target_only``, ``block_verification``, and ``TREE_REFERENCES`` by algorithm.

Import it as ``from specverify import trees``; it imports torch.
"""

from __future__ import annotations

from ._trees.contract import ALGORITHMS, PADDING, TreeBatch, as_chain_sampler, chain_output
from ._trees.converters import SGLangTree, from_sglang, sglang_arrays, to_sglang
from ._trees.draw import draw_tree
from ._trees.exact import block_law, expected_accepted, tree_law
from ._trees.paths import EagleTree, MedusaTree, from_eagle, from_medusa, to_eagle, to_medusa
from ._trees.successors import SequoiaTree, from_sequoia, to_sequoia
from .samplers._tree_reference import (
    TREE_REFERENCES,
    block_verification,
    tree_reference,
    tree_specinfer,
    tree_target_only,
    tree_without_replacement,
)

__all__ = [
    "ALGORITHMS",
    "EagleTree",
    "MedusaTree",
    "PADDING",
    "SGLangTree",
    "SequoiaTree",
    "TREE_REFERENCES",
    "TreeBatch",
    "as_chain_sampler",
    "block_law",
    "block_verification",
    "chain_output",
    "draw_tree",
    "expected_accepted",
    "from_eagle",
    "from_medusa",
    "from_sequoia",
    "from_sglang",
    "sglang_arrays",
    "to_eagle",
    "to_medusa",
    "to_sequoia",
    "to_sglang",
    "tree_law",
    "tree_reference",
    "tree_specinfer",
    "tree_target_only",
    "tree_without_replacement",
]
