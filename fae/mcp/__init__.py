"""fae.mcp"""
