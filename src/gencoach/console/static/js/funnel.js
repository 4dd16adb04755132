// The coaching funnel per route, backends and queues: computed from what the controller stores.

import { getJSON, poll, query } from "./api.js";
import { h, message, num, pct, secs, updated } from "./dom.js";

const STEPS = [
  ["seen", "Seen", null],
  ["skipped", "Skipped", null],
  ["refused", "Refused by limits", null],
  ["admitted", "Admitted", "admitted"],
  ["corrected", "Corrected", "corrected"],
  ["reinjected", "Reinjected", null],
  ["executed", "Executed", "executed"],
  ["proven", "Proven", "proven"],
  ["unproven", "Unproven", null],
  ["failed", "Failed", null],
];

function bar(value, whole) {
  const share = whole ? Math.min(1, value / whole) : 0;
  return h("span", { class: "bar", "aria-hidden": "true" }, h("span", { style: `width:${(share * 100).toFixed(1)}%` }));
}

// Who made the proven corrections' decisions: a fallback is not the coach's work.
function bySource(sources) {
  const named = Object.entries(sources || {});
  if (!named.length) return null;
  const items = named.map(([source, count]) => h("li", { "data-source": source }, `${num(count)} ${source.replace("_", " ")}`));
  return h("ul", { class: "sources", title: "proven corrections by decision source" }, items);
}

function routeRow(route) {
  const cells = STEPS.map(([key, , rate]) =>
    h(
      "td",
      { class: "num", "data-step": key },
      h("span", { class: "count" }, num(route[key])),
      rate ? h("span", { class: "rate", title: "of the previous step" }, ` ${pct(route.rates[rate])}`) : null,
      bar(route[key], route.seen),
      key === "proven" ? bySource(route.proven_by_source) : null,
    ),
  );
  const reasons = route.skipped_by_reason.length
    ? h("ul", { class: "reasons" }, route.skipped_by_reason.map((r) => h("li", {}, `${num(r.count)} × ${r.reason}`)))
    : null;
  return [
    h("tr", { "data-route": route.route }, h("th", { scope: "row" }, route.route.replace("_", " ")), ...cells, h("td", { class: "num" }, num(route.open))),
    reasons ? h("tr", { class: "reasons-row" }, h("td", {}), h("td", { colspan: STEPS.length + 1 }, h("details", {}, h("summary", {}, "Skip reasons"), reasons))) : null,
  ];
}

function backendRows(data) {
  const rows = data.backends.map((b) =>
    h(
      "tr",
      { "data-backend": b.name },
      h("th", { scope: "row" }, `${b.name} (${b.type}, ${b.model})`),
      h("td", { class: "num" }, num(b.calls)),
      h("td", { class: "num" }, b.jobs ? num(b.jobs.errors) : "—"),
      h("td", { class: "num" }, b.jobs ? `${secs(b.jobs.latency_p50_s)} / ${secs(b.jobs.latency_p90_s)}` : "—"),
      h("td", { class: "num" }, `${num(b.tokens.prompt)} + ${num(b.tokens.completion)} = ${num(b.tokens.total)}`),
    ),
  );
  const agent = data.agent;
  rows.push(
    h(
      "tr",
      { "data-backend": "agent" },
      h("th", { scope: "row" }, "the runs' agents (POST /v1/coaching)"),
      h("td", { class: "num" }, num(agent.calls)),
      h("td", { class: "num" }, num(agent.errors)),
      h("td", { class: "num" }, `${secs(agent.latency_p50_s)} / ${secs(agent.latency_p90_s)}`),
      h("td", { class: "num" }, "—"),
    ),
  );
  return rows;
}

export function renderFunnel(main) {
  let runId = "";
  const stamp = h("p", { class: "stamp", "aria-live": "polite" });
  const runSelect = h("select", { id: "funnel-run", onchange: (e) => { runId = e.target.value; load(); } }, h("option", { value: "" }, "all runs"));
  const routes = h("tbody");
  const backends = h("tbody");
  const queues = h("tbody");
  const head = (labels) => h("thead", {}, h("tr", {}, labels.map((l) => h("th", { scope: "col" }, l))));
  main.append(
    h("h2", {}, "Coaching funnel"),
    h("div", { class: "filters" }, h("label", { for: "funnel-run" }, "Run ", runSelect)),
    stamp,
    h("table", { class: "funnel" }, h("caption", {}, "Per route: each step counts the requests that reached it (rates are of the previous step); unproven and failed requests have ended, open ones not yet — the same counts as gencoach status and /metrics"), head(["Route", ...STEPS.map(([, label]) => label), "Open"]), routes),
    h("h3", {}, "Backends"),
    h("table", {}, h("caption", {}, "Calls and errors count the jobs' results; latency is each job's run time as its worker measured it (p50 / p90)"), head(["Backend", "Calls", "Errors", "Latency p50 / p90", "Tokens (prompt + completion)"]), backends),
    h("h3", {}, "Worker queues"),
    h("table", {}, head(["Queue", "Queued", "Running", "Failed", "Workers"]), queues),
  );
  const loadRuns = async () => {
    const { data, changed } = await getJSON("/console/api/runs");
    if (!changed) return;
    const ids = data.runs.map((r) => r.run_id).filter(Boolean);
    runSelect.replaceChildren(h("option", { value: "" }, "all runs"), ...ids.map((id) => h("option", { value: id }, id)));
    runSelect.value = runId;
  };
  const load = async () => {
    try {
      const { data, changed } = await getJSON(`/console/api/funnel?${query({ run: runId })}`);
      updated(stamp);
      await loadRuns();
      if (!changed) return;
      routes.replaceChildren(...data.routes.flatMap(routeRow).filter(Boolean));
      backends.replaceChildren(...backendRows(data));
      queues.replaceChildren(
        ...data.queues.map((q) =>
          h("tr", { "data-queue": q.queue }, h("th", { scope: "row" }, q.queue), ...[q.queued, q.started, q.failed, q.workers].map((v) => h("td", { class: "num" }, num(v)))),
        ),
      );
    } catch (error) {
      stamp.replaceChildren(message("error", `Cannot load the funnel: ${error.message}`));
    }
  };
  return poll(load, 2000);
}
