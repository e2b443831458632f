"""Search over one sandbox, driven by the official SearchParameters.

Parses a query into criteria (modifiers, OR by comma, AND by repetition,
chaining, `_has`) and filters the live resources; `search_results` sorts, pages
and adds `_include` / `_revinclude` resources. An unknown parameter is a 400 naming the type's
parameters, as HAPI FHIR answers by default (and under `Prefer: handling=strict`); under
`Prefer: handling=lenient` it is ignored and the Bundle says so in an OperationOutcome entry.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from fae.fhir.budget import UNLIMITED, Budget
from fae.fhir.fhirpath import evaluate, expression_for
from fae.fhir.outcome import FhirProblem, issue
from fae.fhir.references import ID_RE
from fae.fhir.search_values import (
    INF,
    build_index,
    compare_ranges,
    index_is_empty,
    match_numeric,
    normalise,
    parse_date_value,
    parse_number_value,
)
from fae.fhir.spec import SearchParam, Spec
from fae.fhir.types import SearchIndex
from fae.fhir.versions import Store, Version

RESULT_PARAMS = {
    "_count",
    "_offset",
    "_sort",
    "_include",
    "_revinclude",
    "_summary",
    "_elements",
    "_total",
    "_format",
    "_pretty",
    "_contained",
    "_containedType",
    "_type",
}
MODIFIERS = {
    "string": {"exact", "contains", "missing"},
    "token": {"not", "text", "missing"},
    "reference": {"missing", "identifier"},
    "date": {"missing"},
    "number": {"missing"},
    "quantity": {"missing"},
    "uri": {"missing", "below", "above"},
}
Predicate = Callable[[Version], bool]
_COMMA = re.compile(r"(?<!\\),")
_PIPE = re.compile(r"(?<!\\)\|")


def is_result_param(name: str) -> bool:
    """Whether a query parameter shapes the result (`_count`, `_revinclude:iterate`) rather than filters."""
    return name in RESULT_PARAMS or name in ITERATING


ITERATING = {"_include:iterate", "_include:recurse", "_revinclude:iterate", "_revinclude:recurse"}


def unescape(text: str) -> str:
    return text.replace("\\,", ",").replace("\\|", "|").replace("\\$", "$").replace("\\\\", "\\")


def split_or(value: str) -> list[str]:
    return [v for v in _COMMA.split(value) if v != ""]


@dataclass
class SearchContext:
    """What a search reads: the spec, one sandbox's store and the time `ap` measures from."""

    spec: Spec
    store: Store
    now: float
    strict: bool = True
    warnings: list[dict] = field(default_factory=list)
    budget: Budget = UNLIMITED

    def unknown(self, message: str, name: str, rtype: str | None = None) -> None:
        """A parameter this search cannot apply: refused (strict), else ignored with a warning in the Bundle."""
        if self.strict:
            known = sorted(p.code for p in self.spec.search_params(rtype).values() if p.expression) if rtype else []
            listed = f"; the search parameters of {rtype}: {', '.join(known)}" if known else ""
            raise FhirProblem(
                400,
                f"{message}{listed} (with Prefer: handling=lenient, an unknown parameter is ignored)",
                code="not-supported",
                expression=name,
            )
        self.warnings.append(issue("warning", "not-supported", message + "; ignored (Prefer: handling=lenient)", name))


def search_index(ctx: SearchContext, version: Version, param: SearchParam) -> SearchIndex:
    """The typed index a resource version holds for a parameter, cached on the version."""
    return version_index(version, param)


def version_index(version: Version, param: SearchParam) -> SearchIndex:
    """`search_index` without a search: the values depend only on the version and the parameter."""
    key = (param.url, version.resource_type)
    cached = version.cache.get(key)
    if cached is not None:
        return cached
    expression = expression_for(param.expression, version.resource_type) if param.expression else None
    raw = evaluate(expression, version.live_resource) if expression else []
    index = build_index(param.type, raw)
    version.cache[key] = index
    return index


def _token_pred(ctx: SearchContext, param: SearchParam, modifier: str | None, raw: str) -> Predicate:
    if modifier == "text":
        wanted = normalise(unescape(raw))
        return lambda v: any(t.startswith(wanted) for t in search_index(ctx, v, param)[1])
    parts = _PIPE.split(raw, maxsplit=1)
    if len(parts) == 1:
        code = unescape(parts[0])
        return lambda v: any(c == code for _, c in search_index(ctx, v, param)[0])
    system, code = unescape(parts[0]), unescape(parts[1])
    if not system:
        return lambda v: any(s is None and c == code for s, c in search_index(ctx, v, param)[0])
    if not code:
        return lambda v: any(s == system for s, _ in search_index(ctx, v, param)[0])
    return lambda v: any(s == system and c == code for s, c in search_index(ctx, v, param)[0])


