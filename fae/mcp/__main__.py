"""``python -m fae.mcp``: the ``fae mcp`` commands without the rest of the CLI."""

from fae.cli.mcp import app

app(prog_name="fae-mcp")
