// /ui/clusters/{cluster}/state/{position}: the cluster as it stood after event N (GET /state?at=N).
// Nodes grouped by the topology keys the workloads use (outermost first: the key with the fewest
// domains), each group drawn only when opened and its nodes a page at a time, so 5,000 nodes do not
// freeze the page; the pending groups with their explanations; stepping from event to event.
import { get } from "../api.js";
import { bar, clear, h, heading, link, notFound, plural, quantity, section, urls, utc } from "../dom.js";

const NODE_PAGE = 50;
const POD_SHOWN = 8;
const PENDING_SHOWN = 50;

function topologyKeys(workloads) {
  const keys = new Set();
  const walk = (x) => {
    if (Array.isArray(x)) { x.forEach(walk); return; }
    if (!x || typeof x !== "object") return;
    for (const [k, v] of Object.entries(x)) {
      if (k === "topology") {
        for (const t of [v].flat()) if (t && typeof t.key === "string") keys.add(t.key);
      }
      walk(v);
    }
  };
  workloads.forEach((w) => walk(w.spec));
  return [...keys];
}

function ordered(keys, nodes) {
  const domains = (k) => new Set(nodes.filter((n) => k in n.labels).map((n) => n.labels[k])).size;
  return keys.filter((k) => domains(k) > 0).sort((a, b) => domains(a) - domains(b) || (a < b ? -1 : 1));
}

function nodeCard(cluster, n) {
  const marks = [];
  if (n.unschedulable) marks.push(h("span", { class: "mark cordoned" }, "cordoned"));
  for (const t of n.taints) marks.push(h("span", { class: "mark tainted" }, `tainted ${t.key}${t.value ? `=${t.value}` : ""}:${t.effect}`));
  const bars = Object.entries(n.allocatable).map(([r, total]) =>
    bar(r, quantity(n.allocated[r] || "0"), quantity(total), n.allocated[r] || "0", total));
  const pods = n.pods.map((p) => h("li", {}, link(urls.workload(cluster, p.namespace, p.workload), `${p.namespace}/${p.workload}/${p.pod}`)));
  const podList = h("ul", { class: "pods" }, pods.slice(0, POD_SHOWN));
  if (pods.length > POD_SHOWN) {
    const more = h("button", { type: "button", class: "quiet", onclick: () => { more.remove(); podList.append(...pods.slice(POD_SHOWN)); } },
      `and ${pods.length - POD_SHOWN} more pods`);
    podList.append(h("li", {}, more));
  }
  return h("article", { class: "node", id: `node-${n.name}` },
    h("h4", {}, n.name, " ", marks),
    h("div", { class: "uses" }, bars),
    pods.length ? podList : h("p", { class: "help" }, "no pods"));
}

function pagedNodes(cluster, nodes) {
  const box = h("div", { class: "nodes" });
  let shown = 0;
  const more = h("button", { type: "button", class: "more-nodes" });
  const step = () => {
    box.append(...nodes.slice(shown, shown + NODE_PAGE).map((n) => nodeCard(cluster, n)));
    shown = Math.min(nodes.length, shown + NODE_PAGE);
    if (shown >= nodes.length) more.remove();
    else more.textContent = `Show ${Math.min(NODE_PAGE, nodes.length - shown)} more of ${nodes.length - shown} nodes`;
  };
  more.addEventListener("click", step);
  step();
  return [box, shown < nodes.length ? more : null];
}

function groupFigures(nodes) {
  const pods = nodes.reduce((s, n) => s + n.pods.length, 0);
  const cordoned = nodes.filter((n) => n.unschedulable).length;
  const res = {};
  for (const n of nodes) {
    for (const [r, total] of Object.entries(n.allocatable)) {
      if (r === "pods") continue;
      res[r] = res[r] || [0, 0];
      res[r][0] += quantity(n.allocated[r] || "0");
      res[r][1] += quantity(total);
    }
  }
  const uses = Object.entries(res).slice(0, 3).map(([r, [u, t]]) => `${r} ${t ? Math.round((100 * u) / t) : 0}%`);
  return [plural(nodes.length, "node"), plural(pods, "pod"), ...uses, cordoned ? `${cordoned} cordoned` : null]
    .filter(Boolean).join(" · ");
}

function grouped(cluster, nodes, keys, depth = 0) {
  if (depth >= keys.length) return pagedNodes(cluster, nodes);
  const key = keys[depth];
  const by = new Map();
  for (const n of nodes) {
    const v = key in n.labels ? `${key}=${n.labels[key]}` : `no ${key} label`;
    if (!by.has(v)) by.set(v, []);
    by.get(v).push(n);
  }
  return [...by.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([domain, members]) => {
    const body = h("div", { class: "domain-body" });
    const details = h("details", { class: "domain" }, h("summary", {}, h("strong", {}, domain), ` — ${groupFigures(members)}`), body);
    details.addEventListener("toggle", () => {
      if (details.open && !body.firstChild) body.append(...[grouped(cluster, members, keys, depth + 1)].flat());
    });
    return details;
  });
}

