"""Retrieval quality of an embedding backend on a set of reflections and queries (recall@k).

A set file (YAML) holds ``reflections`` (id, task_id, macro_summary, heuristic,
text, tags) and ``queries`` (query, expected: [ids]). Each query's recall is the
share of its expected reflections found in the top k; the set's recall@k is the
mean over queries. The reflections go through a real store in a temporary
directory, so this measures exactly what the memory server serves.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fae.memory.embeddings import Embedder
from fae.memory.errors import MemoryStoreError
from fae.memory.reflection_store import MacroReflection, MemoryStore
from fae.util.data_files import read_yaml

SET_CLOCK = "2025-03-03T08:00:00Z"


@dataclass(frozen=True)
class RecallResult:
    embedder: str
    dimension: int
    index: str
    k: int
    recall: float
    hit_rate: float
    queries: int
    misses: list[tuple[str, list[str], list[str]]]


def load_set(path: str | Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The reflections and queries of a retrieval set file."""
    try:
        raw = read_yaml(path)
        reflections, queries = raw["reflections"], raw["queries"]
    except (OSError, yaml.YAMLError, KeyError, TypeError) as exc:
        raise MemoryStoreError(f"cannot read retrieval set {path}: {exc}") from None
    known = {item["id"] for item in reflections}
    for query in queries:
        unknown = [e for e in query["expected"] if e not in known]
        if unknown:
            raise MemoryStoreError(f"retrieval set {path}: query {query['query']!r} expects unknown {unknown}")
    return reflections, queries


def recall_at_k(embedder: Embedder, set_path: str | Path, k: int = 3, *, use_faiss: bool | None = None) -> RecallResult:
    """Build a store of the set's reflections with ``embedder`` and score its queries."""
    reflections, queries = load_set(set_path)
    with tempfile.TemporaryDirectory(prefix="fae-recall-") as tmp:
        store = MemoryStore.create(Path(tmp) / "memory", embedder, created_at=SET_CLOCK, use_faiss=use_faiss)
        store.add_macro(
            [
                MacroReflection(
                    text=item["text"],
                    macro_summary=item["macro_summary"],
                    heuristic=item["heuristic"],
                    tags=tuple(item.get("tags", ())),
                    success=True,
                    task_id=item["task_id"],
                    created_at=SET_CLOCK,
                    run_id=item["id"],
                )
                for item in reflections
            ]
        )
        total, hits = 0.0, 0
        misses: list[tuple[str, list[str], list[str]]] = []
        for query in queries:
            found = [hit.reflection.run_id or "" for hit in store.search_macro(query["query"], k)]
            expected = list(query["expected"])
            share = sum(e in found for e in expected) / len(expected)
            total += share
            hits += share > 0
            if share < 1:
                misses.append((query["query"], expected, found))
        return RecallResult(
            embedder=embedder.name,
            dimension=embedder.dimension,
            index=store.index_backend,
            k=k,
            recall=total / len(queries),
            hit_rate=hits / len(queries),
            queries=len(queries),
            misses=misses,
        )
