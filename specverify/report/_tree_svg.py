"""A failing tree case drawn for the report: its nodes and tokens, the accepted path, where the law breaks.

The ``trees`` family records the case it failed on as ``evidence["tree_case"]``: ``parents`` and
``tokens`` (node 0 the root), and, as far as the check knows them, the failing output's ``path``
and ``token``, and per node how often a path ended there against the exact law's expectation
(``ends_observed``, ``ends_expected``).  This draws it as a plain SVG, node 0 on top, each level
one row down, children in the order they are tried; the accepted path is drawn thick, and the node
whose count is farthest from its expectation (in standard deviations), or the node of the failing
output the target forbids (``breaks_at``), is ringed in red: where the law breaks.
"""

from __future__ import annotations

import math
from html import escape

from .._record.evidence import TreeCase
from ._svg import INK, inline_svg

__all__ = ["tree_case_svg"]

_DX, _DY, _R = 46, 64, 15
_BAD = "#c0392b"


def _layout(parents: list[int]) -> tuple[list[int], list[float]]:
    """Depth and horizontal place of every node: leaves left to right in try order, parents centred."""
    children: list[list[int]] = [[] for _ in parents]
    for node in range(1, len(parents)):
        children[parents[node]].append(node)
    depth = [0] * len(parents)
    for node in range(1, len(parents)):
        depth[node] = depth[parents[node]] + 1
    place = [0.0] * len(parents)
    next_leaf = [0.0]

    def visit(node: int) -> None:  # depth-first; depth is bounded by the 64-node trees the family draws
        if not children[node]:
            place[node] = next_leaf[0]
            next_leaf[0] += 1.0
            return
        for child in children[node]:
            visit(child)
        place[node] = (place[children[node][0]] + place[children[node][-1]]) / 2

    visit(0)
    return depth, place


def _worst_node(case: TreeCase) -> int | None:
    breaks_at = case.get("breaks_at")
    if isinstance(breaks_at, int):
        return int(breaks_at)
    observed, expected = case.get("ends_observed"), case.get("ends_expected")
    if isinstance(observed, list) and isinstance(expected, list) and observed and len(observed) == len(expected):
        score = [
            abs(o - e) / math.sqrt(max(e, 1.0)) + (1e9 if e == 0 and o > 0 else 0.0) for o, e in zip(observed, expected)
        ]
        best = max(range(len(score)), key=score.__getitem__)
        return best if score[best] > 0 else None
    path = case.get("path")
    if isinstance(path, list):
        steps = [n for n in path if isinstance(n, int) and n >= 0]
        return steps[-1] if steps else None
    return None


def tree_case_svg(case: TreeCase, prefix: str, *, label: str) -> str | None:
    """The case as an inline, sanitised ``<svg>``; ``None`` if it is not a drawable tree."""
    parents, tokens = case.get("parents"), case.get("tokens")
    if (
        not isinstance(parents, list)
        or not isinstance(tokens, list)
        or len(parents) != len(tokens)
        or not parents
        or parents[0] != -1
    ):
        return None
    if any(not isinstance(p, int) or not 0 <= p < i for i, p in enumerate(parents) if i):
        return None
    depth, place = _layout(parents)
    path = [n for n in case.get("path") or [] if isinstance(n, int) and 0 <= n < len(parents)]
    worst = _worst_node(case)
    if not path and worst is not None:  # no single failing output: the path to where the law breaks
        path = [worst]
        while path[-1] != 0:
            path.append(parents[path[-1]])
        path.reverse()
    on_path = set(path)
    observed, expected = case.get("ends_observed"), case.get("ends_expected")
    width = int(_DX * (max(place) + 1) + 2 * _R)
    height = int(_DY * (max(depth) + 1) + 2 * _R)

    def xy(node: int) -> tuple[float, float]:
        return _R + _DX * (place[node] + 0.5), _R + _DY * depth[node] + 10

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}">'
    ]
    for node in range(1, len(parents)):
        (x1, y1), (x2, y2) = xy(parents[node]), xy(node)
        thick = node in on_path and parents[node] in on_path
        parts.append(
            f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{INK}" '
            f'stroke-width="{3.5 if thick else 1}" />'
        )
    for node in range(len(parents)):
        x, y = xy(node)
        ring = _BAD if node == worst else INK
        fill = "#5b8def" if node in on_path else "none"
        title = f"node {node}" + (f", token {tokens[node]}" if node else " (root)")
        if isinstance(observed, list) and node < len(observed) and isinstance(expected, list):
            title += f"; paths ending here: observed {observed[node]}, expected {expected[node]:.1f}"
        parts.append(
            f'<g><title>{escape(title)}</title><circle cx="{x:.1f}" cy="{y:.1f}" r="{_R}" fill="{fill}" '
            f'fill-opacity="0.35" stroke="{ring}" stroke-width="{3 if node == worst else 1}" /><text x="{x:.1f}" '
            f'y="{y + 4:.1f}" font-size="{11 if node else 8}" text-anchor="middle" '
            f'fill="{INK}">{escape(str(tokens[node]) if node else "root")}</text></g>'
        )
    token = case.get("token")
    if path and isinstance(token, int):
        x, y = xy(path[-1])
        parts.append(
            f'<text x="{x:.1f}" y="{y + _R + 12:.1f}" font-size="10" text-anchor="middle" fill="{_BAD}">emits '
            f"{token}</text>"
        )
    parts.append("</svg>")
    return inline_svg("".join(parts), prefix, label=label)
