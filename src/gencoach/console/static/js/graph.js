// A run's graph: the situation/candidate tree with the original branch and coached
// alternatives side by side; a node opens in full beside it. Large graphs stay usable:
// only a budget of situations is expanded at first, the rest open on demand.

import { ApiError, getJSON, poll, query } from "./api.js";
import { details, h, json, message, num, time, updated } from "./dom.js";
import { correctionForm } from "./correction.js";

const INITIAL_BUDGET = 120; // situations expanded when a graph is first shown
const EXPAND_ALL_MAX = 600;
const CANDIDATES_SHOWN = 12;

function index(view) {
  const situations = new Map(view.situations.map((s) => [s.id, s]));
  const candidates = new Map();
  const owner = new Map();
  for (const s of view.situations) for (const c of s.candidates) { candidates.set(c.id, c); owner.set(c.id, s.id); }
  const size = new Map();
  for (const s of [...view.situations].sort((a, b) => b.id - a.id)) {
    let total = 1;
    for (const c of s.candidates) for (const [child] of c.links) total += size.get(child) ?? 0;
    size.set(s.id, total);
  }
  return { situations, candidates, owner, size };
}

function initialExpansion(view, idx) {
  const open = new Set();
  const queue = [...view.run.roots];
  while (queue.length && open.size < INITIAL_BUDGET) {
    const sid = queue.shift();
    const s = idx.situations.get(sid);
    if (!s) continue;
    open.add(sid);
    for (const c of s.candidates) for (const [child] of c.links) queue.push(child);
  }
  return open;
}

function scoreText(score) {
  return Object.entries(score)
    .map(([stage, [optimal, nonOptimal, unassessed, total]]) => `${stage.replace("stage_", "S")}: ${optimal}✓ ${nonOptimal}~ ${unassessed}? /${total}`)
    .join("  ");
}

function badges(c) {
  return [
    h("span", { class: `status status-${c.status}` }, c.status),
    c.stage_end ? h("span", { class: "badge end" }, `stage ${c.stage_end}`) : null,
    c.origin !== "model" ? h("span", { class: `badge origin-${c.origin}` }, c.origin) : null,
    c.coaching ? h("span", { class: "badge coached", title: "coaching marker" }, `${c.coaching}${c.role ? ` · ${c.role}` : ""}`) : null,
    c.faulty ? h("span", { class: "badge faulty" }, "diagnosed faulty") : null,
    c.human ? h("span", { class: "badge human" }, "human") : null,
    c.attempts.length ? h("span", { class: "badge attempt" }, `attempt ${c.attempts.join(", ")}`) : null,
  ];
}