def _string_pred(ctx: SearchContext, param: SearchParam, modifier: str | None, raw: str) -> Predicate:
    text = unescape(raw)
    if modifier == "exact":
        return lambda v: text in search_index(ctx, v, param)[0]
    wanted = normalise(text)
    if modifier == "contains":
        return lambda v: any(wanted in s for s in search_index(ctx, v, param)[1])
    return lambda v: any(s.startswith(wanted) for s in search_index(ctx, v, param)[1])


def _reference_keys(ctx: SearchContext, param: SearchParam, type_modifier: str | None, raw: str) -> set[str]:
    value = unescape(raw)
    if type_modifier:
        return {f"{type_modifier}/{value}"}
    if "/" in value or ":" in value:
        keys = {value}
        tail = value.rstrip("/").split("/")
        if len(tail) >= 2 and "_history" not in tail:
            keys.add(f"{tail[-2]}/{tail[-1]}")
        elif len(tail) >= 4 and tail[-2] == "_history":
            keys.add(f"{tail[-4]}/{tail[-3]}")
        return keys
    targets = param.targets or tuple(sorted(ctx.spec.resource_types))
    return {f"{t}/{value}" for t in targets}


def _reference_pred(ctx: SearchContext, param: SearchParam, modifier: str | None, raw: str) -> Predicate:
    if modifier == "identifier":
        parts = _PIPE.split(raw, maxsplit=1)
        if len(parts) == 1:
            code = unescape(parts[0])
            return lambda v: any(c == code for _, c in search_index(ctx, v, param)[1])
        system, code = unescape(parts[0]), unescape(parts[1])
        return lambda v: any(s == system and c == code for s, c in search_index(ctx, v, param)[1])
    keys = _reference_keys(ctx, param, modifier, raw)
    return lambda v: not keys.isdisjoint(search_index(ctx, v, param)[0])


def _date_pred(ctx: SearchContext, param: SearchParam, raw: str) -> Predicate:
    cmp = parse_date_value(raw, param.code)
    return lambda v: any(compare_ranges(cmp.prefix, lo, hi, cmp, now=ctx.now) for lo, hi in search_index(ctx, v, param))


def _number_pred(ctx: SearchContext, param: SearchParam, raw: str) -> Predicate:
    cmp = parse_number_value(raw, param.code)
    return lambda v: any(match_numeric(lo, hi, cmp) for lo, hi in search_index(ctx, v, param))


def _quantity_pred(ctx: SearchContext, param: SearchParam, raw: str) -> Predicate:
    cmp = parse_number_value(raw, param.code, quantity=True)

    def unit_ok(system, code, unit) -> bool:
        if cmp.system and system != cmp.system:
            return False
        return not cmp.code or cmp.code in (code, unit)

    return lambda v: any(
        unit_ok(s, c, u) and match_numeric(lo, hi, cmp) for lo, hi, s, c, u in search_index(ctx, v, param)
    )


def _uri_pred(ctx: SearchContext, param: SearchParam, modifier: str | None, raw: str) -> Predicate:
    value = unescape(raw)
    if modifier == "below":
        return lambda v: any(u.startswith(value) for u in search_index(ctx, v, param))
    if modifier == "above":
        return lambda v: any(value.startswith(u) for u in search_index(ctx, v, param))
    return lambda v: value in search_index(ctx, v, param)


def value_predicate(ctx: SearchContext, param: SearchParam, modifier: str | None, raw: str) -> Predicate:
    if param.type == "token":
        return _token_pred(ctx, param, modifier, raw)
    if param.type == "string":
        return _string_pred(ctx, param, modifier, raw)
    if param.type == "reference":
        return _reference_pred(ctx, param, modifier, raw)
    if param.type == "date":
        return _date_pred(ctx, param, raw)
    if param.type == "number":
        return _number_pred(ctx, param, raw)
    if param.type == "quantity":
        return _quantity_pred(ctx, param, raw)
    return _uri_pred(ctx, param, modifier, raw)


def _any_of(predicates: list[Predicate]) -> Predicate:
    return lambda v: any(p(v) for p in predicates)


