"""A paraphrase file: written from fixed paraphrases, read back within fae's limits, and never trusted."""

from __future__ import annotations

import msgspec
import pytest

from fae.errors import FileRefused, TaskError
from fae.tasks.paraphrase_file import check_entry, digest_of, dump_paraphrases, fix, load_paraphrase_file


def _reworded(rendered):
    return "A colleague asks: " + rendered.prompt.partition("\n\n")[2]


@pytest.mark.parametrize("name", ["p.yaml", "p.json"])
def test_a_written_file_loads_back_and_plays_the_same_prompt(suite, tmp_path, name):
    rendered = [suite["rec-create-patient"].render(v) for v in (0, 1)]
    fixed = [fix(r, model="m", seed=3, text=_reworded(r)) for r in rendered]
    refused = fix(rendered[0], model="m", seed=4, text="something else entirely")
    assert all(f.prompt is not None for f in fixed) and refused.prompt is None
    assert refused.digest == digest_of(rendered[0].prompt)  # a refused paraphrase plays the original
    path = tmp_path / name
    assert dump_paraphrases([f.entry() for f in (*fixed, refused)], path, note="n") == 3
    entries = load_paraphrase_file(path)
    assert [(e.variation, e.seed, e.accepted) for e in entries] == [(0, 3, True), (0, 4, False), (1, 3, True)]
    again = {(e.variation, e.seed): check_entry(e, rendered[e.variation], str(path)) for e in entries}
    assert again[(0, 3)] == fixed[0] and again[(1, 3)] == fixed[1] and again[(0, 4)] == refused


def test_an_entry_marked_accepted_whose_text_changed_a_number_is_refused(suite, tmp_path):
    rendered = suite["rec-create-patient"].render(0)
    entry = fix(rendered, model="m", seed=0, text=_reworded(rendered)).entry()
    changed = msgspec.structs.replace(entry, text=entry.text.replace("192 Oak", "193 Oak"))
    path = tmp_path / "p.yaml"
    dump_paraphrases([changed], path)
    [loaded] = load_paraphrase_file(path)
    with pytest.raises(TaskError, match=r"rec-create-patient v0 is marked accepted, but the paraphrase changed 192"):
        check_entry(loaded, rendered, str(path))


def test_an_entry_for_another_rendering_of_the_task_is_refused(suite):
    entry = fix(suite["rec-create-patient"].render(0), model="m", seed=0, text="x").entry()
    with pytest.raises(TaskError, match="rewords another prompt than fae renders now"):
        check_entry(entry, suite["rec-create-patient"].render(1), "f")


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("paraphrases: [{task_id: t}]", "not a paraphrase file: Object missing required field"),
        ("paraphrases: []\nextra: 1", "not a paraphrase file: Object contains unknown field `extra`"),
        ("format: 9\nparaphrases: []", "paraphrase file format 9; this fae reads up to 1"),
        ("paraphrases: [", "not a paraphrase file"),
        (
            "paraphrases:\n"
            + "".join(
                f"  - {{task_id: t, variation: 0, model: m, seed: 0, original: o, text: {t}}}\n" for t in ("a", "b")
            ),
            "paraphrase 2 (t v0, m, seed 0) gives a second text",
        ),
    ],
)
def test_a_bad_file_is_one_line_naming_it(tmp_path, text, said):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(TaskError) as caught:
        load_paraphrase_file(path)
    assert str(caught.value).startswith(f"{path}: ") and said in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_yaml_bomb_and_a_missing_file_are_refused(tmp_path):
    bomb = tmp_path / "bomb.yaml"
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    lines += [f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]" for i in range(8)]
    bomb.write_text("\n".join(lines) + "\n")
    with pytest.raises(FileRefused, match="aliases expand"):
        load_paraphrase_file(bomb)
    with pytest.raises(TaskError, match="no paraphrase file"):
        load_paraphrase_file(tmp_path / "none.yaml")
