"""The gold-fairness check lives in the library (``fae tasks check`` runs it too)."""

from fae.harness.gold_origins import hidden_literals

__all__ = ["hidden_literals"]
