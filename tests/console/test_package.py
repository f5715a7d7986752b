"""The console's files ship in the package (pyproject's package data), so a wheel serves /ui."""
from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "service" / "console"


def test_every_console_file_is_package_data():
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["service.console"]
    files = [p.relative_to(STATIC).as_posix() for p in (STATIC / "static").rglob("*") if p.is_file()]
    assert len(files) >= 10 and "static/shell.html" in files and "static/views/state.js" in files
    missing = [f for f in files if not any(fnmatch.fnmatchcase(f, g) and f.count("/") == g.count("/") for g in globs)]
    assert missing == [], f"add these to [tool.setuptools.package-data] in pyproject.toml: {missing}"