function pending(cluster, workloads) {
  const items = [];
  for (const w of workloads) {
    const ref = () => link(urls.workload(cluster, w.namespace, w.name), `${w.namespace}/${w.name}`);
    for (const c of w.status.compositePodGroups || []) {
      if (c.explanation) items.push(h("li", {}, ref(), ` composite pod group ${c.name}: `, c.explanation.message || "not satisfied"));
    }
    for (const g of w.status.podGroups) {
      if (g.explanation) {
        items.push(h("li", {}, ref(), ` group ${g.name} (${g.placedPods} placed, minCount ${g.minCount}): `,
          g.explanation.message || ""));
      }
    }
  }
  if (!items.length) return h("p", {}, "No group is waiting.");
  const list = h("ul", { class: "lines pending" }, items.slice(0, PENDING_SHOWN));
  if (items.length <= PENDING_SHOWN) return list;
  const more = h("button", { type: "button", class: "quiet", onclick: () => { more.remove(); list.append(...items.slice(PENDING_SHOWN)); } },
    `Show the other ${items.length - PENDING_SHOWN} waiting groups`);
  return [list, more];
}

function finder(cluster, nodes) {
  const input = h("input", { id: "find-node", type: "search", placeholder: "node name", size: 20 });
  const out = h("div", { class: "found" });
  input.addEventListener("input", () => {
    clear(out);
    const q = input.value.trim();
    if (!q) return;
    const hits = nodes.filter((n) => n.name.includes(q));
    out.append(h("p", { class: "status" }, `${plural(hits.length, "node")} named like "${q}"`),
      h("div", { class: "nodes" }, hits.slice(0, NODE_PAGE).map((n) => nodeCard(cluster, n))));
  });
  return [h("p", { class: "filters" }, h("label", { for: "find-node" }, "Find a node "), input), out];
}

function stepper(cluster, n, head, navigate) {
  const to = h("input", { id: "goto", type: "number", min: 0, max: head, value: n, size: 10 });
  return h("form", { class: "step", onsubmit: (e) => { e.preventDefault(); navigate(urls.state(cluster, Number(to.value))); } },
    n > 0 ? link(urls.state(cluster, n - 1), `← after #${n - 1}`) : h("span", { class: "help" }, "the start"), " ",
    n < head ? link(urls.state(cluster, n + 1), `after #${n + 1} →`) : h("span", { class: "help" }, "the head"), " ",
    h("label", { for: "goto" }, "Go to position"), to, h("button", { type: "submit" }, "Go"));
}

let keys = null;

export async function render({ cluster, position }, { signal, navigate }) {
  const back = link(urls.timeline(cluster), `Back to the timeline of ${cluster}`);
  if (!/^\d+$/.test(position)) return notFound(`"${position}" is not a position: positions are whole numbers.`, back);
  const n = Number(position);
  const page = await get(urls.api(cluster, `/events?after=${Math.max(0, n - 1)}&limit=1&explain=true`), { signal });
  const head = page.lastPosition;
  if (head === 0) return notFound(`Cluster ${cluster} has no events.`, back);
  if (n > head) return notFound(`Position ${n} is past the head of cluster ${cluster}: its record ends at #${head}.`, back);
  const state = await get(urls.api(cluster, `/state?at=${n}`), { signal });
  const e = n > 0 ? page.events[0] : null;
  const nodes = state.nodes;
  const order = ordered(topologyKeys(state.workloads), nodes);
  const placed = nodes.reduce((s, x) => s + x.pods.length, 0);
  keys = (ev) => {
    if (ev.target !== document.body && !ev.target.matches("h1")) return;
    if (ev.key === "ArrowLeft" && n > 0) navigate(urls.state(cluster, n - 1));
    if (ev.key === "ArrowRight" && n < head) navigate(urls.state(cluster, n + 1));
  };
  return [heading(`${cluster} after event #${n}`),
    e ? h("p", { class: "status" }, link(urls.event(cluster, n), `#${n} ${e.type}`), ` at ${utc(e.recordedAt)}: `,
      page.explained[0].lines[0]) : h("p", { class: "status" }, "Position 0: before the first event, the cluster is empty."),
    stepper(cluster, n, head, navigate),
    h("p", { class: "help" }, "Keys: ← and → step to the previous and next event when nothing else has focus."),
    section("Pending groups", pending(cluster, state.workloads)),
    section(`Nodes (${plural(nodes.length, "node")}, ${plural(placed, "pod")} placed)`,
      h("p", { class: "help" }, order.length ? `Grouped by ${order.join(", then ")} (the topology keys the workloads use).`
        : "Not grouped: no workload uses a topology key."),
      finder(cluster, nodes),
      nodes.length ? grouped(cluster, nodes, order) : h("p", {}, "No nodes."))];
}

export function mounted(ctx) {
  const handler = keys;
  document.addEventListener("keydown", handler);
  ctx.setCleanup(() => document.removeEventListener("keydown", handler));
}
