"""``fae export --otel``: a log's runs as OpenTelemetry traces (GenAI conventions) in a file or at an OTLP endpoint.

The log is opened by the sandboxed reader every read command uses, and its runs are streamed
(``fae.replay.stream``): memory holds a chunk of runs and one request's spans, never the log. Runs still
recording are left out (their traces would change); every other run is exported, failed ones too.
"""

from __future__ import annotations

import gc
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from fae.errors import ExportError
from fae.replay.source import RunLog, load_runs, run_ids
from fae.replay.stream import CHUNK_RUNS, spans, stream_runs
from fae.report.otel_root import VerdictInfo
from fae.report.otel_sinks import PROTOBUF, EndpointSink, FileSink, env_headers, is_endpoint
from fae.report.otel_spans import RunInfo, run_spans
from fae.report.otlp import Attributes, SpanData, request_json, request_proto
from fae.store.live import LogReader
from fae.store.log import RUN_STATUSES

SCHEMA_URL = "https://opentelemetry.io/schemas/1.44.0"
"""The semantic conventions the attribute names are checked against (opentelemetry-semantic-conventions 0.66b2)."""
REQUEST_SPANS = 2000
"""Spans per request (whole runs, so a request may hold more): well under the 4 MiB most receivers take."""
COLLECT_CHUNKS = 8
"""Chunks of runs between two passes of the garbage collector (each walks every live object: ~0.2 s)."""
EXPORTED_STATUSES = tuple(status for status in RUN_STATUSES if status != "running")


@dataclass
class OtelExport:
    """What an export did."""

    target: str
    runs: int = 0
    spans: int = 0
    requests: int = 0
    still_running: int = 0
    rejected_spans: int = 0
    rejected_message: str = ""


def _fae_version() -> str:
    try:
        return version("fae")
    except PackageNotFoundError:
        return "0"


def _rules_label(rule_set: Any) -> str:
    if not isinstance(rule_set, dict):
        return ""
    return ",".join(
        f"{key}={json.dumps(value, default=str)}"
        if isinstance(value, (list, dict))
        else f"{key}={str(value).lower() if isinstance(value, bool) else value}"
        for key, value in sorted(rule_set.items())
    )


def _explanation(evidence: Any) -> str | None:
    """A verdict's reasons in its own words: the ``reasons`` or ``problems`` its evidence lists."""
    try:
        found = json.loads(evidence) if isinstance(evidence, str) else evidence
    except ValueError:
        return None
    if not isinstance(found, dict):
        return None
    listed = found.get("reasons") or found.get("problems")
    return "; ".join(str(item) for item in listed) if isinstance(listed, list) and listed else None


def _infos(reader: LogReader, ids: Sequence[str]) -> dict[str, RunInfo]:
    _, rows = reader.query(
        "SELECT run_id, suite, experiment, phase, stop_reason, error, cause, agent_config->>'$.model'"
        " FROM runs WHERE run_id IN (SELECT unnest(?))",
        [list(ids)],
    )
    return {row[0]: RunInfo(*row[1:]) for row in rows}


def _verdicts(reader: LogReader, ids: Sequence[str], content: bool) -> dict[str, list[VerdictInfo]]:
    _, rows = reader.query(
        "SELECT run_id, judge, rule_set, rule_set_hash, code_version, outcome, passed, judged_at, batch, "
        + ("evidence" if content else "NULL")
        + " FROM verdicts WHERE run_id IN (SELECT unnest(?))"
        " ORDER BY run_id, judged_at, judge, rule_set_hash, batch",
        [list(ids)],
    )
    found: dict[str, list[VerdictInfo]] = {}
    for run_id, judge, rule_set, digest, code, outcome, passed, judged_at, batch, evidence in rows:
        try:
            rules = json.loads(rule_set) if isinstance(rule_set, str) else rule_set
        except ValueError:
            rules = rule_set
        found.setdefault(run_id, []).append(
            VerdictInfo(
                judge=judge,
                rules=_rules_label(rules),
                rule_set=json.dumps(rules, sort_keys=True, default=str),
                rule_set_hash=digest,
                code_version=code,
                outcome=outcome,
                passed=passed,
                judged_at=judged_at.astimezone(UTC).isoformat() if isinstance(judged_at, datetime) else str(judged_at),
                batch=batch,
                explanation=_explanation(evidence) if content else None,
            )
        )
    return found


