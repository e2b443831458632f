"""Secrets are removed here, before anything reaches the log, and remembered so echoes of them are too."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import unquote, unquote_plus, urlsplit, urlunsplit

from fae.store.secrets import REDACTED, SecretValues

DEFAULT_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "api-key",
        "x-api-key",
        "cookie",
        "set-cookie",
        "x-auth-token",
        "x-access-token",
        "openai-api-key",
        "x-goog-api-key",
        "anthropic-api-key",
    }
)
DEFAULT_QUERY_PARAMS = frozenset(
    {
        "api-key",
        "api_key",
        "apikey",
        "key",
        "token",
        "access_token",
        "id_token",
        "refresh_token",
        "client_secret",
        "password",
        "secret",
        "sig",
        "signature",
    }
)
URL_HEADERS = frozenset({"location", "content-location"})
"""Response headers holding a URL whose query is redacted like the request's."""

_QUERY_SEPARATORS = re.compile(r"([&;])")


@dataclass(frozen=True)
class Redactor:
    """Which header names and query parameters count as secrets (case-insensitive), and the values seen.

    ``secrets`` is the recording-wide set of values redacted so far (plus ``extra_values``, such as
    the configured API key); the recorder hands it to the log writer, which scrubs them everywhere.
    """

    headers: frozenset[str] = DEFAULT_HEADERS
    query_params: frozenset[str] = DEFAULT_QUERY_PARAMS
    extra_values: tuple[str, ...] = field(default=())
    secrets: SecretValues = field(default_factory=SecretValues, compare=False, repr=False)

    def __post_init__(self) -> None:
        for value in self.extra_values:
            self.secrets.add(value)

    @classmethod
    def with_extra(
        cls, headers: Iterable[str] = (), query_params: Iterable[str] = (), values: Iterable[str | None] = ()
    ) -> Redactor:
        return cls(
            headers=DEFAULT_HEADERS | {h.lower() for h in headers},
            query_params=DEFAULT_QUERY_PARAMS | {q.lower() for q in query_params},
            extra_values=tuple(v for v in values if v),
        )

    def _learn_header(self, name: str, value: str) -> None:
        self.secrets.add(value)
        scheme, _, credential = value.strip().partition(" ")
        if credential:
            self.secrets.add(credential.strip())
            if scheme.lower() == "basic":
                try:
                    user_pass = base64.b64decode(credential.strip(), validate=True).decode("utf-8")
                except (binascii.Error, UnicodeDecodeError):
                    user_pass = ""
                self.secrets.add(user_pass)
                self.secrets.add(user_pass.partition(":")[2])
        if name in ("cookie", "set-cookie"):
            cookies = value.split(";") if name == "cookie" else value.split(";")[:1]
            for cookie in cookies:
                self.secrets.add(cookie.partition("=")[2])

    def header_list(self, headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        redacted = []
        for key, value in headers:
            name = key.lower()
            if name in self.headers:
                self._learn_header(name, value)
                redacted.append((key, REDACTED))
            elif name in URL_HEADERS:
                redacted.append((key, self.url(value)))
            else:
                redacted.append((key, value))
        return redacted

    def query(self, query: str) -> str:
        """The query with secret parameters' values redacted; ``&`` and ``;`` both separate pairs."""
        if not query:
            return query
        parts = _QUERY_SEPARATORS.split(query)
        for index in range(0, len(parts), 2):
            name, eq, value = parts[index].partition("=")
            if eq and unquote_plus(name).strip().lower() in self.query_params:
                self.secrets.add(value)
                self.secrets.add(unquote_plus(value))
                self.secrets.add(unquote(value))
                parts[index] = f"{name}={REDACTED}"
        return "".join(parts)

    def url(self, url: str) -> str:
        parts = urlsplit(url)
        netloc = parts.netloc
        if parts.password:
            self.secrets.add(unquote(parts.password))
            self.secrets.add(parts.password)
            netloc = f"{parts.username}:{REDACTED}@{netloc.rpartition('@')[2]}"
        return urlunsplit(parts._replace(netloc=netloc, query=self.query(parts.query)))

    def path(self, path: str) -> str:
        raw, sep, query = path.partition("?")
        return raw + (sep + self.query(query) if sep else "")

    def learn_request(self, headers: Iterable[tuple[str, str]], url: str) -> None:
        """Remember a request's secrets before any of its response is written (streamed chunks)."""
        self.header_list(headers)
        self.url(url)
