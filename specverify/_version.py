"""The package version, in one place: pyproject.toml reads it, and modules import it from here
(never from the package root, which would import the whole package)."""

__version__ = "0.1.0"
