"""Replay: a recorded run read back and folded into FHIR state, a transcript, and an LLM cassette."""

from fae.replay.drift import captured_resources, state_drift
from fae.replay.fold import FhirExchange, FoldedState, FoldedVersion, fhir_exchanges, fold_state
from fae.replay.source import BodyCache, Recorded, RunLog, load_run, load_runs, run_ids
from fae.replay.transcript import ToolUse, Transcript, fold_transcript

__all__ = [
    "BodyCache",
    "FhirExchange",
    "FoldedState",
    "Recorded",
    "RunLog",
    "ToolUse",
    "Transcript",
    "FoldedVersion",
    "captured_resources",
    "fhir_exchanges",
    "fold_state",
    "fold_transcript",
    "load_run",
    "load_runs",
    "run_ids",
    "state_drift",
]
