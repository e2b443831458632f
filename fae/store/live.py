"""Reading a log while another process records into it.

DuckDB lets no second process open a file that one process writes, not even
read-only. So the recording process serves read queries over HTTP on
127.0.0.1, each on its own cursor (a consistent snapshot), and advertises the
port and a per-run token in ``<log>.live.json`` (mode 0600). Readers try the
file first and fall back to the live endpoint. Either way a query is checked and
run by ``fae.store.sandbox`` on a locked-down connection; live ones within a budget.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import threading
from collections.abc import Sequence
from datetime import date, datetime
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from uuid import UUID

import duckdb
import httpx

from fae.errors import StoreError
from fae.store.bodies import body_of
from fae.store.files import write_private
from fae.store.log import EventLog
from fae.store.sandbox import Budget, run_query


def live_file(log_path: str | Path) -> Path:
    path = Path(log_path)
    return path.with_name(path.name + ".live.json")


def _jsonable(value: Any) -> Any:
    if isinstance(value, (datetime, date)):
        return {"$t": "datetime", "v": value.isoformat()}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$t": "bytes", "v": bytes(value).hex()}
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


def _restore(value: Any) -> Any:
    if isinstance(value, dict):
        if value.get("$t") == "datetime":
            return datetime.fromisoformat(value["v"])
        if value.get("$t") == "bytes":
            return bytes.fromhex(value["v"])
        return {k: _restore(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_restore(v) for v in value]
    return value


_MAX_REQUEST = 1024 * 1024


def _parse_request(body: bytes) -> tuple[str, list[Any] | None]:
    """The SQL and parameters of a live query request; StoreError for anything malformed."""
    try:
        request = json.loads(body or b"{}")
    except (ValueError, UnicodeDecodeError):
        raise StoreError("bad request: the body is not JSON") from None
    if not isinstance(request, dict):
        raise StoreError("bad request: the body must be a JSON object with 'sql'")
    sql, params = request.get("sql"), request.get("params")
    if not isinstance(sql, str) or not sql.strip():
        raise StoreError("bad request: 'sql' must be a non-empty string")
    if params is not None and not isinstance(params, list):
        raise StoreError("bad request: 'params' must be a list")
    return sql, params or None


class LiveQueryServer:
    """Serves read queries on the recording process's open log, sandboxed and within a budget.

    The log's connection was locked down as it opened (``fae.store.opening``), with the budget's memory limit
    among its settings (``EventLog(path, settings=budget.settings)``): a locked connection takes no new one."""

    def __init__(self, log: EventLog, budget: Budget | None = None, *, concurrent: int = 2):
        self.log = log
        self.budget = budget or Budget()
        self.token = secrets.token_hex(16)
        self.path = live_file(log.path)
        self._slots = threading.BoundedSemaphore(concurrent)
        server_ref = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                given = self.headers.get("x-fae-token") or ""
                if not hmac.compare_digest(given.encode(), server_ref.token.encode()):
                    self._send(403, {"error": "bad token"})
                    return
                try:
                    length = int(self.headers.get("content-length") or 0)
                except ValueError:
                    self._send(400, {"error": "bad request: content-length is not a number"})
                    return
                if length < 0 or length > _MAX_REQUEST:
                    self.close_connection = True
                    self._send(400, {"error": f"bad request: the body must be 0 to {_MAX_REQUEST} bytes"})
                    return
                try:
                    sql, params = _parse_request(self.rfile.read(length))
                    columns, rows = server_ref.run(sql, params)
                    self._send(200, {"columns": columns, "rows": _jsonable(rows)})
                except StoreError as exc:
                    self._send(400, {"error": str(exc)})

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                body = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fae-live-query", daemon=True)

    def run(self, sql: str, params: list[Any] | None = None) -> tuple[list[str], list[tuple]]:
        """One sandboxed query on its own cursor, at most ``concurrent`` at a time."""
        if not self._slots.acquire(timeout=self.budget.time_s):
            raise StoreError("the live endpoint is busy with other queries; retry")
        try:
            cursor = self.log.cursor()
            try:
                return run_query(cursor, sql, params, self.budget)
            finally:
                cursor.close()
        finally:
            self._slots.release()

    def __enter__(self) -> LiveQueryServer:
        self._thread.start()
        info = {"pid": os.getpid(), "port": self._server.server_address[1], "token": self.token}
        # a stale file from a killed recording (or a planted link) is removed, never followed or reused
        try:
            write_private(self.path, json.dumps(info).encode())
        except StoreError:
            self._server.shutdown()
            self._server.server_close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        self._server.shutdown()
        self._server.server_close()


class LogReader:
    """Read queries on a log, whether or not a recording holds it open."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._log: EventLog | None = None
        self._live: dict[str, Any] | None = None
        if not self.path.exists():
            raise StoreError(f"no log at {self.path}")
        try:
            self._log = EventLog(self.path, read_only=True)
        except StoreError as exc:
            if "open in another process" not in str(exc):
                raise
            self._live = self._live_info()

    def _live_info(self) -> dict[str, Any]:
        info_path = live_file(self.path)
        try:
            info = json.loads(info_path.read_text())
        except (OSError, ValueError):
            raise StoreError(
                f"log {self.path} is open in another process that offers no live queries; wait for it to finish"
            ) from None
        return info

    @property
    def live(self) -> bool:
        return self._live is not None

    @property
    def connection(self) -> duckdb.DuckDBPyConnection | None:
        """The locked-down connection to the log file, for a pass that streams the whole log
        (``fae.replay.stream``); None while a recording serves the log live (then only ``query`` reads it)."""
        return self._log.con if self._log is not None else None

    def query(self, sql: str, params: Sequence[Any] | None = None) -> tuple[list[str], list[tuple]]:
        if self._log is not None:
            cursor = self._log.cursor()
            try:
                return run_query(cursor, sql, params, None)
            finally:
                cursor.close()
        assert self._live is not None
        try:
            reply = httpx.post(
                f"http://127.0.0.1:{self._live['port']}/sql",
                json={"sql": sql, "params": list(params or [])},
                headers={"x-fae-token": self._live["token"]},
                timeout=120,
            )
        except httpx.HTTPError:
            raise StoreError(
                f"log {self.path} is locked by process {self._live.get('pid')}, which does not answer; "
                f"if it died, remove {live_file(self.path)} and retry"
            ) from None
        try:
            payload = reply.json()
        except ValueError:
            raise StoreError(
                f"the live endpoint of {self.path} answered HTTP {reply.status_code} without JSON"
            ) from None
        if reply.status_code != 200:
            raise StoreError(str(payload.get("error", f"live query failed with HTTP {reply.status_code}")))
        return payload["columns"], [tuple(_restore(row)) for row in payload["rows"]]

    def blob(self, hash_: str) -> bytes | None:
        _, rows = self.query("SELECT data, external FROM blobs WHERE hash = ? LIMIT 1", [hash_])
        return body_of(self.path, hash_, *rows[0]) if rows else None

    def close(self) -> None:
        if self._log is not None:
            self._log.close()

    def __enter__(self) -> LogReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
