"""The tree kind's internals: its contract and audit (:mod:`.contract`), the sampler under test's
tree calls (:mod:`.calling`), drawing trees from a drafter (:mod:`.draw`), the exact laws of the tree
algorithms (:mod:`.exact`) and the converters from engines' buffers (:mod:`.converters`).  The
public face is :mod:`specverify.trees`."""
