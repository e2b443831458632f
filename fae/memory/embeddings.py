"""Embedding backends for macro reflections: unit-length float32 vectors, one row per text.

A backend is named by a spec string (``embedder_from_spec``):

- ``static`` — the small static model (10k vocabulary, 64 dimensions, int8)
  shipped inside the PyPI package ``tokenlearn-static-model``, loaded from the
  installed files: offline, no torch, no hub.
- ``hashed-bow`` — hashed bag of words (the same function the local LLM
  server's ``/v1/embeddings`` serves): no dependency at all, matches shared words only.
- ``openai:MODEL`` — any OpenAI-compatible ``/embeddings`` endpoint (OpenAI,
  vLLM, Ollama, the local server) at a base URL, over plain httpx.

The store records the backend's ``name`` and ``dimension`` and refuses to mix them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol

import httpx
import numpy as np

from fae.memory.errors import EmbeddingError
from fae.util.limits import DEFAULT_EMBEDDER_SPEC

DEFAULT_SPEC = DEFAULT_EMBEDDER_SPEC
ROUTED_BASE: ContextVar[str | None] = ContextVar("fae_embeddings_base", default=None)
"""Where an ``openai:`` embedder sends the embeddings asked for in this context instead of its own base URL (set
with ``routed``)."""
STATIC_NAME = "static:tokenlearn-static-model"
HASHED_NAME = "hashed-bow"


@contextmanager
def routed(base: str | None) -> Iterator[None]:
    """Send the ``openai:`` embeddings asked for inside to ``base`` (None: each embedder's own base URL).

    Whoever embeds for a recorded run routes to that run's proxied LLM base, so the log keeps the call under the run
    it served: the memory MCP server for the run that asked a query (``fae.memory.server``), training for the run
    whose reflection it stores (``fae.harness.training``).
    """
    token = ROUTED_BASE.set(base)
    try:
        yield
    finally:
        ROUTED_BASE.reset(token)


class Embedder(Protocol):
    """Turns texts into unit-length vectors; ``name`` and ``dimension`` identify the space."""

    name: str
    dimension: int

    def embed(self, texts: list[str]) -> np.ndarray: ...


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as float32."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim == 1:
        vectors = vectors[None, :]
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


class HashedEmbedder:
    """Hashed bag of words: deterministic everywhere, needs nothing, knows no synonyms."""

    def __init__(self, dimension: int = 384) -> None:
        self.name = HASHED_NAME if dimension == 384 else f"{HASHED_NAME}-{dimension}"
        self.dimension = dimension

    def embed(self, texts: list[str]) -> np.ndarray:
        from fae.llm.embeddings import embed

        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return normalise(np.array([embed(text, self.dimension) for text in texts]))


class StaticEmbedder:
    """The static model inside ``tokenlearn-static-model``, run by its own Rust encoder.

    The package bakes its weights in (10k-token vocabulary, 64 dimensions, int8)
    and loads them from its installed files: no hub, no torch. model2vec's
    ``StaticModel.from_pretrained`` on the same files gives the same vectors
    (within 2e-8) but loads in about 5 s instead of 1 s.
    """

    dimension = 64

    def __init__(self) -> None:
        try:
            import static_model
        except ImportError:
            raise EmbeddingError(
                "the static embedding model is not installed: `uv sync --extra memory` "
                "(package tokenlearn-static-model), or choose --embedder hashed-bow"
            ) from None
        self._encode = static_model.get_embeddings
        self.name = STATIC_NAME

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return normalise(np.array(self._encode(list(texts)), dtype=np.float32))


class OpenAIEmbedder:
    """An OpenAI-compatible ``/embeddings`` endpoint; the dimension is learnt from one call."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        dimension: int | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = f"openai:{model}"
        self._headers = {"authorization": f"Bearer {api_key or 'not-needed'}"}
        self._timeout_s = timeout_s
        self.dimension = dimension or self.embed(["dimension probe"]).shape[1]

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, getattr(self, "dimension", 0)), dtype=np.float32)
        base = (ROUTED_BASE.get() or self.base_url).rstrip("/")
        try:
            reply = httpx.post(
                f"{base}/embeddings",
                headers=self._headers,
                json={"model": self.model, "input": list(texts), "encoding_format": "float"},
                timeout=self._timeout_s,
            )
        except httpx.HTTPError as exc:
            raise EmbeddingError(f"embedding endpoint {self.base_url} cannot be reached: {exc}") from None
        if reply.status_code != 200:
            raise EmbeddingError(
                f"embedding endpoint {self.base_url} answered HTTP {reply.status_code}: {reply.text[:200]}"
            )
        try:
            rows = sorted(reply.json()["data"], key=lambda row: row["index"])
            vectors = np.array([row["embedding"] for row in rows], dtype=np.float32)
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingError(f"embedding endpoint {self.base_url} answered malformed JSON: {exc}") from None
        if vectors.shape[0] != len(texts):
            raise EmbeddingError(f"embedding endpoint returned {vectors.shape[0]} vectors for {len(texts)} texts")
        return normalise(vectors)


def embedder_from_spec(
    spec: str = DEFAULT_SPEC, *, base_url: str | None = None, api_key: str | None = None
) -> Embedder:
    """The backend a spec names: ``static``, ``hashed-bow`` or ``openai:MODEL`` (needs a base URL)."""
    if spec in ("static", STATIC_NAME):
        return StaticEmbedder()
    if spec == HASHED_NAME:
        return HashedEmbedder()
    if spec.startswith("openai:"):
        base = base_url or os.environ.get("OPENAI_BASE_URL")
        if not base:
            raise EmbeddingError(f"embedder {spec!r} needs a base URL (--embeddings-url or OPENAI_BASE_URL)")
        return OpenAIEmbedder(base, spec.removeprefix("openai:"), api_key=api_key or os.environ.get("OPENAI_API_KEY"))
    raise EmbeddingError(f"unknown embedder {spec!r}: use static, hashed-bow or openai:MODEL")
