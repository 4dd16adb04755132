// The runs page: every run, active first, filtered by state, scenario and agent; polled live.

import { getJSON, poll, query } from "./api.js";
import { h, message, num, time, updated } from "./dom.js";

const filters = { state: "", scenario: "", agent: "" };

function select(name, label, values) {
  const id = `filter-${name}`;
  const control = h(
    "select",
    { id, name, onchange: (event) => { filters[name] = event.target.value; refresh(); } },
    h("option", { value: "" }, "any"),
  );
  fill(control, values);
  return h("label", { for: id }, `${label} `, control);
}

function fill(control, values) {
  const current = filters[control.name];
  const wanted = [...new Set([...values, ...(current ? [current] : [])])].sort();
  const present = [...control.options].slice(1).map((option) => option.value);
  if (present.join("\n") === wanted.join("\n")) return;
  control.replaceChildren(h("option", { value: "" }, "any"), ...wanted.map((v) => h("option", { value: v }, v)));
  control.value = current;
}

function coachingCells(coaching) {
  if (!coaching) return [h("td", { colspan: 4, class: "muted" }, "not kept in saves")];
  return [
    h("td", { class: "num", "data-col": "requests" }, num(coaching.requests)),
    h("td", { class: "num", "data-col": "in_flight" }, num(coaching.in_flight)),
    h("td", { class: "num", "data-col": "corrected" }, num(coaching.corrected)),
    h("td", { class: "num", "data-col": "proven" }, num(coaching.proven)),
  ];
}

function row(run) {
  const name = run.run_id
    ? h("a", { href: `#/run?${query({ id: run.run_id })}` }, run.run_id)
    : h("span", { title: run.reason }, `${run.folder} (unreadable: ${run.reason})`);
  return h(
    "tr",
    { "data-run": run.run_id ?? run.folder, "data-state": run.state },
    h("th", { scope: "row" }, name),
    h("td", {}, h("span", { class: `state state-${run.state}` }, run.state)),
    h("td", {}, run.scenario),
    h("td", {}, run.target),
    h("td", {}, run.agent),
    h("td", { class: "num", "data-col": "situations" }, num(run.situations)),
    ...coachingCells(run.coaching),
    h("td", {}, time(run.started_at)),
  );
}

let refresh = () => {};

export function renderRuns(main, { live }) {
  const stamp = h("p", { class: "stamp", "aria-live": "polite" });
  const controls = h("div", { class: "filters", role: "group", "aria-label": "Filters" });
  const body = h("tbody");
  const empty = h("p", { class: "muted", hidden: true }, "No run matches.");
  main.append(
    h("h2", {}, live ? "Runs" : "Saved runs"),
    controls,
    stamp,
    h(
      "table",
      { class: "runs" },
      h("caption", { class: "visually-hidden" }, "Runs, active first"),
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          ...["Run", "State", "Scenario", "Target", "Agent", "Situations", "Requests", "In flight", "Corrected", "Proven", "Started"].map(
            (label) => h("th", { scope: "col" }, label),
          ),
        ),
      ),
      body,
    ),
    empty,
  );
  const selects = {
    state: select("state", "State", []),
    scenario: select("scenario", "Scenario", []),
    agent: select("agent", "Agent", []),
  };
  controls.append(...Object.values(selects));
  const load = async () => {
    try {
      const { data, changed } = await getJSON(`/console/api/runs?${query(filters)}`);
      updated(stamp);
      if (!changed) return;
      for (const [key, label] of Object.entries(selects)) fill(label.querySelector("select"), data.facets[key]);
      body.replaceChildren(...data.runs.map(row));
      empty.hidden = data.runs.length > 0;
    } catch (error) {
      stamp.replaceChildren(message("error", `Cannot load runs: ${error.message}`));
    }
  };
  refresh = load;
  return poll(load, 2000);
}
