// /ui/clusters/{cluster}: the timeline. Events newest first, a page at a time, each in the words of
// `audit explain` (the API's ?explain=true); filters, a jump to a position, the chart (/series), and
// new events at the top while the page is open (the long poll of /events?wait=).
import { ApiError, get } from "../api.js";
import { h, heading, link, notFound, notice, plural, urls, utc } from "../dom.js";
import { chart } from "./chart.js";

const PAGE = 50;
const CHUNK = 1000; // events read per request while filtering
const SCAN_MAX = 20000; // events a filtered page reads at most before it says how far it looked
const DECISIONS = new Set(["PodGroupScheduled", "PodsScheduled", "PodGroupUnschedulable", "PodGroupPreempted",
  "PodsLost", "CompositePodGroupScheduled", "CompositePodGroupUnschedulable"]);
const KINDS = {
  all: ["all events", () => true],
  inputs: ["inputs", (t) => !DECISIONS.has(t)],
  decisions: ["decisions", (t) => DECISIONS.has(t)],
  preemptions: ["preemptions", (t) => t === "PodGroupPreempted"],
  losses: ["losses", (t) => t === "PodsLost"],
};

function workloadOf(e) {
  const d = e.data || {};
  const named = ["WorkloadSubmitted", "WorkloadDeleted", "CommandRejected"].includes(e.type);
  const name = named ? d.name : d.workload;
  return typeof d.namespace === "string" && typeof name === "string" ? [d.namespace, name] : null;
}

function filterOf(query) {
  const kind = KINDS[query.get("kind")] ? query.get("kind") : "all";
  return { kind, ns: (query.get("ns") || "").trim(), name: (query.get("name") || "").trim() };
}

function matches(filter, e) {
  if (!KINDS[filter.kind][1](e.type)) return false;
  if (!filter.ns && !filter.name) return true;
  const w = workloadOf(e);
  return !!w && (!filter.ns || w[0] === filter.ns) && (!filter.name || w[1] === filter.name);
}

function row(cluster, e, x, current) {
  const w = x && x.namespace ? [x.namespace, x.workload] : null;
  const about = w ? link(urls.workload(cluster, w[0], w[1]), `${w[0]}/${w[1]}`) : (x && x.about) || "—";
  const lines = (x && x.lines) || [e.type];
  return h("tr", { id: `e-${e.position}`, class: current ? "current" : null },
    h("td", { class: "num" }, link(urls.event(cluster, e.position), `#${e.position}`)),
    h("td", { class: "time" }, utc(e.recordedAt)),
    h("td", {}, h("span", { class: `type ${DECISIONS.has(e.type) ? "decision" : "input"}` }, e.type)),
    h("td", {}, about),
    h("td", { class: "summary" }, lines[0], lines.length > 1 ? h("span", { class: "more" }, ` (+${lines.length - 1} more)`) : null),
    h("td", {}, link(urls.state(cluster, e.position), "state")));
}

async function explainedEvents(cluster, events, signal) {
  // the matched events' words, a few requests at a time (each the page of one event)
  const out = new Map();
  const queue = [...events];
  async function worker() {
    while (queue.length) {
      const e = queue.shift();
      const page = await get(urls.api(cluster, `/events?after=${e.position - 1}&limit=1&explain=true`), { signal });
      out.set(e.position, page.explained[0]);
    }
  }
  await Promise.all(Array.from({ length: Math.min(6, events.length) }, worker));
  return out;
}

