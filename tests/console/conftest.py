"""Fixtures of the browser tests (tests/console/support.py): one recorded server, a tampered copy of
its store, a server with tokens, and one headless Chromium for the module."""
from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.console import support


def _need_browser() -> None:
    missing = [p for p in (support.CHROMIUM, support.CHROMEDRIVER) if not shutil.which(p) and not os.path.exists(p)]
    if missing:
        pytest.fail(f"the browser tests need Debian's chromium and chromium-driver ({', '.join(missing)} missing): "
                    "./scripts/test installs them")


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The golden scenario recorded by a real `gangplank serve` that signs checkpoints; a second
    server on a copy of its store with one event altered; a third with tokens."""
    workdir = tmp_path_factory.mktemp("console")
    key = support.keygen(workdir)
    tokens = workdir / "tokens.json"
    tokens.write_text(json.dumps({"auditor-secret": {"role": "auditor"}, "admin-secret": {"role": "admin"},
                                  "submitter-secret": {"role": "submitter", "namespaces": ["team-a"]}}))
    # started side by side: the recorded one, the one with tokens
    server = support.spawn(workdir / "store.db", workdir, signing_key=key, extra_env={"GANGPLANK_CHECKPOINT_EVENTS": "50"})
    guarded = support.spawn(workdir / "guarded.db", workdir, tokens=tokens)
    servers = [server, guarded]
    try:
        support.started(server)
        support.started(guarded)
        statuses = support.record(server.base)
        tampered = support.spawn(support.tampered_copy(server.database, workdir / "tampered.db", 40), workdir)
        servers.append(tampered)
        support.record(guarded.base, {"Authorization": "Bearer admin-secret"})
        support.started(tampered)
        yield {"server": server, "tampered": tampered, "guarded": guarded, "statuses": statuses, "workdir": workdir}
    finally:
        for s in servers:
            if s.process.poll() is None:
                s.process.terminate()
        for s in servers:
            s.stop()
        for s in servers:  # no answer of any server was a 5xx or a traceback
            text = s.log.read_text() if s.log else ""
            assert "Traceback" not in text and '"status": 5' not in text, text[-3000:]


@pytest.fixture(scope="session")
def browser(site: dict[str, Any]) -> Iterator[support.Browser]:
    _need_browser()
    driver = support.chrome()
    driver.set_page_load_timeout(30)
    hosts = {s.base.split("//", 1)[1] for key, s in site.items() if isinstance(s, support.Server)}
    try:
        yield support.Browser(driver, hosts)
    finally:
        driver.quit()


@pytest.fixture
def page(browser: support.Browser, site: dict[str, Any]) -> Iterator[Callable[..., Any]]:
    """`page(path, server="server")`: open a console URL, wait for its view; the logs are checked
    when the test ends (and on every later call)."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver = browser.driver

    def open_(path: str, server: str = "server") -> Any:
        browser.check()
        driver.get(site[server].base + path)
        return ready()

    def ready() -> Any:
        WebDriverWait(driver, 15).until(lambda d: d.execute_script(
            "const m = document.getElementById('main');"
            "return !!m && !!m.querySelector('h1') && !m.querySelector(':scope > .loading');"))
        time.sleep(0.05)
        return driver

    open_.ready = ready  # type: ignore[attr-defined]
    browser.check()
    yield open_
    browser.check()
    driver.execute_script("try { sessionStorage.clear(); } catch (e) {}")
