"""The clinic world for scheduling tasks: practitioners, schedules, slots and appointments."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from fae.errors import TaskError
from fae.tasks.world import SNOMED, World, display_name, zulu

SPECIALTIES = [
    ("394579002", "Cardiology"),
    ("394582007", "Dermatology"),
    ("394814009", "General practice"),
    ("394591006", "Neurology"),
]
LANGUAGES = {"en": "English", "es": "Spanish", "fr": "French", "pt": "Portuguese", "de": "German"}
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


@dataclass
class Clinic:
    """The practitioners, their schedules and slots; slot starts kept parsed for expectations."""

    world: World
    practitioners: list[dict[str, Any]] = field(default_factory=list)
    schedules: dict[str, dict[str, Any]] = field(default_factory=dict)  # practitioner id -> Schedule
    slots: list[dict[str, Any]] = field(default_factory=list)
    starts: dict[str, datetime] = field(default_factory=dict)
    owner: dict[str, str] = field(default_factory=dict)  # slot id -> practitioner id
    booked: set[str] = field(default_factory=set)  # slot ids that carry an appointment

    def free(self, after: datetime | None = None) -> list[dict[str, Any]]:
        """Free slots starting at or after ``after`` (now by default), by start then id."""
        after = after or self.world.now
        found = [s for s in self.slots if s["status"] == "free" and self.starts[s["id"]] >= after]
        return sorted(found, key=lambda s: (self.starts[s["id"]], s["id"]))

    def of(self, practitioner: dict[str, Any]) -> list[dict[str, Any]]:
        """A practitioner's slots by start."""
        return sorted(
            (s for s in self.slots if self.owner[s["id"]] == practitioner["id"]),
            key=lambda s: self.starts[s["id"]],
        )

    def at(self, practitioner: dict[str, Any], start: datetime) -> dict[str, Any]:
        """The practitioner's slot starting at ``start``; every practitioner has the same grid, so one exists."""
        slot = next((s for s in self.of(practitioner) if self.starts[s["id"]] == start), None)
        if slot is None:
            raise TaskError(f"practitioner {practitioner['id']} has no slot at {zulu(start)}")
        return slot

    def book(self, slot: dict[str, Any], patient: dict[str, Any], status: str = "booked") -> dict[str, Any]:
        """An appointment of the patient in the slot; the slot turns busy."""
        slot["status"] = "busy"
        self.booked.add(slot["id"])
        return self.world.add(
            {
                "resourceType": "Appointment",
                "id": self.world.new_id("appt"),
                "status": status,
                "start": slot["start"],
                "end": slot["end"],
                "slot": [{"reference": f"Slot/{slot['id']}"}],
                "participant": [
                    {"actor": {"reference": f"Patient/{patient['id']}"}, "status": "accepted"},
                    {
                        "actor": {"reference": f"Practitioner/{self.owner[slot['id']]}"},
                        "status": "accepted",
                    },
                ],
            }
        )


def clinic(
    world: World,
    *,
    doctors: int = 4,
    days: int = 14,
    hours: tuple[int, ...] = (9, 11, 14),
    p_free: float = 0.55,
    today_hours: tuple[int, ...] = (),
) -> Clinic:
    """Doctors with distinct traits, each with a schedule and one-hour slots on weekdays."""
    rng = world.rng
    place = Clinic(world)
    langs = rng.sample(sorted(LANGUAGES), doctors)
    specialties = [SPECIALTIES[i % len(SPECIALTIES)] for i in range(doctors)]
    for index in range(doctors):
        doctor = world.practitioner(gender=["female", "male"][index % 2], language=langs[index])
        place.practitioners.append(doctor)
        code, display = specialties[index]
        schedule = world.add(
            {
                "resourceType": "Schedule",
                "id": world.new_id("sched"),
                "active": True,
                "actor": [
                    {
                        "reference": f"Practitioner/{doctor['id']}",
                        "display": f"Dr. {display_name(doctor)}",
                    }
                ],
                "specialty": [{"coding": [{"system": SNOMED, "code": code, "display": display}]}],
            }
        )
        place.schedules[doctor["id"]] = schedule
    for offset in range(days):
        day = world.day(offset)
        day_hours = today_hours if offset == 0 and today_hours else hours
        if offset > 0 and day.weekday() >= 5:
            continue
        if offset == 0 and not today_hours and day.weekday() >= 5:
            continue
        # every doctor has the same grid: each hour's times are written once a day, not once a doctor
        grid = [
            (start, zulu(start), zulu(start + timedelta(hours=1)))
            for start in (world.at(day, hour) for hour in day_hours)
        ]
        for index, doctor in enumerate(place.practitioners):
            schedule = place.schedules[doctor["id"]]
            code, display = specialties[index]
            for start, begins, ends in grid:
                slot = world.add(
                    {
                        "resourceType": "Slot",
                        "id": world.new_id("slot"),
                        "schedule": {"reference": f"Schedule/{schedule['id']}"},
                        # the schedule's specialty, made anew (a copy, never the schedule's own lists)
                        "specialty": [{"coding": [{"system": SNOMED, "code": code, "display": display}]}],
                        "status": "free" if rng.random() < p_free else "busy",
                        "start": begins,
                        "end": ends,
                    }
                )
                place.slots.append(slot)
                place.starts[slot["id"]] = start
                place.owner[slot["id"]] = doctor["id"]
    return place


