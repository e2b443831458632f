"""What a search answers beyond the matches: `_sort` order, `_include` / `_revinclude` resources, paging."""

from __future__ import annotations

from urllib.parse import urlencode

from fae.fhir.outcome import FhirProblem
from fae.fhir.search import SearchContext, search_index
from fae.fhir.spec import SearchParam
from fae.fhir.versions import Version

DEFAULT_COUNT = 20
MAX_COUNT = 1000


def _sort_value(ctx: SearchContext, v: Version, param: SearchParam, descending: bool):
    index = search_index(ctx, v, param)
    if param.type == "string":
        return min(index[1]) if index[1] else None
    if param.type == "token":
        codes = [c for _, c in index[0]]
        return min(codes) if codes else None
    if param.type == "reference":
        return min(index[0]) if index[0] else None
    if param.type in ("date", "number", "quantity"):
        if not index:
            return None
        return max(float(i[1]) for i in index) if descending else min(float(i[0]) for i in index)
    return min(index) if index else None


def sort_resources(ctx: SearchContext, rtype: str, versions: list[Version], spec_text: str) -> list[Version]:
    keys = [k.strip() for k in spec_text.split(",") if k.strip()]
    out = list(versions)
    for key in reversed(keys):
        descending = key.startswith("-")
        code = key.lstrip("-")
        param = ctx.spec.search_params(rtype).get(code)
        if param is None or not param.expression:
            raise FhirProblem(400, f"Unknown sort parameter '{code}' for {rtype}", code="invalid", expression="_sort")
        present = [(val, v) for v in out if (val := _sort_value(ctx, v, param, descending)) is not None]
        missing = [v for v in out if _sort_value(ctx, v, param, descending) is None]
        present.sort(key=lambda pair: pair[0], reverse=descending)
        out = [v for _, v in present] + missing
    return out


def _parse_include(ctx: SearchContext, text: str, what: str) -> tuple[str, list[SearchParam], str | None]:
    if text == "*":
        return "*", [], None
    parts = text.split(":")
    if len(parts) not in (2, 3) or parts[0] not in ctx.spec.resource_types:
        raise FhirProblem(
            400, f"Malformed {what} {text!r}: use Type:param[:TargetType]", code="invalid", expression=what
        )
    source = parts[0]
    target = parts[2] if len(parts) == 3 else None
    if parts[1] == "*":
        params = _reference_params(ctx, source)
    else:
        param = ctx.spec.search_params(source).get(parts[1])
        if param is None or param.type != "reference":
            raise FhirProblem(
                400, f"'{parts[1]}' is not a reference parameter of {source}", code="invalid", expression=what
            )
        params = [param]
    return source, params, target


def _reference_params(ctx: SearchContext, rtype: str) -> list[SearchParam]:
    return [p for p in ctx.spec.search_params(rtype).values() if p.type == "reference" and p.expression]


def includes(
    ctx: SearchContext, base: list[Version], include_specs: list[str], revinclude_specs: list[str], exclude: set[str]
) -> list[Version]:
    """Resources named by `_include` / `_revinclude` (with `:iterate` one level further)."""
    found: dict[str, Version] = {}

    def run(sources: list[Version], inc: list[str], rev: list[str]) -> list[Version]:
        new: list[Version] = []
        for text in inc:
            stype, params, target = _parse_include(ctx, text, "_include")
            for v in sources:
                if stype != "*" and v.resource_type != stype:
                    continue
                plist = params or _reference_params(ctx, v.resource_type)
                for param in plist:
                    for key in search_index(ctx, v, param)[0]:
                        rtype, _, rid = key.partition("/")
                        if "/" in rid or (target and rtype != target):
                            continue
                        hit = ctx.store.get(rtype, rid)
                        if hit and not hit.deleted and hit.key not in exclude and hit.key not in found:
                            found[hit.key] = hit
                            new.append(hit)
        for text in rev:
            stype, params, target = _parse_include(ctx, text, "_revinclude")
            wanted = {v.key for v in sources if not target or v.resource_type == target}
            for ctype in ctx.store.types() if stype == "*" else [stype]:
                plist = params or _reference_params(ctx, ctype)
                for cand in ctx.store.live(ctype):
                    ctx.budget.step()
                    if cand.key in exclude or cand.key in found:
                        continue
                    if any(not wanted.isdisjoint(search_index(ctx, cand, p)[0]) for p in plist):
                        found[cand.key] = cand
                        new.append(cand)
        return new

    plain_inc = [t for t in include_specs if not t.endswith(":iterate")]
    plain_rev = [t for t in revinclude_specs if not t.endswith(":iterate")]
    iter_inc = [t.removesuffix(":iterate") for t in include_specs if t.endswith(":iterate")]
    iter_rev = [t.removesuffix(":iterate") for t in revinclude_specs if t.endswith(":iterate")]
    first = run(base, plain_inc + iter_inc, plain_rev + iter_rev)
    if iter_inc or iter_rev:
        run(first, iter_inc, iter_rev)
    return list(found.values())


def int_param(pairs: list[tuple[str, str]], name: str, default: int, maximum: int) -> int:
    values = [v for k, v in pairs if k == name]
    if not values:
        return default
    text = values[-1]
    if not (text.isascii() and text.isdigit()):
        raise FhirProblem(400, f"{name} must be a non-negative integer, not {text!r}", code="value", expression=name)
    return min(int(text), maximum)


def link_query(pairs: list[tuple[str, str]], offset: int, count: int) -> str:
    kept = [(k, v) for k, v in pairs if k not in ("_offset", "_count")]
    return urlencode(kept + [("_count", str(count)), ("_offset", str(offset))], safe=":|,/")
