"""HTTP exchanges as OpenTelemetry HTTP client spans, and what a URL says about the server and the LLM provider.

A span is named ``{method} {url.template}`` for a FHIR exchange (the path with its sandbox, resource id and
history version as placeholders: low-cardinality, as the HTTP conventions ask), ``{method}`` otherwise. The URL
is the one recorded, whose secrets the recorder already redacted; nothing is added to it.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from fae.report.otlp import Attributes, Value
from fae.store import events as ev

KNOWN_METHODS = frozenset({"CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "TRACE"})
PROVIDERS = {
    "api.openai.com": "openai",
    "api.anthropic.com": "anthropic",
    "api.cohere.com": "cohere",
    "api.cohere.ai": "cohere",
    "api.deepseek.com": "deepseek",
    "api.groq.com": "groq",
    "api.mistral.ai": "mistral_ai",
    "api.perplexity.ai": "perplexity",
    "api.x.ai": "x_ai",
    "generativelanguage.googleapis.com": "gcp.gemini",
}
"""``gen_ai.provider.name`` by the LLM upstream's host (well-known values of the conventions)."""
PROVIDER_SUFFIXES = (
    (".openai.azure.com", "azure.ai.openai"),
    (".services.ai.azure.com", "azure.ai.inference"),
    ("aiplatform.googleapis.com", "gcp.vertex_ai"),
    (".amazonaws.com", "aws.bedrock"),
)
API_PROVIDERS = {"messages": "anthropic"}
"""Any other host: the provider whose API fae spoke (Anthropic Messages; else OpenAI's Chat Completions or
Responses), as the conventions name a provider by the flavour of what it was sent."""


def server_of(url: str) -> tuple[str | None, int | None]:
    """``server.address`` and ``server.port`` of a recorded URL (None, None when it does not parse)."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return None, None
    if not host:
        return None, None
    return host, port if port is not None else {"http": 80, "https": 443}.get(parts.scheme)


def provider_of(host: str | None, api: str = "chat") -> str:
    host = (host or "").lower()
    if host in PROVIDERS:
        return PROVIDERS[host]
    for suffix, provider in PROVIDER_SUFFIXES:
        if host.endswith(suffix) and (suffix != ".amazonaws.com" or host.startswith("bedrock")):
            return provider
    return API_PROVIDERS.get(api, "openai")


def url_template(path: str, interaction: ev.FhirInteracted | None) -> str:
    """A FHIR path with its variable parts as placeholders: ``/sandbox/{sandbox}/fhir/Patient/{id}``."""
    segments = path.partition("?")[0].partition("#")[0].split("/")
    for index, segment in enumerate(segments):
        before = segments[index - 1] if index else ""
        if before == "sandbox" and segment:
            segments[index] = "{sandbox}"
        elif before == "_history" and segment:
            segments[index] = "{vid}"
        elif interaction is not None and interaction.resource_id and segment == interaction.resource_id:
            segments[index] = "{id}"
    return "/".join(segments) or "/"


def http_attributes(exchange: ev.HttpExchanged, interaction: ev.FhirInteracted | None) -> tuple[str, Attributes]:
    """The span name and the HTTP attributes of one exchange (with what the FHIR interaction adds)."""
    method = exchange.method.upper()
    known = method if method in KNOWN_METHODS else "_OTHER"
    address, port = server_of(exchange.url)
    template = url_template(exchange.path, interaction) if interaction is not None else None
    failed = exchange.status is not None and exchange.status >= 400
    values: dict[str, Value | None] = {
        "http.request.method": known,
        "http.request.method_original": exchange.method if known == "_OTHER" else None,
        "url.full": exchange.url,
        "url.template": template,
        "server.address": address,
        "server.port": port,
        "http.response.status_code": exchange.status,
        "http.request.body.size": exchange.request_size,
        "http.response.body.size": exchange.response_size if exchange.status is not None else None,
        "error.type": str(exchange.status) if failed else ("_OTHER" if exchange.error is not None else None),
    }
    if interaction is not None:
        values.update(
            {
                "fae.fhir.interaction": interaction.interaction,
                "fae.fhir.resource_type": interaction.resource_type,
                "fae.fhir.resource_id": interaction.resource_id,
                "fae.fhir.version": interaction.version,
                "fae.fhir.search_total": interaction.search_total,
            }
        )
    shown = "HTTP" if known == "_OTHER" else known  # the conventions' name for a method they do not know
    name = f"{shown} {template}" if template else shown
    return name, [(key, value) for key, value in values.items() if value is not None]
