// A run's graph: the situation/candidate tree with the original branch and coached
// alternatives side by side; a node opens in full beside it. Large graphs stay usable:
// only a budget of situations is expanded at first, the rest open on demand.

import { ApiError, getJSON, poll, query } from "./api.js";
import { details, h, json, message, nodes, num, time, updated } from "./dom.js";
import { correctionForm } from "./correction.js";

const INITIAL_BUDGET = 60; // situations expanded when a graph is first shown
const EXPAND_ALL_MAX = 600;
const CANDIDATES_SHOWN = 12;
const WINDOW_ABOVE = 8; // situations shown above a candidate reached deep in a long graph

// The one situation a trajectory simply continues with: drawn below, not indented.
function continuation(s) {
  const linked = s.candidates.filter((c) => c.links.length);
  if (linked.length !== 1) return null;
  const links = linked[0].links;
  return links.length === 1 && links[0][1] === "next" ? { candidate: linked[0].id, situation: links[0][0] } : null;
}

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

const plural = (count, noun) => `${num(count)} ${noun}${count === 1 ? "" : "s"}`;

function scoreText(score) {
  return Object.entries(score)
    .map(([stage, [optimal, nonOptimal, unassessed, total]]) => `${stage.replace("stage_", "S")}: ${optimal}✓ ${nonOptimal}~ ${unassessed}? /${total}`)
    .join("  ");
}

const SCORE_HELP = "descendant score per stage (S0 is stage 0): trajectories below that ended it optimal (✓), non-optimal (~), not assessed (?), of all of them (/)";

function scoreLegend() {
  return h(
    "p",
    { class: "legend", id: "score-legend" },
    h("span", { class: "score" }, "S0: 1✓ 0~ 0? /3"),
    " reads: of the 3 trajectories below the candidate that reached stage 0's end, 1 ended it optimal (✓), 0 non-optimal (~), 0 not assessed (?).",
  );
}

function badges(c) {
  return [
    h("span", { class: `status status-${c.status}` }, c.status),
    c.stage_end ? h("span", { class: "badge end" }, `stage ${c.stage_end}`) : null,
    c.origin !== "model" ? h("span", { class: `badge origin-${c.origin}` }, c.origin) : null,
    c.coaching ? h("span", { class: "badge coached", title: "coaching marker" }, `${c.coaching}${c.role ? ` · ${c.role}` : ""}`) : null,
    c.faulty ? h("span", { class: "badge faulty" }, "diagnosed faulty") : null,
    c.human ? h("span", { class: "badge human" }, "human") : null,
    c.decision_source === "fallback" ? h("span", { class: "badge fallback", title: "the agent's fallback made this decision, not the coach" }, "fallback") : null,
    c.attempts.length ? h("span", { class: "badge attempt" }, `attempt ${c.attempts.join(", ")}`) : null,
  ];
}

