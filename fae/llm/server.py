"""Running the local LLM server in process: uvicorn on its own thread (tests, ``fae demo``)."""

from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import Self

from starlette.applications import Starlette

from fae.errors import FaeError
from fae.util.serve import EmbeddedServer, embedded_config

_START_TIMEOUT_S = 10.0


class LlmServer:
    """``with LlmServer(app) as server:`` serves ``app`` at ``server.base_url`` inside the block.

    ``port=0`` takes a free port. The OpenAI base URL is ``server.base_url``
    (it ends in ``/v1``).
    """

    def __init__(self, app: Starlette, *, host: str = "127.0.0.1", port: int = 0) -> None:
        config = embedded_config(app, host=host, port=port, lifespan="off", timeout_graceful_shutdown=2)
        self._server = EmbeddedServer(config)
        self._thread = threading.Thread(target=self._server.run, name="fae-llm-server", daemon=True)
        self.host = host
        self.port = port

    @property
    def root_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    def __enter__(self) -> Self:
        self._thread.start()
        deadline = time.monotonic() + _START_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise FaeError(f"the local LLM server could not start on {self.host}:{self.port}")
            time.sleep(0.01)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
