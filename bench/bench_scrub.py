"""What scrubbing echoed secrets costs the writer, per batch, side by side in one run.

    uv run python bench/bench_scrub.py [--secrets 20] [--body-kib 64] [--batches 2000]

Each batch is one recorded exchange: a JSON body of --body-kib and three event
payloads. Prints the time per batch with no secrets learned, with --secrets
learned but absent from the batch (the substring pre-check), and with one of
them echoed in the body and an event (the regex rewrite and the blob rehash).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fae.store import events as ev
from fae.store.log import Batch, EventRow, blob_hash
from fae.store.secrets import SecretValues


def _batch(body_kib: int, echo: str) -> Batch:
    body = (
        b'{"resourceType": "Bundle", "entry": ['
        + b'{"resource": {"id": "p"}},' * (body_kib * 40)
        + f'"{echo}"]}}'.encode()
    )
    when = datetime(2026, 1, 1, tzinfo=UTC)
    events = [
        EventRow("r", i, "AnswerGiven", when, i, "agent", None, ev.encode(ev.AnswerGiven(text=f"text {echo}")))
        for i in range(3)
    ]
    return Batch(blobs={blob_hash(body): body}, events=events)


def _per_batch_us(secrets: SecretValues, batch: Batch, batches: int) -> float:
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(batches // 5):
            secrets.scrub_batch(batch)
        rounds.append((time.perf_counter() - start) / (batches // 5) * 1e6)
    return statistics.median(rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--secrets", type=int, default=20)
    parser.add_argument("--body-kib", type=int, default=64)
    parser.add_argument("--batches", type=int, default=2000)
    args = parser.parse_args()
    values = [f"sk-live-SECRET-{i:04d}-abcdefghijklmnop" for i in range(args.secrets)]
    clean = _batch(args.body_kib, "no secret here")
    echoed = _batch(args.body_kib, f"Incorrect API key provided: {values[-1]}")
    none = _per_batch_us(SecretValues(), clean, args.batches)
    absent = _per_batch_us(SecretValues(values), clean, args.batches)
    present = _per_batch_us(SecretValues(values), echoed, args.batches)
    size = len(next(iter(clean.blobs.values()))) / 1024
    print(f"scrub per batch ({size:.0f} KiB body, 3 events, {args.secrets} secrets x their forms):")
    print(f"  no secrets learned     {none:8.1f} us")
    print(f"  learned, none present  {absent:8.1f} us  ({absent / size:.2f} us/KiB)")
    print(f"  one echoed             {present:8.1f} us  ({present / size:.2f} us/KiB)")


if __name__ == "__main__":
    main()
