"""Insurance and billing: scenarios for insurers, coverages, related persons and accounts."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from fae.tasks.world import ROLE, World, display_name

INSURERS = [
    "Northwind Health Mutual",
    "Bluepeak Assurance",
    "Cedar Valley Insurance",
    "Harborlight Health Plans",
]
COVERAGE_CLASS = "http://terminology.hl7.org/CodeSystem/coverage-class"


def insurer(world: World, name: str) -> dict[str, Any]:
    """An insurance company."""
    return world.add(
        {
            "resourceType": "Organization",
            "id": world.new_id("org"),
            "active": True,
            "name": name,
            "type": [
                {
                    "coding": [
                        {
                            "system": "http://terminology.hl7.org/CodeSystem/organization-type",
                            "code": "ins",
                            "display": "Insurance Company",
                        }
                    ]
                }
            ],
        }
    )


def related_person(world: World, patient: dict[str, Any], code: str, *, gender: str | None = None) -> dict[str, Any]:
    """A relative of the patient (v3 RoleCode relationship)."""
    given, family, gender = world.name(gender)
    return world.add(
        {
            "resourceType": "RelatedPerson",
            "id": world.new_id("rp"),
            "active": True,
            "patient": {"reference": f"Patient/{patient['id']}"},
            "relationship": [{"coding": [{"system": ROLE, "code": code}]}],
            "name": [{"family": family, "given": [given]}],
            "gender": gender,
            "birthDate": world.birth_date(25, 80),
        }
    )


def coverage(
    world: World,
    patient: dict[str, Any],
    payor: dict[str, Any],
    *,
    status: str = "active",
    start_days: int = -200,
    end_days: int = 165,
) -> dict[str, Any]:
    """A coverage of the patient as their own subscriber, with group and plan classes."""
    return world.add(
        {
            "resourceType": "Coverage",
            "id": world.new_id("cov"),
            "status": status,
            "beneficiary": {"reference": f"Patient/{patient['id']}"},
            "subscriber": {"reference": f"Patient/{patient['id']}"},
            "subscriberId": f"M{world.rng.randrange(10**7, 10**8)}",
            "relationship": {
                "coding": [
                    {
                        "system": "http://terminology.hl7.org/CodeSystem/subscriber-relationship",
                        "code": "self",
                    }
                ]
            },
            "period": {
                "start": world.day(start_days).isoformat(),
                "end": world.day(end_days).isoformat(),
            },
            "payor": [{"reference": f"Organization/{payor['id']}"}],
            "class": [
                {
                    "type": {"coding": [{"system": COVERAGE_CLASS, "code": "group"}]},
                    "value": f"GRP-{world.rng.randrange(1000, 9999)}",
                },
                {
                    "type": {"coding": [{"system": COVERAGE_CLASS, "code": "plan"}]},
                    "value": f"PLN-{world.rng.randrange(100, 999)}",
                },
            ],
        }
    )


def account(world: World, patient: dict[str, Any], guarantor: dict[str, Any] | None = None) -> dict[str, Any]:
    """An active patient account, with a guarantor when one is given."""
    resource: dict[str, Any] = {
        "resourceType": "Account",
        "id": world.new_id("acct"),
        "status": "active",
        "name": f"{display_name(patient)} patient account",
        "subject": [{"reference": f"Patient/{patient['id']}"}],
    }
    if guarantor is not None:
        resource["guarantor"] = [{"party": {"reference": f"RelatedPerson/{guarantor['id']}"}}]
    return world.add(resource)


def _base(world: World) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Insurers, distractor patients (each covered, some with accounts and relatives)."""
    payors = [insurer(world, name) for name in INSURERS]
    patients = [p for p in world.distractors(18) if p["resourceType"] == "Patient"]
    for index, patient in enumerate(patients):
        coverage(world, patient, world.rng.choice(payors))
        if index % 2 == 0:
            account(
                world,
                patient,
                related_person(world, patient, world.rng.choice(["SPS", "MTH", "FTH"])),
            )
    return payors, patients


