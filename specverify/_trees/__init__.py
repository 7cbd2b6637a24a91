"""The tree kind's internals: its contract and audit (:mod:`.contract`), drawing trees from a
drafter (:mod:`.draw`), the exact laws of the tree algorithms (:mod:`.exact`) and the converters
from engines' buffers (:mod:`.converters`).  The sampler under test's tree calls are
:mod:`specverify._calling.tree`; the public face is :mod:`specverify.trees`."""
