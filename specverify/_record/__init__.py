"""The run's record: what a run's JSON holds, read without any check, plan or run layer.

* :mod:`.result`: :class:`~specverify._record.result.CheckResult`, :class:`~specverify._record.result.RunResult`
  and the verdict;
* :mod:`.info`: the typed run record (``RunInfo``, ``SamplerInfo``, ``Isolation``, ``Timing``);
* :mod:`.vocabulary`: the words (``Status``, ``Finding``, ``Verdict``);
* :mod:`.evidence`: the schema of a check's evidence;
* :mod:`.reach`: what a check actually gave the sampler (shapes, dtypes, case kinds);
* :mod:`.families`: the check families, in the order reports show them.

Nothing here imports torch, and this ``__init__`` imports nothing, so the report reads a JSON with the
record alone (``tests/test_imports.py`` holds it to importing no check and no run layer).
"""
