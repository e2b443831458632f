"""The task suite's gold plans, found from a prompt, so the scripted models play any suite task unregistered.

A suite prompt opens with its variation's clock block, and every task's
"now" falls in its variation's own nine-day window (``Task.now_for``), so the
instant in that block names the variation. The suite's tasks are rendered at
that variation and a task matches when its clock block is in the prompt and
so is its body, or, for a reworded prompt, every string a paraphrase must
keep verbatim (``fae.tasks.paraphrase.must_keep``: ids, codes, dates, names,
answer tags). The harness accepts a paraphrase only when it keeps them all, so
an accepted paraphrase still finds its plan. Tasks that share a world (the
same day and values) are told apart by the most kept strings found, then by the
share of each body's words the rewording still uses; a tie is refused, never
guessed.
"""

from __future__ import annotations

import functools
import re
import threading
from dataclasses import dataclass
from datetime import datetime

from fae.errors import PlanError
from fae.llm.plan_registry import PlanEntry
from fae.tasks.model import EPOCH, Rendered
from fae.tasks.paraphrase import must_keep
from fae.tasks.suite import Suite, load_suite
from fae.tasks.world import clock_block

_WORD = re.compile(r"[a-z]{3,}")
_INSTANT = re.compile(r"\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z)\)")
_VARIATION_DAYS = 9  # Task.now_for puts variation n on days 9n..9n+4 after EPOCH
_CACHED_VARIATIONS = 64


@dataclass(frozen=True)
class _Candidate:
    rendered: Rendered
    clock: str
    body: str
    keep: tuple[str, ...]
    words: frozenset[str]


def prompt_instant(prompt: str) -> datetime | None:
    """The instant a prompt's clock block states, if it has one."""
    found = _INSTANT.search(prompt)
    if found is None:
        return None
    return datetime.strptime(found.group(1), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=EPOCH.tzinfo)


class SuitePlans:
    """Finds the suite task variation a prompt asks for, and gives its gold plan as a registry entry."""

    def __init__(self, suite: Suite | None = None) -> None:
        self._suite = suite
        self._lock = threading.Lock()

    @property
    def suite(self) -> Suite:
        with self._lock:
            if self._suite is None:
                self._suite = load_suite()
            return self._suite

    @functools.lru_cache(maxsize=_CACHED_VARIATIONS)  # noqa: B019 (one instance per server, kept for its life)
    def _candidates(self, variation: int) -> tuple[_Candidate, ...]:
        found = []
        for task in self.suite.values():
            rendered = task.render(variation)
            clock, _, body = rendered.prompt.partition("\n\n")
            found.append(
                _Candidate(
                    rendered, clock, body.strip(), tuple(must_keep(rendered)), frozenset(_WORD.findall(body.lower()))
                )
            )
        return tuple(found)

    def matches(self, prompt: str) -> list[Rendered]:
        """The suite variations that fit the prompt best: the one asked for, or several that tie."""
        now = prompt_instant(prompt)
        if now is None or now < EPOCH:
            return []
        variation = (now - EPOCH).days // _VARIATION_DAYS
        verbatim, reworded = [], []
        for candidate in self._candidates(variation):
            if candidate.rendered.now != now or clock_block(now) not in prompt:
                continue
            if candidate.body in prompt:
                verbatim.append(candidate.rendered)
            elif candidate.keep and all(token in prompt for token in candidate.keep):
                reworded.append(candidate)
        if verbatim or len(reworded) < 2:
            return verbatim or [c.rendered for c in reworded]
        used = frozenset(_WORD.findall(prompt.lower()))
        scores = {c.rendered.task_id: (len(c.keep), len(c.words & used) / max(len(c.words), 1)) for c in reworded}
        best = max(scores.values())
        return [c.rendered for c in reworded if scores[c.rendered.task_id] == best]

    def find(self, prompt: str) -> PlanEntry | None:
        """The gold plan of the one variation the prompt asks for; PlanError if it could be several."""
        found = self.matches(prompt)
        if len(found) > 1:
            names = ", ".join(f"{r.task_id} v{r.variation}" for r in found)
            raise PlanError(f"the prompt matches several suite task variations ({names}); register a plan for it")
        if not found:
            return None
        rendered = found[0]
        return PlanEntry(plan=rendered.gold_plan)
