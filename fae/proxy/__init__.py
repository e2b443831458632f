"""fae.proxy"""
