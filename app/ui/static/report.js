// Draws what the server reports of a finished request: how an answer ended, its trust signals
// in words (who wrote it, whether the documents answer the question, whether the passages bear
// it out, how its sources were found: each with its field beside), the degradations in words,
// the waterfall, the model's token counts and the trace id.

import { el } from "./dom.js";
import { waterfall } from "./waterfall.js";
import { degradationWords, finishWords, trustWords } from "./words.js";

function traceLine(traceId, jaegerUrl) {
  if (!traceId) return null;
  const id = jaegerUrl
    ? el("a", { href: `${jaegerUrl}/trace/${traceId}`, target: "_blank", rel: "noopener" }, traceId)
    : el("code", {}, traceId);
  return el("p", { class: "trace" }, "Trace ", id);
}

/** The answer's trust signals as a list of questions and answers, each with its field. */
function trust(report) {
  const entries = trustWords(report).flatMap(({ name, words, code, warn }) => [
    el("dt", {}, name),
    el("dd", { class: warn ? "unsupported" : null }, words, " ", el("code", {}, code)),
  ]);
  return el("dl", { class: "trust" }, entries);
}

/** The report of a finished request: its ending and trust signals (an answer's), degradations,
 * waterfall, usage and trace. */
export function showReport(container, report, { jaegerUrl = null, answered = false } = {}) {
  const parts = [];
  if (answered) {
    parts.push(el("p", { class: "ending" }, finishWords(report.finish_reason)), trust(report));
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
