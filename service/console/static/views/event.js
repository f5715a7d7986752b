// /ui/clusters/{cluster}/events/{position}: one event. Its envelope and data, its words, the input that
// caused it (a decision) or the decisions it caused (an input), and the state just before and after it.
import { get } from "../api.js";
import { h, heading, link, notFound, section, urls, utc } from "../dom.js";

function brief(cluster, e, x) {
  return h("li", {}, link(urls.event(cluster, e.position), `#${e.position} ${e.type}`), ` (${utc(e.recordedAt)}): `,
    x ? x.lines[0] : "");
}

async function causedBy(cluster, position, signal) {
  // the decisions an input caused follow it; read on while they are its own
  const out = [];
  let after = position;
  for (;;) {
    const page = await get(urls.api(cluster, `/events?after=${after}&limit=100&explain=true`), { signal });
    const explained = new Map(page.explained.map((x) => [x.position, x]));
    for (const e of page.events) {
      if ((e.metadata || {}).causationPosition !== position) return out;
      out.push([e, explained.get(e.position)]);
    }
    if (page.events.length < 100) return out;
    after = page.events[page.events.length - 1].position;
  }
}

export async function render({ cluster, position }, { signal }) {
  const n = Number(position);
  const back = link(urls.timeline(cluster), `Back to the timeline of ${cluster}`);
  if (!/^\d+$/.test(position) || n < 1) {
    return notFound(`"${position}" is not a position: positions are whole numbers from 1.`, back);
  }
  const page = await get(urls.api(cluster, `/events?after=${n - 1}&limit=1&explain=true`), { signal });
  const e = page.events[0];
  if (!e || e.position !== n) {
    return notFound(page.lastPosition === 0 ? `Cluster ${cluster} has no events.`
      : `There is no event #${n} in cluster ${cluster}: its record ends at #${page.lastPosition}.`, back);
  }
  const x = page.explained[0];
  const meta = e.metadata || {};
  const causation = meta.causationPosition;
  let related = null;
  if (typeof causation === "number") {
    const cause = await get(urls.api(cluster, `/events?after=${causation - 1}&limit=1&explain=true`), { signal });
    related = section("The input that caused it",
      h("ul", { class: "lines" }, cause.events.map((c, i) => brief(cluster, c, cause.explained[i]))));
  } else {
    const decisions = await causedBy(cluster, n, signal);
    related = section("The decisions it caused", decisions.length
      ? h("ul", { class: "lines" }, decisions.map(([d, dx]) => brief(cluster, d, dx)))
      : h("p", {}, "None: no decision followed from this input."));
  }
  const rows = [["Type", e.type], ["Position", `#${e.position}`], ["Recorded (UTC)", utc(e.recordedAt)],
    ["About", x && x.namespace ? link(urls.workload(cluster, x.namespace, x.workload), `${x.namespace}/${x.workload}`) : (x && x.about) || "—"],
    ["Schema version", String(e.schemaVersion)], ["Source", `${meta.source || "—"}${meta.actor ? ` (${meta.actor})` : ""}`],
    ["Hash", h("code", {}, e.hash)], ["Previous hash", h("code", {}, e.prevHash)]];
  return [heading(`Event #${e.position}: ${e.type}`),
    h("p", { class: "step" },
      n > 1 ? link(urls.event(cluster, n - 1), `← #${n - 1}`) : null, " ",
      n < page.lastPosition ? link(urls.event(cluster, n + 1), `#${n + 1} →`) : null, " · ",
      link(urls.state(cluster, n - 1), `state just before (#${n - 1})`), " · ",
      link(urls.state(cluster, n), `state just after (#${n})`), " · ",
      link(urls.timeline(cluster, { at: String(n) }), "in the timeline")),
    section("In words", h("ul", { class: "lines" }, (x ? x.lines : [e.type]).map((l) => h("li", { class: l.startsWith("    ") ? "detail" : null }, l.trim())))),
    section("Envelope", h("table", { class: "fields" }, rows.map(([k, v]) => h("tr", {}, h("th", { scope: "row" }, k), h("td", {}, v))))),
    related,
    section("Data (as recorded)", h("pre", { class: "data", tabindex: "0" }, JSON.stringify(e.data, null, 2)))];
}