// The page of events below `before` (exclusive) that pass the filter, newest first.
async function readPage(cluster, filter, before, signal) {
  const plain = filter.kind === "all" && !filter.ns && !filter.name;
  if (plain) {
    const after = Math.max(0, before - 1 - PAGE);
    const page = await get(urls.api(cluster, `/events?after=${after}&limit=${Math.max(1, before - 1 - after)}&explain=true`),
      { signal });
    const explained = new Map(page.explained.map((x) => [x.position, x]));
    return { events: page.events.filter((e) => e.position < before).reverse(), explained,
      older: after > 0 ? after + 1 : null, scannedTo: after + 1, head: page.lastPosition };
  }
  let end = before - 1;
  let head = null;
  const found = [];
  let scanned = 0;
  while (end > 0 && found.length < PAGE && scanned < SCAN_MAX) {
    const after = Math.max(0, end - CHUNK);
    const page = await get(urls.api(cluster, `/events?after=${after}&limit=${end - after}`), { signal });
    head = head ?? page.lastPosition;
    found.push(...page.events.filter((e) => matches(filter, e)).reverse());
    scanned += end - after;
    end = after;
  }
  const events = found.slice(0, PAGE);
  const cut = found.length > PAGE ? events[events.length - 1].position : (end > 0 ? end + 1 : null);
  const explained = await explainedEvents(cluster, events, signal);
  return { events, explained, older: cut, scannedTo: end + 1, head };
}

function filters(cluster, filter, query) {
  const kind = h("select", { id: "kind", name: "kind" },
    Object.entries(KINDS).map(([k, [words]]) => h("option", { value: k, selected: k === filter.kind }, words)));
  const ns = h("input", { id: "ns", name: "ns", value: filter.ns, placeholder: "any", size: 14 });
  const name = h("input", { id: "name", name: "name", value: filter.name, placeholder: "any", size: 14 });
  const at = h("input", { id: "at", name: "at", type: "number", min: 1, value: query.get("at") || "", size: 10 });
  return h("form", { class: "filters", role: "search", onsubmit: (e) => {
    e.preventDefault();
    const q = {};
    if (kind.value !== "all") q.kind = kind.value;
    if (ns.value.trim()) q.ns = ns.value.trim();
    if (name.value.trim()) q.name = name.value.trim();
    if (at.value) q.at = at.value;
    e.target.dispatchEvent(new CustomEvent("gp-navigate", { bubbles: true, detail: urls.timeline(cluster, q) }));
  } },
  h("label", { for: "kind" }, "Show"), kind,
  h("label", { for: "ns" }, "Namespace"), ns,
  h("label", { for: "name" }, "Workload"), name,
  h("label", { for: "at" }, "Go to position"), at,
  h("button", { type: "submit" }, "Apply"),
  (filter.kind !== "all" || filter.ns || filter.name || query.get("at"))
    ? link(urls.timeline(cluster), "Clear") : null);
}

let live = null; // the state of the live updates of the page shown

