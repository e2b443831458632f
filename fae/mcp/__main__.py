"""``python -m fae.mcp``: the ``fae mcp`` commands without the rest of the CLI."""

from fae.mcp.cli import app

app(prog_name="fae-mcp")
