// The timeline's chart: the cluster over positions, from GET /series (never the whole stream in the
// browser). Use per resource, pods placed and groups pending as lines, preemptions and losses as
// marks; a slider (keyboard: arrows, Home, End) scrubs the points, with links to the state and events.
import { get } from "../api.js";
import { clear, h, link, percent, plural, quantity, urls, utc } from "../dom.js";

const SVG = "http://www.w3.org/2000/svg";
const W = 1000;
const HGT = 160;
const RANGES = [["5000", "the last 5,000 events"], ["50000", "the last 50,000 events"], ["all", "the whole record"]];

function svg(tag, attrs) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

function lines(points) {
  const resources = Object.keys(points[points.length - 1].allocatable).filter((r) => r !== "pods");
  const out = resources.map((r) => ({ key: r, label: `${r} used`, unit: "%",
    value: (p) => percent(quantity(p.allocated[r]), quantity(p.allocatable[r])), max: 100 }));
  const maxPlaced = Math.max(1, ...points.map((p) => p.placedPods));
  const maxPending = Math.max(1, ...points.map((p) => p.pendingGroups));
  out.push({ key: "placed", label: "pods placed", value: (p) => p.placedPods, max: maxPlaced });
  out.push({ key: "pending", label: "groups pending", value: (p) => p.pendingGroups, max: maxPending });
  return out;
}

function draw(points, series) {
  const el = svg("svg", { viewBox: `0 0 ${W} ${HGT}`, preserveAspectRatio: "none", class: "chart",
    role: "img", "aria-label": "The cluster over positions" });
  const x = (i) => (points.length === 1 ? W / 2 : (i * W) / (points.length - 1));
  series.forEach((s, k) => {
    const d = points.map((p, i) => `${i ? "L" : "M"}${x(i).toFixed(1)},${(HGT - 14 - ((HGT - 24) * s.value(p)) / s.max).toFixed(1)}`);
    el.append(svg("path", { d: d.join(""), class: `line line-${k % 6}`, "vector-effect": "non-scaling-stroke" }));
  });
  points.forEach((p, i) => {
    if (p.preemptions) el.append(svg("rect", { x: x(i) - 1.5, y: HGT - 10, width: 3, height: 10, class: "mark-preemption" }));
    if (p.losses) el.append(svg("rect", { x: x(i) - 1.5, y: HGT - 20, width: 3, height: 8, class: "mark-loss" }));
  });
  const cursor = svg("line", { x1: 0, x2: 0, y1: 0, y2: HGT, class: "cursor", "vector-effect": "non-scaling-stroke" });
  el.append(cursor);
  return { el, cursor, x };
}

function readout(cluster, p, series) {
  const figures = series.map((s) => `${s.label} ${s.value(p).toLocaleString("en")}${s.unit || ""}`);
  return [h("strong", {}, `#${p.position}`), ` · ${utc(p.time)} · `, figures.join(" · "),
    ` · ${plural(p.preemptions, "preemption")} and ${plural(p.losses, "loss", "losses")} since the point before · `,
    link(urls.state(cluster, p.position), `state at #${p.position}`), " · ",
    link(urls.timeline(cluster, { at: String(Math.max(1, p.position)) }), `events at #${p.position}`)];
}

export async function chart(box, ctx) {
  const cluster = decodeURIComponent(location.pathname.split("/")[3] || "");
  const range = h("select", { id: "chart-range", "aria-label": "Chart range" },
    RANGES.map(([v, words]) => h("option", { value: v }, words)));
  async function load() {
    clear(box).append(h("p", { class: "loading" }, "Loading the chart…"));
    try {
      const head = (await get(urls.api(cluster, "/events?after=0&limit=1"), { signal: ctx.signal })).lastPosition;
      const from = range.value === "all" ? 0 : Math.max(0, head - Number(range.value));
      const data = await get(urls.api(cluster, `/series?from=${from}&to=${head}&points=400`), { signal: ctx.signal });
      if (!ctx.isCurrent()) return;
      show(data);
    } catch (err) {
      if (err.name === "AbortError" || !ctx.isCurrent()) return;
      clear(box).append(h("p", { class: "notice error" }, `The chart could not be read: ${err.message}`));
    }
  }
  function show(data) {
    const points = data.points;
    const series = lines(points);
    const { el, cursor, x } = draw(points, series);
    const slider = h("input", { type: "range", id: "scrub", min: 0, max: points.length - 1, value: points.length - 1,
      "aria-label": "Scrub the chart's positions" });
    const out = h("p", { class: "readout", id: "chart-readout", "aria-live": "polite" });
    const move = () => {
      const i = Number(slider.value);
      const at = (x(i) / W) * 100;
      cursor.setAttribute("x1", String(x(i)));
      cursor.setAttribute("x2", String(x(i)));
      slider.setAttribute("aria-valuetext", `position ${points[i].position}`);
      clear(out).append(...readout(cluster, points[i], series));
      out.dataset.percent = String(at);
    };
    slider.addEventListener("input", move);
    const legend = h("ul", { class: "legend" }, series.map((s, k) => h("li", {}, h("span", { class: `swatch line-${k % 6}` }),
      s.unit ? s.label : `${s.label} (top: ${s.max.toLocaleString("en")})`)),
    h("li", {}, h("span", { class: "swatch mark-preemption" }), "preemptions"),
    h("li", {}, h("span", { class: "swatch mark-loss" }), "losses"));
    clear(box).append(h("div", { class: "chart-head" }, h("h2", {}, `The cluster over positions #${data.from}–#${data.to}`),
      h("span", {}, h("label", { for: "chart-range" }, "Range "), range)), el, slider, legend, out);
    move();
  }
  range.addEventListener("change", load);
  await load();
}
