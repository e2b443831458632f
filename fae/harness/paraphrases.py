"""Fixed paraphrases for a recording: each variation's paraphrase is made once, before its runs, and every
trial and configuration plays it.

For each (task, variation, paraphrase model, seed) the recording needs, in this order:

1. the log already holds one for the prompt fae renders now (an earlier recording, an interrupted one being
   resumed, another experiment in the same log): it is played again;
2. the paraphrase file (``--paraphrases FILE``) has one: it is recorded in the log (``ParaphraseMade`` with
   the file's name as origin) and played;
3. otherwise the model is asked once, through the recording proxy as the ``harness`` actor, under an id of
   the variation's own (``paraphrase.TASK.vN.HASH``, not a run), so the request is in the log.

All of that happens before the first run starts, so runs that start together never ask twice. Each run then
records a ``PromptParaphrased`` event naming the prompt it played (``digest``). A paraphrase the guard
refuses is fixed too: every run of the variation plays the original prompt. A request that fails makes the
variation's runs fail on fae's side (``--resume`` asks again).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio
import httpx
import msgspec

from fae.errors import FaeError, RecordError, TaskError
from fae.harness.config import StackConfig
from fae.harness.stack import open_stack
from fae.store import events as ev
from fae.store.log import EventLog
from fae.store.writer import Stamped
from fae.tasks.model import Rendered
from fae.tasks.paraphrase import paraphrase_request, request_seed
from fae.tasks.paraphrase_file import (
    FixedParaphrase,
    ParaphraseEntry,
    check_entry,
    digest_of,
    dump_paraphrases,
    fix,
    load_paraphrase_file,
)
from fae.util.tls import client_tls

Key = tuple[str, int]
"""(task, variation)."""


@dataclass(frozen=True)
class Paraphrase:
    """How a recording rewords its prompts: ``model`` asked once per variation with ``seed``; the paraphrases of
    ``file`` (a paraphrase file) where it has them. With no model, the file's one model and seed are used."""

    model: str | None
    seed: int = 0
    file: str | None = None

    @classmethod
    def asked(cls, model: str | None, seed: int = 0, file: str | Path | None = None) -> Paraphrase | None:
        """The setting ``--paraphrase-model``, ``--paraphrase-seed`` and ``--paraphrases`` ask for (None: none)."""
        return cls(model, seed, str(file) if file else None) if model or file else None


@dataclass(frozen=True)
class Played:
    """A variation's fixed paraphrase, where the log keeps it, or why it could not be made."""

    fixed: FixedParaphrase | None
    made_in: str
    exchange_id: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class Paraphrases:
    """The paraphrase each (task, variation) of a recording plays, fixed before its runs start (it pickles: a
    sharded recording hands it to every worker)."""

    model: str
    seed: int
    played: dict[Key, Played] = field(default_factory=dict)


def made_in(task_id: str, variation: int, model: str, seed: int, original: str) -> str:
    """The id a variation's paraphrase is kept under: its request and its ``ParaphraseMade`` event."""
    digest = hashlib.sha256(f"{model}\n{seed}\n{original}".encode()).hexdigest()[:12]
    return f"{ev.PARAPHRASE_IDS}{task_id}.v{variation}.{digest}"


