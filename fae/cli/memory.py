"""``fae memory``: serve, show and search a Reflexion memory store (mounted by fae/cli/main.py)."""

from __future__ import annotations

import functools
import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import msgspec
import typer
from rich.table import Table

from fae.cli.console import echo, err, error_line, out
from fae.errors import FaeError
from fae.mcp.endpoints import MEMORY_PORT, TRANSPORT_HELP, Transport

app = typer.Typer(help="The Reflexion memory: serve it over MCP, show and search it.", no_args_is_help=True)

StoreOption = Annotated[Path, typer.Option("--store", "-s", help="Memory store directory.", envvar="FAE_MEMORY")]


class Kind(StrEnum):
    micro = "micro"
    macro = "macro"
    all = "all"


def _errors(fn):
    """A user's mistake is one line on stderr and exit code 1 (the same contract as fae's CLI)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except FaeError as exc:
            error_line(exc)
            raise typer.Exit(1) from None

    return wrapper


def _embedder(spec: str | None, url: str | None):
    if spec is None:
        return None
    from fae.memory.embeddings import embedder_from_spec

    return embedder_from_spec(spec, base_url=url)


def _open(store: Path, embedder: str | None = None, url: str | None = None):
    from fae.memory.reflection_store import MemoryStore

    return MemoryStore.open(store, _embedder(embedder, url))


def _print_json(value: Any) -> None:
    echo(json.dumps(value, ensure_ascii=False, sort_keys=True))


@app.command()
@_errors
def serve(
    store: StoreOption,
    transport: Annotated[Transport, typer.Option(help=TRANSPORT_HELP)] = Transport.stdio,
    host: Annotated[str, typer.Option(help="Address to bind (http, sse).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help=f"Port to bind (http, sse); default {MEMORY_PORT}.")] = MEMORY_PORT,
    embedder: Annotated[str | None, typer.Option(help="Query embedder; default: the store's own backend.")] = None,
    embeddings_url: Annotated[str | None, typer.Option(help="Base URL for an openai:MODEL embedder.")] = None,
) -> None:
    """Serve the store's read-only memory tools over MCP."""
    from fae.mcp.transports import serve as serve_mcp
    from fae.memory.reflection_store import read_manifest
    from fae.memory.server import build_memory_mcp

    read_manifest(store)  # a missing or too-new store is reported now, not at the first call
    backend = _embedder(embedder, embeddings_url)
    server = build_memory_mcp(store, embedder=backend)
    serve_mcp(
        server,
        transport,
        host=host,
        port=port,
        announce=lambda where: err.print(f"memory MCP server on {where} over {store}"),
    )


@app.command()
@_errors
def show(
    store: StoreOption,
    kind: Annotated[Kind, typer.Option(help="Which reflections to list.")] = Kind.all,
    limit: Annotated[int, typer.Option(help="At most this many rows of each kind (newest last).")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="JSON lines instead of tables.")] = False,
) -> None:
    """Print the store's manifest, counts and reflections."""
    memory = _open(store)
    stats = memory.stats()
    if as_json:
        _print_json({"stats": stats})
    else:
        out.print(
            f"{store}: format {stats['format_version']}, embedding {stats['embedding']['name']} "
            f"({stats['embedding']['dimension']}-d), index {stats['index']}; "
            f"{stats['micro']} micro, {stats['macro']} macro",
        )
    if kind in (Kind.micro, Kind.all):
        rows = memory.micro()[-limit:]
        if as_json:
            for row in rows:
                _print_json({"micro": msgspec.to_builtins(row)})
        else:
            table = Table(title="micro reflections")
            for column in ("resource", "operation", "tip", "success", "task", "created_at"):
                table.add_column(column, overflow="fold")
            for row in rows:
                table.add_row(row.resource, row.operation, row.tip, str(row.success), row.task_id, row.created_at)
            out.print(table)
    if kind in (Kind.macro, Kind.all):
        rows = memory.macro()[-limit:]
        if as_json:
            for row in rows:
                _print_json({"macro": msgspec.to_builtins(row)})
        else:
            table = Table(title="macro reflections")
            for column in ("summary", "heuristic", "success", "task", "created_at"):
                table.add_column(column, overflow="fold")
            for row in rows:
                table.add_row(row.macro_summary, row.heuristic, str(row.success), row.task_id, row.created_at)
            out.print(table)


@app.command()
@_errors
def search(
    store: StoreOption,
    query: Annotated[str | None, typer.Argument(help="Text to find strategies for (macro search).")] = None,
    resource: Annotated[str | None, typer.Option(help="Resource type for micro tips.")] = None,
    operation: Annotated[str | None, typer.Option(help="create, search, read, update or delete.")] = None,
    k: Annotated[int, typer.Option("-k", min=1, max=50, help="How many results.")] = 3,
    embedder: Annotated[str | None, typer.Option(help="Query embedder; default: the store's own backend.")] = None,
    embeddings_url: Annotated[str | None, typer.Option(help="Base URL for an openai:MODEL embedder.")] = None,
) -> None:
    """Search the store as the MCP tools do: macro by meaning, or micro tips by exact match."""
    memory = _open(store, embedder, embeddings_url)
    if query:
        for hit in memory.search_macro(query, k):
            _print_json(hit.as_dict())
        return
    if not (resource and operation):
        raise FaeError("give a QUERY, or both --resource and --operation")
    for tip in memory.micro_tips(resource, operation, k):
        _print_json(msgspec.to_builtins(tip))


@app.command()
@_errors
def recall(
    retrieval_set: Annotated[Path, typer.Argument(help="A retrieval set (YAML: reflections and queries).")],
    embedder: Annotated[list[str], typer.Option(help="Backend(s) to measure.")] = ["hashed-bow", "static"],
    embeddings_url: Annotated[str | None, typer.Option(help="Base URL for openai:MODEL embedders.")] = None,
    k: Annotated[int, typer.Option("-k", min=1, help="Cut-off.")] = 3,
    show_misses: Annotated[bool, typer.Option(help="List the queries that missed.")] = False,
) -> None:
    """Measure retrieval quality (recall@k) of embedding backends on a retrieval set."""
    from fae.memory.embeddings import embedder_from_spec
    from fae.memory.quality import recall_at_k

    table = Table(title=f"recall@{k} on {retrieval_set}")
    for column in ("embedder", "dim", "index", f"recall@{k}", f"hit@{k}", "queries"):
        table.add_column(column)
    for spec in embedder:
        result = recall_at_k(embedder_from_spec(spec, base_url=embeddings_url), retrieval_set, k)
        table.add_row(
            result.embedder,
            str(result.dimension),
            result.index,
            f"{result.recall:.3f}",
            f"{result.hit_rate:.3f}",
            str(result.queries),
        )
        if show_misses:
            for query, expected, found in result.misses:
                err.print(f"{result.embedder}: {query!r} expected {expected}, got {found}")
    out.print(table)
