"""Conditional matching without a scan: token indexes for `identifier=system|value`-style conditions.

Conditional create (If-None-Exist, `ifNoneExist`), update, delete and
conditional references name a resource by a query, typically an identifier.
Scanning the sandbox for each would make a 1,000-entry transaction on a large
sandbox quadratic; instead the first such query on a (type, token parameter)
builds an index on the store, which every later write keeps up to date.
Candidates from the index are then checked against the whole query, so the
answer is the same as a scan's.
"""

from __future__ import annotations

from fae.fhir.search import (
    SearchContext,
    criterion,
    filter_resources,
    split_or,
    unescape,
    version_index,
)
from fae.fhir.spec import SearchParam
from fae.fhir.versions import Store, Version

_PIPE = "|"


class TokenIndex:
    """Ids of one type's live resources by the token values one parameter extracts from them.

    A copy shares its buckets with the original and copies one only when a write changes it,
    so copying a store for a transaction costs two dict copies, not a rebuild.
    """

    __slots__ = ("ids", "keys_of", "owned", "param")

    def __init__(self, param: SearchParam):
        self.param = param
        self.ids: dict[tuple[str | None, str | None], set[str]] = {}
        self.keys_of: dict[str, tuple] = {}
        self.owned: set[tuple[str | None, str | None]] | None = None  # None: every bucket is ours

    def copy(self) -> TokenIndex:
        other = TokenIndex(self.param)
        other.ids = dict(self.ids)
        other.keys_of = dict(self.keys_of)
        other.owned = set()
        return other

    def _bucket(self, key: tuple[str | None, str | None]) -> set[str]:
        bucket = self.ids.get(key)
        if bucket is None:
            bucket = self.ids[key] = set()
            if self.owned is not None:
                self.owned.add(key)
        elif self.owned is not None and key not in self.owned:
            bucket = self.ids[key] = set(bucket)
            self.owned.add(key)
        return bucket

    def _keys(self, version: Version) -> tuple:
        pairs = version_index(version, self.param)[0]
        return tuple({key for system, code in pairs for key in ((system, code), (None, code))})

    def update(self, version: Version) -> None:
        for key in self.keys_of.pop(version.id, ()):
            if key in self.ids:
                self._bucket(key).discard(version.id)
        if version.deleted:
            return
        keys = self._keys(version)
        self.keys_of[version.id] = keys
        for key in keys:
            self._bucket(key).add(version.id)


def _index(store: Store, rtype: str, param: SearchParam) -> TokenIndex:
    per_type = store.indexes.setdefault(rtype, {})
    index = per_type.get(param.code)
    if index is None:
        index = TokenIndex(param)
        for version in store.live(rtype):
            index.update(version)
        per_type[param.code] = index
    return index


def _indexable(
    ctx: SearchContext, rtype: str, name: str, value: str
) -> tuple[SearchParam, tuple[str | None, str]] | None:
    if ":" in name or "." in name or name.startswith("_has"):
        return None
    param = ctx.spec.search_params(rtype).get(name)
    if param is None or param.type != "token" or not param.expression:
        return None
    values = split_or(value)
    if len(values) != 1 or "\\" in value:
        return None
    system, bar, code = values[0].partition(_PIPE)
    if not bar:
        return param, (None, system)
    if not system or not code:
        return None
    return param, (system, code)


def conditional_matches(ctx: SearchContext, rtype: str, pairs: list[tuple[str, str]]) -> list[Version]:
    """What `filter_resources` would answer, through a token index when the query has a token term."""
    for name, value in pairs:
        found = _indexable(ctx, rtype, name, value)
        if found is None:
            continue
        param, key = found
        ids = _index(ctx.store, rtype, param).ids.get((key[0], unescape(key[1])), set())
        predicates = [p for n, v in pairs if (p := criterion(ctx, rtype, n, v)) is not None]
        candidates = [ctx.store.get(rtype, rid) for rid in sorted(ids)]
        return [v for v in candidates if v is not None and not v.deleted and all(p(v) for p in predicates)]
    return filter_resources(ctx, rtype, pairs)
