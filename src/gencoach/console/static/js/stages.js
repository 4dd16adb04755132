// Stages and budgets: per active run and stage, pending and unproven against their limits;
// the budgets in force, changed with PUT /v1/budgets and reset to the file's with DELETE.

import { ApiError, getJSON, poll, send } from "./api.js";
import { h, message, updated } from "./dom.js";
import { withToken } from "./token.js";

const BUDGETS = [
  ["max_pending_per_stage", "Max pending per stage", "Automatic requests queued, running or awaiting reinjection."],
  ["max_unproven_per_stage", "Max unproven per stage", "Pending plus completed minus proven."],
  ["max_alternatives_per_situation", "Max alternatives per situation", "The exploration budget; people's corrections count too."],
];

function gauge(label, value, limit, id) {
  const full = value >= limit;
  return h(
    "div",
    { class: `gauge${full ? " full" : ""}`, "data-gauge": id },
    h("span", { class: "gauge-label" }, label),
    h("meter", { min: 0, max: Math.max(limit, 1), value, high: Math.max(limit - 1, 0.5), optimum: 0, "aria-label": `${label}: ${value} of ${limit}` }),
    h("span", { class: "gauge-text" }, h("span", { class: "gauge-value" }, String(value)), " / ", h("span", { class: "gauge-limit" }, String(limit))),
  );
}

function runCard(run) {
  const stages = run.stages.length
    ? run.stages.map((s) =>
        h(
          "div",
          { class: "stage", "data-stage": s.stage_id },
          h("h4", {}, `Stage ${s.stage_id}`),
          gauge("Pending", s.pending, s.max_pending, "pending"),
          gauge("Unproven", s.unproven, s.max_unproven, "unproven"),
          h("p", { class: "muted" }, `${s.completed} completed, ${s.proven} proven, ${s.human_pending} human pending`),
        ),
      )
    : [h("p", { class: "muted" }, "No coaching yet.")];
  return h("section", { class: "card", "data-run": run.run_id }, h("h3", {}, h("a", { href: `#/run?id=${encodeURIComponent(run.run_id)}` }, run.run_id)), h("div", { class: "stages" }, stages));
}

export function renderStages(main) {
  const stamp = h("p", { class: "stamp", "aria-live": "polite" });
  const feedback = h("div", { "aria-live": "polite" });
  const inputs = {};
  const form = h(
    "form",
    { class: "budgets", id: "budgets-form" },
    h("h3", {}, "Budgets in force"),
    ...BUDGETS.map(([key, label, hint]) => {
      inputs[key] = h("input", { id: `budget-${key}`, name: key, type: "number", min: 1, step: 1, required: true, "aria-describedby": `hint-${key}` });
      return h(
        "div",
        { class: "field" },
        h("label", { for: `budget-${key}` }, label),
        inputs[key],
        h("span", { class: "override", id: `override-${key}` }),
        h("small", { id: `hint-${key}` }, hint),
      );
    }),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Apply"), h("button", { type: "button", id: "budgets-reset", onclick: () => reset() }, "Reset to the file's values")),
    feedback,
  );
  const runs = h("div", { class: "cards" });
  main.append(h("h2", {}, "Stages and budgets"), form, stamp, h("h3", {}, "Active runs"), runs);
  let effective = {};
  let dirty = false;
  for (const input of Object.values(inputs)) input.addEventListener("input", () => { dirty = true; });

  const show = (budgets) => {
    effective = budgets.effective;
    for (const [key] of BUDGETS) {
      if (!dirty) inputs[key].value = budgets.effective[key];
      document.getElementById(`override-${key}`).textContent = key in budgets.overrides ? "changed over HTTP" : "from the config file";
    }
  };
  const fail = (error) => {
    const problems = error instanceof ApiError && error.body?.errors ? Object.entries(error.body.errors).map(([k, v]) => `${k}: ${v}`) : [];
    feedback.replaceChildren(message("error", `${error.message}${problems.length ? ` (${problems.join("; ")})` : ""}`));
  };
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const changes = {};
    for (const [key] of BUDGETS) {
      const value = Number(inputs[key].value);
      if (value !== effective[key]) changes[key] = value;
    }
    await change("PUT", changes, "Budgets changed; they apply from the next admission.");
  });
  const reset = () => change("DELETE", undefined, "Budgets reset to the config file's values.");
  const change = async (method, body, done) => {
    try {
      await withToken(() => send(method, "/v1/budgets", body));
      dirty = false;
      feedback.replaceChildren(message("ok", done));
      load();
    } catch (error) {
      fail(error);
    }
  };
  const load = async () => {
    try {
      const { data, changed } = await getJSON("/console/api/stages");
      updated(stamp);
      if (!changed) return;
      show(data.budgets);
      runs.replaceChildren(...(data.runs.length ? data.runs.map(runCard) : [h("p", { class: "muted" }, "No active run.")]));
    } catch (error) {
      stamp.replaceChildren(message("error", `Cannot load stages: ${error.message}`));
    }
  };
  return poll(load, 2000);
}
