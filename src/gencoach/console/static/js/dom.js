// Small DOM helpers: build elements, format numbers and times in the viewer's locale.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else if (key === "text") el.textContent = value;
    else if (key in el && typeof value !== "string") el[key] = value;
    else el.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

const numberFormat = new Intl.NumberFormat();
export const num = (value) => (value === null || value === undefined ? "—" : numberFormat.format(value));
export const pct = (rate) => (rate === null || rate === undefined ? "—" : `${Math.round(rate * 100)}%`);
export const time = (seconds) =>
  seconds ? new Date(seconds * 1000).toLocaleString(undefined, { dateStyle: "short", timeStyle: "medium" }) : "—";
export const secs = (value) => (value === null || value === undefined ? "—" : `${value.toFixed(2)} s`);

export function json(value) {
  return h("pre", { class: "json" }, JSON.stringify(value, null, 2));
}

export function details(summary, ...content) {
  return h("details", {}, h("summary", {}, summary), ...content);
}

export function message(kind, text) {
  return h("p", { class: `notice ${kind}`, role: kind === "error" ? "alert" : "status" }, text);
}

export function updated(el) {
  el.textContent = `Updated ${new Date().toLocaleTimeString()}`;
}

// Children for `replaceChildren`/`append`, which would print null and arrays as text.
export function nodes(...items) {
  return items.flat(Infinity).filter((item) => item !== null && item !== undefined && item !== false);
}
