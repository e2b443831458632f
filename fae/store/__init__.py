"""fae.store"""