export async function render({ cluster }, { signal, query }) {
  const filter = filterOf(query);
  const head = (await get(urls.api(cluster, "/events?after=0&limit=1"), { signal })).lastPosition;
  if (head === 0) {
    return notFound(`Cluster ${cluster} has no events: nothing was ever recorded under this name.`);
  }
  const at = Number.parseInt(query.get("at") || "", 10);
  if (query.get("at") && (!(at >= 1) || at > head)) {
    return [heading(`Timeline of ${cluster}`), filters(cluster, filter, query),
      notice("warning", `Position ${query.get("at")} is not in this cluster's record: its positions run from 1 to ${head}.`),
      h("p", {}, link(urls.timeline(cluster), "The newest events"))];
  }
  const beforeParam = Number.parseInt(query.get("before") || "", 10);
  const before = at >= 1 ? Math.min(head + 1, at + 1 + Math.floor(PAGE / 5)) : (beforeParam >= 1 ? Math.min(beforeParam, head + 1) : head + 1);
  const page = await readPage(cluster, filter, before, signal);
  const newest = before > head;
  const tbody = h("tbody", {}, page.events.map((e) => row(cluster, e, page.explained.get(e.position), e.position === at)));
  const pager = h("nav", { class: "pager", "aria-label": "Pages" },
    newest ? null : link(urls.timeline(cluster, cleanQuery(query, {})), "Newest"),
    newest ? null : link(urls.timeline(cluster, cleanQuery(query, { before: String(Math.min(head + 1, (page.events[0]?.position || before) + PAGE + 1)) })), "Newer"),
    page.older ? link(urls.timeline(cluster, cleanQuery(query, { before: String(page.older) })), "Older") : null);
  const filtered = filter.kind !== "all" || filter.ns || filter.name;
  const status = filtered
    ? `${plural(page.events.length, "matching event")}, looking from #${before - 1} back to #${page.scannedTo}`
    : `Events #${page.events.length ? page.events[page.events.length - 1].position : 0}–#${page.events[0]?.position || 0} of ${head.toLocaleString("en")}`;
  live = newest ? { cluster, filter, last: head, tbody, count: 0 } : null;
  return [heading(`Timeline of ${cluster}`),
    h("div", { id: "chart", class: "chart-box" }, h("p", { class: "loading" }, "Loading the chart…")),
    filters(cluster, filter, query),
    h("p", { class: "status", id: "timeline-status" }, status,
      newest ? h("span", { id: "live", class: "live", role: "status", "aria-live": "polite" }, " · live: new events appear at the top") : null),
    page.events.length ? h("table", { class: "list timeline" },
      h("thead", {}, h("tr", {}, ["Position", "Time (UTC)", "Type", "About", "Summary", ""].map((t) => h("th", { scope: "col" }, t)))),
      tbody) : notice("info", filtered ? "No event matches these filters in the part of the record looked at." : "No events."),
    pager];
}

function cleanQuery(query, changes) {
  const q = Object.fromEntries(query);
  delete q.at;
  delete q.before;
  for (const [k, v] of Object.entries(changes)) if (v) q[k] = v;
  return q;
}

export function mounted(ctx) {
  const main = document.getElementById("main");
  const nav = (e) => ctx.navigate(e.detail);
  main.addEventListener("gp-navigate", nav);
  ctx.setCleanup(() => main.removeEventListener("gp-navigate", nav));
  const box = document.getElementById("chart");
  if (box) chart(box, ctx);
  if (live) poll(live, ctx);
}

async function poll(state, ctx) {
  while (ctx.isCurrent()) {
    let page;
    try {
      page = await get(urls.api(state.cluster, `/events?after=${state.last}&limit=200&wait=20&explain=true`),
        { signal: ctx.signal });
    } catch (err) {
      if (err.name === "AbortError" || !ctx.isCurrent()) return;
      const liveNote = document.getElementById("live");
      if (liveNote) liveNote.textContent = err instanceof ApiError
        ? ` · live updates stopped: the service answered ${err.status}` : " · live updates stopped";
      return;
    }
    if (!ctx.isCurrent() || !page.events.length) continue;
    state.last = page.events[page.events.length - 1].position;
    const explained = new Map(page.explained.map((x) => [x.position, x]));
    const fresh = page.events.filter((e) => matches(state.filter, e)).reverse();
    if (fresh.length) prepend(state, fresh.map((e) => row(state.cluster, e, explained.get(e.position), false)));
  }
}

// New rows go on top; when the reader has scrolled into the list, the page scrolls by what was added,
// so the rows in view stay where they are.
function prepend(state, rows) {
  const tbody = state.tbody;
  if (!tbody.isConnected) return;
  const first = tbody.firstElementChild;
  const anchorTop = first ? first.getBoundingClientRect().top : 0;
  const keep = first && anchorTop < 0;
  const before = keep ? first.getBoundingClientRect().top : 0;
  for (const r of rows) r.classList.add("fresh");
  tbody.prepend(...rows);
  if (keep) window.scrollBy(0, first.getBoundingClientRect().top - before);
  state.count += rows.length;
  const liveNote = document.getElementById("live");
  if (liveNote) liveNote.textContent = ` · live: ${plural(state.count, "new event")} since the page opened`;
}

