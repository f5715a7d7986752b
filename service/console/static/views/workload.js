// /ui/clusters/{cluster}/workloads/{namespace}/{name}: the workload's story. Its groups (a tree as a
// tree) with phase, minCount, pods, claims and devices and conditions, and its history in the words of
// `audit explain` (GET .../history?explain=true), each line linking to the timeline and the state.
import { ApiError, get } from "../api.js";
import { h, heading, link, notFound, section, urls, utc } from "../dom.js";

function conditions(list) {
  if (!list || !list.length) return null;
  return h("ul", { class: "conditions" }, list.map((c) => h("li", {},
    h("strong", {}, `${c.type}=${c.status}`), ` (${c.reason}${typeof c.position === "number" ? `, at #${c.position}` : ""})`,
    c.message ? `: ${c.message}` : "")));
}

function claims(list) {
  if (!list || !list.length) return null;
  return h("ul", { class: "claims" }, list.map((c) => h("li", {},
    `claim ${c.name}${c.pod ? ` of pod ${c.pod}` : ""} (shared by ${c.sharing}): `,
    c.devices && c.devices.length ? c.devices.map((d) => `${d.driver}/${d.pool}/${d.device}`).join(", ") : "no devices allocated")));
}

function group(cluster, g) {
  const pods = g.pods.map((p) => h("li", {}, `${p.name}: `,
    p.node ? [`${p.phase || "Running"} on `, h("code", {}, p.node)] : (p.phase || "Pending")));
  return h("li", { class: "group" },
    h("div", {}, h("strong", {}, `group ${g.name}`), ` — ${g.phase}, minCount ${g.minCount}, ${g.placedPods} of ${g.pods.length} pods placed`,
      g.domain ? ` in ${g.domain}` : ""),
    g.explanation ? h("p", { class: "why" }, g.explanation.message || "") : null,
    h("ul", { class: "pods" }, pods), claims(g.claims), conditions(g.conditions));
}

function tree(cluster, status) {
  const cpgs = status.compositePodGroups || [];
  if (!cpgs.length) return h("ul", { class: "groups" }, status.podGroups.map((g) => group(cluster, g)));
  const cpg = new Map(cpgs.map((c) => [c.name, c]));
  const groups = new Map(status.podGroups.map((g) => [g.name, g]));
  const node = (c) => h("li", { class: "cpg" },
    h("div", {}, h("strong", {}, `composite pod group ${c.name}`), ` — ${c.phase}, minGroupCount ${c.minGroupCount}, `
      + `${c.satisfiedChildren} of ${c.children.length} children satisfied`, c.domain ? ` in ${c.domain.key}=${c.domain.value}` : ""),
    c.explanation ? h("p", { class: "why" }, c.explanation.message || "not satisfied") : null,
    conditions(c.conditions),
    h("ul", { class: "children" }, c.children.map((name) => (cpg.has(name) && cpg.get(name).parent === c.name
      ? node(cpg.get(name)) : groups.has(name) ? group(cluster, groups.get(name)) : h("li", {}, name)))));
  return h("ul", { class: "tree", role: "tree" }, cpgs.filter((c) => c.parent === null).map(node));
}

function story(cluster, history) {
  const byPosition = new Map(history.events.map((e) => [e.position, e]));
  return h("ol", { class: "story" }, history.explained.map((entry) => {
    const p = entry.position;
    const e = p === null ? null : byPosition.get(p);
    const head = p === null ? null : h("span", { class: "when" }, link(urls.event(cluster, p), `#${p}`), ` ${utc(e && e.recordedAt)} `);
    return h("li", { id: p === null ? "now" : `h-${p}` }, head,
      entry.lines.map((l, i) => (i ? h("div", { class: "detail" }, l.trim()) : h("span", {}, l))),
      p === null ? null : h("span", { class: "line-links" }, " ",
        link(urls.timeline(cluster, { at: String(p) }), "timeline"), " · ", link(urls.state(cluster, p), "state")));
  }));
}

export async function render({ cluster, namespace, name }, { signal }) {
  const back = link(urls.timeline(cluster), `Back to the timeline of ${cluster}`);
  let view;
  let history;
  try {
    [view, history] = await Promise.all([
      get(urls.api(cluster, `/namespaces/${encodeURIComponent(namespace)}/workloads/${encodeURIComponent(name)}`), { signal }),
      get(urls.api(cluster, `/namespaces/${encodeURIComponent(namespace)}/workloads/${encodeURIComponent(name)}/history?explain=true`), { signal })]);
  } catch (err) {
    if (err instanceof ApiError && (err.status === 404 || err.status === 422)) {
      return notFound(`Workload ${namespace}/${name} was never submitted to cluster ${cluster}.`, back);
    }
    throw err;
  }
  const s = view.status;
  return [heading(`Workload ${namespace}/${name}`),
    h("p", { class: "status" }, `${s.phase} · priority ${view.priority} · submitted at `,
      link(urls.event(cluster, view.position), `#${view.position}`),
      typeof s.deletedAt === "number" ? [" · deleted at ", link(urls.event(cluster, s.deletedAt), `#${s.deletedAt}`)] : null,
      " · ", link(urls.timeline(cluster, { ns: namespace, name }), "its events in the timeline")),
    section("Groups now", tree(cluster, s)),
    section("History", story(cluster, history))];
}
