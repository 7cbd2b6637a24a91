"""Read a rendered page back as a browser's parser would, to say what it could execute or fetch."""

from __future__ import annotations

import dataclasses
from html.parser import HTMLParser

__all__ = ["ALLOWED_TAGS", "Audit", "audit"]

ALLOWED_TAGS = {
    "html", "head", "meta", "title", "link", "style", "body", "header", "nav", "footer", "section", "h1", "h2",
    "h3", "h4", "p", "div", "span", "a", "code", "pre", "strong", "br", "table", "caption", "thead", "tbody",
    "tfoot", "tr", "th", "td", "details", "summary", "dl", "dt", "dd", "button", "figure", "figcaption", "script",
    # inline SVG plots, after sanitising
    "svg", "g", "path", "rect", "text", "defs", "clippath", "use", "tspan",
}  # fmt: skip


@dataclasses.dataclass
class Audit:
    tags: list[str]
    attributes: list[tuple[str, str, str]]
    scripts: list[str]
    text: list[str]

    def unexpected_tags(self) -> set[str]:
        return set(self.tags) - ALLOWED_TAGS

    def event_handlers(self) -> list[tuple[str, str, str]]:
        return [a for a in self.attributes if a[1].startswith("on")]

    def references(self) -> list[str]:
        """Every URL the page names (links, sources, SVG references)."""
        return [
            value for _, name, value in self.attributes if name in ("href", "src", "xlink:href", "action", "srcset")
        ]


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.result = Audit([], [], [], [])
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.result.tags.append(tag)
        self.result.attributes += [(tag, name, value or "") for name, value in attrs]
        if tag == "script":
            self._in_script = True
            self.result.scripts.append("")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag == "script":
            self._in_script = False

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.result.scripts[-1] += data
        else:
            self.result.text.append(data)


def audit(html: str) -> Audit:
    parser = _Parser()
    parser.feed(html)
    parser.close()
    return parser.result
