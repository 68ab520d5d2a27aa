// Draws what the server reports: the sources (before the answer, then marked as the answer cites
// them), search hits, and a request's waterfall (each hop's allocated and spent milliseconds
// against the budget, the degradations in words, how it ended, its trace id). Every text from
// the server goes in as text, never as markup: passages are other people's documents.

import { attributionWords, degradationWords, finishWords } from "./words.js";

/** Make an element: el("li", {class: "x"}, "text", child, ...). */
export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value !== null && value !== undefined && value !== false) node.setAttribute(name, value);
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

const ms = (value) => `${Number(value).toFixed(1)} ms`;
const PREVIEW_CHARS = 280;

function origin(passage) {
  const where = [passage.source];
  if (passage.page) where.push(`page ${passage.page}`);
  return where.join(", ");
}

/** The passages the prompt holds, labelled [n] as the model saw them, none cited yet. */
export function showCitations(list, citations) {
  list.replaceChildren(
    ...citations.map((c) =>
      el(
        "li",
        { value: c.label, "data-label": c.label, class: "citation" },
        el("span", { class: "label" }, `[${c.label}]`),
        " ",
        el("strong", {}, c.title || c.source),
        c.section ? el("span", { class: "section" }, ` · ${c.section}`) : null,
        el("span", { class: "source" }, ` (${origin(c)})`),
        el("span", { class: "score" }, ` score ${c.score.toFixed(3)} ${c.score_kind}`),
        el("span", { class: "cited-mark" }),
      ),
    ),
  );
}

/** Mark the sources the finished answer cites, and how that was found. */
export function markCited(list, citations) {
  for (const c of citations) {
    const item = list.querySelector(`li[data-label="${c.label}"]`);
    if (!item) continue;
    item.classList.toggle("cited", c.cited);
    const mark = item.querySelector(".cited-mark");
    if (!c.cited) mark.textContent = " — not cited";
    else if (c.by === "attributed")
      mark.textContent = ` — cited (attributed, support ${Number(c.support).toFixed(2)})`;
    else mark.textContent = " — cited";
  }
}

/** Search results: each hit's source, scores, how it was found, and its text. */
export function showHits(list, passages) {
  list.replaceChildren(
    ...passages.map((p) =>
      el(
        "li",
        { class: "hit" },
        el("strong", {}, p.title || p.source),
        p.section ? el("span", { class: "section" }, ` · ${p.section}`) : null,
        el("span", { class: "source" }, ` (${origin(p)}, ${p.kind || "text"})`),
        el(
          "span",
          { class: "score" },
          ` ${p.score_kind} ${p.score.toFixed(3)}, found by ${p.found_by.join(" and ") || "search"}`,
          p.rerank_score !== null && p.rerank_score !== undefined
            ? `, reranked ${p.rerank_score.toFixed(3)}`
            : "",
        ),
        ...passageText(p.text),
      ),
    ),
  );
}

/** A passage's opening lines, and the whole of it behind a disclosure when it is longer. */
function passageText(text) {
  if (text.length <= PREVIEW_CHARS) return [el("p", { class: "text" }, text)];
  return [
    el("p", { class: "text" }, `${text.slice(0, PREVIEW_CHARS).trimEnd()}…`),
    el("details", {}, el("summary", {}, `The whole passage (${text.length} characters)`), el("p", {}, text)),
  ];
}

function bar(stage, scale) {
  const track = el("div", { class: "track", "aria-hidden": "true" });
  const allocated = el("div", { class: "allocated" });
  const spent = el("div", { class: stage.exceeded ? "spent over" : "spent" });
  allocated.style.left = spent.style.left = `${(100 * stage.start_ms) / scale}%`;
  allocated.style.width = `${(100 * stage.allocated_ms) / scale}%`;
  spent.style.width = `${Math.max((100 * stage.spent_ms) / scale, 0.3)}%`;
  track.append(allocated, spent);
  return track;
}

function waterfall(report) {
  const budget = report.budget;
  const scale = Math.max(budget.budget_ms, budget.spent_ms);
  const rows = report.stages.map((stage) =>
    el(
      "tr",
      { class: stage.exceeded ? "over" : null, "data-stage": stage.stage },
      el("th", { scope: "row" }, stage.stage),
      el("td", {}, ms(stage.start_ms)),
      el("td", {}, ms(stage.spent_ms), stage.exceeded ? el("span", { class: "flag" }, " over") : null),
      el("td", {}, ms(stage.allocated_ms)),
      el("td", { class: "bar" }, bar(stage, scale)),
    ),
  );
  const total = { start_ms: 0, spent_ms: budget.spent_ms, allocated_ms: budget.budget_ms, exceeded: budget.exceeded };
  rows.push(
    el(
      "tr",
      { class: budget.exceeded ? "total over" : "total" },
      el("th", { scope: "row" }, "whole request"),
      el("td", {}, ms(0)),
      el("td", {}, ms(budget.spent_ms)),
      el("td", {}, ms(budget.budget_ms)),
      el("td", { class: "bar" }, bar(total, scale)),
    ),
  );
  return el(
    "table",
    { class: "waterfall" },
    el(
      "caption",
      {},
      `Where the budget went: ${ms(budget.spent_ms)} of ${ms(budget.budget_ms)}` +
        (budget.exceeded ? ", over budget." : `, ${ms(budget.remaining_ms)} left.`),
    ),
    el(
      "thead",
      {},
      el(
        "tr",
        {},
        el("th", { scope: "col" }, "Hop"),
        el("th", { scope: "col" }, "Started at"),
        el("th", { scope: "col" }, "Spent"),
        el("th", { scope: "col" }, "Allocated"),
        el("th", { scope: "col" }, "Against the budget (outline: allocated; fill: spent)"),
      ),
    ),
    el("tbody", {}, rows),
  );
}

function traceLine(traceId, jaegerUrl) {
  if (!traceId) return null;
  const id = jaegerUrl
    ? el("a", { href: `${jaegerUrl}/trace/${traceId}`, target: "_blank", rel: "noopener" }, traceId)
    : el("code", {}, traceId);
  return el("p", { class: "trace" }, "Trace ", id);
}

/** The report of a finished request: its waterfall, degradations, ending and trace. */
export function showReport(container, report, { jaegerUrl = null, answered = false } = {}) {
  const parts = [];
  if (answered) {
    parts.push(el("p", { class: "ending" }, finishWords(report.finish_reason)));
    const attribution = attributionWords(report.attribution, report.grounded, report.answer_mode);
    const unsupported = report.grounded === false && report.answer_mode !== "abstain";
    if (attribution) {
      parts.push(el("p", { class: unsupported ? "attribution unsupported" : "attribution" }, attribution));
    }
  }
  const degradations = report.degradations || [];
  parts.push(
    el("h3", {}, "Degradations"),
    degradations.length
      ? el("ul", { class: "degradations" }, degradations.map((d) => el("li", {}, degradationWords(d))))
      : el("p", { class: "degradations" }, "None: every hop ran in full."),
  );
  parts.push(el("h3", {}, "Waterfall"), waterfall(report));
  if (answered && report.usage) {
    const u = report.usage;
    parts.push(
      el(
        "p",
        { class: "usage" },
        `${report.model}: ${u.prompt_tokens} prompt tokens (${u.cached_tokens} cached), ` +
          `${u.completion_tokens} answer tokens.`,
      ),
    );
  }
  parts.push(traceLine(report.trace_id, jaegerUrl));
  container.replaceChildren(...parts.filter(Boolean));
}
