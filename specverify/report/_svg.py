"""Make a matplotlib SVG safe and tidy to inline in an HTML page.

matplotlib escapes the text it writes, but an inline SVG is markup the page trusts, so it is parsed
and rebuilt from an allow-list rather than trusted: no scripts, no foreign content, no event
handlers, no reference to anything outside the figure.  Ids are prefixed so that several figures
can share one page, the fixed drawing ink becomes ``currentColor`` (the figure follows the page's
light or dark text colour), and the height follows the width the page gives it.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

__all__ = ["INK", "inline_svg"]

#: The colour plots draw text and axes in; replaced by ``currentColor`` when inlined.
INK = "#010203"

_SVG = "http://www.w3.org/2000/svg"
_XLINK = "http://www.w3.org/1999/xlink"
_ALLOWED = {
    "svg", "g", "path", "rect", "circle", "ellipse", "line", "polyline", "polygon", "text", "tspan",
    "defs", "clipPath", "use", "style", "title", "desc",
}  # fmt: skip
_URL_REF = re.compile(r"url\(#([^)]+)\)")


def inline_svg(svg: str, prefix: str, *, label: str) -> str:
    """``svg`` (a whole SVG document) as a sanitised ``<svg>`` element for an HTML page.

    ``prefix`` makes its ids unique in the page; ``label`` becomes its accessible name.
    """
    root = ET.fromstring(svg)
    _prune(root)
    referenced = set()
    for element in root.iter():
        for value in element.attrib.values():
            referenced.update(_URL_REF.findall(value))
        href = element.get(f"{{{_XLINK}}}href") or element.get("href")
        if href and href.startswith("#"):
            referenced.add(href[1:])
    for element in root.iter():
        ident = element.get("id")
        if ident is not None:
            if ident in referenced:
                element.set("id", f"{prefix}-{ident}")
            else:
                del element.attrib["id"]
        for name, value in list(element.attrib.items()):
            if name in ("href", f"{{{_XLINK}}}href"):
                element.set(name, f"#{prefix}-{value[1:]}")
            elif "url(#" in value:
                element.set(name, _URL_REF.sub(lambda m: f"url(#{prefix}-{m.group(1)})", value))
    root.attrib.pop("height", None)  # the page scales it: width is a maximum, height follows the viewBox
    root.set("role", "img")
    root.set("aria-label", label)
    ET.register_namespace("", _SVG)
    ET.register_namespace("xlink", _XLINK)
    text = ET.tostring(root, encoding="unicode", short_empty_elements=True)
    return text.replace(INK, "currentColor")


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _prune(parent: ET.Element) -> None:
    """Drop disallowed elements (with their content) and unsafe attributes, recursively."""
    for child in list(parent):
        if not isinstance(child.tag, str) or _local(child.tag) not in _ALLOWED:
            parent.remove(child)
            continue
        _prune(child)
    for name, value in list(parent.attrib.items()):
        if _unsafe_attribute(_local(name).lower(), value):
            del parent.attrib[name]
    if _local(parent.tag) == "style" and parent.text and _unsafe_css(parent.text):
        parent.text = ""


def _unsafe_attribute(name: str, value: str) -> bool:
    """Event handlers, links out of the figure, and styles that could fetch."""
    if name.startswith("on") or (name == "style" and _unsafe_css(value)):
        return True
    if name == "href":
        return not value.startswith("#")
    return "url(" in value and not all(part.startswith("#") for part in re.findall(r"url\(([^)]*)\)", value))


def _unsafe_css(css: str) -> bool:
    lowered = css.lower()
    return "@import" in lowered or "expression(" in lowered or re.search(r"url\(\s*['\"]?(?!#)", lowered) is not None
