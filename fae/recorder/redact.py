"""Secrets are removed here, before anything reaches the log."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

REDACTED = "[redacted]"

DEFAULT_HEADERS = frozenset({
    "authorization", "proxy-authorization", "api-key", "x-api-key", "cookie", "set-cookie",
    "x-auth-token", "x-access-token", "openai-api-key", "x-goog-api-key", "anthropic-api-key",
})
DEFAULT_QUERY_PARAMS = frozenset({
    "api-key", "api_key", "apikey", "key", "token", "access_token", "id_token", "refresh_token",
    "client_secret", "password", "secret", "sig", "signature",
})


@dataclass(frozen=True)
class Redactor:
    """Which header names and query parameters count as secrets (case-insensitive)."""

    headers: frozenset[str] = DEFAULT_HEADERS
    query_params: frozenset[str] = DEFAULT_QUERY_PARAMS
    extra_values: tuple[str, ...] = field(default=())

    @classmethod
    def with_extra(cls, headers: Iterable[str] = (), query_params: Iterable[str] = ()) -> Redactor:
        return cls(
            headers=DEFAULT_HEADERS | {h.lower() for h in headers},
            query_params=DEFAULT_QUERY_PARAMS | {q.lower() for q in query_params},
        )

    def header_list(self, headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        return [(k, REDACTED if k.lower() in self.headers else v) for k, v in headers]

    def query(self, query: str) -> str:
        if not query:
            return query
        pairs = parse_qsl(query, keep_blank_values=True)
        if not any(k.lower() in self.query_params for k, _ in pairs):
            return query
        return urlencode([(k, REDACTED if k.lower() in self.query_params else v) for k, v in pairs])

    def url(self, url: str) -> str:
        parts = urlsplit(url)
        return urlunsplit(parts._replace(query=self.query(parts.query)))

    def path(self, path: str) -> str:
        raw, sep, query = path.partition("?")
        return raw + (sep + self.query(query) if sep else "")
