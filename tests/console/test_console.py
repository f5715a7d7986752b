"""The audit console in a real browser (console.md): headless Chromium against a real `gangplank
serve` that recorded the golden scenario (a preemption, node loss, a tree, shared devices, a NoExecute
taint, a cordon, signed checkpoints), a tampered copy of its store, and a server with tokens. The
tests read what a person reads (text, links, the page after clicks and keys); every page is checked
for script and console errors and for requests to another host (conftest.page)."""
from __future__ import annotations

import re
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

from tests.console.support import CLUSTER, ROOT

C = f"/ui/clusters/{CLUSTER}"


def text(driver: Any) -> str:
    return str(driver.find_element(By.ID, "main").text)


def links(driver: Any) -> dict[str, str]:
    return {a.text: a.get_attribute("pathname") + (a.get_attribute("search") or "")
            for a in driver.find_elements(By.CSS_SELECTOR, "#main a")}


def wait_text(driver: Any, needle: str, timeout: float = 15) -> str:
    WebDriverWait(driver, timeout).until(lambda d: needle in text(d))
    return text(driver)


def api(site: dict[str, Any], path: str, server: str = "server") -> Any:
    return httpx.get(site[server].base + f"/v1/clusters/{CLUSTER}{path}", timeout=30).json()


_EXPLAINED: dict[tuple[str, str], list[str]] = {}


