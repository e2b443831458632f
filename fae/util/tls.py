"""One TLS context for the HTTP clients fae builds per run: building one costs ~15-25 ms of CPU.

An httpx client made without ``verify`` loads the CA bundle into a fresh
``ssl.SSLContext``; a recording builds several clients per run (the
harness's, the scripted agent's, its MCP client's), which made that load a
third of a gold run's CPU. A context is safe to share between clients and
threads; it is built on first use, from the environment then
(``SSL_CERT_FILE``, ``SSL_CERT_DIR``, as httpx reads them).
"""

from __future__ import annotations

import functools
import ssl


@functools.cache
def client_tls() -> ssl.SSLContext:
    """The TLS context every per-run client shares (certificate checks as httpx's default)."""
    import httpx

    return httpx.create_ssl_context()