def paraphrases_in_log(log: EventLog) -> dict[tuple[str, int, str, int, str], tuple[ParaphraseEntry, str, str | None]]:
    """Every paraphrase the log fixed, by (task, variation, model, seed, original): the entry, where it was made
    and its request's exchange. The earliest made wins; runs' own ``PromptParaphrased`` events count too, so
    a log that kept the runs but not the ``ParaphraseMade`` events (a merge copies runs) still has them."""
    _, rows = log.query(
        "SELECT run_id, payload FROM events WHERE kind = 'ParaphraseMade'"
        " OR (kind = 'PromptParaphrased' AND payload->>'$.original' IS NOT NULL)"
        " ORDER BY kind = 'PromptParaphrased', wall_time, run_id, seq"
    )
    found: dict[tuple[str, int, str, int, str], tuple[ParaphraseEntry, str, str | None]] = {}
    tasks: dict[str, tuple[str, int]] | None = None
    for run_id, payload in rows:
        try:
            event = ev.decode(payload)
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise FaeError("an event payload cannot be decoded: the log is damaged", run_id=run_id) from None
        if isinstance(event, ev.ParaphraseMade):
            entry = ParaphraseEntry(
                task_id=event.task_id,
                variation=event.variation,
                model=event.model,
                seed=event.seed,
                original=event.original,
                text=event.text,
                accepted=event.accepted,
                problems=list(event.problems),
            )
            found.setdefault(_entry_key(entry), (entry, run_id, event.exchange_id))
        elif isinstance(event, ev.PromptParaphrased) and event.original and event.text is not None:
            tasks = _run_tasks(log) if tasks is None else tasks
            if run_id not in tasks or event.seed is None:
                continue
            task_id, variation = tasks[run_id]
            entry = ParaphraseEntry(
                task_id=task_id,
                variation=variation,
                model=event.model,
                seed=event.seed,
                original=event.original,
                text=event.text,
                accepted=event.accepted,
                problems=list(event.problems),
            )
            found.setdefault(_entry_key(entry), (entry, event.made_in or run_id, event.exchange_id))
    return found


def _run_tasks(log: EventLog) -> dict[str, tuple[str, int]]:
    _, rows = log.query("SELECT run_id, task_id, variation FROM runs")
    return {run_id: (task_id, variation) for run_id, task_id, variation in rows}


def _entry_key(entry: ParaphraseEntry) -> tuple[str, int, str, int, str]:
    return (entry.task_id, entry.variation, entry.model, entry.seed, entry.original)


def _model_and_seed(spec: Paraphrase, entries: list[ParaphraseEntry]) -> tuple[str, int]:
    if spec.model is not None:
        return spec.model, spec.seed
    pairs = sorted({(e.model, e.seed) for e in entries})
    if len(pairs) != 1:
        found = "none" if not pairs else ", ".join(f"{m} seed {s}" for m, s in pairs)
        raise RecordError(
            f"{spec.file}: name the paraphrases to play with --paraphrase-model (and --paraphrase-seed): "
            f"the file holds {found}"
        )
    return pairs[0]


def paraphrase_work(
    log: EventLog, rendered: Mapping[Key, Any], spec: Paraphrase
) -> tuple[Paraphrases, list[Played], list[Key]]:
    """What the log and the file already fix, which of the file's the log must record, and what is left to make."""
    entries = load_paraphrase_file(spec.file) if spec.file else []
    model, seed = _model_and_seed(spec, entries)
    in_log = paraphrases_in_log(log)
    in_file = {_entry_key(e): e for e in entries if (e.model, e.seed) == (model, seed)}
    by_variation = {(e.task_id, e.variation): e for e in in_file.values()}
    book = Paraphrases(model, seed)
    to_record: list[Played] = []
    to_make: list[Key] = []
    for key, variation in sorted(rendered.items()):
        if not isinstance(variation, Rendered):
            raise RecordError(f"task {key[0]} cannot be paraphrased (only the suite's tasks can)")
        original = digest_of(variation.prompt)
        where = made_in(key[0], key[1], model, seed, original)
        full = (key[0], key[1], model, seed, original)
        logged = in_log.get(full)
        filed = in_file.get(full) or by_variation.get(key)
        if logged is not None:
            fixed = _reused(logged[0], variation, "the log")
            if filed is not None and filed.text != logged[0].text:
                raise RecordError(
                    f"{spec.file}: its paraphrase of {key[0]} v{key[1]} differs from the one the log's runs "
                    "played; record into a new log, or drop the entry from the file"
                )
            book.played[key] = Played(fixed, logged[1], logged[2])
        elif filed is not None:
            try:
                fixed = check_entry(filed, variation, str(spec.file))
            except TaskError as exc:
                raise RecordError(str(exc)) from None
            book.played[key] = Played(fixed, where)
            to_record.append(book.played[key])
        else:
            to_make.append(key)
    return book, to_record, to_make


