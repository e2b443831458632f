"""An embeddings endpoint reached through the recording proxy, so every embedding call is in the log.

Training embeds each run's macro reflection; with an ``openai:MODEL`` embedder the request goes to the
stack's LLM upstream through the proxy URL of the run it serves (actor ``harness``), and the recorder
writes it like any LLM call (an ``HttpExchanged`` and an ``LlmCalled`` with api ``embeddings``, the
model and the token usage the endpoint reports). The offline embedders make no request.
"""

from __future__ import annotations

import numpy as np

from fae.memory.embeddings import Embedder, OpenAIEmbedder, embedder_from_spec

ACTOR = "harness"  # the harness builds the store; the proxy knows a fixed set of actors
PREFIX = "openai:"


class ProxiedEmbedder:
    """``openai:MODEL`` behind the proxy; ``route(base_url)`` points it at the run it serves next
    (the first route asks the endpoint once for the dimension, recorded under that run)."""

    def __init__(self, model: str, *, api_key: str | None = None) -> None:
        self.model = model
        self.name = PREFIX + model
        self.dimension = 0
        self._api_key = api_key
        self._inner: OpenAIEmbedder | None = None

    def route(self, base_url: str) -> None:
        if self._inner is None:
            self._inner = OpenAIEmbedder(base_url, self.model, api_key=self._api_key)
            self.dimension = self._inner.dimension
        else:
            self._inner.base_url = base_url.rstrip("/")

    def embed(self, texts: list[str]) -> np.ndarray:
        if self._inner is None:
            raise RuntimeError("route() the proxied embedder to a run before embedding")
        return self._inner.embed(texts)


def training_embedder(spec: str, *, api_key: str | None = None) -> Embedder | ProxiedEmbedder:
    """The embedder a spec names: ``openai:MODEL`` goes through the proxy, the others stay offline."""
    if spec.startswith(PREFIX):
        return ProxiedEmbedder(spec.removeprefix(PREFIX), api_key=api_key)
    return embedder_from_spec(spec)
