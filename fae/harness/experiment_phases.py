"""Experiments as data: a YAML file (or a built-in preset) names each phase's tasks and variations,
the configurations, trials, models and seed; this module loads, checks, reduces and splits one into phases."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import msgspec
import yaml

from fae.errors import FaeError
from fae.harness.paraphrases import Paraphrase
from fae.harness.run import RunSpec
from fae.harness.worklist import base_run_id
from fae.tasks import load_suite
from fae.util.data_files import field_error, read_yaml

PRESETS = Path(__file__).parent / "experiments"
STORES = (("nospec", False), ("spec", True))  # memory stores trained without and with the specs server


class PhaseSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The task variations of one phase; ``tasks`` is a list of ids or ``all`` (the whole suite)."""

    tasks: list[str] | str = "all"
    variations: list[int] = msgspec.field(default_factory=lambda: [0])


class TrainingSpec(PhaseSpec, frozen=True, forbid_unknown_fields=True):
    """Reflexion training: ``agent`` plays each variation up to ``trials`` times (stopping at a pass);
    ``model`` is the training actor's model (default: the experiment's), ``evaluator_model`` and
    ``reflector_model`` the Reflexion judges' (default: the experiment's model)."""

    agent: str = "langchain:baseline"
    trials: int = 2
    model: str | None = None
    evaluator_model: str | None = None
    reflector_model: str | None = None


class ParaphraseSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Reword every prompt: one paraphrase per (task, variation), made by ``model`` with ``seed`` (plus the
    experiment's) once and played by every trial and configuration; ``file``: a paraphrase file whose
    paraphrases are played instead of asking (a relative path is read from the experiment file's folder)."""

    model: str
    seed: int = 0
    file: str | None = None


class Experiment(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One experiment: train two memory stores, then evaluate every configuration."""

    name: str
    configurations: list[str]
    evaluation: PhaseSpec
    training: TrainingSpec | None = None
    description: str = ""
    trials: int = 3
    model: str | None = None
    seed: int = 0
    paraphrase: ParaphraseSpec | None = None
    embedder: str | None = None  # the memory stores' embedding model (default: the offline static one)


def presets() -> list[str]:
    return sorted(p.stem for p in PRESETS.glob("*.yaml"))


def load_experiment(name_or_path: str | Path) -> Experiment:
    """An experiment from a YAML file, or the built-in preset of that name (exp1..exp4)."""
    path = Path(name_or_path)
    if not path.is_file():
        path = PRESETS / f"{name_or_path}.yaml"
        if not path.is_file():
            raise FaeError(
                f"no experiment file {str(name_or_path)!r} and no preset of that name (presets: {', '.join(presets())})"
            )
    raw = None
    try:
        raw = read_yaml(path)
        experiment = msgspec.convert(raw, Experiment)
    except (yaml.YAMLError, OSError) as exc:
        raise FaeError(f"{path}: cannot read the experiment: {exc}") from None
    except msgspec.ValidationError as exc:
        raise FaeError(f"{path}: {field_error(exc, kind=Experiment, raw=raw)}") from None
    check(experiment, str(path))
    if experiment.paraphrase is not None and experiment.paraphrase.file is not None:
        found = path.parent / experiment.paraphrase.file  # an absolute file stays itself
        experiment = msgspec.structs.replace(
            experiment, paraphrase=msgspec.structs.replace(experiment.paraphrase, file=str(found))
        )
    return experiment


def check(experiment: Experiment, where: str) -> None:
    """Every named task exists, variations are whole numbers >= 0, trials >= 1, some configuration."""
    known = set(load_suite())
    phases = [("evaluation", experiment.evaluation)]
    if experiment.training is not None:
        phases.append(("training", experiment.training))
    for label, phase in phases:
        if isinstance(phase.tasks, str) and phase.tasks != "all":
            raise FaeError(f"{where}: {label}.tasks is a list of task ids or 'all', got {phase.tasks!r}")
        unknown = [t for t in task_list(phase) if t not in known]
        if unknown:
            raise FaeError(f"{where}: {label} names unknown task {unknown[0]!r}; `fae tasks list` shows the ids")
        if not phase.variations or any(v < 0 for v in phase.variations):
            raise FaeError(f"{where}: {label}.variations must be whole numbers >= 0")
    if experiment.trials < 1 or (experiment.training and experiment.training.trials < 1):
        raise FaeError(f"{where}: trials must be at least 1")
    if not experiment.configurations:
        raise FaeError(f"{where}: name at least one configuration")


def task_list(phase: PhaseSpec) -> list[str]:
    """The phase's task ids (the whole suite for ``all``)."""
    return list(load_suite()) if phase.tasks == "all" else list(phase.tasks)


def first_tasks(task_ids: list[str], count: int) -> list[str]:
    """The first ``count`` tasks taken in turn from each family, so a reduced experiment still spans the families."""
    suite = load_suite()
    by_family: dict[str, list[str]] = defaultdict(list)
    for task_id in task_ids:
        by_family[suite[task_id].family].append(task_id)
    chosen: list[str] = []
    while len(chosen) < min(count, len(task_ids)):
        for family in list(by_family):
            if by_family[family] and len(chosen) < count:
                chosen.append(by_family[family].pop(0))
    return chosen


def with_overrides(
    experiment: Experiment,
    *,
    tasks: int | None = None,
    trials: int | None = None,
    agents: list[str] | None = None,
    model: str | None = None,
    paraphrase_model: str | None = None,
    evaluator_model: str | None = None,
    reflector_model: str | None = None,
    paraphrases: str | None = None,
    training_model: str | None = None,
    embedder: str | None = None,
) -> Experiment:
    """The experiment reduced to ``tasks`` tasks per phase and with the command line's choices."""
    changes: dict = {}
    if tasks is not None:
        if tasks < 1:
            raise FaeError("--tasks must be at least 1")
        changes["evaluation"] = msgspec.structs.replace(
            experiment.evaluation, tasks=first_tasks(task_list(experiment.evaluation), tasks)
        )
        if experiment.training is not None:
            changes["training"] = msgspec.structs.replace(
                experiment.training, tasks=first_tasks(task_list(experiment.training), tasks)
            )
    if trials is not None:
        if trials < 1:
            raise FaeError("--trials must be at least 1")
        changes["trials"] = trials
    if agents:
        changes["configurations"] = list(agents)
    if model:
        changes["model"] = model
    if embedder:
        changes["embedder"] = embedder
    training = changes.get("training", experiment.training)
    if training is not None and (model or training_model or evaluator_model or reflector_model):
        # --model sets every agent's model, the training actor's too, unless --training-model names its own
        actor = training_model or (None if model else training.model)
        changes["training"] = msgspec.structs.replace(
            training,
            model=actor,
            evaluator_model=evaluator_model or training.evaluator_model,
            reflector_model=reflector_model or training.reflector_model,
        )
    if experiment.paraphrase is not None:  # one that does not reword its prompts ignores both
        changes["paraphrase"] = msgspec.structs.replace(
            experiment.paraphrase,
            model=paraphrase_model or experiment.paraphrase.model,
            file=paraphrases or experiment.paraphrase.file,
        )
    return msgspec.structs.replace(experiment, **changes)


def agent_name(configuration: str, model: str | None) -> str:
    """A configuration with the experiment's model, unless it names its own (``@MODEL``) or needs none."""
    if model and configuration.startswith("langchain:") and "@" not in configuration:
        return f"{configuration}@{model}"
    return configuration


def paraphrase_of(experiment: Experiment) -> Paraphrase | None:
    if experiment.paraphrase is None:
        return None
    spec = experiment.paraphrase
    return Paraphrase(spec.model, spec.seed + experiment.seed, spec.file)


def eval_specs(experiment: Experiment) -> list[RunSpec]:
    """Every evaluation run: task × variation × configuration × trial, in a stable order."""
    agents = [agent_name(c, experiment.model) for c in experiment.configurations]
    return [
        RunSpec(
            run_id=f"{experiment.name}.eval.{base_run_id(t, v, a, r)}",
            task_id=t,
            variation=v,
            agent=a,
            repeat=r,
            suite=experiment.name,
            experiment=experiment.name,
            phase="eval",
        )
        for t in task_list(experiment.evaluation)
        for v in experiment.evaluation.variations
        for a in agents
        for r in range(experiment.trials)
    ]


@dataclass(frozen=True)
class PhaseRuns:
    """One phase as it will run: what it covers and at most how many runs it records."""

    phase: str
    tasks: list[str]
    variations: list[int]
    agents: list[str]
    trials: int
    runs: int
    paraphrased: bool


def experiment_phases(experiment: Experiment) -> list[PhaseRuns]:
    """The training phases (one per memory store) and the evaluation phase."""
    phases = []
    paraphrased = experiment.paraphrase is not None
    if experiment.training is not None:
        training = experiment.training
        tasks, variations = task_list(training), training.variations[:2]
        agent = agent_name(training.agent, training.model or experiment.model)
        trials = min(training.trials, 2)
        for store, _ in STORES:
            phases.append(
                PhaseRuns(
                    f"train-{store}",
                    tasks,
                    variations,
                    [agent],
                    trials,
                    len(tasks) * len(variations) * trials,
                    paraphrased,
                )
            )
    tasks = task_list(experiment.evaluation)
    agents = [agent_name(c, experiment.model) for c in experiment.configurations]
    phases.append(
        PhaseRuns(
            "eval",
            tasks,
            experiment.evaluation.variations,
            agents,
            experiment.trials,
            len(eval_specs(experiment)),
            paraphrased,
        )
    )
    return phases
