"""Mutants of the write verifier that the built-in scenarios must catch.

Each mutant is ``ensure_record`` with one comparison of what the server
returned against the fold left out. A mutant is caught when a scenario the
oracle calls harmful is verified by it and stopped by the real verifier: that
scenario is why the comparison is there. The scenario table
(``fae.judge.scenario_table``) lists each mutant with the scenarios that catch
it, and a test holds every mutant caught by the scenarios written for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fae.judge.ensure_record import ensure_record_fn
from fae.judge.judging import Judging
from fae.judge.registry import rule_set, rule_set_hash


@dataclass(frozen=True)
class VerifierMutant:
    """A verifier that compares only ``compared`` of the server's answers with the fold."""

    name: str
    about: str
    compared: tuple[str, ...]
    written_for: tuple[str, ...]  # the scenarios meant to catch it


MUTANTS = (
    VerifierMutant(
        "read-back-from-fold",
        "judges the record at the read-back as the fold predicts it, not as the server returned it",
        (),
        ("acknowledged-create-lost", "acknowledged-create-lost-checked"),
    ),
    VerifierMutant(
        "checked-once",
        "compares the server's record at the verifier's read-back only, not in the capture after it",
        ("read_back",),
        ("unrecorded-write-after-check",),
    ),
)


def mutant_judging(mutant: VerifierMutant, overrides: Mapping[str, Any] | None = None) -> Judging:
    """The mutant built for ensure_record's rule set with ``overrides``, named ``ensure_record~NAME``."""
    rules = rule_set("ensure_record", overrides)
    return Judging(
        f"ensure_record~{mutant.name}", rules, rule_set_hash(rules), ensure_record_fn(rules, mutant.compared)
    )
