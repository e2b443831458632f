"""The built-in trivial task: one create and one answer. A fixture for the recording loop."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fae.plan import plan_from_dict
from fae.tasks.model import FixtureVariation

BUILTIN_TASK = "builtin-create-patient"
_GIVEN = ("Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "John")
_FAMILY = ("Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Allen", "Backus")


def render_builtin(variation: int) -> FixtureVariation:
    """Variation ``n`` asks to register a different person, at a fixed "now"."""
    given = _GIVEN[variation % len(_GIVEN)]
    family = _FAMILY[(variation * 3 + 1) % len(_FAMILY)]
    birth = f"19{50 + variation % 40:02d}-0{1 + variation % 9}-1{variation % 10}"
    now = datetime(2025, 1, 6, 9, 0, tzinfo=UTC) + timedelta(days=variation)
    seed = {
        "resourceType": "Bundle",
        "type": "transaction",
        "entry": [
            {
                "resource": {
                    "resourceType": "Patient",
                    "id": f"seed-{i}",
                    "name": [{"family": _FAMILY[i], "given": [_GIVEN[(i + 2) % len(_GIVEN)]]}],
                },
                "request": {"method": "PUT", "url": f"Patient/seed-{i}"},
            }
            for i in range(3)
        ],
    }
    prompt = (
        f"Today is {now:%A %d %B %Y}, {now:%H:%M} UTC.\n"
        f"Register a new patient {given} {family}, born {birth}. "
        f"Answer with <patient_id>ID</patient_id>."
    )
    plan = plan_from_dict(
        {
            "name": "gold",
            "steps": [
                {
                    "call": "createResource",
                    "save": "created",
                    "args": {
                        "resourceType": "Patient",
                        "body_json": {
                            "resourceType": "Patient",
                            "name": [{"family": family, "given": [given]}],
                            "birthDate": birth,
                        },
                    },
                },
                {"answer": "<patient_id>${created.id}</patient_id>"},
            ],
        }
    )
    return FixtureVariation(
        task_id=BUILTIN_TASK,
        variation=variation,
        prompt=prompt,
        now=now,
        seed_bundle=seed,
        gold_plan=plan,
        params={"given": given, "family": family, "birth": birth},
    )