def _runs(reader: LogReader, ids: Sequence[str]) -> Iterator[RunLog]:
    """The runs, every event of each: streamed in one pass over the file, or read a chunk at a time while a
    recording serves the log live."""
    if reader.connection is None:
        yield from load_runs(reader, ids)
        return
    found = spans(reader, ids, lean=False)
    # no body is fetched ahead: traces name none, and contents read the few kept in side files when asked
    yield from stream_runs(reader.connection, reader.path, found, lean=False, needed=lambda rows: ())


def _chunks(reader: LogReader, ids: Sequence[str]) -> Iterator[list[RunLog]]:
    """The runs a chunk at a time, the cyclic garbage collector run every ``COLLECT_CHUNKS`` chunks instead of on
    its own.

    An export holds a chunk of decoded runs and a request's spans while it makes millions of small containers,
    none in a cycle: the collector's own passes walked the survivors again and again (60 % of an export's time
    at 10,000 runs, docs/otel.md); a pass now and then finds the few cycles there are (20 in that export).
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        chunk: list[RunLog] = []
        chunks = 0
        for run in _runs(reader, ids):
            chunk.append(run)
            if len(chunk) >= CHUNK_RUNS:
                yield chunk
                chunk = []
                chunks += 1
                if chunks % COLLECT_CHUNKS == 0:
                    gc.collect()
        if chunk:
            yield chunk
    finally:
        if enabled:
            gc.enable()


def export_otel(
    log_path: str | Path,
    target: str | Path,
    *,
    runs: str | None = None,
    content: bool = False,
    protocol: str = PROTOBUF,
    headers: Mapping[str, str] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    request_spans: int = REQUEST_SPANS,
    sleep: Callable[[float], None] | None = None,
) -> OtelExport:
    """Export the log's runs (``runs``: the ``--runs`` filter) as traces to a file or an OTLP/HTTP endpoint.

    ``content``: add prompts, completions, tool arguments and results, answers and verdict reasons (the
    conventions' opt-in attributes). ``headers``: sent with every request (an endpoint's API key).
    """
    text = str(target)
    with LogReader(log_path) as reader:  # a log refused is refused before anything is written or sent
        sink: FileSink | EndpointSink = (
            EndpointSink(text, protocol, headers, sleep=sleep or time.sleep)
            if is_endpoint(text)
            else FileSink(Path(text))
        )
        done = OtelExport(target=sink.shown)
        resource: Attributes = [("service.name", "fae"), ("fae.log.name", Path(log_path).name)]
        scope = ("fae", _fae_version())
        encode = request_proto if sink.protocol == PROTOBUF else request_json
        pending: list[SpanData] = []

        def send() -> None:
            rejected, message = sink.send(encode(resource, scope, SCHEMA_URL, pending))
            done.requests += 1
            done.rejected_spans += rejected
            done.rejected_message = message or done.rejected_message
            pending.clear()

        finished = False
        try:
            ids = run_ids(reader, runs, statuses=EXPORTED_STATUSES)
            done.still_running = len(run_ids(reader, runs, statuses=["running"]))
            if on_progress:
                on_progress(0, len(ids))
            for chunk in _chunks(reader, ids):
                chunk_ids = [run.run_id for run in chunk]
                infos, verdicts = _infos(reader, chunk_ids), _verdicts(reader, chunk_ids, content)
                for run in chunk:
                    built = run_spans(
                        run, infos.get(run.run_id, RunInfo()), verdicts.get(run.run_id, ()), content=content
                    )
                    pending += built
                    done.runs += 1
                    done.spans += len(built)
                    if len(pending) >= request_spans:
                        send()
                if on_progress:
                    on_progress(len(chunk), len(ids))
            if pending:
                send()
            finished = True
        finally:
            sink.close(finished)
    return done


def headers_of(pairs: Sequence[str], environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """``--otel-header KEY=VALUE`` pairs over the OTLP exporters' header variables."""
    found = env_headers(environ)
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():  # the pair itself is not shown: it may hold a key
            raise ExportError("an --otel-header is not KEY=VALUE (e.g. --otel-header 'Authorization=Bearer …')")
        found[key.strip()] = value
    return found
