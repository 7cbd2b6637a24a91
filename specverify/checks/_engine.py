"""The engine family: an engine's own ``generate()`` with speculation on, against itself with it off.

Neither mode's law is known, so nothing here asks for one (:mod:`specverify._kinds.engine`):

* ``engine.output``: every call's output of the contract's type, shape and ids, with every declared
  parameter group and greedy rows, in both modes (exact);
* ``engine.determinism``: the same seed gives the same output, speculation on (exact);
* ``engine.greedy``: at temperature 0 speculation on generates exactly what it generates off, row by
  row (exact: a KV cache not rolled back, or a position id advanced by a rejected draft, shows here
  with no statistics at all);
* ``engine.law[group]``: the law of a whole generation with speculation on against off, for each
  group of sampling parameters the engine declares, by a two-sample test
  (:func:`~specverify.stats.two_sample_test`) on each position's token given the tokens before it
  (an end, where a stop token ends a row, is a symbol of its own, so lengths are compared too): the
  G statistics of the positions add up to the whole generation's, so the claim is on the joint law.

A law check's arms are sized for the budget's TV with its power (four times a one-sample test's
samples in all) and looked at a quarter and half way (:data:`LOOKS`, each look at its share of the
check's alpha), so an engine whose modes differ stops early; a smallest detectable TV above twice the
budget's is inconclusive, never a pass.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, cast

import numpy as np
import torch

from .._budgets import Budget
from .._history.posing import posed_params
from .._kinds.engine import EngineInputs, EngineKind
from .._record.families import ENGINE_FAMILY
from .._record.result import CheckResult
from .._warps.rules import SamplingParams
from ..errors import SamplerFault
from ..stats import TwoSampleTest, two_sample_test
from ._base import Check, Context, registered

__all__ = ["ENGINE_GROUPS", "EngineCheck", "engine_battery", "length_counts", "position_tables", "throughput_line"]


def _bias(vocab: int, given: dict[int, float]) -> list[float]:
    """A logit bias over ``vocab`` tokens: ``given`` where the token exists, 0 elsewhere."""
    return [given.get(token, 0.0) for token in range(vocab)]


def _no_token_twice(vocab: int) -> list[list[int]] | None:
    """No token twice in a row: state ``1 + t`` after token ``t`` forbids ``t`` (a table of
    ``vocab + 1`` states, so posed up to 64 tokens; an engine's law checks are for small vocabularies)."""
    if vocab > 64:
        return None
    after = list(range(1, vocab + 1))
    return [after] + [[-1 if t == last else after[t] for t in range(vocab)] for last in range(vocab)]


def _zero_then_one_or_two(vocab: int) -> list[list[int]] | None:
    """Token 0, then 1 or 2, alternating (with 2 a stop token: ``0 1 0 1 ... 0 2``); 3 tokens at least."""
    if vocab < 3:
        return None
    return [[1] + [-1] * (vocab - 1), [-1, 0, 0] + [-1] * (vocab - 3)]


#: Parameter groups of the law checks: each group a row group, rows alternating between a case's groups.
ENGINE_GROUPS: dict[str, list[dict[str, Any]]] = {
    "sampled": [{}],
    "temperature": [{"temperature": 0.6}, {"temperature": 1.4}],
    "top-k": [{"top_k": 2}, {"temperature": 0.8, "top_k": 3}],
    "top-p": [{"top_p": 0.7}],
    "min-p": [{"min_p": 0.1}],
    "penalties": [{"repetition_penalty": 1.8}, {"frequency_penalty": 0.8, "presence_penalty": 0.5}],
    "min-tokens": [{"min_tokens": 2, "stop_tokens": 0b1}],
    "stop": [{"stop_tokens": 0b1}],
    "bad-words": [{"bad_words": [[2, 2]]}, {"bad_words": [[0], [2, 1, 1]]}],
    # a value that depends on the engine's vocabulary is given as the function that builds it
    "logit-bias": [
        {"logit_bias": lambda vocab: _bias(vocab, {0: 1.5, 2: -1.0})},
        {"logit_bias": lambda vocab: _bias(vocab, {0: -math.inf, 1: 0.5})},
    ],
    "grammar": [{"grammar": _no_token_twice}, {"grammar": _zero_then_one_or_two, "stop_tokens": 0b100}],
}
#: Tokens a law check's rows generate (beyond one draft step of a typical 3 to 5 drafts), and its prompt's length.
LAW_TOKENS, PROMPT_TOKENS = 6, 4
#: Degrees of freedom a law check is sized for: the cells a short generation reaches are far fewer
#: than ``(V + 1) ** LAW_TOKENS``; the test states the TV it reached from the cells it saw.
PLANNED_DF = 256
#: Rows of each exact check, in each mode.
EXACT_ROWS = 64
#: Where a law check looks, as fractions of its rows: each look tests at ``alpha / len(LOOKS)``
#: (Bonferroni, so any number of looks holds the check's alpha) and a difference stops the check at
#: the first look it shows in; the rows are sized for the last look's level, so the stated power holds.
LOOKS = (0.25, 0.5, 1.0)


@dataclasses.dataclass
class EngineCheck(Check):
    """One check of the engine family (``name`` picks what it does; ``case`` a law check's group)."""

    name: str
    case: str | None = None
    family: str = ENGINE_FAMILY

    @property
    def id(self) -> str:
        return f"{self.family}.{self.name}" + (f"[{self.case}]" if self.case else "")

    @property
    def statistical(self) -> bool:
        return self.name == "law"

    @property
    def proves(self) -> str:
        return "contract" if self.name in ("output", "determinism") else "loss"

    def skip_reason(self, engine: Any) -> str | None:
        declared = set(engine.kind.parameters)
        if self.name == "greedy" and "temperature" not in declared:
            return "the engine declares no temperature (greedy rows are temperature 0)"
        if self.name == "law" and not _posable(self.case, declared, engine.kind.vocab_size):
            missing = {name for group in ENGINE_GROUPS[self.case or "sampled"] for name in group} - declared
            if not missing:
                return f"none of its groups can be posed over the engine's {engine.kind.vocab_size} tokens"
            return f"the engine does not declare {', '.join(sorted(missing))}"
        return None

    def skipped(self, reason: str) -> list[CheckResult]:
        return [self._result("skip", message=reason)]

    def planned_samples(self, budget: Budget, alpha: float) -> int:
        """Generations in both modes: a law check's at its last look (a failing one stops sooner)."""
        if self.name == "law":
            return 2 * _law_rows(budget, alpha, len(ENGINE_GROUPS[self.case or "sampled"]))
        return 2 * EXACT_ROWS

    def run(self, ctx: Context) -> CheckResult:
        """Call the engine as this check says; a fault (raised, crashed, hung, broke the contract) fails it."""
        run = _EngineRun(ctx, self.id)
        try:
            result = getattr(self, f"_{self.name}")(run)
        except SamplerFault as fault:
            evidence = {"violation": fault.violation.rule, **fault.details}
            result = self._result("fail", finding="contract", message=str(fault), evidence=evidence)
        if run.throughput():
            result.evidence["throughput"] = run.throughput()
        return result

    def _result(self, status: str, **fields: Any) -> CheckResult:
        return CheckResult(id=self.id, family=self.family, case=self.case, status=status, proves=self.proves, **fields)

    # --- exact checks -------------------------------------------------------------------------

    def _output(self, run: _EngineRun) -> CheckResult:
        declared = set(run.parameters)
        groups = [g for case in ENGINE_GROUPS for g in _posable(case, declared, run.vocab)]
        groups += [{"temperature": 0.0}] if "temperature" in declared else []
        prompts = run.prompts(EXACT_ROWS, "prompts")
        for speculative in (True, False):
            run.generate(prompts, LAW_TOKENS, groups, run.seed("output", speculative), speculative)
        message = f"{2 * EXACT_ROWS} generations of {LAW_TOKENS} tokens, {len(groups)} parameter groups, both modes"
        return self._result("pass", samples=2 * EXACT_ROWS, message=message)

    def _determinism(self, run: _EngineRun) -> CheckResult:
        prompts, seed = run.prompts(EXACT_ROWS, "prompts"), run.seed("determinism")
        first, again = (run.generate(prompts, LAW_TOKENS, [{}], seed, True) for _ in range(2))
        differs = (first != again).any(dim=1)
        if bool(differs.any()):
            row = int(differs.nonzero()[0, 0])
            message = (
                f"the same seed ({seed}) gave two outputs, speculation on: row {row} {first[row].tolist()} then "
                f"{again[row].tolist()}"
            )
            return self._result("fail", finding="contract", message=message, samples=2 * EXACT_ROWS)
        return self._result("pass", samples=2 * EXACT_ROWS, message="the same seed, the same output (speculation on)")

    def _greedy(self, run: _EngineRun) -> CheckResult:
        prompts, greedy = run.prompts(EXACT_ROWS, "prompts"), [{"temperature": 0.0}]
        on, off = (run.generate(prompts, LAW_TOKENS, greedy, run.seed("greedy"), mode) for mode in (True, False))
        differs = (on != off).any(dim=1)
        if bool(differs.any()):
            row = int(differs.nonzero()[0, 0])
            column = int((on[row] != off[row]).nonzero()[0, 0])
            message = (
                f"greedy generations differ in {int(differs.sum())} of {EXACT_ROWS} rows: row {row}, prompt "
                f"{prompts[row].tolist()}, speculation on {on[row].tolist()}, off {off[row].tolist()} (first at "
                f"position {column})"
            )
            return self._result("fail", finding="loss", message=message, samples=2 * EXACT_ROWS)
        return self._result("pass", samples=2 * EXACT_ROWS, message="greedy: speculation on generates what it does off")

    # --- the law ------------------------------------------------------------------------------

    def _law(self, run: _EngineRun) -> CheckResult:
        groups, budget = _posable(self.case, set(run.parameters), run.vocab), run.ctx.budget
        level = run.ctx.alpha / len(LOOKS)  # each look's level: the looks together hold the check's alpha
        rows = _law_rows(budget, run.ctx.alpha, len(groups))
        prompt = run.prompts(1, "prompt")
        arms: dict[bool, list[np.ndarray]] = {True: [], False: []}
        drawn = 0
        for look, fraction in enumerate(LOOKS):  # over looks: a difference stops the check at the first it shows in
            upto = len(groups) * math.ceil(fraction * rows / len(groups))
            for mode in (True, False):
                seed = run.seed("law", mode)
                arms[mode].append(run.generate_many(prompt.expand(upto - drawn, -1), groups, seed, mode, first=drawn))
            drawn = upto
            on, off = np.concatenate(arms[True]), np.concatenate(arms[False])
            test = _two_sample(on, off, len(groups), run.vocab)
            if test.pvalue <= level:
                break
        claim = test.min_detectable_tv(level, budget.power)
        where = _largest_gap(on, off, run.vocab)
        evidence = {
            "two_sample": dataclasses.asdict(test),
            "largest_gap": where,
            "prompt": prompt[0].tolist(),
            "looks": {"at": [len(groups) * math.ceil(f * rows / len(groups)) for f in LOOKS], "stopped_at": drawn},
        }
        fields = dict(p_value=test.pvalue, alpha=level, samples=2 * drawn, min_detectable_tv=claim, evidence=evidence)
        if test.pvalue <= level:
            message = (
                f"speculation on changes what the engine generates: two-sample p-value {test.pvalue:.3g} <= "
                f"{level:.3g} over {drawn} generations each way (look {look + 1} of {len(LOOKS)}); the largest gap: "
                f"{where['what']}"
            )
            return self._result("fail", finding="loss", message=message, **fields)
        status = "pass" if claim <= budget.ceiling_tv else "inconclusive"
        message = (
            f"speculation on and off agree: p-value {test.pvalue:.3g} over {drawn} generations of {LAW_TOKENS} tokens "
            f"each way ({len(groups)} parameter groups); any difference of TV >= {claim:.3g} detected with power "
            f"{budget.power:g}"
        )
        return self._result(status, message=message, **fields)


@dataclasses.dataclass
class _EngineRun:
    """A check's calls of the engine: prompts and seeds derived from the run seed and the check, rows
    cut into calls of at most the engine's ``max_batch``, each output audited."""

    ctx: Context
    check: str
    #: per mode (speculation on, off): tokens generated and the seconds of the calls that made them
    made: dict[bool, list[float]] = dataclasses.field(default_factory=lambda: {True: [0, 0.0], False: [0, 0.0]})

    @property
    def kind(self) -> EngineKind:
        return cast(EngineKind, self.ctx.sut.kind)  # the battery of the engine kind runs on engines alone

    @property
    def parameters(self) -> tuple[str, ...]:
        return self.kind.parameters

    @property
    def vocab(self) -> int:
        return self.kind.vocab_size

    def seed(self, *parts: object) -> int:
        return self.ctx.seed_for(self.check, *parts) % 2**31

    def prompts(self, rows: int, *parts: object) -> torch.Tensor:
        drawn = torch.Generator().manual_seed(self.seed(*parts))
        return torch.randint(self.vocab, (rows, PROMPT_TOKENS), generator=drawn)

    def generate(
        self, prompts: torch.Tensor, num_tokens: int, groups: list[dict[str, Any]], seed: int, speculative: bool
    ) -> torch.Tensor:
        """One call's worth of rows (row ``r`` with ``groups[r % len(groups)]``), audited."""
        rows = prompts.shape[0]
        params = posed_params(groups, torch.arange(rows) % len(groups), self.parameters)
        return self._call(prompts, num_tokens, params, seed, speculative)

    def generate_many(
        self, prompts: torch.Tensor, groups: list[dict[str, Any]], seed: int, speculative: bool, *, first: int = 0
    ) -> np.ndarray:
        """``[rows, LAW_TOKENS]`` generations of rows ``first, first + 1, ...`` (row ``r`` with
        ``groups[r % len(groups)]``), in calls of at most ``max_batch`` rows, each seeded from ``seed``
        and its first row's index: spread over the run's workers (``--workers``) as units, the same
        generations whichever worker makes a call."""
        rows, batch = prompts.shape[0], self.kind.max_batch
        which = (first + torch.arange(rows)) % len(groups)
        calls = _Calls(prompts, posed_params(groups, which, self.parameters), seed + first, speculative, self.vocab)
        spans = [(start, min(start + batch, rows)) for start in range(0, rows, batch)]
        out = np.empty((rows, LAW_TOKENS), dtype=np.int64)
        for (start, stop), (tokens, seconds) in zip(spans, self.ctx.units(calls, spans)):
            out[start:stop] = tokens.numpy()
            self._count(tokens, seconds, speculative)
            self.ctx.advance(stop - start)
        return out

    def _call(
        self, prompts: torch.Tensor, num_tokens: int, params: SamplingParams, seed: int, speculative: bool
    ) -> torch.Tensor:
        tokens, seconds = _called(self.ctx.sut, prompts, num_tokens, params, seed, speculative, self.vocab)
        self._count(tokens, seconds, speculative)
        return tokens

    def _count(self, tokens: torch.Tensor, seconds: float, speculative: bool) -> None:
        self.made[speculative][0] += int((tokens >= 0).sum())
        self.made[speculative][1] += seconds

    def throughput(self) -> dict[str, Any]:
        """Each mode's tokens, seconds and tokens a second, as this check called the engine."""
        return {
            "on" if mode else "off": {"tokens": tokens, "seconds": round(seconds, 4), "per_second": tokens / seconds}
            for mode, (tokens, seconds) in self.made.items()
            if seconds > 0
        }


@dataclasses.dataclass(frozen=True)
class _Calls:
    """A law check's calls as units: ``(start, stop)`` is one call of those rows, seeded by its first."""

    prompts: torch.Tensor
    params: SamplingParams
    seed: int
    speculative: bool
    vocab: int

    def __call__(self, sut: Any, span: tuple[int, int]) -> tuple[torch.Tensor, float]:
        part = slice(*span)
        prompts, params = self.prompts[part], self.params.select(part)
        return _called(sut, prompts, LAW_TOKENS, params, self.seed + span[0], self.speculative, self.vocab)


def _called(
    sut: Any, prompts: torch.Tensor, num_tokens: int, params: SamplingParams, seed: int, speculative: bool, vocab: int
) -> tuple[torch.Tensor, float]:
    """One call of the engine, audited (a broken output is a fault, naming the mode), with its seconds."""
    started = time.perf_counter()
    output = sut(prompts, num_tokens, params, seed, speculative)
    seconds = time.perf_counter() - started
    wrong = sut.layout.audit(EngineInputs(prompts, num_tokens, params, vocab), output, first_only=True)
    if wrong:
        mode = "on" if speculative else "off"
        raise SamplerFault(dataclasses.replace(wrong[0], message=f"{wrong[0].message} (speculation {mode})"))
    return output.cpu(), seconds


def _posable(case: str | None, declared: set[str], vocab: int) -> list[dict[str, Any]]:
    """The groups of a law check's case whose parameters the engine declares (a group it cannot be
    given is left out, as the loop family's history checks leave it), with their values for its
    ``vocab`` (a group whose value it has none of, a grammar over tokens it lacks, too)."""
    built = [
        {name: value(vocab) if callable(value) else value for name, value in group.items()}
        for group in ENGINE_GROUPS[case or "sampled"]
        if set(group) <= declared
    ]
    return [group for group in built if None not in group.values()]


def _law_rows(budget: Budget, alpha: float, groups: int) -> int:
    """Generations a law check draws in each mode by its last look: sized for the budget's TV at the
    last look's level, as many for each group."""
    size = budget.sample_size(PLANNED_DF * groups, alpha / len(LOOKS), factor=2)
    return groups * math.ceil(size.samples / groups)


def _two_sample(on: np.ndarray, off: np.ndarray, groups: int, vocab: int) -> TwoSampleTest:
    """The two modes' generations compared by :func:`~specverify.stats.two_sample_test`, each
    position's token given its prefix, within each parameter group (row ``r`` in group ``r % groups``)."""
    which = np.arange(len(on)) % groups
    tables = [pair for g in range(groups) for pair in position_tables(on[which == g], off[which == g], vocab)]
    return two_sample_test(np.concatenate([a for a, _ in tables]), np.concatenate([b for _, b in tables]))


def position_tables(a: np.ndarray, b: np.ndarray, vocab: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """For each position ``t``, the two arms' counts ``[prefixes, vocab + 1]`` of token ``t`` given the
    tokens before it (cell ``vocab``: the generation ended), over the prefixes either arm reached
    still running.  ``a`` and ``b`` are generations ``[N, L]`` with ``-1`` after an end."""
    a_codes, b_codes = _coded(a, vocab), _coded(b, vocab)
    base = vocab + 1
    tables = []
    for t in range(a.shape[1]):  # over positions, vectorised over generations
        running_a = (a_codes[:, :t] < vocab).all(axis=1)
        running_b = (b_codes[:, :t] < vocab).all(axis=1)
        prefixes = np.concatenate([a_codes[running_a, :t], b_codes[running_b, :t]])
        groups, inverse = _distinct_prefixes(prefixes, base)
        split = int(running_a.sum())
        cells = groups * base
        count_a = np.bincount(inverse[:split] * base + a_codes[running_a, t], minlength=cells)
        count_b = np.bincount(inverse[split:] * base + b_codes[running_b, t], minlength=cells)
        tables.append((count_a.reshape(-1, base), count_b.reshape(-1, base)))
    return tables


def _distinct_prefixes(prefixes: np.ndarray, base: int) -> tuple[int, np.ndarray]:
    """How many distinct rows ``prefixes`` ``[N, t]`` holds and each row's index among them, in
    lexicographic order: as one integer a row (its digits in ``base``, the first most significant,
    which sorts as the rows do) where that fits in 62 bits, a sort of 1-D keys instead of rows."""
    width = prefixes.shape[1]
    if width and width * math.log2(base) < 62:
        keys = prefixes @ (base ** np.arange(width - 1, -1, -1, dtype=np.int64))
        distinct, inverse = np.unique(keys, return_inverse=True)
    else:
        distinct, inverse = np.unique(prefixes, axis=0, return_inverse=True)
    return len(distinct), inverse.reshape(-1)


def length_counts(tokens: np.ndarray) -> np.ndarray:
    """``[L + 1]``: how many generations emitted each number of tokens before they ended."""
    lengths = (np.asarray(tokens) >= 0).sum(axis=1)
    return np.bincount(lengths, minlength=tokens.shape[1] + 1)


def _coded(tokens: np.ndarray, vocab: int) -> np.ndarray:
    """Tokens with ``-1`` (ended) as the symbol ``vocab``."""
    tokens = np.asarray(tokens, dtype=np.int64)
    return np.where(tokens < 0, vocab, tokens)


def _largest_gap(on: np.ndarray, off: np.ndarray, vocab: int) -> dict[str, Any]:
    """Where the two modes differ most, in words a person reads: the position whose token's law
    (an end included) is furthest apart in TV, and the generations' lengths."""
    base = vocab + 1
    gaps = []
    for t in range(on.shape[1]):  # over positions, vectorised over generations
        p = np.bincount(_coded(on, vocab)[:, t], minlength=base) / len(on)
        q = np.bincount(_coded(off, vocab)[:, t], minlength=base) / len(off)
        gaps.append((0.5 * float(np.abs(p - q).sum()), t, p, q))
    tv, t, p, q = max(gaps, key=lambda gap: gap[0])
    token = int(np.argmax(np.abs(p - q)))
    named = "an end" if token == vocab else f"token {token}"
    lengths = 0.5 * float(np.abs(length_counts(on) / len(on) - length_counts(off) / len(off)).sum())
    what = (
        f"position {t}: {named} at rate {p[token]:.4f} with speculation on, {q[token]:.4f} off (TV of the position's "
        f"law {tv:.3g}; of the lengths {lengths:.3g})"
    )
    return {"position": t, "token": token, "on": float(p[token]), "off": float(q[token]), "tv": tv, "what": what}


def engine_battery() -> list[EngineCheck]:
    """Every engine check: the exact ones first (cheap, decisive), then a law check per group."""
    checks = [EngineCheck("output"), EngineCheck("determinism"), EngineCheck("greedy")]
    checks += [EngineCheck("law", case) for case in ENGINE_GROUPS]
    return registered(checks, families=(ENGINE_FAMILY,))


def throughput_line(results: list[CheckResult]) -> str | None:
    """The engine's speed in each mode over a run's checks, in words (``None``: no engine check
    timed its calls): tokens a second as the checks called it, batches of up to its ``max_batch`` rows."""
    total: dict[str, list[float]] = {"on": [0, 0.0], "off": [0, 0.0]}
    for result in results:
        speed = result.evidence.get("throughput", {})
        for mode in ("on", "off"):
            if mode in speed:
                total[mode][0] += speed[mode]["tokens"]
                total[mode][1] += speed[mode]["seconds"]
    if not all(seconds > 0 for _, seconds in total.values()):
        return None
    on, off = (tokens / seconds for tokens, seconds in total.values())
    return (
        f"throughput: speculation on {on:,.0f} tokens/s, off {off:,.0f} tokens/s ({on / off:.2f}x), "
        f"over {int(total['on'][0] + total['off'][0]):,} tokens as the checks called the engine"
    )
