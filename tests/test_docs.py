"""Docs that cannot drift: every module, class and function docs/architecture.md and docs/layout.md
name exists in the package, their error tree is the one ``specverify.errors`` documents, and the
public API table lists exactly the facade and its public submodules.

What counts as a name, in a span of code (between backticks, or in a code block):

* a path (``_calling/sut.py``, ``specverify/_run/``, ``checks/_looks.py::FutilityLooks``): the file
  or folder exists in the package (a bare file name: somewhere in it), and the name after ``::`` in it;
* a dotted name whose first part is ``specverify``, a top-level module of the package or a class
  the package defines (``checks._plan.BATTERIES``, ``RunInfo.to_json``): it resolves by import;
* a lone name that can only be code: CamelCase, ALL_CAPS or snake_case with an underscore
  (``SamplerUnderTest``, ``BATTERIES``, ``kind_of``): the package (or Python) defines it.

Lone lowercase words (``chain``, ``step``), flags, JSON keys and other spans are prose and not read.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import functools
import importlib
import pathlib
import re
import warnings

import pytest

import specverify

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = pathlib.Path(specverify.__file__).parent
DOCS = ("docs/architecture.md", "docs/layout.md")

_PATH = re.compile(r"^(?:specverify/)?[\w./]*?(?:\.py|/)(?:::\w+)?$")
_DOTTED = re.compile(r"^[A-Za-z_]\w*(?:\.\w+)+$")
_LONE = re.compile(r"^(?:_?[A-Z][a-z0-9]\w*|_?[A-Z][A-Z0-9_]+|_?[a-z][a-z0-9]*_\w+)$")


@functools.cache
def defined_names() -> frozenset[str]:
    """Every class, function, method, module-level name and attribute the package defines."""
    names: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        names.add(path.stem)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    for part in ast.walk(target):
                        if isinstance(part, ast.Name):
                            names.add(part.id)
                        elif isinstance(part, ast.Attribute):
                            names.add(part.attr)
            elif isinstance(node, ast.ImportFrom) and not node.level:  # a library's name the package uses
                names.update(alias.asname or alias.name for alias in node.names)
    return frozenset(names | set(dir(builtins)) | set(specverify.__all__))


@functools.cache
def class_homes() -> dict[str, str]:
    """The module that defines each class of the package (the first found, for a name two define)."""
    homes: dict[str, str] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(("specverify", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                homes.setdefault(node.name, module)
    return homes


def _has(owner: object, name: str) -> bool:
    if hasattr(owner, name):
        return True
    if dataclasses.is_dataclass(owner) and name in {f.name for f in dataclasses.fields(owner)}:
        return True
    return name in getattr(owner, "__annotations__", {})


def resolve_dotted(name: str) -> bool:
    """Whether ``a.b.c`` resolves: the longest importable module prefix, then attributes."""
    parts = name.split(".")
    if parts[0] in class_homes() and parts[0] != "specverify":
        owner: object = getattr(importlib.import_module(class_homes()[parts[0]]), parts[0])
        rest = parts[1:]
    else:
        if parts[0] != "specverify":
            parts = ["specverify", *parts]
        for cut in range(len(parts), 0, -1):
            try:
                owner = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            rest = parts[cut:]
            break
        else:
            return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # a moved facade name still resolves
        for part in rest:
            if not _has(owner, part):
                return False
            owner = getattr(owner, part, None)
    return True


def resolve_path(span: str) -> bool:
    """Whether a path names a file or folder of the package (``specverify/`` optional), of the
    repository (``tests/test_kinds.py``, ``scripts/``), or, a bare name, anywhere in the package or tests."""
    path, _, attribute = span.partition("::")
    if path == "specverify/":
        return True
    if "/" in path.rstrip("/"):
        found = [PACKAGE / path.removeprefix("specverify/"), ROOT / path]
    else:
        found = [ROOT / path, *PACKAGE.rglob(path.rstrip("/")), *(ROOT / "tests").rglob(path.rstrip("/"))]
    found = [p for p in found if p.exists() and (p.is_dir() if path.endswith("/") else p.is_file())]
    if not found:
        return False
    return not attribute or any(
        p.is_file() and re.search(rf"^\s*(?:class|def) {attribute}\b", p.read_text(), re.M) for p in found
    )


def top_level_modules() -> set[str]:
    return {
        p.stem if p.is_file() else p.name
        for p in PACKAGE.iterdir()
        if p.suffix == ".py" or (p / "__init__.py").exists()
    }


def spans(text: str) -> list[tuple[str, bool]]:
    """The code spans of a markdown text: between backticks, and each word of its code blocks (a
    block's capitalised words are prose: only its paths, dotted names and snake_case ones are read)."""
    found = [(span, True) for span in re.findall(r"`([^`\n]+)`", _without_blocks(text))]
    for block in _blocks(text):
        found += [(word, False) for word in re.findall(r"[\w./:]+", block)]
    return found


def _blocks(text: str) -> list[str]:
    """Indented (4 spaces, after a blank line) and fenced code blocks."""
    fenced = re.findall(r"^```[^\n]*\n(.*?)^```", text, re.M | re.S)
    indented = re.findall(
        r"(?:^\n)((?:^(?: {4}|\t).*\n|^\n)+)", re.sub(r"^```.*?^```", "", text, flags=re.M | re.S), re.M
    )
    return fenced + indented


def _without_blocks(text: str) -> str:
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    return re.sub(r"(?:^\n)((?:^(?: {4}|\t).*\n|^\n)+)", "\n", text, flags=re.M)


def wrong_names(text: str) -> list[str]:
    """The spans of ``text`` that name code the package does not have."""
    wrong = []
    for raw, quoted in spans(text):
        span = re.sub(r"\(.*\)$", "", raw.strip()).rstrip(".,:;")  # a call's arguments, a sentence's stop
        if _PATH.match(span) and ("/" in span or span.endswith(".py")):
            ok = resolve_path(span)
        elif _DOTTED.match(span) and span.split(".")[0] in {"specverify", *top_level_modules(), *class_homes()}:
            ok = resolve_dotted(span)
        elif _LONE.match(span) and (quoted or span[0].islower()):
            ok = span in defined_names()
        else:
            continue
        if not ok:
            wrong.append(raw)
    return sorted(set(wrong))


@pytest.mark.parametrize("doc", DOCS)
def test_every_name_the_docs_give_exists(doc):
    assert wrong_names((ROOT / doc).read_text()) == []


@pytest.mark.parametrize(
    "planted, named",
    [
        ("`checks._plan.BATTERIES`", "checks._plan.BATTERIES"),  # a module that moved
        ("`specverify._kinds.no_such_function`", "specverify._kinds.no_such_function"),
        ("`LoopFault`", "LoopFault"),  # a class that is gone
        ("`NoSuchClass(x, y)`", "NoSuchClass(x, y)"),
        ("`RunInfo.no_such_field`", "RunInfo.no_such_field"),
        ("`no_such_function`", "no_such_function"),
        ("`_calling/no_such_module.py`", "_calling/no_such_module.py"),
        ("`checks/_looks.py::NoSuchLooks`", "checks/_looks.py::NoSuchLooks"),
        ("`no_such_folder/`", "no_such_folder/"),
        ("    specverify/_no_such_module.py      a line of a code block\n", "specverify/_no_such_module.py"),
        ("    _run/          the run layer: no_such_helper (what it does)\n", "no_such_helper"),
    ],
)
def test_a_planted_wrong_name_is_found(planted, named):
    prose = "More prose naming `kind_of`, `RunInfo.to_json` and `specverify._calling.sut.SamplerUnderTest`.\n"
    assert wrong_names(f"Some prose.\n\n{planted}\n\n{prose}") == [named]


def public_table() -> dict[str, list[str]]:
    """The public API table of docs/architecture.md: each row's modules and the names it lists."""
    text = (ROOT / "docs/architecture.md").read_text()
    section = text.split("## Public API", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`specverify"):
            first = re.findall(r"`([^`]+)`", cells[0])
            modules = [m if m.startswith("specverify") else "specverify" + m for m in first]
            for module in modules:
                rows[module] = re.findall(r"`([A-Za-z_]\w*)`", cells[1])
    return rows


def test_the_public_api_table_lists_exactly_the_facade_and_its_public_submodules():
    rows = public_table()
    assert sorted(rows.pop("specverify")) == sorted(specverify.__all__)
    assert sorted(rows) == sorted(f"specverify.{name}" for name in specverify._SUBMODULES)
    for module, names in rows.items():  # a row that lists names lists public ones of its module
        exported = set(importlib.import_module(module).__all__)
        assert [n for n in names if n not in exported] == [], module


def test_every_public_submodule_is_one_the_facade_reaches():
    """A public module of the package (no leading underscore) is a submodule of the facade."""
    public = {name for name in top_level_modules() if not name.startswith("_")}
    assert public == set(specverify._SUBMODULES)


def test_the_error_tree_is_the_one_specverify_errors_documents():
    def tree(text: str) -> list[str]:
        return [
            line.strip()
            for line in text.splitlines()
            if re.match(r"\s*(?:[│├└].*──|Exception$|KeyboardInterrupt$)", line)
        ]

    documented = (ROOT / "docs/architecture.md").read_text().split("## Errors", 1)[1].split("\n## ", 1)[0]
    assert tree(documented) == tree(importlib.import_module("specverify.errors").__doc__ or "")


def test_the_layout_names_every_top_level_module_and_folder_of_the_package():
    block = "\n".join(_blocks((ROOT / "docs/layout.md").read_text()))
    named = set(re.findall(r"\b([\w]+)(?:\.py|/)", block))
    assert sorted(top_level_modules() - named - {"__main__"}) == []


def layout_top_level(text: str) -> list[str]:
    """The entries the layout's tree puts at the package's top level: the names that open a line
    indented two spaces under ``specverify/`` (several on one line: ``laws.py models.py ...``)."""
    found = []
    for block in _blocks(text):
        for line in block.splitlines():
            head = re.match(r"^  ((?:\w+(?:\.py|/) ?)+)", line)
            if head:
                found += head.group(1).split()
    return found


def test_the_layout_puts_at_the_top_level_only_what_is_there():
    """A module the layout shows at the top level is one (not a name that moved into a folder)."""
    entries = layout_top_level((ROOT / "docs/layout.md").read_text())
    assert len(entries) > 20
    assert [e for e in entries if not (PACKAGE / e).exists()] == []


def test_a_moved_module_left_at_the_top_level_is_found():
    text = "```\nspecverify/\n  _exact.py        exact laws\n  _laws/ _record/  the laws, the record\n```\n"
    assert layout_top_level(text) == ["_exact.py", "_laws/", "_record/"]
    assert [e for e in layout_top_level(text) if not (PACKAGE / e).exists()] == ["_exact.py"]


#: The folders docs/layout.md maps module by module (the public subpackages have pages of their own).
MAPPED = ("_calling", "_cli", "_kinds", "_laws", "_record", "_run", "_trees", "_warps", "_worker", "checks")


@pytest.mark.parametrize("folder", MAPPED)
def test_the_layout_names_every_module_of_the_folders_it_maps(folder):
    named = set(re.findall(r"\w+", "\n".join(_blocks((ROOT / "docs/layout.md").read_text()))))
    modules = {p.stem for p in (PACKAGE / folder).glob("*.py")} - {"__init__", "__main__"}
    assert sorted(modules - named) == []
