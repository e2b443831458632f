"""The study's cost: per run, per configuration and per successful run, against a computation of its own from the
calls the log was built with, and the Pareto front; "no price" and "unknown tokens" are never a cost of zero."""

from __future__ import annotations

import json
import math
import re
from xml.etree import ElementTree

import pytest
from typer.testing import CliRunner

from fae.cli.main import app
from fae.errors import FaeError
from fae.report.figures import draw
from fae.report.prices import SHIPPED, Price, load_prices, parse_price, price_table, shipped_prices
from fae.report.scope import Scope
from fae.report.study import compute_study
from fae.store.log import EventLog
from fae.util.visible import hidden, visible
from tests.report.cost_log import CALLS, HOSTILE, PASSES, Call, build

runner = CliRunner()
SNAPSHOT = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8})$")


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    return build(tmp_path_factory.mktemp("cost") / "cost.duckdb")


def _call_usd(call: Call, prices: dict[str, Price]) -> float | str:
    """A call's cost, or why it has none, worked out apart from the SQL."""
    if call.prompt is None:
        return 0.0 if call.status >= 400 else "unknown"
    assert call.model is not None
    price = prices.get(call.model) or prices.get(SNAPSHOT.sub("", call.model))
    if price is None:
        return f"no price: {call.model}"
    read, write = call.cache_read or 0, call.cache_write or 0
    cached = price.input if price.cached_input is None else price.cached_input
    writing = price.input if price.cache_write is None else price.cache_write
    return (
        (call.prompt - read - write) * price.input
        + read * cached
        + write * writing
        + (call.completion or 0) * price.output
    ) / 1e6


def _expected(prices: dict[str, Price]) -> dict[str, dict]:
    found = {}
    for configuration, calls in CALLS.items():
        costs = [_call_usd(call, prices) for call in calls]
        runs, passes = len(PASSES[configuration]), sum(PASSES[configuration])
        why = sorted({c for c in costs if isinstance(c, str) and c.startswith("no price")})
        unknown = sum(c == "unknown" for c in costs) * runs
        if why or unknown:
            price = "; ".join(why + ([f"unknown tokens: {unknown} calls"] if unknown else []))
            usd = None
        else:
            usd = runs * sum(float(c) for c in costs)
            price = "listed" if calls else "no LLM calls"
        found[configuration] = {
            "runs": runs,
            "successes": passes,
            "success_pct": 100 * passes / runs,
            "usd": usd,
            "usd_per_run": None if usd is None else usd / runs,
            "usd_per_success": None if usd is None or not passes else usd / passes,
            "price": price,
        }
    for row in found.values():  # dominated: another is as cheap and as successful, and better at one
        others = [o for o in found.values() if o is not row and o["usd"] is not None]
        row["pareto"] = (
            None
            if row["usd"] is None
            else not any(
                o["usd_per_run"] <= row["usd_per_run"]
                and o["success_pct"] >= row["success_pct"]
                and (o["usd_per_run"] < row["usd_per_run"] or o["success_pct"] > row["success_pct"])
                for o in others
            )
        )
    return found


def _same(got: dict, want: dict) -> bool:
    return all(
        (got[k] is None and v is None)
        or (isinstance(v, float) and math.isclose(got[k], v, rel_tol=1e-9))
        or got[k] == v
        for k, v in want.items()
    )


def _cost_rows(log, prices):
    with EventLog(log, read_only=True) as opened:
        study = compute_study(opened, Scope(experiment="c"), prices=prices, only={"cost"})
    return study, {r["configuration"]: r for r in study["cost"].dicts()}


def test_cost_per_run_configuration_and_success_against_a_computation_of_its_own(log):
    study, rows = _cost_rows(log, shipped_prices())
    want = _expected(shipped_prices().models)
    assert set(rows) == set(want)
    for configuration, expected in want.items():
        assert _same(rows[configuration], expected), (configuration, rows[configuration], expected)
    # the cases the log was built for, spelled out
    assert rows["scripted"]["usd"] is None and rows["scripted"]["price"] == "no price: scripted:gold"
    assert rows["other-api"]["usd"] is None and rows["other-api"]["price"] == "unknown tokens: 4 calls"
    assert rows["no-usage"]["usd"] is None and rows["silent"]["usd"] == 0.0 == rows["silent"]["usd_per_run"]
    assert rows["flaky"]["usd"] == pytest.approx(4 * (800 * 0.40 + 80 * 1.60) / 1e6)
    assert rows["claude"]["usd"] == pytest.approx(4 * (800 * 3 + 500 * 0.30 + 200 * 3.75 + 100 * 15) / 1e6)
    assert {c for c, r in rows.items() if r["pareto"]} == {HOSTILE, "big", "cheap", "claude", "silent"}
    # waste: dearer than big and less successful; flaky: dearer than the nano configuration, as successful
    assert rows["waste"]["pareto"] is False and rows["flaky"]["pareto"] is False
    with EventLog(log, read_only=True) as opened:  # the SQL under the table runs as it is
        columns, again = opened.query(study["cost"].sql)
    assert columns == study["cost"].columns and len(again) == len(rows)


