// The page's behaviour: the key, the collection picker, asking (citations, then the answer's
// Markdown as it streams, then the report) and searching (modes and filters). It uses the API as
// any client does.

import { ApiError, apiKey, call, events, getJson } from "./api.js";
import { answerView } from "./markdown.js";
import { showReport } from "./report.js";
import { markCited, openSource, showCitations, showHits } from "./sources.js";
import { errorWords } from "./words.js";

const $ = (id) => document.getElementById(id);
let config = { budget_ms: { default: 15000, min: 50, max: 120000 }, jaeger_url: null };
let asking = null; // the AbortController of the question being answered

function say(target, text, { error = false } = {}) {
  target.textContent = text;
  target.classList.toggle("error", error);
}

/** A failure in words: the server's (refusals, 504s, ...) or the browser's own. */
function sayFailure(target, error) {
  say(target, error instanceof ApiError ? errorWords(error) : String(error), { error: true });
}

async function loadConfig() {
  config = await getJson("/ui/config.json");
  const budget = $("budget");
  Object.assign(budget, { min: config.budget_ms.min, max: config.budget_ms.max });
  budget.value = config.budget_ms.default;
  $("k").max = config.max_search_k;
  const mode = document.querySelector(`input[name="mode"][value="${config.search_mode}"]`);
  if (mode) mode.checked = true;
}

async function loadCollections() {
  const select = $("collection");
  const status = $("collections-status");
  if (!apiKey.get()) {
    select.replaceChildren();
    say(status, "Type an API key to see its collections.");
    return;
  }
  try {
    const { collections } = await getJson("/v1/collections");
    const options = collections.map((c) => {
      const option = document.createElement("option");
      option.value = c.name;
      option.textContent = `${c.name} (${c.chunks} chunks)`;
      return option;
    });
    select.replaceChildren(...options);
    const standard = collections.find((c) => c.default);
    if (standard) select.value = standard.name;
    say(status, collections.length ? "" : "This key reads no collection yet.");
  } catch (error) {
    select.replaceChildren();
    sayFailure(status, error);
  }
}

function budgetMs() {
  const value = Number($("budget").value);
  return Number.isFinite(value) && value > 0 ? Math.round(value) : undefined;
}

async function ask(event) {
  event.preventDefault();
  if (asking) return;
  const status = $("ask-status");
  const citations = $("citations");
  const answer = $("answer");
  const report = $("ask-report");
  citations.replaceChildren();
  answer.replaceChildren();
  delete answer.dataset.markdown;
  let view = answerView(answer);
  report.replaceChildren();
  $("answer-area").hidden = true;
  asking = new AbortController();
  $("ask-button").disabled = true;
  $("stop-button").disabled = false;
  say(status, "Searching…");
  const sent = performance.now();
  let firstToken = null;
  try {
    const response = await call("/v1/ask", {
      method: "POST",
      body: {
        question: $("question").value,
        collection: $("collection").value || undefined,
        budget_ms: budgetMs(),
        stream: true,
      },
      signal: asking.signal,
    });
    for await (const { event: name, data } of events(response)) {
      if (name === "citations") {
        showCitations(citations, data.citations);
        view = answerView(answer, new Set(data.citations.map((c) => c.label)));
        $("answer-area").hidden = false;
        say(status, `${data.citations.length} sources found; answering…`);
      } else if (name === "token") {
        if (firstToken === null) firstToken = performance.now() - sent;
        view.add(data.text);
      } else if (name === "replace") {
        view.replace(data.text);
      } else if (name === "done") {
        view.finish();
        markCited(citations, data.citations);
        showReport(report, data, { jaegerUrl: config.jaeger_url, answered: true });
        const first = firstToken === null ? "no answer token" : `first token after ${firstToken.toFixed(0)} ms`;
        say(status, `Done in ${data.budget.spent_ms.toFixed(0)} ms of ${data.budget.budget_ms.toFixed(0)} (${first}, as this browser saw it).`);
      } else if (name === "error") {
        const { type, message } = data.error;
        sayFailure(status, new ApiError(0, type, message));
      }
    }
  } catch (error) {
    if (error.name === "AbortError") say(status, "Stopped: the server stops generating too.");
    else sayFailure(status, error);
  } finally {
    view.finish();
    asking = null;
    $("ask-button").disabled = false;
    $("stop-button").disabled = true;
  }
}

function kinds() {
  const list = $("kind").value.split(",").map((k) => k.trim().replace(/^\./, "")).filter(Boolean);
  if (list.length === 0) return undefined;
  return list.length === 1 ? list[0] : list;
}

async function search(event) {
  event.preventDefault();
  const status = $("search-status");
  const hits = $("hits");
  const report = $("search-report");
  hits.replaceChildren();
  report.replaceChildren();
  say(status, "Searching…");
  $("search-button").disabled = true;
  const mode = document.querySelector('input[name="mode"]:checked');
  const k = Number($("k").value);
  try {
    const response = await call("/v1/search", {
      method: "POST",
      body: {
        query: $("query").value,
        collection: $("collection").value || undefined,
        mode: mode ? mode.value : undefined,
        k: Number.isInteger(k) && k > 0 ? k : undefined,
        source_prefix: $("source-prefix").value.trim() || undefined,
        kind: kinds(),
        budget_ms: budgetMs(),
      },
    });
    const data = await response.json();
    showHits(hits, data.passages);
    showReport(report, data, { jaegerUrl: config.jaeger_url });
    say(status, `${data.passages.length} passages in ${data.budget.spent_ms.toFixed(0)} ms.`);
  } catch (error) {
    sayFailure(status, error);
  } finally {
    $("search-button").disabled = false;
  }
}

function useKey(event) {
  event.preventDefault();
  apiKey.set($("key").value.trim());
  loadCollections();
}

function forgetKey() {
  apiKey.forget();
  $("key").value = "";
  loadCollections();
}

function enterAsks(event) {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    $("ask-form").requestSubmit();
  }
}

async function start() {
  $("key").value = apiKey.get();
  $("key-form").addEventListener("submit", useKey);
  $("forget-key").addEventListener("click", forgetKey);
  $("ask-form").addEventListener("submit", ask);
  $("question").addEventListener("keydown", enterAsks);
  $("stop-button").addEventListener("click", () => asking && asking.abort());
  $("answer").addEventListener("click", (event) => {
    const link = event.target.closest("a.cite");
    if (!link) return;
    event.preventDefault(); // the focus goes to the source, which scrolls into view
    openSource(link);
  });
  $("search-form").addEventListener("submit", search);
  try {
    await loadConfig();
  } catch (error) {
    sayFailure($("ask-status"), error);
  }
  await loadCollections();
  document.body.dataset.ready = "true";
}

start();
