"""The run explorer: `fae view LOG` serves the report with every cell linked to its runs, and a page per run
(timeline, FHIR state diff, verdicts and why), each built from the log when asked for."""
