"""The `fae` command line: thin wrappers over the library."""

from fae.cli.main import app

__all__ = ["app"]
