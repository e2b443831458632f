"""A clinic's slot lookup: every doctor shares one grid, and a time off it is a clear TaskError."""

from datetime import UTC, datetime, timedelta
from random import Random

import pytest

from fae.errors import TaskError
from fae.tasks.clinic import clinic
from fae.tasks.world import World


def _place():
    return clinic(World(Random(7), datetime(2025, 3, 3, 8, tzinfo=UTC)))


def test_each_doctor_has_a_slot_at_another_doctors_slot_time():
    place = _place()
    first, second = place.practitioners[:2]
    slot = place.of(first)[0]
    twin = place.at(second, place.starts[slot["id"]])
    assert twin["id"] != slot["id"]
    assert place.starts[twin["id"]] == place.starts[slot["id"]]
    assert twin in place.of(second)


def test_a_time_off_the_grid_is_a_task_error_naming_doctor_and_time():
    place = _place()
    doctor = place.practitioners[0]
    off_grid = place.starts[place.of(doctor)[0]["id"]] + timedelta(minutes=30)
    with pytest.raises(TaskError, match=f"practitioner {doctor['id']} has no slot at"):
        place.at(doctor, off_grid)


def test_each_slot_carries_its_schedules_specialty_as_its_own_copy():
    place = _place()
    for slot in place.slots:
        schedule = place.schedules[place.owner[slot["id"]]]
        assert slot["specialty"] == schedule["specialty"]
        assert slot["specialty"] is not schedule["specialty"]
        assert slot["specialty"][0]["coding"][0] is not schedule["specialty"][0]["coding"][0]
