"""fae.curate: the soft (LLM) validator that checks the deterministic one, for curating tasks. See docs/curate.md."""
