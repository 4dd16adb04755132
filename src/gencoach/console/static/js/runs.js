// The runs page: a page of runs at a time (newest first), filtered by state, scenario and
// agent on the server, with the totals; polled live, and only the page shown is re-read.

import { getJSON, poll, query } from "./api.js";
import { h, message, num, time, updated } from "./dom.js";

const PAGE_SIZE = 50;
// Kept across polls and visits to other pages: the filters, and the cursors of the pages
// walked through (the first page has none).
const filters = { state: "", scenario: "", agent: "" };
let cursors = [null];

function select(name, label, values) {
  const id = `filter-${name}`;
  const control = h(
    "select",
    {
      id,
      name,
      onchange: (event) => {
        filters[name] = event.target.value;
        cursors = [null];
        refresh();
      },
    },
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
  const target = run.target_kind ? `${run.target_kind}: ${run.target}` : run.target;
  return h(
    "tr",
    { "data-run": run.run_id ?? run.folder, "data-state": run.state },
    h("th", { scope: "row" }, name),
    h("td", {}, h("span", { class: `state state-${run.state}` }, run.state)),
    h("td", {}, run.scenario),
    h("td", { class: "task", title: target, "data-col": "task" }, run.task),
    h("td", {}, run.agent),
    h("td", { class: "num", "data-col": "situations" }, num(run.situations)),
    ...coachingCells(run.coaching),
    h("td", { "data-col": "started" }, time(run.started_at)),
    h("td", { "data-col": "saved" }, time(run.saved_at)),
  );
}

function summary(data, first) {
  const shown = data.runs.length ? `${num(first)}–${num(first + data.runs.length - 1)} of ` : "";
  const states = Object.entries(data.counts)
    .filter(([, count]) => count > 0)
    .map(([state, count]) => `${num(count)} ${state}`)
    .join(", ");
  return `Runs ${shown}${num(data.total)} matching${states ? ` · ${states}` : ""}`;
}

let refresh = () => {};

export function renderRuns(main, { live }) {
  const stamp = h("p", { class: "stamp", "aria-live": "polite" });
  const controls = h("div", { class: "filters", role: "group", "aria-label": "Filters" });
  const total = h("p", { id: "runs-total", class: "total" });
  const body = h("tbody");
  const empty = h("p", { class: "muted", hidden: true }, "No run matches.");
  const previous = h("button", { type: "button", disabled: true }, "Previous page");
  const next = h("button", { type: "button", disabled: true }, "Next page");
  const pager = h("nav", { class: "pager", "aria-label": "Pages of runs" }, previous, next);
  main.append(
    h("h2", {}, live ? "Runs" : "Saved runs"),
    controls,
    total,
    stamp,
    h(
      "table",
      { class: "runs" },
      h("caption", { class: "visually-hidden" }, "Runs, newest first"),
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          ...["Run", "State", "Scenario", "Task", "Agent", "Situations", "Requests", "In flight", "Corrected", "Proven", "Started", "Saved"].map(
            (label) => h("th", { scope: "col" }, label),
          ),
        ),
      ),
      body,
    ),
    empty,
    pager,
  );
  const selects = {
    state: select("state", "State", []),
    scenario: select("scenario", "Scenario", []),
    agent: select("agent", "Agent", []),
  };
  controls.append(...Object.values(selects));
  previous.addEventListener("click", () => {
    cursors.pop();
    refresh();
  });
  let nextCursor = null;
  next.addEventListener("click", () => {
    if (nextCursor) cursors.push(nextCursor);
    refresh();
  });
  const load = async () => {
    const cursor = cursors[cursors.length - 1];
    try {
      const { data, changed } = await getJSON(`/console/api/runs?${query({ ...filters, cursor, limit: PAGE_SIZE })}`);
      updated(stamp);
      if (!changed) return;
      if (!data.runs.length && cursors.length > 1) {
        cursors.pop(); // the page emptied (its runs moved on): show the one before
        await load();
        return;
      }
      for (const [key, label] of Object.entries(selects)) fill(label.querySelector("select"), data.facets[key]);
      total.textContent = summary(data, (cursors.length - 1) * PAGE_SIZE + 1);
      body.replaceChildren(...data.runs.map(row));
      empty.hidden = data.runs.length > 0;
      nextCursor = data.next_cursor;
      next.disabled = !nextCursor;
      previous.disabled = cursors.length < 2;
    } catch (error) {
      if (error.status === 400 && cursors.length > 1) {
        cursors = [null]; // a cursor the server no longer takes: back to the first page
        await load();
        return;
      }
      stamp.replaceChildren(message("error", `Cannot load runs: ${error.message}`));
    }
  };
  refresh = load;
  return poll(load, 2000);
}
