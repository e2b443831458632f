"""fae.judge"""
