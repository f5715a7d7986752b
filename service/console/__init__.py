"""The audit console's files (static/), shipped in the package and served at /ui by
service/api/console.py (console.md)."""
