"""The laws that decide a failing tree case, laid out beside its drawing (:mod:`._tree_svg`).

A failing tree case's evidence (``evidence["tree_case"]``, written by
``specverify.checks._tree_cases.case_json``) carries, for ``V <= 64``, the target row ``p`` and the
draft row ``q`` at each node on the failing path (``rows``, root first), which nodes those are
(``rows_of``), the smallest nonzero ``|p - q|`` over them and the mechanism in words.  This turns
them into one small table per node: the node and its token, then ``p`` and ``q`` over the tokens
that matter (every token when ``V`` is small; else the largest entries, with the token the path
takes next and the emitted token always kept), the token taken next highlighted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ._format import number

__all__ = ["NodeRows", "TreeRows", "tree_rows"]

#: Most token columns a node's table shows (all of them up to this ``V``).
MAX_COLUMNS = 10


@dataclasses.dataclass
class NodeRows:
    """One node on the failing path: its title, the tokens shown, ``p`` and ``q`` over them."""

    title: str
    tokens: list[int]
    target: list[str]
    draft: list[str] | None
    next_token: int | None  # the token the path takes from here (or the emitted token at its end)
    hidden: int  # tokens left out of the table (the smallest entries)


@dataclasses.dataclass
class TreeRows:
    """The failing path's laws, node by node, with what decides the case."""

    rows_of: str
    nodes: list[NodeRows]
    smallest_difference: str | None
    mechanism: str | None


def _floats(values: Any) -> list[float] | None:
    if not isinstance(values, list) or not all(isinstance(v, (int, float)) for v in values):
        return None
    return [float(v) for v in values]


def _columns(p: list[float], q: list[float] | None, keep: list[int]) -> list[int]:
    """The tokens a node's table shows, in token order: all of them up to :data:`MAX_COLUMNS`,
    else ``keep`` and the largest ``max(p, q)``."""
    vocab = len(p)
    if vocab <= MAX_COLUMNS:
        return list(range(vocab))
    weight = [max(p[t], q[t] if q is not None else 0.0) for t in range(vocab)]
    chosen = [t for t in keep if 0 <= t < vocab]
    for t in sorted(range(vocab), key=lambda t: -weight[t]):
        if len(chosen) >= MAX_COLUMNS:
            break
        if t not in chosen:
            chosen.append(t)
    return sorted(chosen)


def tree_rows(case: Mapping[str, Any]) -> TreeRows | None:
    """The case's rows as shown, or ``None`` where it carries none (``V`` above 64, older JSON)."""
    rows, parents, tokens = case.get("rows"), case.get("parents"), case.get("tokens")
    if not isinstance(rows, list) or not rows or not isinstance(parents, list) or not isinstance(tokens, list):
        return None
    nodes = [r.get("node") for r in rows if isinstance(r, Mapping)]
    path = [n for n in nodes if isinstance(n, int) and 0 <= n < len(tokens)]
    emitted = case.get("token") if isinstance(case.get("token"), int) else None
    shown = []
    for row in rows:
        node = row.get("node") if isinstance(row, Mapping) else None
        p = _floats(row.get("target")) if isinstance(row, Mapping) else None
        if not isinstance(node, int) or not 0 <= node < len(tokens) or p is None:
            continue
        q = _floats(row.get("draft"))
        if q is not None and len(q) != len(p):
            q = None
        following = path.index(node) + 1 if node in path else len(path)
        next_token = tokens[path[following]] if following < len(path) else emitted
        columns = _columns(p, q, [t for t in (next_token,) if isinstance(t, int)])
        title = (
            f"node {node}"
            + (" (root)" if node == 0 else f", token {tokens[node]}")
            + (", a leaf" if node not in parents[1:] else "")
        )
        shown.append(
            NodeRows(
                title=title,
                tokens=columns,
                target=[number(p[t]) for t in columns],
                draft=None if q is None else [number(q[t]) for t in columns],
                next_token=next_token if isinstance(next_token, int) else None,
                hidden=len(p) - len(columns),
            )
        )
    if not shown:
        return None
    smallest = case.get("smallest_difference")
    mechanism = case.get("mechanism")
    return TreeRows(
        rows_of=str(case.get("rows_of") or "the nodes involved"),
        nodes=shown,
        smallest_difference=number(smallest) if isinstance(smallest, (int, float)) else None,
        mechanism=str(mechanism) if isinstance(mechanism, str) else None,
    )