export function renderGraph(main, runId, { live, focus }) {
  let view = null;
  let idx = null;
  let expanded = null;
  let selected = focus !== null && focus !== undefined ? Number(focus) : null;
  let focusPending = selected !== null; // the URL named a candidate to open
  let windowRoot = null; // draw from this situation instead of the roots, when set
  let stopFollow = null;
  const stamp = h("p", { class: "stamp", "aria-live": "polite" });
  const header = h("div", { class: "run-header" });
  const tree = h("div", { class: "tree", role: "region", "aria-label": "Situations and candidates" });
  const detail = h("aside", { class: "detail", id: "node-detail", "aria-label": "Selected node", tabindex: "-1" }, h("p", { class: "muted" }, "Select a candidate to see it in full."));
  const find = h("input", { id: "find-node", type: "search", placeholder: "candidate id", size: 14 });
  const tools = h(
    "form",
    { class: "tree-tools", onsubmit: (e) => { e.preventDefault(); goTo(find.value.trim()); } },
    h("label", { for: "find-node" }, "Go to candidate "),
    find,
    h("button", { type: "submit" }, "Go"),
    h("button", { type: "button", id: "expand-all", onclick: () => expandAll() }, "Expand all"),
    h("button", { type: "button", onclick: () => { expanded = new Set(view.run.roots); windowRoot = null; draw(); } }, "Collapse all"),
  );
  main.append(h("h2", {}, `Run ${runId}`), header, stamp, h("div", { class: "graph-layout" }, h("div", { class: "tree-column" }, tools, scoreLegend(), tree), detail));

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
    const path = [];
    let sid = idx.owner.get(cid);
    while (sid !== undefined) {
      path.unshift(sid);
      const parent = idx.situations.get(sid).parent;
      sid = parent === null ? undefined : idx.owner.get(parent);
    }
    windowRoot = path.length > WINDOW_ABOVE * 2 ? path[path.length - 1 - WINDOW_ABOVE] : null;
    for (const step of path.slice(windowRoot === null ? 0 : -WINDOW_ABOVE - 1)) expanded.add(step);
    select(cid);
  };

  // A situation and the ones its trajectory simply continues with, as a flat list.
  const situationEl = (first) => {
    const drawn = [];
    let sid = first;
    while (sid !== null) {
      const [section, next] = oneSituation(sid);
      drawn.push(section);
      sid = next;
    }
    return drawn;
  };

  const oneSituation = (sid) => {
    const s = idx.situations.get(sid);
    if (!s) return [h("p", { class: "muted" }, `situation ${sid} is not recorded yet`), null];
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
      s.instruction.json ? h("details", { class: "raw" }, h("summary", {}, "raw JSON"), json(s.instruction.json)) : null,
    );
    const below = idx.size.get(sid) - 1;
    if (!open) {
      const summary = h("p", { class: "muted" }, `${plural(s.candidates.length, "candidate")}, ${plural(below, "situation")} below`);
      return [h("section", { class: "situation collapsed", "data-situation": sid }, head, summary), null];
    }
    const shown = s.showAll ? s.candidates : s.candidates.slice(0, CANDIDATES_SHOWN);
    const more = s.candidates.length - shown.length;
    const next = continuation(s);
    const section = h(
      "section",
      { class: "situation", "data-situation": sid },
      head,
      h("ol", { class: "candidates", "aria-label": `Candidates of situation ${sid}` }, shown.map((c) => candidateEl(c, next))),
      more > 0 ? h("button", { type: "button", class: "more", onclick: () => { s.showAll = true; draw(); } }, `Show ${more} more candidates`) : null,
    );
    return [section, next ? next.situation : null];
  };

  const candidateEl = (c, next) => {
    const following = c.links.filter(([, kind]) => kind === "next").map(([sid]) => sid);
    const alternatives = c.links.filter(([, kind]) => kind === "alternative").map(([sid]) => sid);
    const row = h(
      "button",
      { type: "button", class: `cand${selected === c.id ? " selected" : ""}`, "data-candidate": c.id, "aria-pressed": String(selected === c.id), onclick: () => select(c.id) },
      h("span", { class: "cand-id" }, `#${c.id}`, c.gen_id ? h("small", {}, ` ${c.gen_id}`) : null),
      h("span", { class: "decision" }, c.decision),
      h("span", { class: "badges" }, badges(c)),
      Object.keys(c.score).length ? h("span", { class: "score", title: SCORE_HELP, "aria-describedby": "score-legend" }, scoreText(c.score)) : null,
    );
    let children = null;
    if (next && next.candidate === c.id) {
      children = h("p", { class: "continues muted" }, `continues with situation ${next.situation} below`);
    } else if (alternatives.length) {
      children = h(
        "div",
        { class: "branches" },
        h("div", { class: "branch original" }, h("h5", {}, "Original branch"), following.length ? following.flatMap(situationEl) : h("p", { class: "muted" }, "ends here")),
        h("div", { class: "branch coached" }, h("h5", {}, "Coached alternatives"), alternatives.flatMap(situationEl)),
      );
    } else if (following.length) {
      children = h("div", { class: "children" }, following.flatMap(situationEl));
    }
    return h("li", { class: "candidate" }, row, children);
  };

  const depthOf = (sid) => {
    let depth = 0;
    let parent = idx.situations.get(sid)?.parent ?? null;
    while (parent !== null) {
      depth += 1;
      parent = idx.situations.get(idx.owner.get(parent))?.parent ?? null;
    }
    return depth;
  };

  const draw = () => {
    const scroll = window.scrollY;
    const banner = windowRoot === null ? [] : [
      h("p", { class: "notice info" }, `Showing from situation ${windowRoot}; ${num(depthOf(windowRoot))} situations above. `,
        h("button", { type: "button", onclick: () => { windowRoot = null; draw(); } }, "Show from the root")),
    ];
    const roots = windowRoot === null ? view.run.roots : [windowRoot];
    tree.replaceChildren(...banner, ...roots.flatMap(situationEl));
    window.scrollTo(0, scroll);
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
    detail.replaceChildren(...nodes(
      h("h3", {}, `Candidate #${c.id}`, c.gen_id ? h("small", {}, ` ${c.gen_id}`) : null),
      h("dl", { class: "facts" },
        h("dt", {}, "Situation"), h("dd", {}, `${node.situation.id}${node.situation.gen_id ? ` (${node.situation.gen_id})` : ""}, stage ${node.situation.stage}`),
        h("dt", {}, "Decision"), h("dd", {}, h("code", {}, c.decision_line)),
        h("dt", {}, "Status"), h("dd", {}, c.status, c.stage_end ? `, stage end ${c.stage_end}` : ""),
        h("dt", {}, "Origin"), h("dd", {}, c.origin, c.coaching_attempt_ids.length ? `, attempts ${c.coaching_attempt_ids.join(", ")}` : ""),
        h("dt", {}, "Coaching"), h("dd", {}, c.coaching.type_coaching ?? "—", c.coaching.coaching_role ? ` (${c.coaching.coaching_role})` : "", c.coaching.diagnosed_as_faulty ? ", diagnosed faulty" : ""),
      ),
      details(`Input: instruction (${input.instruction.type})`, h("pre", { class: "feedback" }, node.situation.instruction_text),
        node.situation.instruction_text !== input.instruction.content ? details("raw JSON", h("pre", { class: "json" }, input.instruction.content)) : null),
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
    ));
  };

  const load = async () => {
    try {
      const { data, changed } = await getJSON(`/console/api/graph?${query({ run: runId })}`);
      updated(stamp);
      if (!changed) return;
      const known = idx ? new Set(idx.situations.keys()) : null;
      view = data;
      idx = index(view);
      if (!expanded) {
        expanded = initialExpansion(view, idx);
      } else if (expanded.size < INITIAL_BUDGET) {
        // Situations recorded since the last look open by themselves while the view is small.
        for (const s of view.situations) if (!known.has(s.id)) expanded.add(s.id);
      }
      document.getElementById("expand-all").disabled = view.situations.length > EXPAND_ALL_MAX;
      const r = view.run;
      // A simulator's target is often its scenario's description (kind "scenario"): it is
      // shown with the scenario; a target of another kind keeps a row naming its kind.
      const describesScenario = r.target_kind === "scenario";
      header.replaceChildren(
        h("dl", { class: "facts inline" },
          h("dt", {}, "State"), h("dd", {}, h("span", { class: `state state-${r.state}` }, r.state)),
          h("dt", {}, "Scenario"), h("dd", { "data-fact": "scenario" }, r.scenario, describesScenario && r.target !== r.scenario ? h("span", { class: "muted" }, ` — ${r.target}`) : null),
          h("dt", {}, "Task"), h("dd", { "data-fact": "task" }, r.task),
          describesScenario || r.target === r.task ? null : [h("dt", {}, `Target (${r.target_kind})`), h("dd", { "data-fact": "target" }, r.target)],
          h("dt", {}, "Agent"), h("dd", {}, r.agent),
          h("dt", {}, "Situations"), h("dd", {}, num(view.situations.length)),
        ),
      );
      draw();
      if (focusPending) {
        focusPending = false;
        goTo(String(selected));
      }
    } catch (error) {
      const text = error instanceof ApiError && error.status === 404 ? `Unknown run ${runId}.` : `Cannot load the graph: ${error.message}`;
      stamp.replaceChildren(message("error", text));
    }
  };
  // A large live graph costs the controller seconds to rebuild after each change: poll it less.
  const every = () => (!live ? 60000 : (view?.situations.length ?? 0) > 500 ? 10000 : 3000);
  const stopGraph = poll(load, every);
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
