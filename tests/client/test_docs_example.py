"""The builder example of docs/client.md runs as written against a real server, and prints what the
page says it prints."""
from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "client.md"


def _blocks() -> tuple[str, str]:
    text = DOC.read_text()
    section = text.split("## Submitting: derived keys, builders, filtered watches", 1)[1].split("\n## ", 1)[0]
    code = re.findall(r"```python\n(.*?)```", section, re.S)
    printed = re.findall(r"prints\n```\n(.*?)```", section, re.S)
    assert len(code) == 1 and len(printed) == 1
    return code[0], printed[0]


def test_the_builder_example_runs_as_written(server, cluster):
    code, printed = _blocks()
    code = code.replace('"http://127.0.0.1:8000"', repr(server)).replace('cluster="default"', f"cluster={cluster!r}")
    assert repr(server) in code and repr(cluster) in code
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(DOC), "exec"), {})
    assert out.getvalue() == printed
