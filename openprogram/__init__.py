"""openprogram"""
