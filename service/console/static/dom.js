// Small helpers to build the page: elements from data, never from markup strings (text is text).

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") el.className = value;
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "style") Object.assign(el.style, value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

// A link inside the console: the router takes the click (history.pushState), not the browser.
export function link(href, ...children) {
  return h("a", { href }, ...children);
}

const enc = encodeURIComponent;

export const urls = {
  clusters: () => "/ui",
  timeline: (c, query) => `/ui/clusters/${enc(c)}` + (query ? `?${new URLSearchParams(query)}` : ""),
  event: (c, p) => `/ui/clusters/${enc(c)}/events/${p}`,
  state: (c, p) => `/ui/clusters/${enc(c)}/state/${p}`,
  workload: (c, ns, name) => `/ui/clusters/${enc(c)}/workloads/${enc(ns)}/${enc(name)}`,
  audit: (c) => `/ui/clusters/${enc(c)}/audit`,
  api: (c, path) => `/v1/clusters/${enc(c)}${path}`,
};

// Times in UTC, to the second (the position is shown beside them).
export function utc(recordedAt) {
  if (!recordedAt) return "—";
  const m = /^(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d)/.exec(recordedAt);
  return m ? `${m[1]} ${m[2]} UTC` : String(recordedAt);
}

export function plural(n, word, many) {
  return `${n.toLocaleString("en")} ${n === 1 ? word : many || `${word}s`}`;
}

// Kubernetes quantities as numbers, for bars and sums ("500m", "64Gi", "2k").
const SUFFIX = { m: 1e-3, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
  Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60 };

export function quantity(text) {
  if (text === undefined || text === null) return 0;
  const m = /^(-?[0-9.]+(?:e[0-9]+)?)([a-zA-Z]*)$/.exec(String(text));
  if (!m) return 0;
  return Number(m[1]) * (SUFFIX[m[2]] || 1);
}

export function percent(used, total) {
  if (!total) return 0;
  return Math.max(0, Math.min(100, Math.round((100 * used) / total)));
}

// A bar of use: allocated against allocatable, with its figures in words beside it.
export function bar(label, used, total, usedText, totalText) {
  const pct = percent(used, total);
  const fill = h("span", { class: "fill" + (used > total ? " over" : "") });
  fill.style.width = `${pct}%`;
  return h("div", { class: "use" },
    h("span", { class: "use-label" }, label),
    h("span", { class: "bar", role: "meter", "aria-valuemin": 0, "aria-valuemax": 100, "aria-valuenow": pct,
      "aria-label": `${label} ${pct}% used` }, fill),
    h("span", { class: "use-figures" }, `${usedText} of ${totalText} (${pct}%)`));
}

export function section(title, ...children) {
  return h("section", {}, h("h2", {}, title), ...children);
}

export function notice(kind, ...children) {
  return h("p", { class: `notice ${kind}`, role: kind === "error" ? "alert" : "status" }, ...children);
}

// A name the console does not find: said in words, with a way back.
export function notFound(what, back) {
  return [h("h1", { tabindex: "-1" }, "Not found"), notice("warning", what),
    h("p", {}, back || link(urls.clusters(), "Back to the clusters"))];
}

export function heading(text, ...rest) {
  return h("h1", { tabindex: "-1" }, text, ...rest);
}
