"""The harness: wires proxy, FHIR server, MCP server, agents and the log into recorded runs."""
