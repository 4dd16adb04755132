// The token prompt: asked once per tab when the controller wants a token, kept in session storage.

import { ApiError, getJSON, token } from "./api.js";

let required = false;

export function setRequired(value) {
  required = value;
  const button = document.getElementById("token-button");
  button.hidden = !value;
  refreshButton();
  button.addEventListener("click", () => promptToken("Enter the API token, or a different one."));
}

function refreshButton() {
  const button = document.getElementById("token-button");
  button.textContent = token.get() ? "API token: set" : "API token: not set";
}

async function check() {
  try {
    await getJSON(`/console/api/auth?t=${Date.now()}`);
    return true;
  } catch (error) {
    if (error instanceof ApiError && (error.status === 401 || error.status === 403)) return false;
    throw error;
  }
}

// Ask for the token; resolves true once a token the controller accepts is stored.
export function promptToken(reason) {
  const dialog = document.getElementById("token-dialog");
  const form = document.getElementById("token-form");
  const input = document.getElementById("token-input");
  const error = document.getElementById("token-error");
  document.getElementById("token-reason").textContent = reason;
  error.hidden = true;
  input.value = "";
  return new Promise((resolve) => {
    const done = (ok) => {
      form.removeEventListener("submit", onSubmit);
      skip.removeEventListener("click", onSkip);
      dialog.removeEventListener("cancel", onSkip);
      dialog.close();
      refreshButton();
      resolve(ok);
    };
    const onSubmit = async (event) => {
      event.preventDefault();
      token.set(input.value);
      if (await check()) {
        done(true);
      } else {
        token.clear();
        error.textContent = "The controller refused this token.";
        error.hidden = false;
        input.focus();
      }
    };
    const onSkip = (event) => {
      event?.preventDefault();
      done(false);
    };
    const skip = document.getElementById("token-skip");
    form.addEventListener("submit", onSubmit);
    skip.addEventListener("click", onSkip);
    dialog.addEventListener("cancel", onSkip);
    dialog.showModal();
    input.focus();
  });
}

// Run a change; on 401/403 ask for the token and try once more.
export async function withToken(change) {
  try {
    return await change();
  } catch (error) {
    if (!(error instanceof ApiError) || (error.status !== 401 && error.status !== 403)) throw error;
    const reason = error.status === 401 ? "This change needs the API token." : "The stored token was refused.";
    token.clear();
    if (!(await promptToken(reason))) throw error;
    return await change();
  }
}

export const tokenRequired = () => required;
