"""Judges over the log: registered by name, built from a rule set, pure over a replayed run."""

from fae.judge.registry import Rule, Verdict, judges, register_judge, rule_set, rule_set_hash

__all__ = ["Rule", "Verdict", "judges", "register_judge", "rule_set", "rule_set_hash"]