def _reused(entry: ParaphraseEntry, rendered: Rendered, where: str) -> FixedParaphrase:
    """A paraphrase the log fixed, checked again: a guard that now decides otherwise would change what the
    variation's runs play, so that is refused rather than played."""
    fixed = fix(rendered, model=entry.model, seed=entry.seed, text=entry.text)
    if entry.accepted is not None and entry.accepted != (fixed.prompt is not None):
        said = "accepted" if entry.accepted else "refused"
        raise RecordError(
            f"{where}'s paraphrase of {entry.task_id} v{entry.variation} was {said} when it was made, and this "
            f"fae decides otherwise ({', '.join(fixed.problems) or 'nothing changed'}): record into a new log"
        )
    return fixed


def _made_event(played: Played, origin: str) -> ev.ParaphraseMade:
    fixed = played.fixed
    assert fixed is not None
    return ev.ParaphraseMade(
        task_id=fixed.task_id,
        variation=fixed.variation,
        model=fixed.model,
        seed=fixed.seed,
        original=fixed.original,
        text=fixed.text,
        accepted=fixed.prompt is not None,
        digest=fixed.digest,
        problems=fixed.problems,
        origin=origin,
        exchange_id=played.exchange_id,
    )


async def _ask(stack: Any, client: httpx.AsyncClient, rendered: Rendered, book: Paraphrases) -> Played:
    """One paraphrase request through the proxy, under the variation's own id."""
    where = made_in(rendered.task_id, rendered.variation, book.model, book.seed, digest_of(rendered.prompt))
    request = paraphrase_request(
        rendered, seed=request_seed(book.seed, rendered.task_id, rendered.variation), model=book.model
    )
    try:
        reply = await client.post(stack.llm_base(where, "harness") + "/chat/completions", json=request)
    except httpx.HTTPError as exc:
        return Played(None, where, error=f"the paraphrase request failed: {exc!r}")
    finally:
        stack.revoke(where)  # the request's capability dies with it, as a run's does when it closes
    try:
        text = reply.json()["choices"][0]["message"]["content"] or ""
    except (ValueError, KeyError, IndexError, TypeError):
        return Played(
            None, where, error=f"the paraphrase model answered HTTP {reply.status_code} without a usable reply"
        )
    return Played(fix(rendered, model=book.model, seed=book.seed, text=str(text)), where)


async def fix_paraphrases(
    stack: Any, rendered: Mapping[Key, Any], spec: Paraphrase, *, concurrency: int = 4
) -> Paraphrases:
    """Every variation's paraphrase fixed in the stack's log before any run starts: reused, taken from the
    file, or asked of the model once each (``concurrency`` requests at a time)."""
    book, to_record, to_make = paraphrase_work(stack.log, rendered, spec)
    if to_make and not stack.llm_upstream:
        raise RecordError("--paraphrase-model needs an LLM endpoint (--llm-url)")
    asked: dict[Key, Played] = {}
    limiter = anyio.CapacityLimiter(max(1, concurrency))

    async def ask(key: Key, client: httpx.AsyncClient) -> None:
        async with limiter:
            asked[key] = await _ask(stack, client, rendered[key], book)

    async with httpx.AsyncClient(timeout=120, verify=client_tls()) as client, anyio.create_task_group() as group:
        for key in to_make:
            group.start_soon(ask, key, client)
    await stack.writer.flush()  # the requests' exchanges are in the log: each event names its own
    events: list[Stamped] = []
    for key in to_make:
        played = asked[key]
        if played.fixed is not None:
            played = replace(played, exchange_id=_last_exchange(stack.log, played.made_in))
            events.append(Stamped(played.made_in, _made_event(played, "generated"), actor="harness"))
        book.played[key] = played
    origin = Path(spec.file).name if spec.file else "file"
    events += [Stamped(p.made_in, _made_event(p, origin), actor="harness") for p in to_record]
    if events:
        await stack.writer.write(events=events)
    return book


