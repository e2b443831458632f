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
