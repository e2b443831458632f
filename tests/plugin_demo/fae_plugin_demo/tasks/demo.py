"""The demo family's scenarios: fae's own known-patient world, reused."""

from fae.tasks.records import known_patient

SCENARIOS = {"known_patient": known_patient}
