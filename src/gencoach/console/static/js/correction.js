// The human correction form: a diagnosis and the replacement decision (tool calls built
// from the situation's tools and their argument schemas, a text answer, or raw JSON),
// submitted to POST /v1/runs/{id}/interventions and then followed to its outcome.

import { ApiError, getJSON, poll, query, runPath, send } from "./api.js";
import { h, message, nodes } from "./dom.js";
import { requestEl } from "./graph.js";
import { withToken } from "./token.js";

const SETTLED = new Set(["proven", "unproven", "abandoned", "error", "skipped", "declined"]);
let formCount = 0;

// A tool in any of the shapes agents announce: MAGMA `{name, arguments: {p: {type}}}`,
// OpenAI `{type: "function", function: {name, parameters}}` or `{name, parameters}`.
export function toolSpec(tool) {
  const f = tool.function ?? tool;
  let params = {};
  let required = [];
  if (f.parameters && typeof f.parameters === "object" && f.parameters.properties) {
    params = f.parameters.properties;
    required = f.parameters.required ?? [];
  } else if (f.arguments && typeof f.arguments === "object") {
    params = f.arguments;
    required = Object.keys(params);
  }
  return { name: String(f.name ?? "?"), description: f.description ?? "", params, required };
}

function argumentField(id, name, schema, required) {
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type ?? "string";
  const label = h("label", { for: id }, name, required ? " (required)" : "", schema.description ? h("small", {}, ` ${schema.description}`) : null);
  let input;
  let read;
  if (Array.isArray(schema.enum)) {
    input = h("select", { id }, schema.enum.map((v) => h("option", { value: JSON.stringify(v) }, String(v))));
    read = () => JSON.parse(input.value);
  } else if (type === "boolean" || type === "bool") {
    input = h("input", { id, type: "checkbox" });
    read = () => input.checked;
  } else if (["integer", "int", "number", "float"].includes(type)) {
    input = h("input", { id, type: "number", step: type.startsWith("int") ? 1 : "any", required });
    read = () => (input.value === "" ? undefined : Number(input.value));
  } else if (["object", "array", "dict", "list"].includes(type)) {
    input = h("textarea", { id, rows: 2, placeholder: type === "array" || type === "list" ? "[]" : "{}", required });
    read = () => (input.value.trim() === "" ? undefined : JSON.parse(input.value));
  } else {
    input = h("input", { id, type: "text", required });
    read = () => (input.value === "" && !required ? undefined : input.value);
  }
  return { el: h("div", { class: "field" }, label, input), read, input };
}

function callBuilder(prefix, tools, robot, onRemove) {
  const specs = tools.map(toolSpec);
  const box = h("fieldset", { class: "call" });
  const argsBox = h("div", { class: "args" });
  let fields = [];
  const toolId = `${prefix}-tool`;
  const robotId = `${prefix}-robot`;
  const toolSelect = h("select", { id: toolId, required: true }, specs.map((s) => h("option", { value: s.name }, s.name)));
  const robotInput = h("input", { id: robotId, type: "text", value: robot, required: true });
  const description = h("p", { class: "muted" });
  const build = () => {
    const spec = specs.find((s) => s.name === toolSelect.value);
    description.textContent = spec?.description ?? "";
    fields = Object.entries(spec?.params ?? {}).map(([name, schema]) => ({ name, ...argumentField(`${prefix}-arg-${name}`, name, schema ?? {}, spec.required.includes(name)) }));
    argsBox.replaceChildren(...fields.map((f) => f.el));
  };
  toolSelect.addEventListener("change", build);
  box.append(
    h("legend", {}, "Tool call"),
    h("div", { class: "field" }, h("label", { for: toolId }, "Tool"), toolSelect),
    description,
    h("div", { class: "field" }, h("label", { for: robotId }, "Robot (target_robot_name)"), robotInput),
    argsBox,
    h("button", { type: "button", onclick: () => onRemove(box) }, "Remove this call"),
  );
  build();
  return {
    el: box,
    value: () => {
      const args = {};
      for (const f of fields) {
        let value;
        try {
          value = f.read();
        } catch {
          throw new Error(`argument ${f.name} is not valid JSON`);
        }
        if (value !== undefined) args[f.name] = value;
      }
      return { name: toolSelect.value, arguments: args, target_robot_name: robotInput.value };
    },
  };
}