def test_a_price_file_and_a_price_override_fae_s_table(log, tmp_path):
    prices = tmp_path / "prices.yaml"
    prices.write_text(
        "date: 2026-01-02\nmodels:\n  scripted:gold: {input: 0, output: 0}\n"
        "  gpt-4.1: {input: 3, output: 12, source: a contract}\n"
    )
    table = price_table([prices], dict([parse_price("gpt-4.1-nano=1/2/0.5")]))
    assert table.origin == ("fae's list prices of 2025-08-15", "prices.yaml (2026-01-02)", "--price")
    assert table.models["gpt-4.1-nano"] == Price(1.0, 2.0, 0.5, None, "--price")
    _, rows = _cost_rows(log, table)
    want = _expected(table.models)
    assert all(_same(rows[c], w) for c, w in want.items()), rows
    assert rows["scripted"]["usd"] == 0.0 and rows["scripted"]["price"] == "listed"
    assert rows["big"]["usd"] == pytest.approx(4 * (2000 * 3 + 200 * 12) / 1e6)
    result = runner.invoke(
        app,
        ["stats", "--log", str(log), "-t", "cost", "--json", "--prices", str(prices), "--price", "gpt-4.1-nano=1/2"],
    )
    assert result.exit_code == 0, result.output
    shown = {r["configuration"]: r for r in json.loads(result.output)["cost"]["rows"]}
    assert (
        shown["scripted"]["price"] == "listed"
        and "prices.yaml (2026-01-02)" in json.loads(result.output)["cost"]["note"]
    )


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("date: 2026-01-02\nmodels:\n  m: {input: -1, output: 1}\n", "m.input must be a price of 0 or more"),
        ("date: 2026-01-02\nmodels:\n  m: {input: .nan, output: 1}\n", "m.input must be a price of 0 or more"),
        ("date: 2026-01-02\nmodels:\n  m: {input: 1}\n", "not a price table"),
        ("date: 2026-01-02\nmodels:\n  m: {input: 1, output: 1, currency: EUR}\n", "not a price table"),
        ("models: {}\n", "not a price table"),
        ("date: [\n", "cannot read the price table"),
    ],
)
def test_a_bad_price_file_is_one_line_naming_it(log, tmp_path, text, said):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(FaeError, match=re.escape(said)):
        load_prices(path)
    result = runner.invoke(app, ["stats", "--log", str(log), "--prices", str(path)])
    assert result.exit_code == 1 and said in result.output and len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize("text", ["gpt", "gpt=1", "=1/2", "gpt=a/b", "gpt=1/2/3/4", "gpt=-1/2"])
def test_a_bad_price_is_refused(text):
    with pytest.raises(FaeError, match="MODEL=IN/OUT|price of 0 or more"):
        parse_price(text)
    assert parse_price("org/model=0.5/1.5") == ("org/model", Price(0.5, 1.5, None, None, "--price"))


def test_fae_s_table_is_dated_and_every_entry_names_its_source():
    date, models = load_prices(SHIPPED)
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", date) and len(models) >= 10
    assert all(p.source and p.output >= p.input > 0 for p in models.values()), models
    assert all(p.cached_input is None or p.cached_input < p.input for p in models.values())


def test_the_cost_figure_draws_the_front_and_names_what_has_no_cost(log):
    study, _ = _cost_rows(log, shipped_prices())
    [figure] = draw(study, {}, ("fig-cost",))
    assert figure.name == "fig-cost"
    assert figure.title.endswith("(not drawn, no cost: no-usage, other-api, scripted)"), figure.title
    ElementTree.fromstring(figure.svg)  # well-formed: no control character reached a label
    assert not any(hidden(c) for c in figure.svg)
    texts = re.findall(r"<text\b[^>]*>([^<]*)</text>", figure.svg)
    for configuration in ("cheap", "big", "waste", "claude", "flaky", "silent"):
        assert any(configuration in t for t in texts), (configuration, texts)
    assert any(visible(HOSTILE).replace("&", "&amp;") in t or visible(HOSTILE) in t for t in texts), texts
    assert "scripted" not in " ".join(texts)
