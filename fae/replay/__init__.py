"""fae.replay"""
