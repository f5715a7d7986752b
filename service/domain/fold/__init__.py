"""Folding recorded events into the state: evolve, and the fast fold of long runs."""
