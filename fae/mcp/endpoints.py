"""Names, default ports and URLs of fae's MCP servers; light (no SDK import) so the CLI starts fast."""

from __future__ import annotations

from enum import StrEnum

FHIR_PORT = 8765
SPECS_PORT = 8766
MEMORY_PORT = 8767
STREAMABLE_PATH = "/mcp"
SSE_PATH = "/sse"
MESSAGES_PATH = "/messages/"

TRANSPORT_HELP = "stdio; http: streamable HTTP at /mcp plus legacy SSE at /sse; sse: legacy SSE only."


class Transport(StrEnum):
    """The transports a ``fae mcp`` or ``fae memory serve`` command offers."""

    stdio = "stdio"
    http = "http"
    sse = "sse"


def served_at(transport: Transport, host: str, port: int) -> str:
    """Where an HTTP transport's clients connect, for the start-up line."""
    root = f"http://{host}:{port}"
    if transport is Transport.sse:
        return f"{root}{SSE_PATH} (legacy SSE)"
    return f"{root}{STREAMABLE_PATH} (streamable HTTP) and {root}{SSE_PATH} (legacy SSE)"
