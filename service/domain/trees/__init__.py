"""Composite pod groups: the tree routine."""
