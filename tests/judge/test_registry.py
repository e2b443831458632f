"""Judges by name, rule sets filled and checked, and a hash over canonical JSON."""

from __future__ import annotations

import pytest

from fae.errors import JudgeError
from fae.judge import registry
from fae.judge.compare import judges_for
from fae.judge.judging import judges_to_run
from fae.judge.registry import judges, parse_rules, register_judge, rule_set, rule_set_hash


def test_the_built_in_judges_are_registered_with_their_rules():
    found = judges()
    assert {"task", "failure_mode", "state_drift", "ensure_record", "oracle"} <= set(found)
    assert set(found["ensure_record"].rules) == {"accept_corrections", "settle_s", "evidence"}


def test_rule_sets_get_defaults_and_refuse_unknown_or_mistyped_rules():
    assert rule_set("ensure_record") == {"accept_corrections": True, "settle_s": 1.0, "evidence": "proxy"}
    assert rule_set("ensure_record", {"settle_s": 2}) == {
        "accept_corrections": True,
        "settle_s": 2,
        "evidence": "proxy",
    }
    with pytest.raises(JudgeError, match="has no rule 'settle'"):
        rule_set("ensure_record", {"settle": 1})
    with pytest.raises(JudgeError, match="true or false"):
        rule_set("ensure_record", {"accept_corrections": "yes please"})
    with pytest.raises(JudgeError, match="is a number"):
        rule_set("ensure_record", {"settle_s": True})
    with pytest.raises(JudgeError, match="unknown judge"):
        rule_set("nope")


def test_a_misspelt_rule_names_the_closest_rule_and_lists_the_valid_ones():
    with pytest.raises(JudgeError) as one:
        rule_set("ensure_record", {"acept_corrections": False})
    assert str(one.value) == (
        "judge 'ensure_record' has no rule 'acept_corrections' (did you mean 'accept_corrections'?); "
        "its rules: accept_corrections, evidence, settle_s"
    )
    with pytest.raises(JudgeError) as every:
        judges_to_run(None, {"acept_corrections": False})  # no judge named: every default judge's rules
    said = str(every.value)
    assert said.startswith("no judge takes rule 'acept_corrections' (did you mean 'accept_corrections'?)"), said
    assert "task: mode" in said and "ensure_record: accept_corrections, evidence, settle_s" in said, said
    with pytest.raises(JudgeError) as compared:
        judges_for(None, {}, {"setle_s": 2})
    assert "(did you mean 'settle_s'?)" in str(compared.value) and "state_drift: ignore_types" in str(compared.value)
    with pytest.raises(JudgeError) as far:
        rule_set("ensure_record", {"colour": "blue"})
    assert "did you mean" not in str(far.value) and "its rules: accept_corrections" in str(far.value)


def test_the_hash_is_over_canonical_json():
    a = rule_set_hash({"accept_corrections": False, "settle_s": 1.0})
    b = rule_set_hash({"settle_s": 1.0, "accept_corrections": False})
    assert a == b and len(a) == 16
    assert rule_set_hash({"accept_corrections": True, "settle_s": 1.0}) != a


def test_rules_from_the_command_line():
    assert parse_rules(["accept_corrections=false", "settle_s=2.5"]) == {"accept_corrections": False, "settle_s": 2.5}
    assert parse_rules(["accept_corrections=no,settle_s=0"]) == {"accept_corrections": False, "settle_s": 0}
    assert parse_rules(["mode=light"]) == {"mode": "light"}
    with pytest.raises(JudgeError, match="not key=value"):
        parse_rules(["mode"])


def test_equal_rules_written_differently_are_one_rule_set_and_bad_values_are_refused():
    one = rule_set("ensure_record", parse_rules(["settle_s=1"]))
    assert rule_set_hash(one) == rule_set_hash(rule_set("ensure_record", parse_rules(["settle_s=1.0"])))
    assert rule_set_hash(one) != rule_set_hash(rule_set("ensure_record", parse_rules(["settle_s=2"])))
    with pytest.raises(JudgeError, match="at least 0"):
        rule_set("ensure_record", {"settle_s": -1})


def test_the_installed_packages_are_scanned_for_judge_plugins_once_per_process(monkeypatch):
    """Live judging asks for the judges on every run, and a scan reads every installed package's metadata (it was
    a quarter of a gold run's CPU). The scan is wrapped, not replaced: the real entry points are returned."""
    import fae.judge.registry as registry

    scans = []
    real = registry.entry_points
    monkeypatch.setattr(registry, "entry_points", lambda **kw: scans.append(kw) or real(**kw))
    registry._plugin_points.cache_clear()
    for _ in range(5):
        assert "ensure_record" in judges()
    assert scans == [{"group": "fae.judges"}]


def test_a_judge_without_a_docstring_registers(monkeypatch):
    monkeypatch.setattr(registry, "_JUDGES", dict(registry._JUDGES))  # registered for this test only

    @register_judge("undocumented")
    def undocumented(rules):
        return lambda run: None

    assert judges()["undocumented"].doc == ""
