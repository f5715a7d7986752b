// /ui: the clusters, each with its last position and the time of its last event.
import { get } from "../api.js";
import { h, heading, link, notice, urls, utc } from "../dom.js";

export async function render(_params, { signal }) {
  const { items } = await get("/v1/clusters", { signal });
  if (!items.length) {
    return [heading("Clusters"), notice("info", "No cluster has any event yet. A cluster appears here with its "
      + "first recorded input (a node put, a workload submitted).")];
  }
  const last = await Promise.all(items.map((c) => c.lastPosition > 0
    ? get(urls.api(c.name, `/events?after=${c.lastPosition - 1}&limit=1`), { signal }).then((p) => p.events[0])
    : null));
  const rows = items.map((c, i) => h("tr", {},
    h("th", { scope: "row" }, link(urls.timeline(c.name), c.name)),
    h("td", { class: "num" }, c.lastPosition > 0 ? link(urls.event(c.name, c.lastPosition), `#${c.lastPosition}`) : "—"),
    h("td", {}, utc(last[i] && last[i].recordedAt)),
    h("td", {}, link(urls.state(c.name, c.lastPosition), "state now"), " · ", link(urls.audit(c.name), "verification"))));
  return [heading("Clusters"),
    h("table", { class: "list" },
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Cluster"), h("th", { scope: "col" }, "Last position"),
        h("th", { scope: "col" }, "Last event (UTC)"), h("th", { scope: "col" }, "Views"))),
      h("tbody", {}, rows))];
}
