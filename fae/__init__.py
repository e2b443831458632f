"""fae: FHIR Agent Eval."""
