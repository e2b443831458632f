"""fae.memory: the Reflexion long-term memory — a versioned store, embedding backends, an MCP server.

Micro reflections are tips for one (resource, operation) pair, found by exact
match; macro reflections are task strategies, found by semantic search over
their embeddings. See docs/memory.md.
"""
