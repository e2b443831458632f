"""Surgery and test orders, with the genetic-testing workflow: plans, orders, reports, consent, specimen."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from fae.tasks.world import LOINC, SNOMED, World, display_name, zulu

GENOMICS = "http://fae.example.org/CodeSystem/genomic-tests"
V2_SECTION = "http://terminology.hl7.org/CodeSystem/v2-0074"
SURGERIES = [
    ("80146002", "Appendectomy"),
    ("38102005", "Cholecystectomy"),
    ("609588000", "Total knee replacement"),
    ("173422009", "Tonsillectomy"),
]
GENES = ["BRCA2", "MLH1", "CFTR", "TP53", "PALB2"]


def _people(world: World) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Distractor patients and clinicians (a surgeon and two clinical geneticists)."""
    patients = [p for p in world.distractors(20) if p["resourceType"] == "Patient"]
    clinicians = [world.practitioner() for _ in range(3)]
    return patients, clinicians


def surgery(
    world: World,
    patient: dict[str, Any],
    code: str,
    display: str,
    days: int,
    status: str = "active",
) -> dict[str, Any]:
    """A planned surgical procedure ``days`` from today."""
    return world.add(
        {
            "resourceType": "ServiceRequest",
            "id": world.new_id("sr"),
            "status": status,
            "intent": "plan",
            "category": [{"coding": [{"system": SNOMED, "code": "387713003", "display": "Surgical procedure"}]}],
            "code": {
                "coding": [{"system": SNOMED, "code": code, "display": display}],
                "text": display,
            },
            "subject": {"reference": f"Patient/{patient['id']}"},
            "occurrenceDateTime": zulu(world.at(world.day(days), 8)),
        }
    )


def genetic_order(
    world: World, patient: dict[str, Any], requester: dict[str, Any], status: str = "draft"
) -> dict[str, Any]:
    """A whole-genome sequencing order."""
    return world.add(
        {
            "resourceType": "ServiceRequest",
            "id": world.new_id("sr"),
            "status": status,
            "intent": "order",
            "code": {
                "coding": [
                    {
                        "system": GENOMICS,
                        "code": "WGS-RD",
                        "display": "Whole genome sequencing, rare disease",
                    }
                ]
            },
            "subject": {"reference": f"Patient/{patient['id']}"},
            "requester": {"reference": f"Practitioner/{requester['id']}"},
            "authoredOn": zulu(world.now - timedelta(days=3)),
        }
    )


def report(
    world: World,
    patient: dict[str, Any],
    *,
    genetic: bool,
    status: str = "final",
    based_on: dict[str, Any] | None = None,
    gene: str | None = None,
    days_ago: int = 30,
) -> dict[str, Any]:
    """A genetics report (section GE) or a non-genetic one (radiology or chemistry)."""
    if genetic:
        code, display, section = "51969-4", "Genetic analysis report", "GE"
    else:
        code, display, section = world.rng.choice(
            [
                ("24627-2", "Chest CT", "RAD"),
                ("57698-3", "Lipid panel", "CH"),
                ("36643-5", "Chest X-ray", "RAD"),
            ]
        )
    resource: dict[str, Any] = {
        "resourceType": "DiagnosticReport",
        "id": world.new_id("dr"),
        "status": status,
        "category": [{"coding": [{"system": V2_SECTION, "code": section}]}],
        "code": {"coding": [{"system": LOINC, "code": code, "display": display}], "text": display},
        "subject": {"reference": f"Patient/{patient['id']}"},
        "effectiveDateTime": zulu(world.now - timedelta(days=days_ago)),
        "issued": zulu(world.now - timedelta(days=days_ago - 1)),
    }
    if based_on is not None:
        resource["basedOn"] = [{"reference": f"ServiceRequest/{based_on['id']}"}]
    if gene:
        resource["conclusion"] = f"Pathogenic variant identified in {gene}."
    return world.add(resource)


def _target(world: World) -> tuple[dict[str, Any], dict[str, Any]]:
    patient = world.patient()
    return patient, {
        "patient_id": patient["id"],
        "patient_name": display_name(patient),
        "patient_family": patient["name"][0]["family"],
        "patient_birth_date": patient["birthDate"],
    }


