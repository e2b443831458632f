"""fae's own credentials: per-run capabilities and the per-stack upstream key, minted and guarded here.

A **capability** (``fae-cap-`` and 32 hex digits) is the path segment that lets one actor of one run
through the recording proxy; the proxy honours it until the run closes. The **stack key**
(``fae-key-`` and 32 hex digits) is the header the proxy adds to every request it forwards to an
upstream the stack started itself; those upstreams answer nothing without it. Both have one shape so
that the log writer can scrub every credential from everything it stores (``fae.store.secrets``),
whichever run or stack minted it: a log never holds one that works.
"""

from __future__ import annotations

import hmac
import re
import secrets
from typing import Any

CAPABILITY_PREFIX = "fae-cap-"
KEY_PREFIX = "fae-key-"
CREDENTIAL_LENGTH = 8 + 32
CREDENTIAL_MARK = b"fae-"
"""What every credential starts with: the cheap test before the pattern is searched for."""
CREDENTIAL_BYTES = re.compile(rb"fae-(?P<kind>cap|key)-[0-9a-f]{32}")
"""Any credential fae mints, as the log writer scrubs it (keeping its kind)."""
CAPABILITY = re.compile(r"fae-cap-[0-9a-f]{32}")

KEY_HEADER = "x-fae-stack-key"
"""The header carrying the stack key from the proxy to the stack's own upstreams."""
_KEY_HEADER_BYTES = KEY_HEADER.encode()


def new_capability() -> str:
    """A fresh, unguessable capability (128 random bits)."""
    return CAPABILITY_PREFIX + secrets.token_hex(16)


def new_stack_key() -> str:
    """A fresh stack key (128 random bits)."""
    return KEY_PREFIX + secrets.token_hex(16)


def is_capability(value: str) -> bool:
    return CAPABILITY.fullmatch(value) is not None


async def _refuse(send: Any) -> None:
    body = b"this server answers only fae's recording proxy\n"
    await send(
        {
            "type": "http.response.start",
            "status": 403,
            "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


def require_stack_key(app: Any, key: str) -> Any:
    """``app`` answering only HTTP requests that carry ``key`` in ``KEY_HEADER`` (403 otherwise).

    The header is taken off before ``app`` sees the request, so the app can never echo it back.
    Lifespan events pass through; anything else (a websocket) is refused.
    """
    expected = key.encode()

    async def guarded(scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") == "lifespan":
            await app(scope, receive, send)
            return
        if scope.get("type") != "http":
            return  # closing without accepting refuses a websocket
        headers = list(scope.get("headers") or [])
        given = [value for name, value in headers if name.lower() == _KEY_HEADER_BYTES]
        if len(given) != 1 or not hmac.compare_digest(given[0], expected):
            await _refuse(send)
            return
        kept = [(name, value) for name, value in headers if name.lower() != _KEY_HEADER_BYTES]
        await app({**scope, "headers": kept}, receive, send)

    return guarded