def explain_lines(namespace: str, name: str, site: dict[str, Any]) -> list[str]:
    """`gangplank audit explain` of the workload, as printed (each line without its time and position)."""
    if (namespace, name) in _EXPLAINED:
        return _EXPLAINED[namespace, name]
    done = subprocess.run([sys.executable, "-m", "service", "audit", "explain", "--cluster", CLUSTER,
                           f"{namespace}/{name}", "--database-url",
                           f"sqlite+aiosqlite:///{site['server'].database}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = [re.sub(r"^\S+ \[#\d+\] ", "", line).strip() for line in done.stdout.splitlines() if line.strip()]
    _EXPLAINED[namespace, name] = lines
    return lines


def test_the_banner_names_the_console(site):
    banner = site["server"].banner
    assert banner.startswith("listening on http://127.0.0.1:") and banner.rstrip().endswith("/ui")
    assert "API docs at /schema" in banner


def test_clusters_link_to_their_timelines_and_back_works(page, site):
    driver = page("/ui")
    last = api(site, "/events?limit=1")["lastPosition"]
    body = text(driver)
    assert CLUSTER in body and f"#{last}" in body and "UTC" in body
    driver.find_element(By.LINK_TEXT, CLUSTER).click()
    page.ready()
    assert driver.current_url.endswith(C) and f"Timeline of {CLUSTER}" in text(driver)
    driver.back()
    page.ready()
    assert driver.current_url.endswith("/ui") and "Clusters" in text(driver)
    driver.forward()
    page.ready()
    assert f"Timeline of {CLUSTER}" in text(driver)


def test_the_timeline_reads_events_in_the_words_of_audit_explain(page, site):
    driver = page(C)
    events = api(site, "/events?limit=1000")["events"]
    body = wait_text(driver, "The cluster over positions")
    newest = events[-1]
    row = driver.find_element(By.ID, f"e-{newest['position']}").text
    assert f"#{newest['position']}" in row and newest["type"] in row
    # a victim's row says who preempted it, in audit explain's words
    victim = next(e for e in events if e["type"] == "PodGroupPreempted")
    driver.get(site["server"].base + f"{C}?kind=preemptions")
    page.ready()
    rows = driver.find_elements(By.CSS_SELECTOR, "table.timeline tbody tr")
    assert rows and all("PodGroupPreempted" in r.text for r in rows)
    row = driver.find_element(By.ID, f"e-{victim['position']}").text
    d = victim["data"]
    story = explain_lines(d["namespace"], d["workload"], site)
    assert any(line in row for line in story if line.startswith(f"Group {d['podGroup']} preempted by")), (row, story)
    assert "Status" not in body


def test_filters_by_namespace_and_workload_and_loss(page, site):
    driver = page(f"{C}?kind=losses")
    rows = driver.find_elements(By.CSS_SELECTOR, "table.timeline tbody tr")
    assert rows and all("PodsLost" in r.text and "lost" in r.text for r in rows)
    driver.get(site["server"].base + f"{C}?ns=team-b&name=urgent-0")
    page.ready()
    rows = driver.find_elements(By.CSS_SELECTOR, "table.timeline tbody tr")
    assert rows and all("team-b/urgent-0" in r.text for r in rows)
    # the form writes the URL; Clear goes back to every event
    driver.find_element(By.ID, "kind").send_keys("decisions")
    driver.find_element(By.ID, "ns").clear()
    driver.find_element(By.ID, "name").clear()
    driver.find_element(By.CSS_SELECTOR, "form.filters button[type=submit]").click()
    page.ready()
    assert "kind=decisions" in driver.current_url and "ns=" not in driver.current_url
    types = [r.find_elements(By.CSS_SELECTOR, "td")[2].text
             for r in driver.find_elements(By.CSS_SELECTOR, "table.timeline tbody tr")]
    assert types and not {"WorkloadSubmitted", "NodeUpserted", "WorkloadDeleted", "NodeRemoved"} & set(types)
    driver.find_element(By.LINK_TEXT, "Clear").click()
    page.ready()
    assert driver.current_url.endswith(C)


def test_jump_to_a_position_and_page_through(page, site):
    driver = page(C)
    field = driver.find_element(By.ID, "at")
    field.send_keys("12", Keys.ENTER)
    page.ready()
    assert driver.current_url.endswith(f"{C}?at=12")
    current = driver.find_element(By.CSS_SELECTOR, "tr.current")
    assert current.get_attribute("id") == "e-12"
    driver.find_element(By.LINK_TEXT, "Newest").click()
    page.ready()
    last = api(site, "/events?limit=1")["lastPosition"]
    assert driver.find_elements(By.CSS_SELECTOR, "table.timeline tbody tr")[0].get_attribute("id") == f"e-{last}"
    driver.find_element(By.LINK_TEXT, "Older").click()
    page.ready()
    assert "before=" in driver.current_url
    first = driver.find_elements(By.CSS_SELECTOR, "table.timeline tbody tr")[0].get_attribute("id")
    assert first == f"e-{last - 50}"
    driver.get(site["server"].base + f"{C}?at={last + 100}")
    page.ready()
    assert f"Position {last + 100} is not in this cluster's record" in text(driver)


def test_the_chart_scrubs_with_the_keyboard(page, site):
    driver = page(C)
    wait_text(driver, "The cluster over positions")
    readout = driver.find_element(By.ID, "chart-readout")
    last = api(site, "/events?limit=1")["lastPosition"]
    assert readout.text.startswith(f"#{last} ")
    slider = driver.find_element(By.ID, "scrub")
    slider.send_keys(Keys.HOME)
    assert readout.text.startswith("#0 ")
    slider.send_keys(Keys.ARROW_RIGHT, Keys.ARROW_RIGHT)
    assert readout.text.startswith("#2 ")
    series = api(site, "/series?points=400")["points"]
    assert f"pods placed {series[2]['placedPods']}" in readout.text
    readout.find_element(By.LINK_TEXT, "state at #2").click()
    page.ready()
    assert driver.current_url.endswith(f"{C}/state/2")


def test_new_events_appear_on_top_without_moving_the_rows_in_view(page, site):
    driver = page(C)
    wait_text(driver, "The cluster over positions")
    rows = driver.find_elements(By.CSS_SELECTOR, "table.timeline tbody tr")
    watched = rows[10]
    driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", watched)
    before = driver.execute_script("return arguments[0].getBoundingClientRect().top;", watched)
    answer = httpx.put(site["server"].base + f"/v1/clusters/{CLUSTER}/nodes/live-1",
                       json={"labels": {"example.com/rack": "r9"}, "allocatable": {"cpu": "2", "pods": "10"}}, timeout=30)
    assert answer.status_code == 200
    WebDriverWait(driver, 30).until(lambda d: "Node live-1 was added or replaced" in text(d))
    top = driver.find_elements(By.CSS_SELECTOR, "table.timeline tbody tr")[0]
    assert "Node live-1 was added or replaced" in top.text
    after = driver.execute_script("return arguments[0].getBoundingClientRect().top;", watched)
    assert abs(after - before) <= 2, (before, after)
    assert "1 new event since the page opened" in text(driver)


def test_one_event_with_its_cause_its_decisions_and_the_states_around_it(page, site):
    events = api(site, "/events?limit=1000")["events"]
    decision = next(e for e in events if e["type"] == "PodGroupPreempted")
    cause = decision["metadata"]["causationPosition"]
    driver = page(f"{C}/events/{decision['position']}")
    body = text(driver)
    assert f"Event #{decision['position']}: PodGroupPreempted" in body
    assert decision["hash"] in body and decision["prevHash"] in body and "preempted by" in body
    assert "The input that caused it" in body and f"#{cause} WorkloadSubmitted" in body
    driver.find_element(By.PARTIAL_LINK_TEXT, f"#{cause} WorkloadSubmitted").click()
    page.ready()
    body = text(driver)
    assert "The decisions it caused" in body and f"#{decision['position']} PodGroupPreempted" in body
    driver.find_element(By.PARTIAL_LINK_TEXT, "state just after").click()
    page.ready()
    assert driver.current_url.endswith(f"{C}/state/{cause}") and f"after event #{cause}" in text(driver)
    driver.back()
    page.ready()
    assert driver.current_url.endswith(f"{C}/events/{cause}")
    page(f"{C}/events/999999")
    assert "There is no event #999999" in text(driver)


def test_the_state_groups_nodes_by_topology_and_marks_cordons_and_taints(page, site):
    events = api(site, "/events?limit=1000")["events"]
    # while the tree (topology example.com/zone) is live, beside the gangs (example.com/rack)
    at = next(e["position"] for e in events if e["type"] == "WorkloadDeleted" and e["data"]["name"] == "tree") - 1
    driver = page(f"{C}/state/{at}")
    body = text(driver)
    assert "Grouped by example.com/zone, then example.com/rack" in body
    assert "Pending groups" in body and "nodes are available" in body  # explanations, rendered by the service
    zone = next(s for s in driver.find_elements(By.CSS_SELECTOR, "details.domain > summary")
                if s.text.startswith("example.com/zone=b"))
    zone.click()
    rack = WebDriverWait(driver, 5).until(lambda d: next(
        (s for s in d.find_elements(By.CSS_SELECTOR, "details.domain > summary")
         if s.text.startswith("example.com/rack=r4")), None))
    rack.send_keys(Keys.ENTER)  # a summary is reachable and opened with the keyboard
    card = WebDriverWait(driver, 5).until(lambda d: d.find_element(By.ID, "node-r4-n4"))
    assert "tainted maintenance=now:NoExecute" in card.text
    assert "cordoned" in driver.find_element(By.ID, "node-r4-n3").text
    assert re.search(r"cpu\s+\S+ of 8 \(\d+%\)", card.text), card.text
    nodes = {n["name"]: n for n in api(site, f"/state?at={at}")["nodes"]}
    placed = [n for n in nodes.values() if n["pods"] and n["labels"].get("example.com/rack") == "r4"]
    assert placed
    for n in placed:
        shown = driver.find_element(By.ID, f"node-{n['name']}").text
        assert all(f"{p['namespace']}/{p['workload']}/{p['pod']}" in shown for p in n["pods"][:8]), shown


def test_stepping_from_event_to_event_with_keys_and_links(page, site):
    driver = page(f"{C}/state/30")
    driver.find_element(By.TAG_NAME, "h1").send_keys(Keys.ARROW_RIGHT)
    page.ready()
    WebDriverWait(driver, 10).until(lambda d: d.current_url.endswith(f"{C}/state/31"))
    page.ready()
    assert "after event #31" in text(driver)
    driver.find_element(By.PARTIAL_LINK_TEXT, "← after #30").click()
    page.ready()
    assert "after event #30" in text(driver)
    field = driver.find_element(By.ID, "goto")
    field.clear()
    field.send_keys("7", Keys.ENTER)
    page.ready()
    assert driver.current_url.endswith(f"{C}/state/7") and "after event #7" in text(driver)
    page(f"{C}/state/99999")
    assert "past the head" in text(driver)


def test_a_tree_reads_as_a_tree_with_its_story(page, site):
    driver = page(f"{C}/workloads/team-a/big-tree")
    body = text(driver)
    assert "composite pod group top" in body and "group a" in body and "group b" in body
    tree = driver.find_element(By.CSS_SELECTOR, "ul.tree")
    assert "group a" in tree.find_element(By.CSS_SELECTOR, "ul.children").text  # a child of its CPG
    story = explain_lines("team-a", "big-tree", site)
    items = [li.text for li in driver.find_elements(By.CSS_SELECTOR, "ol.story > li")]
    assert any(story[0] in item for item in items), (story, items)
    first = driver.find_elements(By.CSS_SELECTOR, "ol.story > li")[0]
    position = first.get_attribute("id").removeprefix("h-")
    first.find_element(By.LINK_TEXT, "timeline").click()
    page.ready()
    assert driver.current_url.endswith(f"{C}?at={position}")
    assert driver.find_element(By.CSS_SELECTOR, "tr.current").get_attribute("id") == f"e-{position}"
    driver.back()
    page.ready()
    driver.find_elements(By.CSS_SELECTOR, "ol.story > li")[0].find_element(By.LINK_TEXT, "state").click()
    page.ready()
    assert driver.current_url.endswith(f"{C}/state/{position}")


def test_shared_devices_and_a_preempted_workloads_story(page, site):
    driver = page(f"{C}/workloads/team-a/fabric-job")
    body = text(driver)
    assert re.search(r"claim nic \(shared by PodGroup\): net\.example\.com/r2/nic-\d", body), body
    victim = next(e for e in api(site, "/events?limit=1000")["events"] if e["type"] == "PodGroupPreempted")["data"]
    driver = page(f"{C}/workloads/{victim['namespace']}/{victim['workload']}")
    story = explain_lines(victim["namespace"], victim["workload"], site)  # read once by the timeline's test too
    body = text(driver)
    for line in story:
        assert line.split(" — ")[0][:60] in body, line
    assert "DisruptionTarget=True" in body  # its conditions: it was preempted


def test_names_not_found_are_said_in_words(page, site):
    driver = page(f"{C}/workloads/team-a/never-was")
    assert "Workload team-a/never-was was never submitted to cluster golden" in text(driver)
    assert "Back to the timeline of golden" in links(driver)
    page("/ui/clusters/nobody")
    assert "Cluster nobody has no events" in text(driver)
    page("/ui/clusters/nobody/state/3")
    assert "Cluster nobody has no events" in text(driver)
    page("/ui/nothing/here")
    assert "There is no page at /ui/nothing/here" in text(driver)
    page(f"{C}/events/abc")
    assert "is not a position" in text(driver)


def test_the_verification_shows_chain_checkpoints_and_the_replay_verdict(page, site):
    driver = page(f"{C}/audit")
    body = wait_text(driver, "The hash chain is")  # checked after the view opened: it reads every event
    checkpoints = api(site, "/audit/checkpoints")["items"]
    assert checkpoints and "The hash chain is intact" in body
    assert "signed checkpoint" in body and f"the last at #{checkpoints[-1]['position']}" in body
    assert checkpoints[-1]["keyId"] in body
    driver.find_element(By.ID, "replay").click()
    wait_text(driver, "identical", timeout=60)
    assert "Identical: every decision re-decided byte for byte" in text(driver)


def test_a_tampered_copy_shows_the_first_bad_position_in_red(page, site):
    driver = page(f"{C}/audit", server="tampered")
    body = wait_text(driver, "The hash chain is")
    assert "The hash chain is broken at position #40" in body
    bad = driver.find_element(By.LINK_TEXT, "#40")
    assert driver.execute_script("return getComputedStyle(arguments[0].closest('.notice')).borderColor;", bad) \
        != driver.execute_script("return getComputedStyle(document.body).color;")
    driver.find_element(By.ID, "replay").click()
    wait_text(driver, "First differing position", timeout=60)
    verdict = driver.find_element(By.ID, "replay-result").text
    assert verdict.startswith("broken — Broken: the hash chain does not hold") and "#40" in verdict
    bad.click()
    page.ready()
    assert driver.current_url.endswith(f"{C}/events/40") and "Event #40" in text(driver)


def test_with_tokens_a_page_asks_for_one_and_says_401_and_403(page, site, browser):
    driver = page("/ui", server="guarded")
    assert "A token is needed" in text(driver) and "golden" not in text(driver)
    field = driver.find_element(By.ID, "token")
    field.send_keys("wrong-token", Keys.ENTER)
    page.ready()
    assert "401 Unauthorized" in wait_text(driver, "401")
    driver.find_element(By.ID, "token").send_keys("submitter-secret", Keys.ENTER)
    page.ready()
    driver.get(site["guarded"].base + C)  # the clusters list is open to submitters; the timeline is not
    page.ready()
    if "A token is needed" in text(driver) and "403" not in text(driver):
        driver.find_element(By.ID, "token").send_keys("submitter-secret", Keys.ENTER)
        page.ready()
    assert "403 Forbidden" in wait_text(driver, "403")
    driver.find_element(By.ID, "token").send_keys("auditor-secret", Keys.ENTER)
    page.ready()
    assert f"Timeline of {CLUSTER}" in text(driver)
    stored = driver.execute_script("return sessionStorage.getItem('gangplank.token');")
    assert stored == "auditor-secret"
    assert driver.get_cookies() == [] and "secret" not in driver.current_url
    driver.refresh()  # the tab's session keeps it
    page.ready()
    assert f"Timeline of {CLUSTER}" in text(driver)
    driver.find_element(By.XPATH, "//button[normalize-space()='Forget token']").click()
    page.ready()
    assert "A token is needed" in text(driver)


def test_pages_hold_no_data_and_answer_200_with_or_without_tokens(site):
    for server in ("server", "guarded"):
        answer = httpx.get(site[server].base + f"{C}/state/3", timeout=30)
        assert answer.status_code == 200 and "text/html" in answer.headers["content-type"]
        assert "r1-n1" not in answer.text and "team-a" not in answer.text
        assert "default-src 'self'" in answer.headers["content-security-policy"]


def test_keyboard_dark_scheme_and_1280_by_800(page, site, browser):
    driver = page("/ui")
    reached = []
    for _ in range(8):
        driver.switch_to.active_element.send_keys(Keys.TAB)
        reached.append(driver.switch_to.active_element.text)
        if reached[-1] == CLUSTER:
            break
    assert CLUSTER in reached, reached
    driver.switch_to.active_element.send_keys(Keys.ENTER)
    page.ready()
    assert f"Timeline of {CLUSTER}" in text(driver)
    wide = driver.execute_script("return document.documentElement.scrollWidth;")
    assert wide <= driver.execute_script("return window.innerWidth;"), wide
    light = driver.execute_script("return getComputedStyle(document.body).backgroundColor;")
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    try:
        time.sleep(0.1)
        dark = driver.execute_script("return getComputedStyle(document.body).backgroundColor;")
        assert light != dark and dark.startswith("rgb(") and sum(map(int, re.findall(r"\d+", dark)[:3])) < 150
    finally:
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})


@pytest.mark.parametrize("path", ["/ui/assets/app.js", "/ui/assets/console.css", "/ui/assets/views/state.js"])
def test_the_files_are_the_packages(site, path):
    answer = httpx.get(site["server"].base + path, timeout=30)
    assert answer.status_code == 200 and answer.headers["cache-control"] == "no-cache"
    assert "http://" not in answer.text and "https://" not in answer.text.replace("http://www.w3.org/2000/svg", "")
