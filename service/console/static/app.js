// The console's router and frame: each view has its own URL under /ui, links and back/forward move
// between views without reloading (History API), and every answer of the API is shown in words.
import { ApiError, NeedToken, auth } from "./api.js";
import { clear, h, link, notFound, notice, urls } from "./dom.js";
import * as auditView from "./views/audit.js";
import * as clustersView from "./views/clusters.js";
import * as eventView from "./views/event.js";
import * as stateView from "./views/state.js";
import * as timelineView from "./views/timeline.js";
import * as workloadView from "./views/workload.js";

const ROUTES = [
  [/^\/ui\/?$/, clustersView, () => ({})],
  [/^\/ui\/clusters\/([^/]+)\/?$/, timelineView, (m) => ({ cluster: m[1] })],
  [/^\/ui\/clusters\/([^/]+)\/events\/([^/]+)\/?$/, eventView, (m) => ({ cluster: m[1], position: m[2] })],
  [/^\/ui\/clusters\/([^/]+)\/state\/([^/]+)\/?$/, stateView, (m) => ({ cluster: m[1], position: m[2] })],
  [/^\/ui\/clusters\/([^/]+)\/workloads\/([^/]+)\/([^/]+)\/?$/, workloadView,
    (m) => ({ cluster: m[1], namespace: m[2], name: m[3] })],
  [/^\/ui\/clusters\/([^/]+)\/audit\/?$/, auditView, (m) => ({ cluster: m[1] })],
];

const main = document.getElementById("main");
const nav = document.getElementById("nav");
let current = null; // { controller, cleanup }

function decode(params) {
  const out = {};
  for (const [k, v] of Object.entries(params)) {
    try { out[k] = decodeURIComponent(v); } catch { out[k] = v; }
  }
  return out;
}

export function navigate(href, { replace = false } = {}) {
  if (replace) history.replaceState(null, "", href);
  else history.pushState(null, "", href);
  route();
}

function frame(params) {
  clear(nav);
  const items = [link(urls.clusters(), "Clusters")];
  if (params.cluster) {
    const c = params.cluster;
    items.push(h("span", { class: "crumb" }, "›"), h("strong", {}, c),
      link(urls.timeline(c), "Timeline"), link(urls.audit(c), "Verification"));
  }
  nav.append(h("div", { class: "nav-items" }, items));
  if (auth.mode === "bearer" && auth.token) {
    nav.append(h("button", { type: "button", class: "quiet", onclick: () => { auth.token = ""; route(); } },
      "Forget token"));
  }
}

export function tokenForm(reason) {
  const input = h("input", { type: "password", id: "token", name: "token", autocomplete: "off",
    required: true, "aria-describedby": "token-help" });
  const form = h("form", { class: "token", onsubmit: (e) => {
    e.preventDefault();
    auth.token = input.value.trim();
    route();
  } },
  h("label", { for: "token" }, "Token"), input, h("button", { type: "submit" }, "Use this token"),
  h("p", { id: "token-help", class: "help" },
    "An auditor or admin token of this service. It is kept for this browser tab only, and sent as "
    + "Authorization: Bearer."));
  return [h("h1", { tabindex: "-1" }, "A token is needed"), reason ? notice("error", reason) : null, form];
}

function problemWords(err) {
  if (err.status === 401) {
    return "401 Unauthorized: the service did not accept this token (it is not valid). Enter another.";
  }
  if (err.status === 403) {
    return `403 Forbidden: this token's role may not read this (${err.problem.detail || "an auditor or admin "
      + "token is needed"}). Enter an auditor or admin token.`;
  }
  return null;
}

function showError(err) {
  clear(main);
  if (err instanceof NeedToken) {
    main.append(...tokenForm(null));
  } else if (err instanceof ApiError && (err.status === 401 || err.status === 403)) {
    auth.token = "";
    main.append(...tokenForm(problemWords(err)));
  } else if (err instanceof ApiError) {
    const words = err.status ? `The service answered ${err.status}: ${err.message}` : err.message;
    main.append(h("h1", { tabindex: "-1" }, "Could not read this"), notice("error", words),
      h("p", {}, link(urls.clusters(), "Back to the clusters")));
  } else {
    main.append(h("h1", { tabindex: "-1" }, "Something went wrong"), notice("error", String(err && err.message)));
  }
  focusHeading();
}

function focusHeading() {
  const heading = main.querySelector("h1");
  if (heading) heading.focus({ preventScroll: true });
}

export async function route() {
  if (current) {
    current.controller.abort();
    if (current.cleanup) current.cleanup();
  }
  const controller = new AbortController();
  current = { controller, cleanup: null };
  const mine = current;
  const path = location.pathname;
  const found = ROUTES.map(([re, view, params]) => [re.exec(path), view, params]).find(([m]) => m);
  if (!found) {
    frame({});
    clear(main).append(...notFound(`There is no page at ${path} in the console.`));
    document.title = "Not found · Gangplank";
    focusHeading();
    return;
  }
  const [m, view, paramsOf] = found;
  const params = decode(paramsOf(m));
  frame(params);
  clear(main).append(h("p", { class: "loading", role: "status" }, "Loading…"));
  const ctx = { signal: controller.signal, query: new URLSearchParams(location.search), navigate,
    setCleanup: (fn) => { mine.cleanup = fn; }, isCurrent: () => current === mine };
  try {
    const nodes = await view.render(params, ctx);
    if (current !== mine) return;
    clear(main).append(...[nodes].flat());
    document.title = `${main.querySelector("h1")?.textContent || "Console"} · Gangplank`;
    if (view.mounted) view.mounted(ctx);
    focusHeading();
    if (location.hash) document.getElementById(location.hash.slice(1))?.scrollIntoView({ block: "center" });
  } catch (err) {
    if (err.name === "AbortError" || current !== mine) return;
    showError(err);
  }
}

document.addEventListener("click", (e) => {
  if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const a = e.target.closest("a[href]");
  if (!a || a.target || a.origin !== location.origin || !a.pathname.startsWith("/ui")) return;
  e.preventDefault();
  if (a.pathname === location.pathname && a.search === location.search && a.hash) {
    history.pushState(null, "", a.href);
    document.getElementById(a.hash.slice(1))?.scrollIntoView({ block: "center" });
    return;
  }
  navigate(a.pathname + a.search + a.hash);
});

window.addEventListener("popstate", () => route());
route();