def _doctor(doctor: dict[str, Any], prefix: str = "doctor") -> dict[str, Any]:
    return {
        f"{prefix}_id": doctor["id"],
        f"{prefix}_name": f"Dr. {display_name(doctor)}",
        f"{prefix}_family": doctor["name"][0]["family"],
    }


def surgical_patient(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """A patient with no plans yet; other patients have surgery plans."""
    patients, _ = _people(world)
    for other in patients[:4]:
        surgery(world, other, *world.rng.choice(SURGERIES), world.rng.randrange(3, 40))
    _, params = _target(world)
    return {**params, "surgery_date": world.day(world.rng.randrange(10, 40)).isoformat()}


def planned_surgery(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """A patient with a surgery inside the window (unless ``outside``) and one far beyond it."""
    patients, _ = _people(world)
    window = int(option["within_days"])
    for other in patients[:4]:
        surgery(world, other, *world.rng.choice(SURGERIES), world.rng.randrange(2, window))
    patient, params = _target(world)
    near, far = world.rng.sample(SURGERIES, 2)
    surgery(world, patient, *far, window + 30 + world.rng.randrange(30))
    surgery(world, patient, *world.rng.choice(SURGERIES), -200, status="completed")
    inside = None if option.get("outside") else surgery(world, patient, *near, world.rng.randrange(2, window))
    return {
        **params,
        "limit": world.day(window).isoformat(),
        "expected_plan": inside["id"] if inside else "NONE",
        "plan_name": near[1],
    }


def wgs_candidate(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """A patient to be tested; the geneticist is among several clinicians."""
    patients, clinicians = _people(world)
    for other in patients[:3]:
        genetic_order(world, other, world.rng.choice(clinicians), status="active")
    _, params = _target(world)
    return {**params, **_doctor(clinicians[0])}


def order_with_reports(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """A draft WGS order; the patient has two genetic and two other reports; others have reports too."""
    patients, clinicians = _people(world)
    for other in patients[:4]:
        report(
            world,
            other,
            genetic=True,
            gene=world.rng.choice(GENES),
            days_ago=world.rng.randrange(10, 300),
        )
    for other in patients[4:6]:
        genetic_order(world, other, world.rng.choice(clinicians))
    patient, params = _target(world)
    order = genetic_order(world, patient, clinicians[0])
    genetic = [report(world, patient, genetic=True, days_ago=world.rng.randrange(40, 900)) for _ in range(2)]
    for _ in range(2):
        report(world, patient, genetic=False, days_ago=world.rng.randrange(10, 900))
    return {
        **params,
        **_doctor(clinicians[0]),
        "order_id": order["id"],
        "genetic_report_ids": [r["id"] for r in genetic],
        "genetic_refs": [f"DiagnosticReport/{r['id']}" for r in genetic],
    }


def order_pending(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """An active WGS order of the patient, with other patients' orders around."""
    patients, clinicians = _people(world)
    for other in patients[:4]:
        genetic_order(world, other, world.rng.choice(clinicians), status="active")
    patient, params = _target(world)
    order = genetic_order(world, patient, clinicians[0], status="active")
    collected = world.at(world.today, 8) if world.now.hour >= 9 else world.now - timedelta(minutes=30)
    return {
        **params,
        **_doctor(clinicians[0]),
        "order_id": order["id"],
        "collected": zulu(collected),
    }


def order_resulted(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """An active WGS order with a preliminary and a final report; other orders have reports too."""
    patients, clinicians = _people(world)
    for other in patients[:3]:
        other_order = genetic_order(world, other, world.rng.choice(clinicians), status="active")
        report(
            world,
            other,
            genetic=True,
            based_on=other_order,
            gene=world.rng.choice(GENES),
            days_ago=5,
        )
    patient, params = _target(world)
    order = genetic_order(world, patient, clinicians[0], status="active")
    gene = world.rng.choice(GENES)
    report(world, patient, genetic=True, status="preliminary", based_on=order, days_ago=12)
    final = report(world, patient, genetic=True, based_on=order, gene=gene, days_ago=4)
    return {
        **params,
        **_doctor(clinicians[0]),
        "order_id": order["id"],
        "report_id": final["id"],
        "gene": gene,
        "genes": GENES,
    }


SCENARIOS = {
    f.__name__: f
    for f in (
        surgical_patient,
        planned_surgery,
        wgs_candidate,
        order_with_reports,
        order_pending,
        order_resulted,
    )
}
