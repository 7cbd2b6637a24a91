"""Render pages with Jinja2: autoescaped templates, inline assets, a strict Content-Security-Policy.

Every value from a run reaches the page through Jinja2's autoescaping, so a sampler's name,
messages, exception text and repro snippet are text, never markup.  The only markup inserted
unescaped is the page's own CSS and script and the sanitised plot SVG.  As a second line of
defence the page forbids every script but its own (by hash) and every fetch, so even an escaping
slip could neither run code nor load anything.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import os
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from ._format import FILTERS, visible

__all__ = ["render", "write_text"]


@functools.cache
def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("specverify.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=visible,
    )

    environment.filters.update(FILTERS)
    return environment


@functools.cache
def _page() -> dict[str, Any]:
    """What every page shares: CSS, script, and a policy that allows exactly that script."""
    from .._record.result import SCHEMA_VERSION
    from .._version import __version__

    templates = resources.files("specverify.report") / "templates"
    css = (templates / "style.css").read_text(encoding="utf-8")
    script = (templates / "report.js").read_text(encoding="utf-8")
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    csp = (
        "default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
        f"script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"
    )
    return {
        "css": Markup(css),
        "script": Markup(script),
        "csp": csp,
        "version": __version__,
        "schema_version": SCHEMA_VERSION,
    }


def render(template: str, **context: Any) -> str:
    """Render one of the package's templates with the shared page assets."""
    return _environment().get_template(template).render(page=_page(), **context)


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write atomically (a reader never sees half a page), creating parent folders."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.chmod(temporary, 0o644)  # a report is meant to be shared, unlike mkstemp's private default
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
