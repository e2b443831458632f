"""A command stopped by SIGINT or SIGTERM says so in one line and exits 128 + the signal, wherever it was.

The signals are real (sent to this process by a timer thread); the command is a guarded function that
runs a real DuckDB query long enough to be stopped inside it. DuckDB then raises an error of its own, not
KeyboardInterrupt, which is what the guard must still recognise as a stop.
"""

from __future__ import annotations

import os
import signal
import threading

import duckdb
import pytest
import typer

from fae.cli.guard import user_errors
from fae.errors import StoreError


@pytest.fixture(autouse=True)
def default_signals():
    """The handlers a fresh ``fae`` process starts with; a library loaded by an earlier test in this worker
    (Ray installs its own SIGTERM handler) would otherwise be found, and rightly left in place, by the guard."""
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


@pytest.fixture
def numbers():
    con = duckdb.connect()
    con.execute("SET threads = 1")
    con.execute("CREATE TABLE numbers AS SELECT range AS i FROM range(2000000)")
    yield con
    con.close()


def _stopped_inside_a_query(con, signum: int, wrap: bool = False) -> list[BaseException]:
    """A guarded command whose query is stopped by ``signum``; returns what the query raised."""
    raised: list[BaseException] = []

    @user_errors(stopped="nothing was written")
    def command() -> None:
        threading.Timer(0.5, os.kill, (os.getpid(), signum)).start()
        try:  # minutes of work unless stopped
            con.execute("SELECT sum(hash(a.i + b.range)) FROM numbers a, range(100000) b").fetchall()
        except BaseException as exc:
            raised.append(exc)
            if wrap:  # as the store wraps a failed query: the signal is now two layers down
                raise StoreError(f"cannot read the log: {exc}") from None
            raise

    assert threading.current_thread() is threading.main_thread(), "signal handlers need the main thread"
    with pytest.raises(typer.Exit) as stopped:
        command()
    assert stopped.value.exit_code == 128 + signum
    return raised


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_inside_a_duckdb_query_is_a_stop(numbers, signum, capsys):
    raised = _stopped_inside_a_query(numbers, signum)
    assert raised and not isinstance(raised[0], KeyboardInterrupt), (
        f"DuckDB raised {raised!r}: the query was not stopped inside DuckDB, so this test proves less"
    )
    err = capsys.readouterr().err
    assert f"stopped by {signal.Signals(signum).name}; nothing was written" in err, err
    assert "error:" not in err and "Traceback" not in err


def test_a_stop_wrapped_as_a_store_error_is_still_a_stop(numbers, capsys):
    _stopped_inside_a_query(numbers, signal.SIGINT, wrap=True)
    err = capsys.readouterr().err
    assert "stopped by SIGINT" in err and "error:" not in err, err


def test_the_handlers_are_given_back_and_an_ignored_sigint_stays_ignored():
    seen = {}

    @user_errors
    def command() -> None:
        seen["int"], seen["term"] = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)

    command()
    assert seen["int"] is not signal.default_int_handler and seen["term"] is not signal.SIG_DFL
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a background job's SIGINT
    try:
        command()
        assert seen["int"] is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)


def test_a_mistake_is_still_one_error_line(capsys):
    @user_errors(stopped="never shown")
    def command() -> None:
        raise StoreError("no log at /nowhere")

    with pytest.raises(typer.Exit) as failed:
        command()
    assert failed.value.exit_code == 1
    err = capsys.readouterr().err
    assert "error: no log at /nowhere" in err and "stopped" not in err
