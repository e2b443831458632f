"""`fae experiment run`: train the two memory stores, then evaluate every configuration, into one log.

Every run carries the experiment, its phase (``train-nospec``, ``train-spec``, ``eval``), its
configuration and trial. ``resume`` continues an interrupted experiment: a store whose training
completed is kept, an incomplete one is trained again (its runs are new attempts), and the
evaluation records only the runs not done yet.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fae.errors import RecordError
from fae.harness.config import LlmConfig, RecordConfig, StackConfig
from fae.harness.experiment_phases import STORES, Experiment, agent_name, eval_specs, paraphrase_of, task_list
from fae.harness.run import RunSpec
from fae.harness.suite_runner import record_suite
from fae.harness.task_meta import materialise_task_meta
from fae.harness.training import train
from fae.store.log import EventLog

DONE_MARK = "trained.json"


@dataclass
class ExperimentResult:
    experiment: str
    trained: dict[str, int] = field(default_factory=dict)  # store -> training runs recorded now
    kept: list[str] = field(default_factory=list)  # stores trained by an earlier, completed attempt
    statuses: Counter = field(default_factory=Counter)
    skipped: int = 0


def store_root(log_path: str | Path, experiment: str) -> Path:
    """Where an experiment's memory stores live: beside the log."""
    path = Path(log_path)
    return path.with_name(f"{path.name}.memory") / experiment


def _runs_of(log_path: Path, experiment: str) -> int:
    if not log_path.exists():
        return 0
    with EventLog(log_path) as log:
        return log.query("SELECT count(*) FROM runs WHERE experiment = ?", [experiment])[1][0][0]


async def _train_store(
    log_path: Path,
    experiment: Experiment,
    store: str,
    use_specs: bool,
    directory: Path,
    *,
    llm_url: str,
    api_key: str | None,
) -> int:
    """Train one memory store; a directory left by an interrupted attempt is trained again from scratch."""
    training = experiment.training
    assert training is not None
    attempt = 1
    if directory.exists():
        shutil.rmtree(directory)
        with EventLog(log_path) as log:
            attempt += log.query(
                "SELECT count(DISTINCT suite) FROM runs WHERE experiment = ? AND phase = ?",
                [experiment.name, f"train-{store}"],
            )[1][0][0]
    suffix = f".a{attempt}" if attempt > 1 else ""
    model = experiment.model
    result = await train(
        log_path,
        task_list(training),
        store_dir=directory,
        llm_url=llm_url,
        agent=agent_name(training.agent, training.model or model),
        variations=training.variations,
        trials=training.trials,
        evaluator_model=training.evaluator_model or model or "scripted:evaluator",
        reflector_model=training.reflector_model or model or "scripted:reflector",
        use_specs=use_specs,
        embedder_spec=experiment.embedder,
        api_key=api_key,
        llm_options={"api_key": api_key} if api_key else {},
        suite=f"{experiment.name}:train-{store}{suffix}",
        experiment=experiment.name,
        phase=f"train-{store}",
        run_prefix=f"{experiment.name}.train-{store}{suffix}.",
        paraphrase=paraphrase_of(experiment),
    )
    (directory / DONE_MARK).write_text(
        json.dumps({"experiment": experiment.name, "runs": len(result.runs), "stats": result.stats}, default=str)
    )
    return len(result.runs)


async def run_experiment(
    log_path: str | Path,
    experiment: Experiment,
    *,
    llm_url: str | None,
    resume: bool = False,
    concurrency: int = 4,
    api_key: str | None = None,
    on_progress: Callable[[RunSpec, str], None] | None = None,
) -> ExperimentResult:
    """Train (unless the experiment has no training), then evaluate; returns what was recorded."""
    log_path = Path(log_path)
    if not resume and _runs_of(log_path, experiment.name):
        raise RecordError(
            f"the log {log_path} already holds runs of experiment {experiment.name}; "
            "use --resume to continue it, or record into a new log"
        )
    if llm_url is None:
        raise RecordError("an experiment needs an LLM endpoint: --llm-url (or OPENAI_BASE_URL)")
    result = ExperimentResult(experiment.name)
    stores: dict[str, Path] = {}
    if experiment.training is not None:
        root = store_root(log_path, experiment.name)
        for store, use_specs in STORES:
            directory = root / store
            stores[store] = directory
            if (directory / DONE_MARK).exists():
                result.kept.append(store)
                continue
            result.trained[store] = await _train_store(
                log_path, experiment, store, use_specs, directory, llm_url=llm_url, api_key=api_key
            )
    specs = eval_specs(experiment)
    with EventLog(log_path) as log:
        materialise_task_meta(log, [(s.task_id, s.variation) for s in specs])
    config = RecordConfig(
        stack=StackConfig(llm_url=llm_url, memory_stores=stores),
        # a program agent (cmd:) is told the experiment's model as FAE_MODEL; a LangChain spec names its own
        llm=LlmConfig(model=experiment.model, api_key=api_key),
        concurrency=concurrency,
        resume=resume,
        paraphrase=paraphrase_of(experiment),
    )
    suite = await record_suite(log_path, specs, config, on_progress=on_progress)
    result.statuses, result.skipped = suite.statuses, suite.skipped
    with EventLog(log_path) as log:
        materialise_task_meta(log)
    return result
