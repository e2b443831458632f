"""The on-disk Reflexion memory: a directory any process can read while one process appends.

    manifest.json   {"format": "fae-memory", "format_version": 1,
                     "embedding": {"name": ..., "dimension": ...}, "created_at": ...}
    micro.jsonl     one MicroReflection per line
    macro.jsonl     one MacroReflection per line
    macro.f32       the macro rows' unit vectors, little-endian float32, row i = line i

Vectors are kept, not the index: a flat inner-product index over n x d vectors
builds in well under a millisecond per thousand rows, so it is rebuilt on load
(faiss ``IndexFlatIP`` when faiss is installed, numpy otherwise; ``index_backend``
says which) and searching never needs the embedding model to re-embed the store.
Appends write the vectors before the line, so a reader that sees a line always
finds its vector. Timestamps come from the caller's clock (a task's fixed "now").
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from fae.memory.embeddings import Embedder, embedder_from_spec, normalise
from fae.memory.errors import EmbedderMismatch, FormatTooNew, MemoryStoreError
from fae.util.data_files import read_json

FORMAT = "fae-memory"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
MICRO = "micro.jsonl"
MACRO = "macro.jsonl"
VECTORS = "macro.f32"


class MicroReflection(msgspec.Struct, frozen=True, kw_only=True):
    """A tip for one FHIR (resource, operation) pair, learnt from one run."""

    resource: str
    operation: str
    tip: str
    success: bool
    task_id: str
    created_at: str
    run_id: str | None = None


class MacroReflection(msgspec.Struct, frozen=True, kw_only=True):
    """A task-level strategy learnt from one run, found by meaning."""

    text: str
    macro_summary: str
    heuristic: str
    tags: tuple[str, ...] = ()
    success: bool
    task_id: str
    created_at: str
    run_id: str | None = None

    def embedding_text(self) -> str:
        """What is embedded: the summary, the heuristic, the reflection and the tags."""
        return " ".join(part for part in (self.macro_summary, self.heuristic, self.text, " ".join(self.tags)) if part)


@dataclass(frozen=True)
class Hit:
    """One macro search result and its cosine score."""

    reflection: MacroReflection
    score: float

    def as_dict(self) -> dict[str, Any]:
        return {**msgspec.to_builtins(self.reflection), "_score": round(self.score, 6)}


_micro_decoder = msgspec.json.Decoder(MicroReflection)
_macro_decoder = msgspec.json.Decoder(MacroReflection)
_encoder = msgspec.json.Encoder()


def faiss_available() -> bool:
    try:
        import faiss  # noqa: F401
    except ImportError:
        return False
    return True


class _FlatIndex:
    """Inner-product search over unit vectors: faiss when it is installed, numpy otherwise."""

    def __init__(self, vectors: np.ndarray, *, use_faiss: bool | None = None) -> None:
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self._faiss = None
        if use_faiss is None:
            use_faiss = faiss_available()
        if use_faiss and len(self.vectors):
            import faiss

            self._faiss = faiss.IndexFlatIP(self.vectors.shape[1])
            self._faiss.add(self.vectors)
        self.backend = "faiss" if use_faiss else "numpy"

    def search(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        count = len(self.vectors)
        k = min(k, count)
        if k <= 0:
            return []
        if self._faiss is not None:
            scores, ids = self._faiss.search(query.reshape(1, -1), k)
            return [(int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True) if i >= 0]
        scores = self.vectors @ query.reshape(-1)
        # higher score first; ties go to the older row
        order = np.lexsort((np.arange(count), -scores))[:k]
        return [(int(i), float(scores[i])) for i in order]


def _read_lines(path: Path) -> list[bytes]:
    """The complete lines of a JSON-lines file (a line still being appended is left out)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    lines = data.split(b"\n")
    return [line for line in lines[:-1] if line.strip()]


