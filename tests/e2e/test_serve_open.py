"""`gangplank serve --host 0.0.0.0` without tokens says that it listens on loopback only (the API is
open), on stdout before its listening line, never silently."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.e2e.test_serve import ROOT, _free_port


def test_an_open_api_asked_to_listen_everywhere_says_it_listens_on_loopback(tmp_path: Path) -> None:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "service", "serve", "--host", "0.0.0.0", "--port", str(port),
                             "--database-url", f"sqlite+aiosqlite:///{tmp_path / 'a.db'}"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    try:
        assert proc.stdout is not None
        warning, listening = proc.stdout.readline(), proc.stdout.readline()
        assert warning.startswith("warning: no access tokens") and "127.0.0.1 only, not on 0.0.0.0" in warning
        assert listening.startswith(f"listening on http://127.0.0.1:{port}")
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
