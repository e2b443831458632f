"""Prepare a recording once, whichever executor records it: agents built, tasks rendered, servers checked, what is left.

Before anything is prepared, what an earlier recording of the log left behind is settled: shards of a killed
sharded recording are merged in, and runs left ``running`` by a process that died are marked interrupted, so
``--resume`` sees every attempt. The paraphrases are fixed by the executor, in its own stack, before its first run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import anyio

from fae.agents.base import Agent
from fae.harness.config import RecordConfig
from fae.harness.run import RunSpec
from fae.harness.shards import merge_shards, shard_dir
from fae.harness.worklist import (
    Worklist,
    attempts,
    build_agents,
    check_servers,
    mark_interrupted,
    render_task,
    runs_to_do,
)
from fae.store.live import live_file
from fae.store.log import EventLog
from fae.store.writer import open_writer

Attempts = dict[tuple, list[tuple[str, str, str | None]]]


def settle_log(log_path: Path) -> tuple[int, Attempts]:
    """Merge the shards a killed sharded recording left, mark the runs a dead process left running interrupted
    and remove its live-query file; returns how many runs were marked and each spec's attempts so far, read in
    the same opening of the log. A log that does not exist yet has nothing to settle and no attempt."""
    marked = merge_shards(log_path) if shard_dir(log_path).exists() else 0
    if not log_path.exists():
        return marked, {}
    more, found = anyio.run(_settle, log_path)
    return marked + more, found


async def _settle(path: Path) -> tuple[int, Attempts]:
    with EventLog(path) as log:
        # open for writing here, so no recording holds the log: a live-query file beside it is a dead one's
        live_file(path).unlink(missing_ok=True)
        async with open_writer(log) as writer:
            marked = await mark_interrupted(log, writer)
        return marked, attempts(log)


def prepare_recording(
    log_path: str | Path, specs: Sequence[RunSpec], config: RecordConfig
) -> tuple[Worklist, dict[str, Agent]]:
    """The worklist and its agents (built here, in the driver; a worker builds its own from the names)."""
    agents = build_agents([spec.agent for spec in specs], config)
    check_servers(agents, config.stack.memory_stores)
    rendered = {}
    for spec in specs:
        key = (spec.task_id, spec.variation)
        if key not in rendered:
            rendered[key] = render_task(*key)
    path = Path(log_path)
    marked, found = settle_log(path)
    todo, skipped = runs_to_do(specs, found, resume=config.resume, retry_errored=config.retry_errored)
    work = Worklist(
        planned=len(specs), todo=todo, skipped=skipped, marked=marked, agents=tuple(agents), rendered=rendered
    )
    return work, agents
