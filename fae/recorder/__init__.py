"""fae.recorder"""
