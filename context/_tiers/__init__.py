"""The cascade's tiers: the tier protocol and registry, the layer book and projection, one
module per tier.
"""
