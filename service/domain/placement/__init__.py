"""Placing one pod group: node and domain scores, the strategy seam, topology domains, the routine, explanations."""
