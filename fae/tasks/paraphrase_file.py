"""Fixed paraphrases: one per (task, variation, paraphrase model, seed), and the file that carries them.

A variation's paraphrase is made once and played by every trial and every configuration, so "the same
prompt" is the same text. A recording keeps each paraphrase in its log; ``fae paraphrase export`` writes
them to a paraphrase file, which another recording loads (``--paraphrases FILE``) instead of asking the
model again. The file is YAML or JSON (by its extension; docs/tasks.md, "Paraphrase"):

    format: 1
    paraphrases:
      - task_id: rec-create-patient
        variation: 0
        model: gpt-4.1-mini
        seed: 0
        original: 3f2a...   # SHA-256 of the prompt it rewords, clock block included
        text: Please register a new patient ...
        accepted: true      # what the guard said when the file was written (informational)
        problems: []

``text`` is the paraphrase of the prompt's body as the model wrote it. Nothing in a file is trusted:
each entry goes through the guard again (``fae.tasks.paraphrase.accept_paraphrase``), and an entry that
rewords another prompt than fae renders now is refused.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

import msgspec
import yaml

from fae.errors import TaskError
from fae.tasks.model import Rendered
from fae.tasks.paraphrase import accept_paraphrase
from fae.util.data_files import read_json, read_yaml

FORMAT = 1


class ParaphraseEntry(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One paraphrase as a file keeps it."""

    task_id: str
    variation: int
    model: str
    seed: int
    original: str
    text: str
    accepted: bool | None = None
    problems: list[str] = []


class ParaphraseFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    format: int = FORMAT
    note: str = ""
    paraphrases: list[ParaphraseEntry] = []


class FixedParaphrase(msgspec.Struct, frozen=True, kw_only=True):
    """A variation's paraphrase as every run of it plays it: the guard's answer included.

    ``digest`` names the prompt the agent gets: the SHA-256 of the accepted paraphrase (clock block and
    answer rules included), or of the original prompt when the guard refused the paraphrase.
    """

    task_id: str
    variation: int
    model: str
    seed: int
    original: str
    text: str
    prompt: str | None
    problems: tuple[str, ...]
    digest: str

    @property
    def key(self) -> tuple[str, int, str, int, str]:
        return (self.task_id, self.variation, self.model, self.seed, self.original)

    def entry(self) -> ParaphraseEntry:
        return ParaphraseEntry(
            task_id=self.task_id,
            variation=self.variation,
            model=self.model,
            seed=self.seed,
            original=self.original,
            text=self.text,
            accepted=self.prompt is not None,
            problems=list(self.problems),
        )


def digest_of(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def fix(rendered: Rendered, *, model: str, seed: int, text: str) -> FixedParaphrase:
    """The paraphrase ``text`` of ``rendered``'s body, checked by the guard."""
    prompt, problems = accept_paraphrase(rendered, text)
    return FixedParaphrase(
        task_id=rendered.task_id,
        variation=rendered.variation,
        model=model,
        seed=seed,
        original=digest_of(rendered.prompt),
        text=text,
        prompt=prompt,
        problems=tuple(problems),
        digest=digest_of(prompt if prompt is not None else rendered.prompt),
    )


def load_paraphrase_file(path: str | Path) -> list[ParaphraseEntry]:
    """The entries of a paraphrase file, parsed within fae's limits; TaskError names the file and what is wrong."""
    path = Path(path)
    try:
        raw = read_json(path) if path.suffix.lower() == ".json" else read_yaml(path)
        found = msgspec.convert(raw if raw is not None else {}, ParaphraseFile)
    except FileNotFoundError:
        raise TaskError(f"no paraphrase file {path}") from None
    except (OSError, ValueError, yaml.YAMLError) as exc:  # msgspec.ValidationError is a ValueError
        raise TaskError(f"{path}: not a paraphrase file: {str(exc).splitlines()[0]}") from None
    if found.format > FORMAT:
        raise TaskError(f"{path}: paraphrase file format {found.format}; this fae reads up to {FORMAT}")
    seen: dict[tuple[str, int, str, int, str], str] = {}
    for index, entry in enumerate(found.paraphrases):
        key = (entry.task_id, entry.variation, entry.model, entry.seed, entry.original)
        if seen.setdefault(key, entry.text) != entry.text:
            raise TaskError(
                f"{path}: paraphrase {index + 1} ({entry.task_id} v{entry.variation}, {entry.model}, seed "
                f"{entry.seed}) gives a second text for a prompt the file already paraphrases"
            )
    return list(found.paraphrases)


def check_entry(entry: ParaphraseEntry, rendered: Rendered, where: str) -> FixedParaphrase:
    """A file's entry for ``rendered`` as it will be played; TaskError when it cannot be."""
    name = f"{where}: {entry.task_id} v{entry.variation}"
    if entry.original != digest_of(rendered.prompt):
        raise TaskError(
            f"{name} rewords another prompt than fae renders now (the task changed since the file was written): "
            "drop the entry to have it paraphrased again"
        )
    fixed = fix(rendered, model=entry.model, seed=entry.seed, text=entry.text)
    if entry.accepted and fixed.prompt is None:
        raise TaskError(f"{name} is marked accepted, but the paraphrase changed {', '.join(fixed.problems)}")
    return fixed


class _Dumper(yaml.SafeDumper):
    """Writes a text of several lines as a literal block, as it reads (PyYAML quotes one it cannot)."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _text)


def dump_paraphrases(entries: Iterable[ParaphraseEntry], path: str | Path, note: str = "") -> int:
    """Write a paraphrase file (JSON for a ``.json`` path, else YAML), sorted by key; returns how many."""
    path = Path(path)
    ordered = sorted(entries, key=lambda e: (e.task_id, e.variation, e.model, e.seed, e.original))
    data = msgspec.to_builtins(ParaphraseFile(note=note, paraphrases=ordered))
    if path.suffix.lower() == ".json":
        text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    else:
        text = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise TaskError(f"cannot write the paraphrase file {path}: {exc.strerror or exc}") from None
    return len(ordered)