class MemoryStore:
    """A memory store directory: ``MemoryStore.create`` makes one, ``MemoryStore.open`` reads one.

    ``embedder`` embeds queries and new macro rows; when not given it is built
    from the manifest's backend name on first use.
    """

    def __init__(
        self, path: Path, manifest: dict[str, Any], embedder: Embedder | None, *, use_faiss: bool | None = None
    ) -> None:
        self.path = path
        self.manifest = manifest
        self._embedder = embedder
        self._use_faiss = use_faiss
        self._stamp: tuple | None = None
        self._micro: list[MicroReflection] = []
        self._macro: list[MacroReflection] = []
        self._index = _FlatIndex(np.zeros((0, self.dimension), dtype=np.float32), use_faiss=use_faiss)
        self.refresh()

    # -- opening ------------------------------------------------------------------------

    @classmethod
    def create(
        cls, path: str | Path, embedder: Embedder, *, created_at: str, use_faiss: bool | None = None
    ) -> MemoryStore:
        """Make an empty store at ``path`` (a new or empty directory), or open it if it is one."""
        path = Path(path)
        if (path / MANIFEST).exists():
            return cls.open(path, embedder, use_faiss=use_faiss)
        if path.exists() and any(path.iterdir()):
            raise MemoryStoreError(f"{path} is not empty and holds no memory store")
        path.mkdir(parents=True, exist_ok=True)
        manifest = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "embedding": {"name": embedder.name, "dimension": embedder.dimension},
            "created_at": created_at,
        }
        tmp = path / (MANIFEST + ".tmp")
        tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, path / MANIFEST)
        for name in (MICRO, MACRO, VECTORS):
            (path / name).touch()
        return cls(path, manifest, embedder, use_faiss=use_faiss)

    @classmethod
    def open(cls, path: str | Path, embedder: Embedder | None = None, *, use_faiss: bool | None = None) -> MemoryStore:
        """Open an existing store; a newer format or a different embedding backend is refused."""
        path = Path(path)
        manifest = read_manifest(path)
        if embedder is not None:
            wanted = manifest["embedding"]
            if embedder.name != wanted.get("name") or embedder.dimension != wanted.get("dimension"):
                raise EmbedderMismatch(
                    f"memory store {path} holds vectors from {wanted.get('name')} "
                    f"({wanted.get('dimension')}-d); it cannot be searched or extended with "
                    f"{embedder.name} ({embedder.dimension}-d)"
                )
        return cls(path, manifest, embedder, use_faiss=use_faiss)

    # -- properties ---------------------------------------------------------------------

    @property
    def embedding_name(self) -> str:
        return str(self.manifest["embedding"]["name"])

    @property
    def dimension(self) -> int:
        return int(self.manifest["embedding"]["dimension"])

    @property
    def index_backend(self) -> str:
        return self._index.backend

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = embedder_from_spec(self.embedding_name)
            if self._embedder.dimension != self.dimension:
                raise EmbedderMismatch(
                    f"backend {self.embedding_name} now gives {self._embedder.dimension}-d "
                    f"vectors; the store holds {self.dimension}-d"
                )
        return self._embedder

    # -- reading ------------------------------------------------------------------------

    def _files_stamp(self) -> tuple[tuple[int, int] | None, ...]:
        stamp: list[tuple[int, int] | None] = []
        for name in (MICRO, MACRO, VECTORS):
            try:
                st = (self.path / name).stat()
                stamp.append((st.st_size, st.st_mtime_ns))
            except FileNotFoundError:
                stamp.append(None)
        return tuple(stamp)

    def refresh(self) -> bool:
        """Reload the rows if another process appended since the last look; True if it did."""
        stamp = self._files_stamp()
        if stamp == self._stamp:
            return False
        try:
            micro = [_micro_decoder.decode(line) for line in _read_lines(self.path / MICRO)]
            macro = [_macro_decoder.decode(line) for line in _read_lines(self.path / MACRO)]
        except msgspec.ValidationError as exc:
            raise MemoryStoreError(f"memory store {self.path} has a malformed row: {exc}") from None
        except msgspec.DecodeError as exc:
            raise MemoryStoreError(f"memory store {self.path} has a line that is not JSON: {exc}") from None
        raw = np.fromfile(self.path / VECTORS, dtype="<f4") if (self.path / VECTORS).exists() else np.zeros(0)
        rows = raw.size // self.dimension if self.dimension else 0
        if rows < len(macro):
            raise MemoryStoreError(
                f"memory store {self.path} is inconsistent: {len(macro)} macro rows but {rows} vectors"
            )
        vectors = raw[: len(macro) * self.dimension].reshape(len(macro), self.dimension)
        self._micro, self._macro = micro, macro
        self._index = _FlatIndex(vectors, use_faiss=self._use_faiss)
        self._stamp = stamp
        return True

    def micro(self) -> list[MicroReflection]:
        return list(self._micro)

    def macro(self) -> list[MacroReflection]:
        return list(self._macro)

    def micro_tips(self, resource: str, operation: str, k: int = 3) -> list[MicroReflection]:
        """Tips for exactly this (resource, operation), case-insensitive, newest first, no repeats."""
        resource_key, operation_key = resource.strip().lower(), operation.strip().lower()
        found = [
            (row.created_at, index, row)
            for index, row in enumerate(self._micro)
            if row.resource.lower() == resource_key and row.operation.lower() == operation_key
        ]
        found.sort(key=lambda item: (item[0], item[1]), reverse=True)
        seen: set[str] = set()
        tips: list[MicroReflection] = []
        for _, _, row in found:
            if row.tip in seen:
                continue
            seen.add(row.tip)
            tips.append(row)
            if len(tips) >= k:
                break
        return tips

    def search_macro(self, query: str, k: int = 3) -> list[Hit]:
        """The ``k`` macro reflections nearest ``query`` by cosine, best first."""
        if not self._macro or k <= 0:
            return []
        vector = normalise(self.embedder.embed([query]))[0]
        return [Hit(self._macro[i], score) for i, score in self._index.search(vector, k)]

    def stats(self) -> dict[str, Any]:
        """Counts and how the store is searched."""
        resources = sorted({(r.resource, r.operation) for r in self._micro})
        return {
            "path": str(self.path),
            "format_version": self.manifest["format_version"],
            "embedding": dict(self.manifest["embedding"]),
            "index": self.index_backend,
            "micro": len(self._micro),
            "macro": len(self._macro),
            "micro_pairs": [f"{resource}/{operation}" for resource, operation in resources],
            "tasks": sorted({r.task_id for r in self._micro} | {r.task_id for r in self._macro}),
            "successes": sum(r.success for r in self._macro),
        }

    # -- writing ------------------------------------------------------------------------

    def add_micro(self, rows: Iterable[MicroReflection]) -> int:
        """Append micro reflections; returns how many."""
        rows = list(rows)
        if rows:
            with open(self.path / MICRO, "ab") as handle:
                handle.write(b"".join(_encoder.encode(row) + b"\n" for row in rows))
            self.refresh()
        return len(rows)

    def add_macro(self, rows: Sequence[MacroReflection]) -> int:
        """Embed and append macro reflections; returns how many."""
        rows = list(rows)
        if not rows:
            return 0
        vectors = normalise(self.embedder.embed([row.embedding_text() for row in rows]))
        if vectors.shape != (len(rows), self.dimension):
            raise EmbedderMismatch(
                f"the embedder gave vectors of shape {vectors.shape}, the store holds {self.dimension}-d"
            )
        with open(self.path / VECTORS, "ab") as handle:
            handle.write(vectors.astype("<f4").tobytes())
        with open(self.path / MACRO, "ab") as handle:
            handle.write(b"".join(_encoder.encode(row) + b"\n" for row in rows))
        self.refresh()
        return len(rows)


def read_manifest(path: Path) -> dict[str, Any]:
    """The manifest of the store at ``path``, checked for format and version."""
    try:
        manifest = read_json(path / MANIFEST)
    except FileNotFoundError:
        raise MemoryStoreError(f"no memory store at {path} (no {MANIFEST}); `fae train-memory` makes one") from None
    except (OSError, ValueError) as exc:
        raise MemoryStoreError(f"the manifest of memory store {path} is unreadable: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise MemoryStoreError(f"{path / MANIFEST} is not a fae memory manifest")
    version = manifest.get("format_version")
    if not isinstance(version, int) or version < 1:
        raise MemoryStoreError(f"memory store {path} has no valid format_version")
    if version > FORMAT_VERSION:
        raise FormatTooNew(
            f"memory store {path} has format version {version}, newer than this fae understands "
            f"({FORMAT_VERSION}); upgrade fae to read it"
        )
    embedding = manifest.get("embedding")
    if not isinstance(embedding, dict) or not isinstance(embedding.get("dimension"), int):
        raise MemoryStoreError(f"memory store {path} names no embedding backend and dimension")
    return manifest
