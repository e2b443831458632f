"""The values a FHIRPath expression selects in a resource: walked directly where it is plain, else by fhirpathpy."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from fhirpathpy import compile as fhirpath_compile

from fae.tasks.fhirpath_walk import Unsupported, compile_simple


@lru_cache(maxsize=512)
def _compiled(path: str) -> Callable[[Any], list[Any]]:
    """A path compiled once: walked directly where it is a plain selection, else by fhirpathpy."""
    simple = compile_simple(path)
    if simple is None:
        return _fhirpath(path)

    def evaluate(resource: Any) -> list[Any]:
        try:
            return simple(resource)
        except Unsupported:
            return _general(path)(resource)

    return evaluate


@lru_cache(maxsize=512)
def _general(path: str) -> Callable[[Any], list[Any]]:
    return _fhirpath(path)


def _fhirpath(path: str) -> Callable[[Any], list[Any]]:
    """fhirpathpy's compiled path as a one-argument function (no context, its default), over a copy."""
    compiled = fhirpath_compile(path)
    return lambda resource: compiled(dict(resource), None)


def values(resource: Mapping[str, Any], path: str) -> list[Any]:
    """The values a FHIRPath expression selects in a resource."""
    # the direct walk reads dicts only and never changes them; fhirpathpy is handed a copy (_fhirpath)
    return list(_compiled(path)(resource if type(resource) is dict else dict(resource)))
