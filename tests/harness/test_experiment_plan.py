"""Experiments as data: the presets, the exp4 split, reducing a plan, and model names."""

from __future__ import annotations

from collections import Counter

import pytest

from fae.errors import FaeError
from fae.harness.experiment_phases import (
    agent_name,
    eval_specs,
    experiment_phases,
    first_tasks,
    load_experiment,
    paraphrase_of,
    presets,
    task_list,
    with_overrides,
)
from fae.harness.paraphrases import Paraphrase
from fae.tasks import load_suite


def test_the_four_presets_reproduce_the_reference_design():
    assert presets() == ["exp1", "exp2", "exp3", "exp4"]
    exp1, exp2, exp3, exp4 = (load_experiment(name) for name in presets())
    assert exp1.training.variations == exp1.evaluation.variations == [0]
    assert exp2.training.variations == [0, 1] and exp2.evaluation.variations == [2, 3, 4]
    assert exp2.paraphrase is None and exp3.paraphrase is not None and exp4.paraphrase is not None
    assert (exp3.training.variations, exp3.evaluation.variations) == ([0, 1], [2, 3, 4])
    assert len(exp4.evaluation.variations) == 3 and len(exp4.training.variations) == 2
    for experiment in (exp1, exp2, exp3, exp4):
        assert experiment.trials == 3 and len(experiment.configurations) == 5


def test_exp4_holds_out_half_the_suite_balanced_across_families():
    exp4 = load_experiment("exp4")
    train, held_out = set(task_list(exp4.training)), set(task_list(exp4.evaluation))
    suite = load_suite()
    assert not train & held_out and train | held_out == set(suite)
    for family in ("records", "insurance", "scheduling", "orders"):
        counts = Counter(suite[t].family == family for t in train), Counter(suite[t].family == family for t in held_out)
        assert abs(counts[0][True] - counts[1][True]) <= 1, family
    for difficulty in (1, 2, 3):
        a = sum(suite[t].difficulty == difficulty for t in train)
        b = sum(suite[t].difficulty == difficulty for t in held_out)
        assert abs(a - b) <= 1, difficulty


def test_reducing_takes_tasks_in_turn_from_each_family():
    chosen = first_tasks(list(load_suite()), 4)
    assert len({load_suite()[t].family for t in chosen}) == 4
    small = with_overrides(load_experiment("exp2"), tasks=2, trials=1, model="m")
    [train_nospec, train_spec, evaluation] = experiment_phases(small)
    assert len(train_nospec.tasks) == len(evaluation.tasks) == 2
    assert evaluation.runs == 2 * 3 * 5 * 1 == len(eval_specs(small))
    assert all(
        s.experiment == "exp2" and s.phase == "eval" and s.run_id.startswith("exp2.eval.") for s in eval_specs(small)
    )


def test_the_model_goes_to_langchain_configurations_that_name_none():
    assert agent_name("langchain:specs", "gpt") == "langchain:specs@gpt"
    assert agent_name("langchain:specs@other", "gpt") == "langchain:specs@other"
    assert agent_name("gold", "gpt") == "gold"


@pytest.mark.parametrize(
    "text, message",
    [
        ("name: x\nconfigurations: []\nevaluation: {}\n", "at least one configuration"),
        ("name: x\nconfigurations: [gold]\nevaluation: {variations: [-1]}\n", "whole numbers >= 0"),
        ("name: x\nconfigurations: [gold]\nevaluation: {tasks: some}\n", "list of task ids or 'all'"),
        ("name: x\nconfigurations: [gold]\ntrials: 0\nevaluation: {}\n", "at least 1"),
        ("configurations: [gold]\nevaluation: {}\n", "name"),
        ("name: [oops\n", "cannot read"),
        # a misspelt or mistyped field is named by its path in the file
        ("name: x\nconfigurations: [gold]\nevaluation: {variation: [0]}\n", r"bad\.yaml: evaluation: .*`variation`$"),
        (
            "name: x\nconfigurations: [gold]\nevaluation: {variations: [a]}\n",
            r"evaluation\.variations\[0\]: Expected `int`",
        ),
        (
            "name: x\nconfigurations: [gold]\nevaluations: {}\n",
            "top level: Object contains unknown field `evaluations`",
        ),
    ],
)
def test_a_bad_experiment_file_is_one_clear_error(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(FaeError, match=message):
        load_experiment(path)


def test_a_paraphrase_file_is_read_beside_the_experiment_and_the_command_line_overrides_it(tmp_path):
    (tmp_path / "mine.yaml").write_text(
        "name: mine\nconfigurations: [langchain:baseline]\nevaluation: {tasks: [rec-create-patient]}\n"
        "seed: 2\nparaphrase: {model: m, seed: 5, file: fixed/paraphrases.yaml}\n"
    )
    mine = load_experiment(tmp_path / "mine.yaml")
    assert paraphrase_of(mine) == Paraphrase("m", 7, str(tmp_path / "fixed" / "paraphrases.yaml"))
    overridden = with_overrides(mine, paraphrase_model="other", paraphrases="/elsewhere.yaml")
    assert paraphrase_of(overridden) == Paraphrase("other", 7, "/elsewhere.yaml")
    # an experiment that does not reword its prompts ignores both, as it always ignored --paraphrase-model
    exp2 = with_overrides(load_experiment("exp2"), paraphrase_model="other", paraphrases="/elsewhere.yaml")
    assert paraphrase_of(exp2) is None


def test_presets_carry_the_papers_model_roles_and_the_command_line_overrides_them():
    for name in presets():
        experiment = load_experiment(name)
        assert experiment.model == "gpt-4.1-mini"  # the evaluated actor
        training = experiment.training
        assert (training.model, training.evaluator_model, training.reflector_model) == ("gpt-4.1", "gpt-4.1", "o4-mini")
        assert experiment_phases(experiment)[0].agents == ["langchain:baseline@gpt-4.1"]
        assert experiment_phases(experiment)[-1].agents[0] == "langchain:baseline@gpt-4.1-mini"
    exp3 = load_experiment("exp3")
    # --model moves every agent, the training actor too; --training-model moves the training actor alone
    moved = with_overrides(exp3, model="m", evaluator_model="e", reflector_model="r")
    assert experiment_phases(moved)[0].agents == ["langchain:baseline@m"]
    assert (moved.training.evaluator_model, moved.training.reflector_model) == ("e", "r")
    alone = with_overrides(exp3, training_model="t")
    assert experiment_phases(alone)[0].agents == ["langchain:baseline@t"]
    assert experiment_phases(alone)[-1].agents[0] == "langchain:baseline@gpt-4.1-mini"
    both = with_overrides(exp3, model="m", training_model="t")
    assert [experiment_phases(both)[0].agents, experiment_phases(both)[-1].agents[0]] == [
        ["langchain:baseline@t"],
        "langchain:baseline@m",
    ]
