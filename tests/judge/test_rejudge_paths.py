"""The fast rejudge path gives the verdicts of the plain one: bulk loading, direct FHIRPath walks, the fold's
diff shortcut and the rewritten drift and resource-type walks, compared with reference versions over recorded logs."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from typing import Any

import pytest
from fhirpathpy import compile as fhirpath_compile

import fae.judge.drift_judge
import fae.judge.failure_modes
import fae.tasks.selection
from fae.judge.context import RunContext
from fae.judge.rejudge import judge_run, judges_to_run
from fae.replay.source import load_run, load_runs, run_ids
from fae.store.log import EventLog
from fae.tasks import load_suite
from fae.tasks.fhirpath_walk import Unsupported, compile_simple

NOW = datetime(2025, 1, 1, tzinfo=UTC)


# ---------------------------------------------------------------- reference versions (the plain algorithms)


def _reference_types(value: Any, found: set[str], depth: int = 0) -> None:
    if depth > 6:
        return
    if isinstance(value, dict):
        if isinstance(value.get("resourceType"), str):
            found.add(value["resourceType"])
        for item in value.values():
            _reference_types(item, found, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _reference_types(item, found, depth + 1)
    elif isinstance(value, str) and depth == 0 and value[:1] in "{[":
        try:
            _reference_types(json.loads(value), found, depth + 1)
        except ValueError:
            pass


def _reference_drift(state, captured, ignored_types=("AuditEvent",)):
    def version(resource):
        versions = state.history.get((resource["resourceType"], resource["id"]))
        return versions[-1].version_id if versions else "1"

    def same(a, b):
        return {k: v for k, v in a.items() if k != "meta"} == {k: v for k, v in b.items() if k != "meta"}

    folded = {
        (r["resourceType"], r["id"]): r
        for t in state.resource_types()
        if t not in ignored_types
        for r in state.resources(t)
    }
    seen = {
        (r.get("resourceType"), r.get("id")): r
        for r in captured
        if r.get("resourceType") not in ignored_types
        and isinstance(r.get("resourceType"), str)
        and isinstance(r.get("id"), str)
    }
    differences = []
    for key in sorted(set(folded) | set(seen)):
        ref, mine, theirs = f"{key[0]}/{key[1]}", folded.get(key), seen.get(key)
        if mine is None:
            differences.append(
                {
                    "ref": ref,
                    "difference": "only_in_capture",
                    "capture_version": (theirs.get("meta") or {}).get("versionId"),
                }
            )
        elif theirs is None:
            differences.append({"ref": ref, "difference": "only_in_fold", "fold_version": version(mine)})
        else:
            capture_version = (theirs.get("meta") or {}).get("versionId")
            if not same(mine, theirs):
                changed = sorted(k for k in set(mine) | set(theirs) if k != "meta" and mine.get(k) != theirs.get(k))
                differences.append(
                    {
                        "ref": ref,
                        "difference": "content",
                        "elements": changed,
                        "fold_version": version(mine),
                        "capture_version": capture_version,
                    }
                )
            elif capture_version is not None and str(capture_version) != version(mine):
                differences.append(
                    {
                        "ref": ref,
                        "difference": "version",
                        "fold_version": version(mine),
                        "capture_version": capture_version,
                    }
                )
    return differences


class _PlainView:
    """The fold as a bare StateView: no written_refs, so the diff walks every resource."""

    def __init__(self, state):
        self._state, self.seed = state, state.seed

    def resource_types(self):
        return self._state.resource_types()

    def resources(self, resource_type):
        return self._state.resources(resource_type)

    def read(self, resource_type, resource_id):
        return self._state.read(resource_type, resource_id)


class _PlainContext(RunContext):
    @property
    def state(self):
        return _PlainView(self.fold)


def _reference_rows(log_path, plan) -> dict[tuple, tuple]:
    rows = {}
    with EventLog(log_path, read_only=True) as log:
        for run_id in run_ids(log):
            ctx = _PlainContext(load_run(log, run_id))  # one run at a time, every event
            for judging in plan:
                verdict = judging.fn(ctx)
                rows[(run_id, judging.name, judging.rules_hash)] = (verdict.outcome, verdict.passed, verdict.evidence)
    return rows


def _fast_rows(log_path, plan) -> dict[tuple, tuple]:
    with EventLog(log_path, read_only=True) as log:
        return {
            (r.run_id, r.judge, r.rule_set_hash): (r.outcome, r.passed, r.evidence)
            for run in load_runs(log, run_ids(log), lean=True, chunk=7)
            for r in judge_run(run, plan, judged_at=NOW)
        }


@pytest.mark.parametrize("which", ["suite", "scenarios"])
def test_bulk_judging_gives_the_verdicts_of_the_reference_path(which, suite_log, scenario_log, monkeypatch):
    log_path = suite_log[0] if which == "suite" else scenario_log
    plan = judges_to_run()
    fast = _fast_rows(log_path, plan)
    monkeypatch.setattr(fae.tasks.selection, "_compiled", fhirpath_compile)
    monkeypatch.setattr(fae.judge.failure_modes, "_types", _reference_types)
    monkeypatch.setattr(fae.judge.drift_judge, "state_drift", _reference_drift)
    reference = _reference_rows(log_path, plan)
    assert fast == reference
    # the comparison covers passing and failing strict checks, and a run that drifted
    outcomes = {outcome for (_, judge, _), (outcome, _, _) in fast.items() if judge in ("task", "state_drift")}
    assert outcomes >= ({"pass", "fail", "agree"} if which == "suite" else {"agree", "state_drift"})


# ---------------------------------------------------------------- the direct FHIRPath walk


def _spec_paths() -> set[str]:
    paths = set()
    for task in load_suite().values():
        for variation in range(4):
            spec = task.render(variation).check_spec
            for entry in [*spec.creates, *spec.updates]:
                paths.update(entry.fields)
    return paths


def _odd_resources(count: int) -> list[dict[str, Any]]:
    """Shapes a direct walk could get wrong: floats, nulls, nested lists, extension-only objects, _elements."""
    rnd = random.Random(7)
    keys = [
        "system",
        "value",
        "type",
        "coding",
        "code",
        "name",
        "given",
        "telecom",
        "class",
        "family",
        "extension",
        "_value",
        "_system",
    ]

    def make(depth: int = 0) -> Any:
        roll = rnd.random()
        if depth > 3 or roll < 0.3:
            return rnd.choice(
                [1, 2.5, 0.1, "phone", "group", "plan", None, True, "", [], {}, {"extension": [1]}, [None], [["a"]]]
            )
        if roll < 0.6:
            return [make(depth + 1) for _ in range(rnd.randint(0, 3))]
        return {rnd.choice(keys): make(depth + 1) for _ in range(rnd.randint(0, 4))}

    made = []
    for _ in range(count):
        resource = make()
        made.append({**(resource if isinstance(resource, dict) else {"value": resource}), "resourceType": "Patient"})
    return made


def _captured_resources(log_path) -> list[dict[str, Any]]:
    with EventLog(log_path, read_only=True) as log:
        found = []
        for run in load_runs(log, run_ids(log), lean=True):
            ctx = RunContext(run)
            found.extend(ctx.captured[1] if ctx.captured else [])
    return found


def test_simple_paths_select_exactly_what_fhirpathpy_selects(suite_log):
    paths = _spec_paths() | {
        "name",
        "telecom",
        "extension",
        "class.where(type.coding.code='group')",
        "coding.where(system = 'x').code",
    }
    assert all(compile_simple(p) is not None for p in paths)
    for unsupported in (
        "name.first()",
        "Patient.name",
        "telecom.where(system='a\\'b').value",
        "name.length",
        "where(id='x')",
        "name[0].given",
        "a or b",
    ):
        assert compile_simple(unsupported) is None, unsupported
    resources = _captured_resources(suite_log[0]) + _odd_resources(3000)
    walked = fallbacks = 0
    for path in sorted(paths):
        direct, general = compile_simple(path), fhirpath_compile(path)
        for resource in resources:
            try:
                got = direct(dict(resource))
            except Unsupported:
                fallbacks += 1
                continue
            want = list(general(dict(resource)))
            assert got == want and [type(v) for v in got] == [type(v) for v in want], (path, resource)
            walked += 1
    assert walked > 100_000 and fallbacks > 0


def test_values_fall_back_to_fhirpathpy_for_primitive_extensions():
    resource = {"resourceType": "Patient", "birthDate": "2000-01-01", "_birthDate": {"id": "x", "extension": []}}
    assert fae.tasks.selection.values(resource, "birthDate") == list(fhirpath_compile("birthDate")(resource))


def test_resource_type_walk_matches_the_recursive_one():
    rnd = random.Random(3)

    def make(depth: int = 0) -> Any:
        roll = rnd.random()
        if depth > 9 or roll < 0.25:
            return rnd.choice([1, "x", None, "", "{", "[1]", 2.0, True])
        if roll < 0.5:
            return [make(depth + 1) for _ in range(rnd.randint(0, 3))]
        made = {rnd.choice("abcde"): make(depth + 1) for _ in range(rnd.randint(0, 3))}
        if rnd.random() < 0.6:
            made["resourceType"] = rnd.choice([f"T{depth}", 5, None])
        return made

    for _ in range(5000):
        value = make()
        if rnd.random() < 0.3:
            value = json.dumps(value)
        mine, reference = set(), set()
        fae.judge.failure_modes._types(value, mine)
        _reference_types(value, reference)
        assert mine == reference, value


@pytest.mark.parametrize(
    ("value", "types"),
    [
        ({"resourceType": "Patient", "id": "p"}, {"Patient"}),
        ({"resourceType": 5, "id": "p"}, set()),  # the one key, not a type name
        ({"entry": [{"resource": {"resourceType": "Patient"}}]}, {"Patient"}),  # the one key, not at the top
        ([{"resourceType": "Patient"}], {"Patient"}),
        ({"a": [[[[[[{"resourceType": "Deep"}]]]]]]}, set()),  # seven levels down: past the walk
        ({"a": [[[[[{"resourceType": "Six"}]]]]]}, {"Six"}),
        ({"resourceType": "A", "note": 'says "resourceType":"B"'}, {"A"}),  # inside a string: no key
        ('{"resourceType": "A", "contained": [{"resourceType": "B"}]}', {"A", "B"}),  # a JSON text, one level down
        (
            {
                "resourceType": "Bundle",
                "entry": [{"resource": {"resourceType": "Patient", "name": [{"family": "x"}]}}] * 30,
            },
            {"Bundle", "Patient"},
        ),
    ],
)
def test_resource_types_named_in_a_value(value, types):
    mine, reference = set(), set()
    fae.judge.failure_modes._types(value, mine)
    _reference_types(value, reference)
    assert mine == reference == types
