"""The public API is small, sorted and complete, with one list of names; docs and examples use only it."""

from __future__ import annotations

import ast
import importlib
import pathlib
import re
import subprocess
import sys
import warnings

import pytest

import specverify

MODULES = [
    "specverify",
    "specverify.adapters",
    "specverify.checks",
    "specverify.errors",
    "specverify.laws",
    "specverify.models",
    "specverify.replay",
    "specverify.report",
    "specverify.samplers",
    "specverify.stats",
    "specverify.strategies",
    "specverify.trees",
    "specverify.warps",
    "specverify.zoo",
]
ROOT = pathlib.Path(specverify.__file__).parent
REPO = ROOT.parent


@pytest.mark.parametrize("name", MODULES)
def test_all_is_sorted_and_complete(name):
    module = importlib.import_module(name)
    names = module.__all__
    assert names == sorted(names)
    for attribute in names:
        assert hasattr(module, attribute), f"{name}.{attribute} is in __all__ but missing"


def test_the_facade_is_small():
    assert len(specverify.__all__) <= 25, specverify.__all__


def _type_checking_imports() -> dict[str, tuple[str, str]]:
    """The facade's ``if TYPE_CHECKING:`` imports, as ``name -> (module, attribute)``."""
    tree = ast.parse((ROOT / "__init__.py").read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", None) == "TYPE_CHECKING")
    found = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom), ast.dump(node)
        for alias in node.names:
            found[alias.asname or alias.name] = ("." * node.level + (node.module or ""), alias.name)
    return found


def test_one_list_of_names_the_type_checking_imports_agree_with_it():
    public = specverify._PUBLIC
    assert _type_checking_imports() == public
    assert specverify.__all__ == sorted([*public, "__version__"])
    for name, (module, attribute) in public.items():  # every entry resolves to what it names
        assert getattr(specverify, name) is getattr(importlib.import_module(module, "specverify"), attribute), name


def test_every_name_the_public_submodules_export_is_defined_once():
    """A name is public in one place: the facade or one submodule, never two (``__version__`` aside)."""
    seen: dict[str, str] = {}
    for name in (
        "specverify",
        "specverify.errors",
        "specverify.laws",
        "specverify.models",
        "specverify.replay",
        "specverify.trees",
        "specverify.warps",
    ):
        for attribute in importlib.import_module(name).__all__:
            if name == "specverify.errors" and attribute in specverify.__all__:
                continue  # the facade re-exports the errors a run raises
            assert attribute not in seen, f"{attribute} is public in {seen.get(attribute)} and {name}"
            seen[attribute] = name


def test_moved_names_still_resolve_with_a_warning():
    for name, where in specverify._MOVED.items():
        assert name not in specverify.__all__ and name not in dir(specverify)
        with pytest.warns(DeprecationWarning, match=f"specverify.{where}.{name}"):
            value = getattr(specverify, name)
        assert value is getattr(importlib.import_module(f"specverify.{where}"), name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        specverify.check  # noqa: B018 - a public name warns nothing
    with pytest.raises(AttributeError):
        specverify.no_such_name  # noqa: B018


def test_importing_the_package_does_not_import_triton_or_transformers():
    code = "import specverify, sys; print(sorted(m for m in ('triton', 'transformers', 'torch') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


#: The one page written for the package's maintainers: it maps the private house on purpose.
MAINTAINERS_PAGES = {"docs/architecture.md"}


def _user_facing_files() -> list[pathlib.Path]:
    docs = [
        path for path in (REPO / "docs").rglob("*.md") if path.relative_to(REPO).as_posix() not in MAINTAINERS_PAGES
    ]
    files = [*docs, *(REPO / "examples").rglob("*.py"), *(REPO / "scripts").rglob("*.py")]
    assert len(files) > 5  # the folders exist where this test looks
    return sorted(files)


#: A private name of the package (``specverify._trees.contract``; not a dunder such as ``specverify.__file__``).
PRIVATE = re.compile(r"\bspecverify\._(?!_)")
#: Lines of the maintainers' scripts allowed a private name, each with its reason.
ALLOWED = {
    # the stored reports are named after the sampler as a run names it; no public name gives that
    "scripts/regenerate_reports.py": ("from specverify._contract import name_of",)
}


def test_docs_examples_and_scripts_use_no_private_name():
    """What a user reads or copies imports only public names: a ``specverify._`` name may move."""
    offenders = []
    for path in _user_facing_files():
        allowed = ALLOWED.get(path.relative_to(REPO).as_posix(), ())
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if PRIVATE.search(line) and line.strip() not in allowed:
                offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert offenders == []


def test_the_private_name_probe_finds_a_private_name():
    assert PRIVATE.search("from specverify._trees.contract import TreeBatch")
    assert not PRIVATE.search("from specverify.trees import TreeBatch")
    assert not PRIVATE.search("Path(specverify.__file__)")


def test_a_model_case_prints_as_code_that_uses_public_names_only():
    """A repro snippet's model rebuilds through public, non-deprecated names."""
    import torch

    from specverify.models import ChainModel, TableModel
    from specverify.replay import ModelCase

    laws = torch.tensor([[0.25, 0.75], [0.5, 0.5]], dtype=torch.float64)
    cases = [
        ModelCase(ChainModel(laws, laws.flip(0), (0,)), 2),
        ModelCase(TableModel((laws[:1], laws), (laws[1:],)), 1),
    ]
    for case in cases:
        code = case.to_code()
        assert not PRIVATE.search(code)
        namespace: dict = {}
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a moved name would warn
            exec(f"import torch\nimport specverify\n{code}", namespace)  # noqa: S102 - our own snippet
        assert type(namespace["model"]) is type(case.model) and namespace["k"] == case.k
