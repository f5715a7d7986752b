// /ui/clusters/{cluster}/audit: the verification. The hash chain (GET /audit/verify), the signed
// checkpoints (GET /audit/checkpoints), and the replay verdict (GET /audit/replay) on a button.
import { ApiError, get } from "../api.js";
import { clear, h, heading, link, notFound, notice, plural, section, urls, utc } from "../dom.js";

function chain(cluster, v) {
  if (v.ok) {
    return notice("ok", `The hash chain is intact: ${plural(v.events, "event")}, head `, h("code", {}, v.head), ".");
  }
  const bad = v.firstBadPosition;
  return notice("error", "The hash chain is broken at position ", link(urls.event(cluster, bad), `#${bad}`),
    ": the record was altered or cut there. Events from there on cannot be trusted.");
}

function checkpoints(list) {
  if (!list.length) return h("p", {}, "No signed checkpoint: this service signs none (it runs without a signing key), "
    + "or none was due yet.");
  const last = list[list.length - 1];
  const keys = [...new Set(list.map((c) => c.keyId))];
  return h("div", {}, h("p", {}, `${plural(list.length, "signed checkpoint")}; the last at #${last.position}, signed `
    + `${utc(last.signedAt)}, by key ${keys.join(", ")}.`),
  h("p", { class: "help" }, "The signatures are checked against the public key by "
    + "gangplank audit verify --public-key; here they are listed."));
}

const VERDICTS = {
  identical: "Identical: every decision re-decided byte for byte under the current rules.",
  equivalent: "Equivalent: the same outcomes; some decisions were recorded under older rules and differ only in their explanations.",
  diverged: "Diverged: an outcome differs.",
  broken: "Broken: the hash chain does not hold, or the stream has a gap.",
};

function verdict(cluster, r) {
  const at = r.verdict === "diverged" ? r.divergence && r.divergence.position
    : r.verdict === "broken" ? r.firstBadPosition : null;
  const kind = r.verdict === "identical" || r.verdict === "equivalent" ? "ok" : "error";
  return [notice(kind, h("strong", {}, r.verdict), ` — ${VERDICTS[r.verdict] || ""}`,
    at ? [" First differing position: ", link(urls.event(cluster, at), `#${at}`), "."] : null),
  h("p", {}, `${plural(r.decisions, "decision")} and ${plural(r.inputs, "input")} replayed; rules ${r.rules.current} now, `
    + `recorded under ${r.rules.recorded.join(", ") || "none"}; ${plural(r.explanationDiffs, "explanation difference")}.`)];
}

let pending = null; // the chain check the view started, filled in once mounted

export async function render({ cluster }, { signal }) {
  const [head, cps] = await Promise.all([get(urls.api(cluster, "/events?after=0&limit=1"), { signal }),
    get(urls.api(cluster, "/audit/checkpoints"), { signal })]);
  if (head.lastPosition === 0) return notFound(`Cluster ${cluster} has no events: there is nothing to verify.`);
  // the chain check reads every event: the view opens at once and says the verdict when it is in
  const chainBox = h("div", { id: "chain", "aria-live": "polite" },
    h("p", { class: "loading", role: "status" }, `Checking the hash chain of ${plural(head.lastPosition, "event")}…`));
  pending = { cluster, chainBox };
  const out = h("div", { id: "replay-result", "aria-live": "polite" });
  const button = h("button", { type: "button", id: "replay" }, "Re-decide the record (replay --verify)");
  button.addEventListener("click", async () => {
    button.disabled = true;
    clear(out).append(h("p", { class: "loading", role: "status" }, "Re-deciding every input…"));
    try {
      const r = await get(urls.api(cluster, "/audit/replay"), { signal });
      clear(out).append(...verdict(cluster, r));
    } catch (err) {
      if (err.name === "AbortError") return;
      const words = err instanceof ApiError ? `The replay could not run: ${err.status} ${err.message}` : String(err.message);
      clear(out).append(notice("error", words));
    } finally {
      button.disabled = false;
    }
  });
  return [heading(`Verification of ${cluster}`),
    section("Hash chain", chainBox),
    section("Signed checkpoints", checkpoints(cps.items)),
    section("Replay", h("p", {}, "Re-decides every recorded input with this release's code and compares each decision "
      + "with the recorded one. It reads the whole record: on a long one it takes a while."), button, out)];
}

export function mounted(ctx) {
  const { cluster, chainBox } = pending;
  get(urls.api(cluster, "/audit/verify"), { signal: ctx.signal }).then((v) => {
    if (ctx.isCurrent()) clear(chainBox).append(chain(cluster, v));
  }, (err) => {
    if (err.name === "AbortError" || !ctx.isCurrent()) return;
    clear(chainBox).append(notice("error", `The chain could not be checked: ${err.message}`));
  });
}
