"""The Redactor hides secrets where they were sent and learns them; the secret set scrubs every later form."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from urllib.parse import quote, quote_plus

import pytest

from fae.recorder.redact import Redactor
from fae.store import events as ev
from fae.store.log import Batch, EventRow, FactsRow, RunRow, RunUpdate, VerdictRow, blob_hash
from fae.store.secrets import REDACTED, SecretValues


@pytest.mark.parametrize(
    "query, hidden, kept",
    [
        ("a=1&key=SECRETKEY1", ["SECRETKEY1"], ["a=1"]),
        ("a=1;key=SECRETKEY2;b=2", ["SECRETKEY2"], ["a=1", "b=2"]),
        ("Access_Token=SECRETTOKEN3", ["SECRETTOKEN3"], []),
        ("api%5Fkey=SECRETKEY4&x=1", ["SECRETKEY4"], ["x=1"]),
        ("token=A%2FB%2BC%20SECRET5&token=SECOND-SECRET6", ["A%2FB%2BC%20SECRET5", "SECOND-SECRET6"], []),
        ("tokenizer=notsecret123&keyword=alsofine456", [], ["tokenizer=notsecret123", "keyword=alsofine456"]),
    ],
)
def test_query_parameters_are_redacted_with_either_separator(query, hidden, kept):
    redactor = Redactor()
    out = redactor.query(query)
    for secret in hidden:
        assert secret not in out
    for part in kept:
        assert part in out
    assert (REDACTED in out) == bool(hidden)
    for secret in hidden:  # learned, decoded too
        assert redactor.secrets.scrub_text(f"echo {secret}") == f"echo {REDACTED}"


def test_headers_teach_every_form_of_their_credential():
    redactor = Redactor()
    basic = base64.b64encode(b"alice:BASICPASS-77").decode()
    headers = redactor.header_list(
        [
            ("Authorization", f"Basic {basic}"),
            ("Cookie", "a=COOKIEVAL-1; b=COOKIEVAL-2"),
            ("X-Api-Key", "XKEY-123456"),
            ("Accept", "application/json"),
        ]
    )
    assert headers[-1] == ("Accept", "application/json")
    assert all(v == REDACTED for _, v in headers[:3])
    echoed = f"{basic} alice:BASICPASS-77 pw=BASICPASS-77 COOKIEVAL-1 COOKIEVAL-2 XKEY-123456"
    assert redactor.secrets.scrub_text(echoed) == " ".join([REDACTED] * 2 + ["pw=" + REDACTED] + [REDACTED] * 3)


def test_location_headers_and_userinfo_are_redacted():
    redactor = Redactor()
    (location,) = redactor.header_list([("Location", "http://h/next?page=2&access_token=LOCTOKEN-99")])
    assert location == ("Location", f"http://h/next?page=2&access_token={REDACTED}")
    assert redactor.url("http://bob:URLPASS-123@h/x") == f"http://bob:{REDACTED}@h/x"
    assert redactor.secrets.scrub_text("LOCTOKEN-99 URLPASS-123") == f"{REDACTED} {REDACTED}"


def test_short_values_and_the_marker_are_not_learned():
    secrets = SecretValues()
    for value in ("", "   ", "abc", "1234567", REDACTED, None):
        secrets.add(value)
    assert not secrets
    assert secrets.scrub_text("abc 1234567") == "abc 1234567"


def test_every_encoded_form_is_scrubbed_and_longest_first():
    value = 'K"E\\Y/with space+plus&é-1'
    secrets = SecretValues([value, "prefix-SECRET", "prefix-SECRET-longer"])
    forms = [
        value,
        quote(value, safe=""),
        quote(value),
        quote_plus(value),
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        json.dumps(value)[1:-1].replace("/", "\\/"),
    ]
    for form in forms:
        assert secrets.scrub_text(f"<{form}>") == f"<{REDACTED}>", form
    assert secrets.scrub_text("prefix-SECRET-longer") == REDACTED  # not "[redacted]-longer"


def test_a_batch_without_secrets_passes_through_untouched():
    batch = Batch(blobs={"h": b"body"})
    assert SecretValues().scrub_batch(batch) is batch
    assert SecretValues(["UNRELATED-SECRET"]).scrub_batch(batch).blobs["h"] is batch.blobs["h"]


def test_a_scrubbed_blob_gets_a_new_hash_and_events_follow_even_in_a_later_batch():
    secret = "sk-live-BLOBSECRET-1"
    secrets = SecretValues([secret])
    body = f'{{"error": "bad key {secret}"}}'.encode()
    old = blob_hash(body)
    when = datetime(2026, 1, 1, tzinfo=UTC)
    first = secrets.scrub_batch(
        Batch(
            blobs={old: body},
            runs=[RunRow("r", "t", 0, "a", 0, agent_config={"api_key": secret})],
            events=[EventRow("r", 1, "X", when, 1, None, None, ev.encode(ev.AnswerGiven(text=f"{old} {secret}")))],
            updates=[RunUpdate("r", "errored", error=f"401 {secret}", stop_reason=secret)],
            verdicts=[VerdictRow("r", "j", {}, "h", "v", "fail", False, {"why": secret}, when)],
            facts=[FactsRow("r", "j", "evidence=proxy", "v", json.dumps({"found": secret}))],
        )
    )
    ((new, clean),) = first.blobs.items()
    assert new == blob_hash(clean) != old and secret.encode() not in clean
    assert new in first.events[0].payload.decode() and old not in first.events[0].payload.decode()
    assert first.runs[0].agent_config == {"api_key": REDACTED}
    assert first.updates[0].error == f"401 {REDACTED}" and first.updates[0].stop_reason == REDACTED
    assert first.verdicts[0].evidence == {"why": REDACTED}
    assert json.loads(first.facts[0].facts) == {"found": REDACTED}  # a judge's findings are text like any other
    later = secrets.scrub_batch(
        Batch(events=[EventRow("r", 2, "X", when, 2, None, None, ev.encode(ev.AnswerGiven(text=old)))])
    )
    assert later.events[0].payload.decode().count(new) == 1
