"""The laws a lossless sampler must reproduce, and what they are computed on.

* :mod:`.oracle`: the canonical algorithm's mathematics (imports nothing else of the package);
* :mod:`.exact`: the exact law of a verification step, by enumeration;
* :mod:`.models`: the target and draft models over a small vocabulary;
* :mod:`.cases`: the cases checks run on (fixed step inputs, models that drafts are drawn from).

The public faces are :mod:`specverify.laws` and :mod:`specverify.models`.  This ``__init__`` imports
nothing, so a module here is imported alone.
"""