def _target(world: World) -> tuple[dict[str, Any], dict[str, Any]]:
    patient = world.patient()
    return patient, {
        "patient_id": patient["id"],
        "patient_name": display_name(patient),
        "patient_birth_date": patient["birthDate"],
    }


def new_family_coverage(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """A dependent patient whose parent's policy is new to the system."""
    payors, _ = _base(world)
    _, params = _target(world)
    parent_given, parent_family, _ = world.name(option.get("parent_gender"))
    payor = world.rng.choice(payors)
    start = world.day(world.rng.randrange(1, 20))
    return {
        **params,
        "parent_given": parent_given,
        "parent_family": parent_family,
        "parent_birth_date": world.birth_date(40, 70),
        "payor_id": payor["id"],
        "payor_name": payor["name"],
        "start": start.isoformat(),
        "end": (start + timedelta(days=365)).isoformat(),
        "group": f"GRP-{world.rng.randrange(1000, 9999)}",
        "plan": f"PLN-{world.rng.randrange(100, 999)}",
        "member_id": f"M{world.rng.randrange(10**7, 10**8)}",
    }


def covered_patient(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """A patient with an active coverage and an older cancelled one."""
    payors, _ = _base(world)
    patient, params = _target(world)
    old_payor, payor = world.rng.sample(payors, 2)
    coverage(world, patient, old_payor, status="cancelled", start_days=-900, end_days=-400)
    active = coverage(world, patient, payor)
    return {
        **params,
        "coverage_id": active["id"],
        "payor_id": payor["id"],
        "payor_name": payor["name"],
    }


def formerly_covered_patient(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """A patient whose only coverage was cancelled."""
    payors, _ = _base(world)
    patient, params = _target(world)
    coverage(world, patient, world.rng.choice(payors), status="cancelled", start_days=-900, end_days=-400)
    return params


def new_relative(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """A patient whose relative is not yet on file."""
    _base(world)
    patient, params = _target(world)
    given, _, gender = world.name(option.get("relative_gender"))
    family = patient["name"][0]["family"] if option.get("same_family") else world.name()[1]
    return {
        **params,
        "relative_given": given,
        "relative_family": family,
        "relative_gender": gender,
        "relative_birth_date": world.birth_date(20, 80),
        "relative_phone": world.phone(),
    }


def uninsured_account(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """A patient without an account (other patients have theirs)."""
    _base(world)
    _, params = _target(world)
    return params


def existing_account(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """A patient who already has an active account."""
    _base(world)
    patient, params = _target(world)
    return {**params, "account_id": account(world, patient)["id"]}


def account_and_spouse(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """A patient with an account without guarantor, and a spouse on file."""
    _base(world)
    patient, params = _target(world)
    spouse = related_person(world, patient, "SPS")
    related_person(world, patient, "CHILD")
    return {
        **params,
        "account_id": account(world, patient)["id"],
        "spouse_id": spouse["id"],
        "spouse_name": display_name(spouse),
    }


def guaranteed_account(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """A patient whose account names a relative as guarantor; another relative is on file too."""
    _base(world)
    patient, params = _target(world)
    guarantor = related_person(world, patient, "MTH")
    related_person(world, patient, "SPS")
    return {
        **params,
        "account_id": account(world, patient, guarantor)["id"],
        "guarantor_id": guarantor["id"],
    }


def unguaranteed_account(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """A patient whose account has no guarantor, though a relative is on file."""
    _base(world)
    patient, params = _target(world)
    related_person(world, patient, "SPS")
    return {**params, "account_id": account(world, patient)["id"]}


SCENARIOS = {
    f.__name__: f
    for f in (
        new_family_coverage,
        covered_patient,
        formerly_covered_patient,
        new_relative,
        uninsured_account,
        existing_account,
        account_and_spouse,
        guaranteed_account,
        unguaranteed_account,
    )
}
