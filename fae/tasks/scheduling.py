"""Scheduling: the task setups over the clinic world (which slots, whose appointments, what is expected)."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

from fae.errors import TaskError
from fae.tasks.clinic import (
    LANGUAGES,
    SPECIALTIES,
    WEEKDAYS,
    book_some_busy,
    book_upcoming,
    clinic,
    doctor_params,
    ensure_free,
    more_patients,
    only_free_at_its_time,
    patient_params,
    slot_ids,
    slot_params,
)
from fae.tasks.world import World, zulu

# ---------------------------------------------------------------- query setups


def earliest_free(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """The earliest free slot from now on, unique at its time."""
    place = clinic(world)
    patients = more_patients(world)
    first = place.free()[0]
    only_free_at_its_time(place, first)
    book_some_busy(place, patients)
    return {
        **slot_params(place, first),
        **doctor_params(place, next(d for d in place.practitioners if d["id"] == place.owner[first["id"]])),
    }


def doctor_by_traits(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """One doctor matches language, gender and city; each other doctor shares at most two."""
    place = clinic(world)
    more_patients(world)
    target = world.rng.choice(place.practitioners)
    lang = target["communication"][0]["coding"][0]["code"]
    city = target["address"][0]["city"]
    elsewhere = [c for c in ("Boston", "Denver", "Austin", "Raleigh") if c != city]
    crossed = False
    for doctor in place.practitioners:
        if doctor is target:
            continue
        if doctor["gender"] == target["gender"]:
            doctor["communication"] = copy.deepcopy(target["communication"])
            doctor["address"][0]["city"] = world.rng.choice(elsewhere)
        elif not crossed:
            doctor["communication"] = copy.deepcopy(target["communication"])
            doctor["address"][0]["city"] = city
            crossed = True
    first = next(s for s in place.free() if place.owner[s["id"]] == target["id"])
    return {
        **doctor_params(place, target),
        **slot_params(place, first),
        "language": LANGUAGES[lang],
        "language_code": lang,
        "gender": target["gender"],
        "city": city,
    }


def specialty_count(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """Free slots from now on of one specialty (two doctors share it when five practise)."""
    place = clinic(world, doctors=5)
    more_patients(world)
    code, display = SPECIALTIES[0]
    free = [s for s in place.free() if s["specialty"][0]["coding"][0]["code"] == code]
    return {"specialty": display, "specialty_code": code, "expected_count": len(free)}


def doctor_week(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """A named doctor's free slots in the next seven days."""
    place = clinic(world)
    book_some_busy(place, more_patients(world))
    doctor = world.rng.choice(place.practitioners)
    # Midnight seven days on: no slot starts at the window's end.
    limit = world.at(world.day(7), 0)
    ensure_free(
        place,
        [s for s in place.of(doctor) if world.now <= place.starts[s["id"]] < limit],
    )
    free = [s for s in place.free() if place.owner[s["id"]] == doctor["id"] and place.starts[s["id"]] < limit]
    return {**doctor_params(place, doctor), "limit": zulu(limit), "expected_ids": slot_ids(free)}


