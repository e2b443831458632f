"""``python -m fae.cli``: the fae command line."""

from fae.cli.main import main

main()
