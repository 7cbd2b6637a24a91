"""The package's own shape: its version in one module, type information shipped, no import of the root."""

from __future__ import annotations

import ast
import pathlib

import specverify
from specverify._version import __version__

ROOT = pathlib.Path(specverify.__file__).parent


def test_the_version_lives_in_one_module():
    assert specverify.__version__ == __version__
    assert (ROOT / "py.typed").is_file()  # pyproject's package-data ships it: the package is typed


def test_no_module_imports_a_name_from_the_package_root():
    """``from .. import __version__`` reads a half-initialised root while the root's own imports run."""
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        package = ("specverify", *path.relative_to(ROOT).parent.parts)
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or node.level == 0:
                continue
            target = package[: len(package) - node.level + 1] + tuple(
                (node.module or "").split(".") if node.module else ()
            )
            if target == ("specverify",):
                submodules = [
                    a.name for a in node.names if (ROOT / a.name).is_dir() or (ROOT / f"{a.name}.py").is_file()
                ]
                offenders += [f"{path.relative_to(ROOT)}: {a.name}" for a in node.names if a.name not in submodules]
    assert offenders == []
