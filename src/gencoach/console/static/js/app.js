// The console's entry point: session, token prompt, and the hash router between pages.

import { getJSON, token } from "./api.js";
import { h, message } from "./dom.js";
import { renderFunnel } from "./funnel.js";
import { renderGraph } from "./graph.js";
import { renderRuns } from "./runs.js";
import { renderStages } from "./stages.js";
import { promptToken, setRequired } from "./token.js";

const main = document.getElementById("main");
let session = { mode: "live", token_required: false };
let stop = null;

function route() {
  const hash = location.hash.slice(1) || "/runs";
  const [path, search = ""] = hash.split("?");
  return { path, params: new URLSearchParams(search) };
}

function render() {
  if (stop) stop();
  stop = null;
  const { path, params } = route();
  const page = path.split("/")[1] || "runs";
  for (const link of document.querySelectorAll("nav a")) {
    if (link.dataset.page === page) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  main.replaceChildren();
  const live = session.mode === "live";
  if (page === "run") stop = renderGraph(main, params.get("id"), { live, focus: params.get("node") });
  else if (page === "funnel" && live) stop = renderFunnel(main);
  else if (page === "stages" && live) stop = renderStages(main);
  else stop = renderRuns(main, { live });
  document.title = `${main.querySelector("h2")?.textContent ?? "gencoach"} · gencoach console`;
}

async function start() {
  try {
    session = (await getJSON("/console/api/session")).data;
  } catch (error) {
    main.replaceChildren(message("error", `The console cannot reach its server: ${error.message}`));
    return;
  }
  const badge = document.getElementById("mode-badge");
  badge.textContent = session.mode === "live" ? "live controller" : "saved runs, read-only";
  if (session.mode !== "live") for (const link of document.querySelectorAll("[data-live]")) link.hidden = true;
  setRequired(session.token_required);
  if (session.token_required && !token.get()) {
    await promptToken("This controller requires its API token to change budgets or correct an agent.");
  }
  window.addEventListener("hashchange", render);
  render();
}

start().catch((error) => main.replaceChildren(h("p", { class: "notice error" }, String(error))));