export function renderGraph(main, runId, { live, focus }) {
  let view = null;
  let idx = null;
  let expanded = null;
  let selected = focus !== null && focus !== undefined ? Number(focus) : null;
  let stopFollow = null;
  const stamp = h("p", { class: "stamp", "aria-live": "polite" });
  const header = h("div", { class: "run-header" });
  const tree = h("div", { class: "tree", role: "tree", "aria-label": "Situations and candidates" });
  const detail = h("aside", { class: "detail", id: "node-detail", "aria-label": "Selected node", tabindex: "-1" }, h("p", { class: "muted" }, "Select a candidate to see it in full."));
  const find = h("input", { id: "find-node", type: "search", placeholder: "candidate id", size: 14 });
  const tools = h(
    "form",
    { class: "tree-tools", onsubmit: (e) => { e.preventDefault(); goTo(find.value.trim()); } },
    h("label", { for: "find-node" }, "Go to candidate "),
    find,
    h("button", { type: "submit" }, "Go"),
    h("button", { type: "button", id: "expand-all", onclick: () => expandAll() }, "Expand all"),
    h("button", { type: "button", onclick: () => { expanded = new Set(view.run.roots); draw(); } }, "Collapse all"),
  );
  main.append(h("h2", {}, `Run ${runId}`), header, stamp, h("div", { class: "graph-layout" }, h("div", {}, tools, tree), detail));

  const expandAll = () => {
    if (view.situations.length > EXPAND_ALL_MAX) {
      stamp.replaceChildren(message("info", `${num(view.situations.length)} situations: expand branches one by one, or go to a candidate.`));
      return;
    }
    expanded = new Set(view.situations.map((s) => s.id));
    draw();
  };

  const goTo = (text) => {
    let cid = /^\d+$/.test(text) ? Number(text) : null;
    if (cid === null || !idx.candidates.has(cid)) {
      const match = [...idx.candidates.values()].find((c) => c.gen_id === text);
      cid = match ? match.id : null;
    }
    if (cid === null) {
      stamp.replaceChildren(message("error", `No candidate ${text} in this run.`));
      return;
    }
    let sid = idx.owner.get(cid);
    while (sid !== undefined) {
      expanded.add(sid);
      const parent = idx.situations.get(sid).parent;
      sid = parent === null ? undefined : idx.owner.get(parent);
    }
    select(cid);
  };

  const situationEl = (sid) => {
    const s = idx.situations.get(sid);
    if (!s) return h("p", { class: "muted" }, `situation ${sid} is not recorded yet`);
    const open = expanded.has(sid);
    const toggle = h(
      "button",
      { type: "button", class: "toggle", "aria-expanded": String(open), "aria-label": `${open ? "Collapse" : "Expand"} situation ${sid}`, onclick: () => { open ? expanded.delete(sid) : expanded.add(sid); draw(); } },
      open ? "▾" : "▸",
    );
    const head = h(
      "div",
      { class: "sit-head" },
      toggle,
      h("span", { class: "sit-title" }, `Situation ${s.id}`, s.gen_id ? h("small", {}, ` ${s.gen_id}`) : null),
      h("span", { class: "badge stage" }, `stage ${s.stage}`),
      h("span", { class: `instr instr-${s.instruction.type}` }, `${s.instruction.type}: ${s.instruction.text}`),
    );
    const below = idx.size.get(sid) - 1;
    if (!open) {
      return h("section", { class: "situation collapsed", "data-situation": sid, role: "treeitem", "aria-expanded": "false" }, head, h("p", { class: "muted" }, `${s.candidates.length} candidates, ${num(below)} situations below`));
    }
    const shown = s.showAll ? s.candidates : s.candidates.slice(0, CANDIDATES_SHOWN);
    const more = s.candidates.length - shown.length;
    return h(
      "section",
      { class: "situation", "data-situation": sid, role: "treeitem", "aria-expanded": "true" },
      head,
      h("ol", { class: "candidates", role: "group" }, shown.map(candidateEl)),
      more > 0 ? h("button", { type: "button", class: "more", onclick: () => { s.showAll = true; draw(); } }, `Show ${more} more candidates`) : null,
    );
  };

  const candidateEl = (c) => {
    const next = c.links.filter(([, kind]) => kind === "next").map(([sid]) => sid);
    const alternatives = c.links.filter(([, kind]) => kind === "alternative").map(([sid]) => sid);
    const row = h(
      "button",
      { type: "button", class: `cand${selected === c.id ? " selected" : ""}`, "data-candidate": c.id, "aria-pressed": String(selected === c.id), onclick: () => select(c.id) },
      h("span", { class: "cand-id" }, `#${c.id}`, c.gen_id ? h("small", {}, ` ${c.gen_id}`) : null),
      h("span", { class: "decision" }, c.decision),
      h("span", { class: "badges" }, badges(c)),
      Object.keys(c.score).length ? h("span", { class: "score", title: "descendant score: optimal, non-optimal, unassessed / total" }, scoreText(c.score)) : null,
    );
    let children = null;
    if (alternatives.length) {
      children = h(
        "div",
        { class: "branches" },
        h("div", { class: "branch original" }, h("h5", {}, "Original branch"), next.length ? next.map(situationEl) : h("p", { class: "muted" }, "ends here")),
        h("div", { class: "branch coached" }, h("h5", {}, "Coached alternatives"), alternatives.map(situationEl)),
      );
    } else if (next.length) {
      children = h("div", { class: "children" }, next.map(situationEl));
    }
    return h("li", { class: "candidate" }, row, children);
  };

  const draw = () => {
    const scroll = window.scrollY;
    tree.replaceChildren(...view.run.roots.map(situationEl));
    window.scrollTo(0, scroll);
    const target = selected !== null ? tree.querySelector(`[data-candidate="${selected}"]`) : null;
    if (target && !target.dataset.seen) { target.dataset.seen = "1"; }
  };

  const select = async (cid) => {
    selected = cid;
    draw();
    tree.querySelector(`[data-candidate="${cid}"]`)?.scrollIntoView({ block: "center" });
    await showDetail(cid);
  };

  const showDetail = async (cid) => {
    if (stopFollow) { stopFollow(); stopFollow = null; }
    detail.replaceChildren(h("p", { class: "muted" }, "Loading…"));
    let node;
    try {
      node = (await getJSON(`/console/api/node?${query({ run: runId, candidate: cid })}`)).data;
    } catch (error) {
      detail.replaceChildren(message("error", error.message));
      return;
    }
    const c = node.candidate;
    const input = node.situation.input;
    detail.replaceChildren(
      h("h3", {}, `Candidate #${c.id}`, c.gen_id ? h("small", {}, ` ${c.gen_id}`) : null),
      h("dl", { class: "facts" },
        h("dt", {}, "Situation"), h("dd", {}, `${node.situation.id}${node.situation.gen_id ? ` (${node.situation.gen_id})` : ""}, stage ${node.situation.stage}`),
        h("dt", {}, "Decision"), h("dd", {}, h("code", {}, c.decision_line)),
        h("dt", {}, "Status"), h("dd", {}, c.status, c.stage_end ? `, stage end ${c.stage_end}` : ""),
        h("dt", {}, "Origin"), h("dd", {}, c.origin, c.coaching_attempt_ids.length ? `, attempts ${c.coaching_attempt_ids.join(", ")}` : ""),
        h("dt", {}, "Coaching"), h("dd", {}, c.coaching.type_coaching ?? "—", c.coaching.coaching_role ? ` (${c.coaching.coaching_role})` : "", c.coaching.diagnosed_as_faulty ? ", diagnosed faulty" : ""),
      ),
      details("Input: instruction", h("pre", { class: "json" }, input.instruction.content)),
      details(`Input: tools (${input.tools.length})`, json(input.tools)),
      details("Input: memory and attributes", json({ memory: input.memory, attributes: input.attributes, extra_keys: input.extra_keys })),
      details("Output", json(c.output ?? c.error)),
      details("Execution", json(c.execution)),
      details("Descendant score", json(c.score)),
      Object.keys(c.coaching_source).length ? details("Coaching source", json(c.coaching_source)) : null,
      c.internal_steps.length ? details(`Internal steps (${c.internal_steps.length})`, json(c.internal_steps)) : null,
      h("h4", {}, "Coaching requests"),
      node.requests.length ? node.requests.map(requestEl) : h("p", { class: "muted" }, live ? "None on this candidate." : "Saves keep no request timelines; the run's logs are below."),
      node.run_logs.length ? details(`Coaching logs of the run (${node.run_logs.length})`, node.run_logs.map(logEl)) : null,
      node.can_correct
        ? correctionForm({ runId, node, onFollow: (stop) => { stopFollow = stop; }, onShow: (id) => goTo(String(id)), refreshGraph: () => load() })
        : live && c.execution_finished === false ? h("p", { class: "muted" }, "A correction needs an executed candidate.") : null,
    );
  };

  const load = async () => {
    try {
      const { data, changed } = await getJSON(`/console/api/graph?${query({ run: runId })}`);
      updated(stamp);
      if (!changed) return;
      view = data;
      idx = index(view);
      if (!expanded) {
        expanded = initialExpansion(view, idx);
        document.getElementById("expand-all").disabled = view.situations.length > EXPAND_ALL_MAX;
      }
      const r = view.run;
      header.replaceChildren(
        h("dl", { class: "facts inline" },
          h("dt", {}, "State"), h("dd", {}, h("span", { class: `state state-${r.state}` }, r.state)),
          h("dt", {}, "Scenario"), h("dd", {}, r.scenario),
          h("dt", {}, "Target"), h("dd", {}, r.target),
          h("dt", {}, "Agent"), h("dd", {}, r.agent),
          h("dt", {}, "Situations"), h("dd", {}, num(view.situations.length)),
        ),
      );
      draw();
      if (selected !== null && !detail.dataset.loaded) {
        detail.dataset.loaded = "1";
        goTo(String(selected));
      }
    } catch (error) {
      const text = error instanceof ApiError && error.status === 404 ? `Unknown run ${runId}.` : `Cannot load the graph: ${error.message}`;
      stamp.replaceChildren(message("error", text));
    }
  };
  const stopGraph = poll(load, live ? 3000 : 60000);
  return () => { stopGraph(); if (stopFollow) stopFollow(); };
}

export function requestEl(r) {
  return h(
    "article",
    { class: "request", "data-request": r.request_id },
    h("h5", {}, `${r.route}${r.human ? " (human)" : ""}: `, h("span", { class: `state state-${r.state}` }, r.state), ` · ${r.type_coaching}`),
    r.reason ? h("p", {}, r.reason) : null,
    h("ol", { class: "timeline" }, r.history.map((step) => h("li", {}, h("time", {}, time(step.at)), ` +${step.after_s.toFixed(2)} s `, h("strong", {}, step.state), step.reason ? ` — ${step.reason}` : ""))),
    r.diagnosis ? details("Diagnosis", json(r.diagnosis)) : null,
    r.proposals?.length ? details(`Proposals (${r.proposals.length})`, json(r.proposals)) : null,
    r.logs?.length ? details(`LLM and coaching logs (${r.logs.length})`, r.logs.map(logEl)) : null,
  );
}

function logEl(entry) {
  return h("div", { class: "log" }, h("strong", {}, entry.coaching_type), h("pre", {}, entry.content));
}
