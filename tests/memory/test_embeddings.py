import socket

import numpy as np
import pytest

from fae.llm import LlmServer, PlanRegistry, create_app
from fae.memory.embeddings import HashedEmbedder, OpenAIEmbedder, StaticEmbedder, embedder_from_spec
from fae.memory.errors import EmbeddingError


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to open a connection fails: the offline backend must not need one."""

    def refuse(*args, **kwargs):
        raise OSError("network disabled by the test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_static_backend_runs_with_no_network(no_network):
    backend = embedder_from_spec("static")
    vectors = backend.embed(["physician", "doctor", "invoice"])
    assert vectors.shape == (3, 64) and backend.dimension == 64
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    similarity = vectors @ vectors.T
    assert similarity[0, 1] > similarity[0, 2]  # meaning, not shared words: no word in common


def test_static_backend_is_deterministic():
    assert np.array_equal(StaticEmbedder().embed(["Slot status busy"]), StaticEmbedder().embed(["Slot status busy"]))


def test_openai_backend_over_the_local_server_matches_hashed_bow():
    with LlmServer(create_app(PlanRegistry([]))) as server:
        remote = OpenAIEmbedder(server.base_url, "hashed-bow")
        texts = ["mark the slot busy", "search Patient by name"]
        assert remote.dimension == 384
        assert np.allclose(remote.embed(texts), HashedEmbedder().embed(texts), atol=1e-6)
        with pytest.raises(EmbeddingError, match="HTTP 4"):
            OpenAIEmbedder(server.root_url + "/nowhere", "x")


def test_unknown_spec_and_missing_url(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(EmbeddingError, match="unknown embedder"):
        embedder_from_spec("word2vec")
    with pytest.raises(EmbeddingError, match="needs a base URL"):
        embedder_from_spec("openai:text-embedding-3-small")