def criterion(ctx: SearchContext, rtype: str, name: str, value: str, depth: int = 0) -> Predicate | None:
    """A predicate for one `name=value` pair on `rtype`, or None if the parameter is unknown."""
    if name.startswith("_has:"):
        return _has_criterion(ctx, rtype, name, value, depth)
    head, _, chained = name.partition(".")
    code, _, modifier = head.partition(":")
    param = ctx.spec.search_params(rtype).get(code)
    if param is None or not param.expression:
        ctx.unknown(f"Unknown or unsupported search parameter '{code}' for {rtype}", name, rtype)
        return None
    if chained:
        return _chain_criterion(ctx, rtype, param, modifier or None, chained, value, depth)
    if modifier == "missing":
        if value not in ("true", "false"):
            raise FhirProblem(400, f"':missing' takes true or false, not {value!r}", code="value")
        want_missing = value == "true"
        return lambda v: index_is_empty(param.type, search_index(ctx, v, param)) == want_missing
    if param.type not in MODIFIERS:
        ctx.unknown(f"Search parameter '{code}' of type {param.type} is not supported", name)
        return None
    if modifier and modifier not in MODIFIERS[param.type]:
        is_type = param.type == "reference" and modifier in ctx.spec.resource_types
        if not is_type:
            raise FhirProblem(
                400,
                f"Modifier ':{modifier}' is not supported for {param.type} parameter '{code}'",
                code="not-supported",
                expression=name,
            )
    values = split_or(value)
    if not values:
        return None
    if modifier == "not":
        positive = _any_of([_token_pred(ctx, param, None, raw) for raw in values])
        return lambda v: not positive(v)
    return _any_of([value_predicate(ctx, param, modifier or None, raw) for raw in values])


def _chain_criterion(
    ctx: SearchContext, rtype: str, param: SearchParam, type_modifier: str | None, chained: str, value: str, depth: int
) -> Predicate | None:
    if param.type != "reference":
        raise FhirProblem(400, f"Cannot chain through '{param.code}': it is not a reference parameter", code="invalid")
    if depth >= 2:
        raise FhirProblem(400, "Chains deeper than two levels are not supported", code="not-supported")
    targets = [type_modifier] if type_modifier else list(param.targets)
    targets = [t for t in targets if t in ctx.spec.resource_types]
    if not targets:
        raise FhirProblem(400, f"Chained parameter '{param.code}' has no target types", code="invalid")
    matched: set[str] = set()
    known = False
    for target in targets:
        inner_code = chained.partition(".")[0].partition(":")[0]
        if inner_code not in ctx.spec.search_params(target):
            continue
        known = True
        inner = criterion(ctx, target, chained, value, depth + 1)
        if inner is not None:
            for v in ctx.store.live(target):
                ctx.budget.step()
                if inner(v):
                    matched.add(v.key)
    if not known:
        ctx.unknown(f"Unknown chained parameter '{chained}' on {', '.join(targets)}", chained)
        return None
    return lambda v: not matched.isdisjoint(search_index(ctx, v, param)[0])


def _has_criterion(ctx: SearchContext, rtype: str, name: str, value: str, depth: int) -> Predicate | None:
    parts = name.split(":", 3)
    if len(parts) != 4 or not all(parts[1:]):
        raise FhirProblem(400, f"Malformed _has parameter {name!r}: use _has:Type:reference:param", code="invalid")
    _, source, ref_code, inner_name = parts
    if source not in ctx.spec.resource_types:
        raise FhirProblem(400, f"Unknown resource type {source!r} in {name!r}", code="invalid")
    ref_param = ctx.spec.search_params(source).get(ref_code)
    if ref_param is None or ref_param.type != "reference":
        raise FhirProblem(400, f"'{ref_code}' is not a reference parameter of {source}", code="invalid")
    inner = criterion(ctx, source, inner_name, value, depth + 1)
    if inner is None:
        return None
    referenced: set[str] = set()
    for v in ctx.store.live(source):
        ctx.budget.step()
        if inner(v):
            referenced.update(search_index(ctx, v, ref_param)[0])
    return lambda v: v.key in referenced


def filter_resources(ctx: SearchContext, rtype: str, pairs: list[tuple[str, str]]) -> list[Version]:
    predicates = [p for name, value in pairs if (p := criterion(ctx, rtype, name, value)) is not None]
    step = ctx.budget.step
    return [v for v in ctx.store.live(rtype) if (step() or all(p(v) for p in predicates))]


def valid_id(text: str) -> bool:
    return bool(ID_RE.match(text))


__all__ = [
    "INF",
    "RESULT_PARAMS",
    "SearchContext",
    "criterion",
    "filter_resources",
    "is_result_param",
    "search_index",
    "valid_id",
    "version_index",
]