export function correctionForm({ runId, node, onFollow, onShow, refreshGraph }) {
  const n = ++formCount;
  const c = node.candidate;
  const tools = node.situation.input.tools ?? [];
  const robot = c.output?.tool_calls?.[0]?.target_robot_name ?? "";
  const calls = [];
  const callsBox = h("div", { class: "calls" });
  const addCall = () => {
    const call = callBuilder(`fix${n}-call${calls.length}-${Date.now() % 100000}`, tools, robot, (el) => {
      const at = calls.findIndex((item) => item.el === el);
      if (at >= 0) calls.splice(at, 1);
      el.remove();
    });
    calls.push(call);
    callsBox.append(call.el);
  };
  const ids = { explanation: `fix${n}-explanation`, expected: `fix${n}-expected`, say: `fix${n}-say`, raw: `fix${n}-raw` };
  const explanation = h("textarea", { id: ids.explanation, rows: 3, required: true });
  const expected = h("input", { id: ids.expected, type: "text", placeholder: 'e.g. panda.press_button(id="sw4")' });
  const say = h("textarea", { id: ids.say, rows: 2 });
  const raw = h("textarea", { id: ids.raw, rows: 6, spellcheck: "false" }, JSON.stringify(c.output ?? { say: "", tool_calls: [] }, null, 2));
  const modes = { tools: h("div", {}), say: h("div", { hidden: true }), raw: h("div", { hidden: true }) };
  let mode = tools.length ? "tools" : "say";
  // Hidden modes' fields are disabled too, so the browser does not check them on submit.
  const showMode = () => {
    for (const [k, el] of Object.entries(modes)) {
      el.hidden = k !== mode;
      for (const field of el.querySelectorAll("input, select, textarea")) field.disabled = k !== mode;
    }
  };
  const radio = (value, label) =>
    h("label", {}, h("input", { type: "radio", name: `fix${n}-mode`, value, checked: value === mode, onchange: () => { mode = value; showMode(); } }), ` ${label}`);
  modes.tools.append(...nodes(tools.length ? callsBox : h("p", { class: "muted" }, "The situation offered no tools."), tools.length ? h("button", { type: "button", onclick: addCall }, "Add a tool call") : null));
  modes.say.append(h("label", { for: ids.say }, "What the agent should say"), say);
  modes.raw.append(h("label", { for: ids.raw }, "Decision as JSON: {\"say\": ..., \"tool_calls\": [...]}"), raw);
  if (tools.length) addCall();
  showMode();
  const feedback = h("div", { class: "feedback", "aria-live": "polite" });
  const tell = (kind, text) => {
    feedback.replaceChildren(message(kind, text));
    feedback.scrollIntoView({ block: "nearest" });
  };
  const follow = h("div", { class: "follow" });

  const decision = () => {
    if (mode === "tools") return { say: "", tool_calls: calls.map((call) => call.value()) };
    if (mode === "say") return { say: say.value, tool_calls: [] };
    try {
      return JSON.parse(raw.value);
    } catch (error) {
      throw new Error(`the decision is not valid JSON: ${error.message}`);
    }
  };

  const followRequest = (requestId) => {
    const url = `/console/api/follow?${query({ run: runId, request: requestId })}`;
    const stop = poll(async () => {
      const { data, changed } = await getJSON(url);
      if (!changed) return;
      const branch = data.branch.map((b) =>
        h("li", {}, "Coached candidate ", h("a", { href: "#", onclick: (e) => { e.preventDefault(); onShow(b.candidate.id); } }, `#${b.candidate.id}`), ` in situation ${b.situation_id}: `, h("span", { class: `status status-${b.candidate.status}` }, b.candidate.status), b.candidate.stage_end ? ` (stage ${b.candidate.stage_end})` : ""),
      );
      follow.replaceChildren(...nodes(
        h("h5", {}, "Following your correction"),
        requestEl(data.request),
        branch.length ? h("ul", { class: "branch-orders" }, branch) : h("p", { class: "muted" }, "Waiting for the branch order…"),
        SETTLED.has(data.request.state) ? h("p", { class: `outcome outcome-${data.request.state}`, role: "status" }, `Outcome: ${data.request.state}`) : null,
      ));
      if (branch.length) refreshGraph();
      if (SETTLED.has(data.request.state)) stop();
    }, 1000);
    onFollow(stop);
  };

  const form = h(
    "form",
    { class: "correction", "aria-labelledby": `fix${n}-title` },
    h("h4", { id: `fix${n}-title` }, "Correct this decision"),
    h("p", { class: "muted" }, "Reinjected at this candidate's input outside the pending/unproven limits; the situation's exploration budget still applies."),
    h("div", { class: "field" }, h("label", { for: ids.explanation }, "Diagnosis: what went wrong"), explanation),
    h("div", { class: "field" }, h("label", { for: ids.expected }, "Expected decision, in words (optional)"), expected),
    h("fieldset", { class: "modes" }, h("legend", {}, "Replacement decision"), radio("tools", "Tool calls"), radio("say", "Text answer"), radio("raw", "Raw JSON")),
    modes.tools,
    modes.say,
    modes.raw,
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Submit correction")),
    feedback,
    follow,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    let body;
    try {
      body = {
        candidate_id: c.gen_id,
        diagnosis: { explanation: explanation.value, expected_decision: expected.value || null },
        decision: decision(),
      };
    } catch (error) {
      tell("error", error.message);
      return;
    }
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    try {
      const accepted = await withToken(() => send("POST", `${runPath(runId)}/interventions`, body));
      tell("ok", `Accepted as request ${accepted.request_id}.`);
      followRequest(accepted.request_id);
    } catch (error) {
      button.disabled = false;
      if (error instanceof ApiError && error.status === 409) {
        tell("warning", `Not accepted: ${error.message}`);
      } else if (error instanceof ApiError && error.status === 422) {
        const fields = (error.body?.errors ?? []).map((e) => `${e.field}: ${e.reason}`).join("; ");
        tell("error", `The correction is invalid: ${fields || error.message}`);
      } else {
        tell("error", `The correction failed: ${error.message}`);
      }
    }
  });
  return form;
}
