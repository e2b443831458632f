"""The study layer: analyses computed from the log alone, `fae stats` tables and the `fae report` page."""
