"""The capture compared as bytes: it agrees with the fold exactly when the parsed comparison does, and an
unreadable capture is still refused."""

from __future__ import annotations

import json

import pytest

from fae.errors import ReplayDrift
from fae.replay import fold_state, load_run, state_drift
from fae.replay.drift import Capture, _canonical, read_capture
from fae.store.log import EventLog


def _runs(log_path):
    with EventLog(log_path, read_only=True) as log:
        _, rows = log.query("SELECT run_id FROM runs ORDER BY run_id")
        return [load_run(log, run_id) for (run_id,) in rows]


def _checked(run, body: bytes):
    capture = read_capture(run)
    state = fold_state(run, capture.seq)
    tampered = Capture(run.run_id, capture.seq, body)
    tampered.check(state)
    return state, tampered


def test_a_capture_that_agrees_is_never_parsed_and_gives_the_parsed_verdict(replay_log):
    kinds = set()
    for run in _runs(replay_log):
        capture = read_capture(run)
        state = fold_state(run, capture.seq)
        capture.check(state)
        drifted = "unrecorded" in run.run_id
        assert (capture.matched is None) == drifted, run.run_id
        assert (capture._resources is None) == (not drifted)  # the bytes alone settled it
        assert state_drift(state, capture) == state_drift(state, json.loads(capture.body)), run.run_id
        assert len(capture) == len(json.loads(capture.body))
        kinds.add(bool(state_drift(state, capture)))
    assert kinds == {True, False}


def test_a_changed_version_is_read_from_the_bytes(replay_log):
    run = next(r for r in _runs(replay_log) if r.run_id.startswith("rec-create-patient"))
    resources = json.loads(read_capture(run).body)
    resources[0]["meta"]["versionId"] = "7"
    state, capture = _checked(run, json.dumps(resources, sort_keys=True).encode())
    assert capture.matched is state
    drift = state_drift(state, capture)
    assert drift == state_drift(state, resources) and [d["difference"] for d in drift] == ["version"]


def test_a_resource_the_capture_lacks_or_holds_at_another_version_names_both_versions(replay_log):
    run = next(r for r in _runs(replay_log) if r.run_id.startswith("rec-create-patient"))
    resources = json.loads(read_capture(run).body)
    changed, lacked = resources[0], resources.pop()
    kept = changed["meta"]["versionId"]
    changed["meta"]["versionId"] = "7"
    state, capture = _checked(run, json.dumps(resources, sort_keys=True).encode())
    assert capture.matched is state  # content agrees entry by entry: the versions are read from the bytes
    expected = [
        {
            "ref": f"{changed['resourceType']}/{changed['id']}",
            "difference": "version",
            "fold_version": kept,
            "capture_version": "7",
        },
        {
            "ref": f"{lacked['resourceType']}/{lacked['id']}",
            "difference": "only_in_fold",
            "fold_version": lacked["meta"]["versionId"],
        },
    ]
    expected.sort(key=lambda d: tuple(d["ref"].split("/")))
    assert state_drift(state, capture) == expected  # the bytes path, which compares versions only
    assert state_drift(state, resources) == expected  # the parsed path


@pytest.mark.parametrize("change", ["value", "equal_value", "unsorted", "missing_entry", "duplicate_entry"])
def test_bytes_that_differ_fall_back_to_the_parsed_comparison(replay_log, change):
    run = next(r for r in _runs(replay_log) if r.run_id.startswith("rec-create-patient"))
    resources = json.loads(read_capture(run).body)
    sort_keys = True
    if change == "value":
        resources[0]["zz"] = "x"
    elif change == "equal_value":  # 1 == True to Python: the same content, other bytes
        next(r for r in resources if r.get("active") is True)["active"] = 1
    elif change == "unsorted":
        resources[0] = dict(reversed(resources[0].items()))
        sort_keys = False
    elif change == "missing_entry":
        resources.pop()
    else:
        resources.append(resources[0])
    state, capture = _checked(run, json.dumps(resources, sort_keys=sort_keys).encode())
    assert (capture.matched is state) == (change == "missing_entry")  # a lacking capture still agrees entry by entry
    assert state_drift(state, capture) == state_drift(state, resources)
    assert bool(state_drift(state, capture)) == (change in ("value", "missing_entry"))


@pytest.mark.parametrize(
    "body",
    [
        b'[{"resourceType": "Patient", "id": "p", "x": "\xff"}]',
        b'[{"resourceType": "Patient", "id": "p", "x": 1e999}]',
        b'{"resourceType": "Patient"}',
        b"[1, 2",
    ],
)
def test_an_unreadable_capture_is_refused_even_where_a_partial_read_would_pass(replay_log, body):
    run = _runs(replay_log)[0]
    with pytest.raises(ReplayDrift, match="unreadable"):
        Capture(run.run_id, 1, body).check(fold_state(run))


def test_a_matched_capture_by_key_is_the_parsed_capture_and_untouched_names_only_unwritten_seeds(replay_log):
    seen_written = False
    for run in _runs(replay_log):
        capture = read_capture(run)
        state = fold_state(run, capture.seq)
        capture.check(state)
        parsed = {(r.get("resourceType"), r.get("id")): r for r in json.loads(capture.body)}
        by_key = capture.by_key()
        assert list(by_key) == list(parsed) and dict(by_key) == parsed, run.run_id
        untouched = capture.untouched()
        if capture.matched is None:
            assert untouched == set()
            continue
        assert capture._resources is None  # read from the fold, never parsed
        assert untouched == {key for key in parsed if key not in state.history}
        assert all(
            parsed[key] == {**state.seed.read(*key), "meta": parsed[key]["meta"]}
            for key in untouched
            if "meta" in parsed[key]
        )
        seen_written |= bool(set(parsed) - untouched)
    assert seen_written  # some run wrote a resource the capture holds: it is not called untouched


@pytest.mark.parametrize(
    "resource",
    [
        {},
        {"meta": {"v": 1}},
        {"active": True},
        {"resourceType": "Patient"},
        {"id": "a", "meta": {}, "resourceType": "Patient", "name": [{"given": ["Zoë"]}]},
        {"metaX": 1, "met": 2, "Meta": 3, "é": "ü", "": None, "m": [1.5, {"b": 1, "a": 2}]},
    ],
)
def test_the_canonical_pieces_are_what_json_dumps_writes(resource):
    """The fast comparison's pieces rebuild the harness's own bytes, with any meta and without one."""
    head, tail, without = _canonical(resource)
    rest = {k: v for k, v in resource.items() if k != "meta"}
    assert without == json.dumps(rest, sort_keys=True).encode()
    meta = {"versionId": "3", "lastUpdated": "2026-01-01T00:00:00Z"}
    assert (
        head + json.dumps(meta, sort_keys=True).encode() + tail
        == json.dumps({**rest, "meta": meta}, sort_keys=True).encode()
    )