def slot_ids(slots: list[dict[str, Any]]) -> str:
    return ", ".join(s["id"] for s in slots) or "NONE"


def more_patients(world: World, count: int = 6) -> list[dict[str, Any]]:
    return [world.patient() for _ in range(count)]


def doctor_params(place: Clinic, doctor: dict[str, Any], prefix: str = "doctor") -> dict[str, Any]:
    return {
        f"{prefix}_id": doctor["id"],
        f"{prefix}_name": f"Dr. {display_name(doctor)}",
        f"{prefix}_family": doctor["name"][0]["family"],
        f"{prefix}_schedule_id": place.schedules[doctor["id"]]["id"],
    }


def patient_params(patient: dict[str, Any]) -> dict[str, Any]:
    return {
        "patient_id": patient["id"],
        "patient_name": display_name(patient),
        "patient_birth_date": patient["birthDate"],
    }


def slot_params(place: Clinic, slot: dict[str, Any], prefix: str = "slot") -> dict[str, Any]:
    start = place.starts[slot["id"]]
    return {
        f"{prefix}_id": slot["id"],
        f"{prefix}_start": slot["start"],
        f"{prefix}_end": slot["end"],
        f"{prefix}_date": start.date().isoformat(),
        f"{prefix}_weekday": WEEKDAYS[start.weekday()],
        f"{prefix}_time": start.strftime("%H:%M"),
    }


def book_some_busy(place: Clinic, patients: list[dict[str, Any]], count: int = 6) -> None:
    """Some busy slots carry appointments of distractor patients (the rest are blocked time)."""
    busy = [s for s in place.slots if s["status"] == "busy" and s["id"] not in place.booked]
    for slot in place.world.rng.sample(busy, min(count, len(busy))):
        place.book(slot, place.world.rng.choice(patients))


def ensure_free(place: Clinic, candidates: list[dict[str, Any]]) -> None:
    """Make one candidate slot free when none is, so a list answer is never empty by chance."""
    if any(s["status"] == "free" for s in candidates):
        return
    unbooked = [s for s in candidates if s["id"] not in place.booked]
    if unbooked:
        unbooked[0]["status"] = "free"


def only_free_at_its_time(place: Clinic, slot: dict[str, Any]) -> None:
    """Make the slot the only free one at its start."""
    for other in place.slots:
        if other is not slot and place.starts[other["id"]] == place.starts[slot["id"]]:
            other["status"] = "busy"


def book_upcoming(
    world: World,
    place: Clinic,
    patient: dict[str, Any],
    doctors: list[dict[str, Any]],
    offsets: list[int],
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Book the patient with each doctor on the weekday ``offset`` days out; returns (appt, slot)."""
    made = []
    for doctor, offset in zip(doctors, offsets, strict=True):
        day = world.day(offset)
        while day.weekday() >= 5:
            day += timedelta(days=1)
        slot = world.rng.choice([s for s in place.of(doctor) if place.starts[s["id"]].date() == day])
        made.append((place.book(slot, patient), slot))
    return made
