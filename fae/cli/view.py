"""`fae view LOG`: the run explorer on 127.0.0.1 (fae.report.explorer.server says why a server)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fae.cli.console import screen
from fae.cli.progress import steps
from fae.cli.study import ExperimentOption, PairOption, PhaseOption, PriceOption, PricesOption, _options
from fae.errors import FaeError


def view(
    log: Annotated[Path, typer.Argument(help="The DuckDB event log.", envvar="FAE_LOG")] = Path("fae.duckdb"),
    port: Annotated[int, typer.Option(help="The port on 127.0.0.1 (0: a free one).")] = 8765,
    experiment: ExperimentOption = None,
    phase: PhaseOption = None,
    price: PriceOption = [],
    prices_file: PricesOption = [],
    pair: PairOption = [],
) -> None:
    """Serve the report with every cell linked to its runs, and a page per run (timeline, FHIR state diff,
    verdicts and why), on http://127.0.0.1:PORT/ until Ctrl-C."""
    from fae.report.commands import report_page
    from fae.report.explorer.server import Explorer, port_of, serve
    from fae.store.live import LogReader

    if not log.exists():
        raise FaeError(f"no log at {log}")
    prices, pairs = _options(price, prices_file, pair)
    with steps("view") as on_step:
        index = report_page(log, experiment=experiment, phase=phase, prices=prices, pairs=pairs, on_step=on_step)
    try:
        server = serve(Explorer(LogReader(log), index, log.name), port=port)
    except OSError as exc:
        raise FaeError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from None
    screen().print(f"serving {log} on http://127.0.0.1:{port_of(server)}/ (Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
