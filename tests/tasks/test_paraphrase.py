"""The paraphrase guard: the clock block stays, and nothing a validator needs may be lost."""

from __future__ import annotations

import pytest

from fae.errors import TaskError
from fae.tasks import load_suite
from fae.tasks.paraphrase import accept_paraphrase, must_keep, paraphrase_request, paraphrased


@pytest.mark.parametrize("task_id", list(load_suite()))
def test_identity_is_accepted_and_each_lost_token_refused(suite, task_id):
    rendered = suite[task_id].render(1)
    body = rendered.prompt.partition("\n\n")[2]
    prompt, missing = accept_paraphrase(rendered, body)
    assert prompt == rendered.prompt and missing == []
    keep = must_keep(rendered)
    assert all(f"<{tag}>" in keep for tag in rendered.answer_tags)
    for token in keep:
        _, missing = accept_paraphrase(rendered, body.replace(token, "something"))
        assert token in missing


def test_a_faithful_rewording_passes_and_keeps_the_clock(suite):
    rendered = suite["sched-book-appointment"].render(0)
    p = rendered.params
    text = (
        f"Please set up a visit for {p['patient_name']} (id {p['patient_id']}) with "
        f"{p['doctor_name']}, {p['slot_weekday']} {p['slot_date']} at {p['slot_time']} UTC: a booked "
        "Appointment on that slot, same start and end, both people as accepted participants; "
        "then mark the slot busy. Answer <APPOINTMENT>id</APPOINTMENT> and <SLOT>id</SLOT>."
    )
    changed = paraphrased(rendered, text)
    assert changed.prompt.startswith(rendered.prompt.partition("\n\n")[0])
    assert changed.seed_bundle == rendered.seed_bundle and changed.check_spec == rendered.check_spec
    with pytest.raises(TaskError):
        paraphrased(rendered, text.replace(p["patient_id"], "the patient"))


def test_request_is_seeded_and_leaves_the_clock_out(suite):
    rendered = suite["rec-record-condition"].render(0)
    request = paraphrase_request(rendered, seed=7)
    assert request == paraphrase_request(rendered, seed=7) and request["seed"] == 7
    assert "Current date and time" not in request["messages"][1]["content"]


def _body(rendered):
    return rendered.prompt.partition("\n\n")[2]


# Hostile paraphrases: each changes an id, date, number, code or name while keeping the rest word for word,
# so a guard that only looked for the original's tokens somewhere in the text would accept several of them.
HOSTILE = [
    # a changed digit: "48" is still a substring of "480", and of "onset age 480 years"
    ("rec-family-history", lambda b: b.replace("onset age 48", "onset age 480"), "added 480"),
    # a changed digit inside a date
    ("sched-waitlist-add", lambda b: b.replace("2025-03-11T00:00:00Z", "2025-03-12T00:00:00Z"), "added "),
    # swapped dates: the window now ends before it starts, every date still present
    (
        "sched-waitlist-add",
        lambda b: (
            b.replace("2025-03-07T00:00:00Z", "START")
            .replace("2025-03-11T00:00:00Z", "2025-03-07T00:00:00Z")
            .replace("START", "2025-03-11T00:00:00Z")
        ),
        "out of order",
    ),
    # swapped period of a coverage
    (
        "ins-coverage-parent-subscriber",
        lambda b: b.replace("period 2025-03-09 to 2026-03-09", "period 2026-03-09 to 2025-03-09"),
        "out of order",
    ),
    # swapped phone numbers: the old one becomes the new one
    (
        "rec-update-phone",
        lambda b: b.replace("555-666-2493", "X").replace("555-470-5150", "555-666-2493").replace("X", "555-470-5150"),
        "out of order",
    ),
    # swapped ids: the order becomes the subject
    (
        "ord-collect-specimen",
        lambda b: b.replace("pat-60addd", "X").replace("sr-1f4e10", "pat-60addd").replace("X", "sr-1f4e10"),
        "out of order",
    ),
    # a dropped code: the relationship code is left out
    ("rec-family-history", lambda b: b.replace("relationship MTH ", "relationship "), "MTH"),
    # a changed code (the group number's last digit)
    ("ins-coverage-parent-subscriber", lambda b: b.replace("GRP-5157", "GRP-5158"), "GRP-5157"),
    # a longer name that contains the original one
    ("rec-update-phone", lambda b: b.replace("Ulrich Jovanovic", "Ulrich Jovanovich"), "Ulrich Jovanovic"),
    # an added date the original never asked for
    ("rec-create-patient", lambda b: b.replace("Register", "By 2025-04-01, register"), "added 2025-04-01"),
    # an added answer tag
    (
        "rec-create-patient",
        lambda b: b.replace("<PATIENT>id</PATIENT>", "<PATIENT>id</PATIENT> <NOTE>x</NOTE>"),
        "added <NOTE>",
    ),
]


@pytest.mark.parametrize(("task_id", "change", "said"), HOSTILE)
def test_a_hostile_paraphrase_is_refused_and_says_what_changed(suite, task_id, change, said):
    rendered = suite[task_id].render(0)
    body = _body(rendered)
    text = change(body)
    assert text != body, "the change must apply to the prompt as the suite renders it"
    prompt, problems = accept_paraphrase(rendered, text)
    assert prompt is None and any(said in p for p in problems), problems


def test_a_rewording_that_moves_clauses_of_different_kinds_and_adds_words_passes(suite):
    rendered = suite["rec-create-patient"].render(0)
    p = rendered.params
    text = (
        f"Please add a FHIR Patient for {p['given']} {p['family']} ({p['gender']}), who lives at {p['line']}, "
        f"{p['city']} {p['postal_code']}, US, was born {p['birth_date']} and has the mobile phone {p['phone']}. "
        "Send the new id back as <PATIENT>id</PATIENT>."
    )
    # the phone moved after the address: numbers of another order would be refused, so keep theirs
    prompt, problems = accept_paraphrase(rendered, text)
    assert problems == ["out of order: 192, 69165, 555-679-7678 (the original has 555-679-7678, 192, 69165)"]
    text = text.replace(
        f"who lives at {p['line']}, {p['city']} {p['postal_code']}, US, was born {p['birth_date']} and has the "
        f"mobile phone {p['phone']}",
        f"born {p['birth_date']}, mobile phone {p['phone']}, who lives at {p['line']}, {p['city']} "
        f"{p['postal_code']}, US",
    )
    prompt, problems = accept_paraphrase(rendered, text)
    assert problems == [] and prompt is not None and "FHIR Patient" in prompt
