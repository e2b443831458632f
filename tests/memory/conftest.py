"""Memory tests: stores in tmp_path, the local LLM server on 127.0.0.1, deterministic clocks."""

from __future__ import annotations

import pytest

from fae.memory.embeddings import HashedEmbedder

NOW = "2025-03-03T08:00:00+00:00"


@pytest.fixture
def embedder() -> HashedEmbedder:
    return HashedEmbedder()
