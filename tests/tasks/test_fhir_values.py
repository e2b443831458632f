"""FHIR-aware comparison: ``differs`` says yes exactly when ``changed_paths`` names a path."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from typing import Any

from fae.tasks.fhir_values import changed_paths, differs, same_resource


class _Frozen(Mapping[str, Any]):
    """A Mapping that is not a dict (a capture's resources are read through one)."""

    def __init__(self, items: dict[str, Any]):
        self._items = items

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


# values where the tree walk has a special case: empty objects (no leaf, so no path), objects of empty objects,
# empty and unequal lists, numbers of different types, instants in two zones, booleans against numbers
VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    1,
    1.0,
    1.5,
    "1",
    "",
    "x",
    "2025-03-21T11:00:00Z",
    "2025-03-21T12:00:00+01:00",
    "2025-03-21T11:00:00",
    [],
    [1],
    [1.0],
    [1, 2],
    [{}],
    [{"a": {}}],
    {},
    {"a": {}},
    {"a": {"b": {}}},
    {"a": 1},
    {"a": 1.0},
    {"a": [1]},
    {"a": []},
    {"b": 1},
    {"a": 1, "b": {}},
    {"a": {"b": 1}},
    {"a": {"b": "2025-03-21T11:00:00Z"}},
    {"a": {"b": "2025-03-21T12:00:00+01:00"}},
    _Frozen({"a": 1}),
    _Frozen({"a": {}}),
]


def test_differs_agrees_with_changed_paths_on_every_pair_of_tricky_values():
    checked = 0
    for before, after in itertools.product(VALUES, repeat=2):
        wanted = bool(changed_paths(before, after))
        assert differs(before, after) is wanted, (before, after, changed_paths(before, after))
        checked += 1
    assert checked == len(VALUES) ** 2
    # the cases that make the shortcut worth having a test: equal by value though unequal in Python, and
    # unequal though one side only adds empty objects
    assert not differs({"a": 1, "when": "2025-03-21T11:00:00Z"}, {"a": 1.0, "when": "2025-03-21T12:00:00+01:00"})
    assert not differs({"a": 1}, {"a": 1, "b": {"c": {}}})
    assert differs({"a": 1}, {"a": 1, "b": {"c": {"d": None}}})


def test_same_resource_ignores_what_the_server_sets_and_nothing_else():
    seeded = {
        "resourceType": "Patient",
        "id": "p1",
        "meta": {"versionId": "1", "lastUpdated": "2025-01-01T00:00:00Z"},
        "text": {"status": "generated"},
        "birthDate": "1970-01-01",
        "name": [{"family": "Ng"}],
    }
    bumped = {**seeded, "meta": {"versionId": "2", "lastUpdated": "2025-01-02T00:00:00Z"}, "text": {"status": "x"}}
    assert same_resource(seeded, bumped)
    renamed = {**bumped, "name": [{"family": "Ng", "given": ["Al"]}]}
    assert not same_resource(seeded, renamed)
    tagged = {**bumped, "meta": {**bumped["meta"], "tag": [{"code": "t"}]}}
    assert not same_resource(seeded, tagged)
