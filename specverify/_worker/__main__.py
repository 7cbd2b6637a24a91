"""``python -m specverify._worker FD``: the sampler's process (:func:`specverify._worker.serving.serve`)."""

from specverify._worker.serving import serve  # the package's own classes, not __main__'s, go into pickles

serve()