def _last_exchange(log: EventLog, where: str) -> str | None:
    _, rows = log.query(
        "SELECT payload->>'$.exchange_id' FROM events WHERE run_id = ? AND kind = 'LlmCalled'"
        " ORDER BY seq DESC LIMIT 1",
        [where],
    )
    return rows[0][0] if rows else None


def fix_paraphrases_first(
    log_path: str | Path, rendered: Mapping[Key, Any], spec: Paraphrase, stack: StackConfig
) -> Paraphrases:
    """``fix_paraphrases`` before a sharded recording starts its workers: in a stack of its own on the log
    (serving only the LLM, in one process), opened only when something is left to ask for or to record."""
    with EventLog(log_path) as log:
        book, to_record, to_make = paraphrase_work(log, rendered, spec)
    if not to_record and not to_make:
        return book
    own = StackConfig(
        llm_url=stack.llm_url,
        fsync=stack.fsync,
        max_body_bytes=stack.max_body_bytes,
        processes=1,
        redact_headers=stack.redact_headers,
        redact_params=stack.redact_params,
        secrets=stack.secrets,
    )

    async def fix_in_stack() -> Paraphrases:
        async with open_stack(log_path, own) as opened:
            return await fix_paraphrases(opened, rendered, spec)

    return anyio.run(fix_in_stack)


async def play_paraphrase(stack: Any, run_id: str, rendered: Rendered, book: Paraphrases) -> Rendered:
    """The variation the run's agent gets: its fixed paraphrase where the guard accepted it, else as it was;
    the run's ``PromptParaphrased`` event names which (FaeError when the paraphrase could not be made)."""
    played = book.played.get((rendered.task_id, rendered.variation))
    if played is None or played.fixed is None:
        why = played.error if played is not None else None
        raise FaeError(why or "no paraphrase was fixed for this variation", run_id=run_id)
    fixed = played.fixed
    await stack.writer.write(
        events=[
            Stamped(
                run_id,
                ev.PromptParaphrased(
                    model=fixed.model,
                    accepted=fixed.prompt is not None,
                    prompt=fixed.prompt if fixed.prompt is not None else fixed.text,
                    problems=fixed.problems,
                    exchange_id=played.exchange_id,
                    seed=fixed.seed,
                    original=fixed.original,
                    digest=fixed.digest,
                    text=fixed.text,
                    made_in=played.made_in,
                ),
                actor="harness",
            )
        ]
    )
    return replace(rendered, prompt=fixed.prompt) if fixed.prompt is not None else rendered


def played_prompt(book: Paraphrases | None, rendered: Any) -> str:
    """The prompt the agent of a run of ``rendered`` got: its fixed paraphrase where accepted, else the original."""
    played = book.played.get((rendered.task_id, rendered.variation)) if book is not None else None
    if played is None or played.fixed is None or played.fixed.prompt is None:
        return rendered.prompt
    return played.fixed.prompt


def export_paraphrases(log_path: str | Path, output: str | Path, *, experiment: str | None = None) -> int:
    """Write the paraphrases a log fixed (those its ``experiment``'s runs played, if named) to a paraphrase file;
    returns how many."""
    with EventLog(log_path, read_only=True) as log:
        found = paraphrases_in_log(log)
        if experiment is not None:
            _, rows = log.query(
                "SELECT DISTINCT e.payload->>'$.made_in' FROM events e JOIN runs r USING (run_id)"
                " WHERE e.kind = 'PromptParaphrased' AND r.experiment = ?",
                [experiment],
            )
            wanted = {made for (made,) in rows}
            found = {k: v for k, v in found.items() if v[1] in wanted}
    if not found:
        what = f" of experiment {experiment}" if experiment else ""
        raise FaeError(f"the log {log_path} holds no fixed paraphrases{what}")
    note = f"paraphrases fixed in {Path(log_path).name}; load with --paraphrases (each goes through the guard again)"
    return dump_paraphrases([entry for entry, _, _ in found.values()], output, note=note)