def urgent_today(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """Free slots from now until 17:00 today, with hourly slots all day today."""
    place = clinic(world, today_hours=tuple(range(8, 17)))
    more_patients(world)
    until = world.at(world.today, 17)
    ensure_free(place, [s for s in place.slots if world.now <= place.starts[s["id"]] < until])
    free = [s for s in place.free() if place.starts[s["id"]] < until]
    return {"until": zulu(until), "expected_count": len(free), "expected_ids": slot_ids(free)}


def next_weekday(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """Free slots on the first given weekday after today."""
    place = clinic(world)
    more_patients(world)
    index = WEEKDAYS.index(option["weekday"])
    ahead = (index - world.today.weekday()) % 7 or 7
    day = world.day(ahead)
    ensure_free(place, [s for s in place.slots if place.starts[s["id"]].date() == day])
    free = [s for s in place.free() if place.starts[s["id"]].date() == day]
    return {
        "target_date": day.isoformat(),
        "next_day": world.day(ahead + 1).isoformat(),
        "expected_ids": slot_ids(free),
    }


def follow_up_day(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """Free slots on the day a follow-up falls due, a given number of days out (a weekday)."""
    place = clinic(world, days=16)
    more_patients(world)
    days = int(option["days_out"])
    while world.day(days).weekday() >= 5:
        days += 1
    day = world.day(days)
    ensure_free(place, [s for s in place.slots if place.starts[s["id"]].date() == day])
    free = [s for s in place.free() if place.starts[s["id"]].date() == day]
    return {
        "days_out": days,
        "target_date": day.isoformat(),
        "next_day": world.day(days + 1).isoformat(),
        "expected_ids": slot_ids(free),
    }


def weekday_mornings(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """Free slots before noon on the next two given weekdays after today."""
    place = clinic(world, days=15)
    more_patients(world)
    index = WEEKDAYS.index(option["weekday"])
    ahead = (index - world.today.weekday()) % 7 or 7
    days = {world.day(ahead), world.day(ahead + 7)}
    mornings = [s for s in place.slots if place.starts[s["id"]].date() in days and place.starts[s["id"]].hour < 12]
    ensure_free(place, mornings)
    morning_ids = {s["id"] for s in mornings}
    free = [s for s in place.free() if s["id"] in morning_ids]
    return {
        "first_date": world.day(ahead).isoformat(),
        "second_date": world.day(ahead + 7).isoformat(),
        "expected_ids": slot_ids(free),
        "expected_count": len(free),
    }


def booked_slot(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """A doctor's booked slot, and another doctor booked by someone else at the same time."""
    place = clinic(world)
    patients = more_patients(world)
    doctor, other = world.rng.sample(place.practitioners, 2)
    slot = world.rng.choice([s for s in place.of(doctor) if place.starts[s["id"]] > world.now])
    twin = place.at(other, place.starts[slot["id"]])
    target, decoy = world.rng.sample(patients, 2)
    place.book(slot, target)
    place.book(twin, decoy)
    book_some_busy(place, patients, 4)
    return {**doctor_params(place, doctor), **slot_params(place, slot), **patient_params(target)}


# ---------------------------------------------------------------- write setups


def bookable(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """A free slot of a named doctor; another doctor is free at the same time too."""
    place = clinic(world)
    patients = more_patients(world)
    doctor, other = world.rng.sample(place.practitioners, 2)
    slot = world.rng.choice([s for s in place.of(doctor) if place.starts[s["id"]] > world.now + timedelta(days=1)])
    slot["status"] = "free"
    place.at(other, place.starts[slot["id"]])["status"] = "free"
    book_some_busy(place, patients[1:])
    return {
        **doctor_params(place, doctor),
        **slot_params(place, slot),
        **patient_params(patients[0]),
    }


def next_appointment(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """The patient's next appointment (a past one and a later one exist too)."""
    place = clinic(world)
    patients = more_patients(world)
    patient = patients[0]
    a, b = world.rng.sample(place.practitioners, 2)
    (appt, slot), _ = book_upcoming(world, place, patient, [a, b], [2, 8])
    past_slot = world.add(
        {
            **place.of(b)[0],
            "id": world.new_id("slot"),
            "start": zulu(world.now - timedelta(days=20)),
            "end": zulu(world.now - timedelta(days=20) + timedelta(hours=1)),
        }
    )
    place.starts[past_slot["id"]] = world.now - timedelta(days=20)
    place.owner[past_slot["id"]] = b["id"]
    place.slots.append(past_slot)
    place.book(past_slot, patient, status="fulfilled")
    book_some_busy(place, patients[1:])
    return {
        **patient_params(patient),
        "appointment_id": appt["id"],
        **slot_params(place, slot),
        **doctor_params(place, a),
    }


def appointment_with(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """Upcoming appointments with two doctors; the task names the later one's doctor."""
    place = clinic(world)
    patients = more_patients(world)
    patient = patients[0]
    a, b = world.rng.sample(place.practitioners, 2)
    _, (appt, slot) = book_upcoming(world, place, patient, [a, b], [2, 6])
    book_some_busy(place, patients[1:])
    return {
        **patient_params(patient),
        "appointment_id": appt["id"],
        **slot_params(place, slot),
        **doctor_params(place, b),
    }


def appointment_on_weekday(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """Appointments on two different days; the task names the weekday of one of them."""
    place = clinic(world)
    patients = more_patients(world)
    patient = patients[0]
    a, b = world.rng.sample(place.practitioners, 2)
    booked = book_upcoming(world, place, patient, [a, b], [1, 4])
    appt, slot = booked[world.rng.randrange(2)]
    other_day = next(place.starts[s["id"]].weekday() for _, s in booked if s is not slot)
    if other_day == place.starts[slot["id"]].weekday():
        raise TaskError("appointment_on_weekday: two appointments fell on the same weekday")
    doctor = next(d for d in place.practitioners if d["id"] == place.owner[slot["id"]])
    book_some_busy(place, patients[1:])
    return {
        **patient_params(patient),
        "appointment_id": appt["id"],
        **slot_params(place, slot),
        **doctor_params(place, doctor),
    }


def waitlist_request(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """A patient and a named doctor; the window for an earlier appointment is new."""
    place = clinic(world)
    patients = more_patients(world)
    doctor = world.rng.choice(place.practitioners)
    start = world.at(world.day(int(option.get("window_in", 1))), 0)
    end = start + timedelta(days=int(option.get("window_days", 6)))
    book_some_busy(place, patients[1:])
    return {
        **patient_params(patients[0]),
        **doctor_params(place, doctor),
        "window_start": zulu(start),
        "window_end": zulu(end),
    }


def waitlisted(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """A waitlist appointment with a requested window; the doctor has free slots in it."""
    place = clinic(world)
    patients = more_patients(world)
    patient = patients[0]
    doctor = world.rng.choice(place.practitioners)
    start = world.at(world.day(2), 0)
    end = start + timedelta(days=5)
    inside = [s for s in place.of(doctor) if start <= place.starts[s["id"]] < end]
    for slot in inside[:2]:
        slot["status"] = "free"
    first = next(s for s in inside if s["status"] == "free")
    appt = world.add(
        {
            "resourceType": "Appointment",
            "id": world.new_id("appt"),
            "status": "waitlist",
            "requestedPeriod": [{"start": zulu(start), "end": zulu(end)}],
            "participant": [
                {"actor": {"reference": f"Patient/{patient['id']}"}, "status": "needs-action"},
                {"actor": {"reference": f"Practitioner/{doctor['id']}"}, "status": "needs-action"},
            ],
        }
    )
    book_some_busy(place, patients[1:])
    return {
        **patient_params(patient),
        **doctor_params(place, doctor),
        "appointment_id": appt["id"],
        "window_start": zulu(start),
        "window_end": zulu(end),
        **slot_params(place, first),
    }


def reschedulable(world: World, option: dict[str, Any]) -> dict[str, Any]:
    """An appointment that can move one week later with the same doctor, or to another doctor now."""
    place = clinic(world, days=16)
    patients = more_patients(world)
    patient = patients[0]
    doctor, *others = world.rng.sample(place.practitioners, len(place.practitioners))
    ((appt, slot),) = book_upcoming(world, place, patient, [doctor], [world.rng.randrange(1, 5)])
    later = place.at(doctor, place.starts[slot["id"]] + timedelta(days=7))
    later["status"] = "free"
    # Exactly one other doctor is free at the same time.
    twins = [place.at(o, place.starts[slot["id"]]) for o in others]
    for index, twin in enumerate(twins):
        twin["status"] = "free" if index == 0 else "busy"
    new_doctor = others[0]
    book_some_busy(place, patients[1:])
    return {
        **patient_params(patient),
        "appointment_id": appt["id"],
        **doctor_params(place, doctor),
        **slot_params(place, slot),
        **slot_params(place, later, "later"),
        **doctor_params(place, new_doctor, "other_doctor"),
        **slot_params(place, twins[0], "other_slot"),
    }


SCENARIOS = {
    f.__name__: f
    for f in (
        earliest_free,
        doctor_by_traits,
        specialty_count,
        doctor_week,
        urgent_today,
        next_weekday,
        follow_up_day,
        weekday_mornings,
        booked_slot,
        bookable,
        next_appointment,
        appointment_with,
        appointment_on_weekday,
        waitlist_request,
        waitlisted,
        reschedulable,
    )
}
