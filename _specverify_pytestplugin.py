"""pytest entry point of specverify (registered under ``pytest11``).

Kept tiny and free of heavy imports, like Hypothesis's own plugin module: the harness is imported
only when a run asks for it with ``--specverify-sampler``.
"""
