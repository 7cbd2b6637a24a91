"""Calling a sampler under test: one :class:`~specverify._calling.sut.SamplerUnderTest` for every
kind (:mod:`.sut`), the calls each kind makes of it (:mod:`.chain`, :mod:`.tree`, :mod:`.loop`), and
what they share: call limits, supervision of the sampler's process, devices (:mod:`.supervised`)."""
