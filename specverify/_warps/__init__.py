"""Warps: the rules that turn a target's logits and a request's sampling parameters into the law
speculation must preserve.  The harness's own statement of them (:mod:`.rules`: ``SamplingParams``,
``warp``, transformers' convention), the engines' presets (:mod:`.presets`), the warp a sampler
declares (:mod:`.declared`), posing a case so that a declared warp gives its law (:mod:`.posing`),
the cases that separate the presets (:mod:`.separating`), and the convention finding in words, read
back from a run's record (:mod:`.findings`).  The public face is
:mod:`specverify.warps`."""
