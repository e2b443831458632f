"""What judges read about one run, computed once and shared: fold, capture, transcript, task.

The final state is the fold at the harness's state capture (rejudging), or the
capture itself (the live verdict at the end of a recording). When fold and
capture agree — the ``state_drift`` judge says whether they do — both give the
same verdicts.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import Any

from fae.errors import TaskChanged, TaskError
from fae.replay.drift import Capture, capture_seq, read_capture
from fae.replay.fold import FhirExchange, FoldedState, fhir_exchanges, fold_state, folds_after
from fae.replay.source import RunLog
from fae.replay.transcript import Transcript, fold_transcript
from fae.store import events as ev
from fae.tasks import judged
from fae.tasks.judged import JudgedTask, PlayedTask
from fae.tasks.recorded import rendering_now, unlike
from fae.tasks.state import ResourcesByType, StateView, by_type_and_id
from fae.tasks.suite import rendered_task
from fae.tasks.targets import targets_for
from fae.tasks.write_targets import WriteTarget


class _CapturedState(ResourcesByType):
    """The harness's capture as a StateView over the fold's seed."""

    def __init__(self, resources: Sequence[dict[str, Any]], seed: Any):
        super().__init__(by_type_and_id(resources))
        self.seed = seed


TASK_SOURCES = ("log", "current")
"""Where judges read a run's task: the copy its log keeps (default), or today's task files."""


class RunContext:
    """One run, as judges see it. ``source`` is "fold" (offline) or "capture" (live); ``tasks`` is "log" (the task
    the log keeps, where it keeps one) or "current" (today's task files, checked against what the run played)."""

    def __init__(self, run: RunLog, source: str = "fold", tasks: str = "log"):
        if source not in ("fold", "capture"):
            raise ValueError(f"unknown state source {source!r}")
        if tasks not in TASK_SOURCES:
            raise ValueError(f"unknown task source {tasks!r}")
        self.run = run
        self.source = source
        self.tasks = tasks
        self.memo: dict[Any, Any] = {}  # judges keep per-run results here (e.g. a validator's check)

    @cached_property
    def exchanges(self) -> list[FhirExchange]:
        return fhir_exchanges(self.run)

    @cached_property
    def captured(self) -> tuple[int, Capture] | None:
        """(seq, resources) of the state capture; raises when its body is unreadable.

        The capture is compared with the fold as bytes first and parsed only when they differ.
        """
        capture = read_capture(self.run)
        if capture is None:
            return None
        try:
            fold = self._fold_at_capture
        except Exception:  # whoever asks for the fold is told why it cannot be made; here the capture is just parsed
            fold = None
        capture.check(fold)
        return capture.seq, capture

    @cached_property
    def _fold_at_capture(self) -> FoldedState:
        return fold_state(self.run, capture_seq(self.run), exchanges=self.exchanges)

    @cached_property
    def fold(self) -> FoldedState:
        """The fold at the state capture (or after the last event when there is none)."""
        self.captured  # noqa: B018 - an unreadable capture stops the fold too
        return self._fold_at_capture

    @cached_property
    def full_fold(self) -> FoldedState:
        """The fold after the last event, writes after the capture included (the capture's fold when no
        exchange after the capture can change it: the same state, folded once)."""
        seq = capture_seq(self.run)
        if seq is not None and not folds_after(self.exchanges, seq):
            return self._fold_at_capture
        return fold_state(self.run, None, exchanges=self.exchanges)

    @cached_property
    def state(self) -> StateView:
        """The final state judges validate: the fold, or in live judging the capture."""
        if self.source == "capture" and self.captured is not None:
            return _CapturedState(self.captured[1], self.fold.seed)
        return self.fold

    @cached_property
    def agent_writes(self) -> frozenset[str]:
        """``Type/id`` of every resource the agent's own requests (actor agent, or unnamed in old logs) created or
        updated."""
        return frozenset(
            version.ref
            for versions in self.fold.history.values()
            for version in versions
            if version.seq is not None and version.actor in ("agent", None) and version.resource is not None
        )

    @cached_property
    def transcript(self) -> Transcript:
        return fold_transcript(self.run)

    @cached_property
    def kept(self) -> JudgedTask | None:
        """The task as the run's log keeps it (None: the log is older than that, or ``tasks`` is "current")."""
        found = self.run.first(ev.TaskRendered)
        if self.tasks != "log" or found is None or not isinstance(found.event, ev.TaskRendered):
            return None
        body = self.run.body(found.event.task_blob)
        if body is None:
            raise TaskError("the log names the run's task but lacks its body", run_id=self.run.run_id)
        kept = judged.decode(body)
        recorded = self._recorded()
        if kept.task_id != self.run.task_id or unlike(kept.played, **recorded):
            raise TaskError(
                f"the log's record of the run's task ({kept.task_id!r}) is not what the run played "
                f"({'; '.join(unlike(kept.played, **recorded)) or 'another task id'}): the log is inconsistent",
                run_id=self.run.run_id,
            )
        return None if kept.extra_check is not None else kept  # an extra check is code: today's files judge it

    @cached_property
    def task(self) -> PlayedTask | None:
        """(task, rendered variation), or None for a run of no suite task. From the log's copy where it keeps one
        (the one object serves as both); else from today's suite, raising TaskChanged when the run played another
        rendering of it."""
        kept = self.kept
        if kept is not None:
            return PlayedTask(kept, kept) if kept.meta is not None else None
        found = rendered_task(self.run.task_id, self.run.variation)
        if found is None:
            return None
        self.played_as_rendered()
        return PlayedTask(*found)

    @cached_property
    def targets(self) -> list[WriteTarget]:
        """The records the run's task asks for (empty: none known); from the log's copy where it keeps one, else
        from today's files (raising TaskChanged as ``task`` does)."""
        kept = self.kept
        if kept is not None:
            return list(kept.targets)
        found = targets_for(self.run.task_id, self.run.variation)
        if found:
            self.played_as_rendered()
        return found

    def _recorded(self) -> dict[str, str | None]:
        """What the log recorded of the variation the run played: its seed's hash, its prompt, its clock."""
        started = self.run.first(ev.RunStarted)
        seeded = self.run.first(ev.SandboxSeeded)
        begun = started.event if started is not None and isinstance(started.event, ev.RunStarted) else None
        seed = seeded.event if seeded is not None and isinstance(seeded.event, ev.SandboxSeeded) else None
        return {
            "seed": seed.seed_blob if seed else None,
            "prompt": begun.prompt if begun else None,
            "now": begun.task_now if begun else None,
        }

    def played_as_rendered(self) -> None:
        """Raise TaskChanged when fae now renders the run's variation with a seed, prompt or clock other than
        those its log recorded: a judge reading the task would score the run on a task it never saw."""
        if self._unlike:
            run = self.run
            raise TaskChanged(
                f"task {run.task_id!r} variation {run.variation} renders differently now than when this run "
                f"was recorded ({'; '.join(self._unlike)}): judged against it, the run would be "
                "scored on a task it never saw. Judge it with the fae version and task files it was recorded with",
                run_id=run.run_id,
            )

    @cached_property
    def _unlike(self) -> list[str]:
        rendering = rendering_now(self.run.task_id, self.run.variation)
        if rendering is None:
            return []
        return unlike(rendering.played, **self._recorded())
