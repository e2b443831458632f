"""fae.agents"""
