"""Gangplank: an event-sourced gang scheduler."""
