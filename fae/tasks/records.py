"""Patient records: scenarios for patients, conditions, allergies, observations, family history."""

from __future__ import annotations

from typing import Any

from fae.tasks.world import LOINC, SNOMED, World, display_name, zulu

CLINICAL = "http://terminology.hl7.org/CodeSystem/condition-clinical"

# Conditions that distractor histories draw from: SNOMED code, display.
HISTORY = [
    ("44054006", "Diabetes mellitus type 2"),
    ("195967001", "Asthma"),
    ("35489007", "Depressive disorder"),
    ("399211009", "History of myocardial infarction"),
    ("13644009", "Hypercholesterolemia"),
    ("69896004", "Rheumatoid arthritis"),
    ("235595009", "Gastroesophageal reflux disease"),
    ("40930008", "Hypothyroidism"),
]


def condition(world: World, patient: dict[str, Any], code: str, display: str, days_ago: int) -> dict[str, Any]:
    """An active, confirmed condition with an onset days_ago days before now."""
    return world.add(
        {
            "resourceType": "Condition",
            "id": world.new_id("cond"),
            "clinicalStatus": {"coding": [{"system": CLINICAL, "code": "active"}]},
            "verificationStatus": {
                "coding": [
                    {
                        "system": "http://terminology.hl7.org/CodeSystem/condition-ver-status",
                        "code": "confirmed",
                    }
                ]
            },
            "code": {
                "coding": [{"system": SNOMED, "code": code, "display": display}],
                "text": display,
            },
            "subject": {"reference": f"Patient/{patient['id']}"},
            "onsetDateTime": zulu(world.at(world.day(-days_ago), 10)),
            "recordedDate": zulu(world.at(world.day(-days_ago), 11)),
        }
    )


def _histories(world: World, patients: list[dict[str, Any]]) -> None:
    for patient in patients:
        for code, display in world.rng.sample(HISTORY, 2):
            condition(world, patient, code, display, world.rng.randrange(30, 4000))


def _person_params(patient: dict[str, Any], prefix: str = "patient") -> dict[str, Any]:
    return {
        f"{prefix}_id": patient["id"],
        f"{prefix}_name": display_name(patient),
        f"{prefix}_family": patient["name"][0]["family"],
        f"{prefix}_birth_date": patient["birthDate"],
    }


def new_patient(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """Distractors only; the new patient's details are not in the seed."""
    world.distractors(24)
    gender = world.rng.choice(["female", "male"])
    given, family, gender = world.name(gender)
    address = world.address()
    return {
        "given": given,
        "family": family,
        "gender": gender,
        "birth_date": world.birth_date(),
        "phone": world.phone(),
        "line": address["line"][0],
        "city": address["city"],
        "postal_code": address["postalCode"],
    }


def known_patient(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """A target patient and a namesake born on another date, among distractors."""
    world.distractors(24)
    target = world.patient()
    name = target["name"][0]
    world.patient(
        given=name["given"][0],
        family=name["family"],
        gender=target["gender"],
        birth_date=world.birth_date(),
    )
    return {**_person_params(target), "given": name["given"][0], "family": name["family"]}


def absent_patient(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """A namesake exists, but no one with the asked-for birth date."""
    world.distractors(24)
    namesake = world.patient()
    name = namesake["name"][0]
    while (birth := world.birth_date()) == namesake["birthDate"]:
        pass
    return {"given": name["given"][0], "family": name["family"], "birth_date": birth}


def patient_with_history(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """A target patient with a history of conditions, and other patients with theirs."""
    others = world.distractors(21)
    target = world.patient()
    _histories(world, [p for p in others if p["resourceType"] == "Patient"][:4])
    firsts = []
    for index, (code, display) in enumerate(world.rng.sample(HISTORY, 3)):
        firsts.append(condition(world, target, code, display, 200 + 600 * index + world.rng.randrange(100)))
    earliest = firsts[-1]
    return {
        **_person_params(target),
        "first_condition_id": earliest["id"],
        "first_condition": earliest["code"]["text"],
    }


def empty_history(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """A target patient without conditions; everyone else has some."""
    others = world.distractors(21)
    target = world.patient()
    _histories(world, [p for p in others if p["resourceType"] == "Patient"][:5])
    return _person_params(target)


def phone_change(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """A target patient whose phone number changes."""
    world.distractors(22)
    target = world.patient()
    while (phone := world.phone()) == target["telecom"][0]["value"]:
        pass
    return {
        **_person_params(target),
        "old_phone": target["telecom"][0]["value"],
        "new_phone": phone,
        "family": target["name"][0]["family"],
    }


def hba1c_series(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """Three HbA1c results of the target, one recent result of someone else, and vitals."""
    others = [p for p in world.distractors(22) if p["resourceType"] == "Patient"]
    target = world.patient()

    def hba1c(patient: dict[str, Any], days_ago: int) -> dict[str, Any]:
        return world.add(
            {
                "resourceType": "Observation",
                "id": world.new_id("obs"),
                "status": "final",
                "category": [
                    {
                        "coding": [
                            {
                                "system": "http://terminology.hl7.org/CodeSystem/observation-category",
                                "code": "laboratory",
                            }
                        ]
                    }
                ],
                "code": {
                    "coding": [
                        {
                            "system": LOINC,
                            "code": "4548-4",
                            "display": "Hemoglobin A1c/Hemoglobin.total in Blood",
                        }
                    ]
                },
                "subject": {"reference": f"Patient/{patient['id']}"},
                "effectiveDateTime": zulu(world.at(world.day(-days_ago), 9, 30)),
                "valueQuantity": {
                    "value": round(5.5 + world.rng.random() * 3, 1),
                    "unit": "%",
                    "system": "http://unitsofmeasure.org",
                    "code": "%",
                },
            }
        )

    days = sorted(world.rng.sample(range(20, 500), 3))
    results = [hba1c(target, d) for d in days]
    other = hba1c(others[0], 2)
    # No other HbA1c in the seed may pass for the latest one: values at least 0.2 apart.
    taken: list[float] = []
    for result in [*results, other]:
        quantity = result["valueQuantity"]
        while any(abs(quantity["value"] - t) < 0.15 for t in taken):
            quantity["value"] = round(5.5 + world.rng.random() * 3, 1)
        taken.append(quantity["value"])
    return {
        **_person_params(target),
        "latest_id": results[0]["id"],
        "latest_value": results[0]["valueQuantity"]["value"],
    }


def family_member(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """A target patient among distractors; the relative's history is new."""
    world.distractors(22)
    target = world.patient()
    return _person_params(target)


SCENARIOS = {
    f.__name__: f
    for f in (
        new_patient,
        known_patient,
        absent_patient,
        patient_with_history,
        empty_history,
        phone_change,
        hba1c_series,
        family_member,
    )
}
