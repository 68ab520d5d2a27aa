// What the page says in words: refusals, 504s and other failures, the budget's degradations,
// how an answer ended, who wrote it and how far the passages bear it out (docs/answers.md, "The trust
// signals, defined once"), why each source is there, and each hop of a request. Where a server's
// message or code name exists, it follows the words.

const DEGRADATIONS = {
  rerank_skipped: "Reranking was skipped",
  rerank_reduced: "Fewer candidates were reranked",
  rerank_cut: "Reranking stopped early, at its deadline",
  rerank_timeout: "Reranking ran out of time: the search's order stands",
  rerank_failed: "Reranking failed: the search's order stands",
  rerank_unavailable: "No reranker was available: the search's order stands",
  keyword_skipped: "The keyword search was skipped",
  context_pruned: "The context was pruned to the passages' sentences closest to the question",
  context_reduced: "The context was shortened",
  output_capped: "The answer's length was capped",
  smaller_model: "A smaller model answered",
  passages: "No answer was generated: the passages alone fit the budget",
  generation_skipped: "No answer was generated",
  deadline_stop: "The answer was stopped at the deadline",
  attribution_skipped: "The citations were not attributed",
};

/** One degradation, {stage, action, reason}, as a sentence. */
export function degradationWords({ stage, action, reason }) {
  const what = DEGRADATIONS[action] || `${stage}: ${action.replaceAll("_", " ")}`;
  return reason ? `${what} (${stage}): ${reason}.` : `${what} (${stage}).`;
}

function retryWords(error) {
  return error.retryAfterS ? ` Try again in ${error.retryAfterS} s.` : "";
}

/** An ApiError (a refusal, a 504, any other failure) as a sentence a person can act on. */
export function errorWords(error) {
  const said = error.message ? ` The server said: “${error.message}”.` : "";
  switch (error.type) {
    case "overloaded":
      return (
        "Refused before any work: the server predicted it could not answer within this " +
        "budget behind the requests it already holds. Nothing was computed, so nothing was " +
        `wasted. Give a larger budget, or ask again shortly.${retryWords(error)}${said}`
      );
    case "shutting_down":
      return `Refused: this server is shutting down.${retryWords(error)}${said}`;
    case "deadline_exceeded":
      return (
        "Out of time (504): the budget ran out before an answer could be finished, or the " +
        `smallest answer could not fit in it. Try a larger budget.${said}`
      );
    case "unauthorized":
      return "The key was not accepted: type a valid API key above and choose Use key.";
    case "forbidden":
      return `This key may not do that.${said}`;
    case "rate_limited":
      return `This key has sent too many requests for now.${retryWords(error)}${said}`;
    case "invalid_request":
    case "invalid_header":
      return `The request was not valid.${said}`;
    case "unreachable":
      return "The server could not be reached: is it running?";
    default:
      return `The request failed (${error.status || "stream"} ${error.type}).${said}`;
  }
}

const FINISH = {
  stop: "The answer is complete.",
  length: "The answer was cut at its token limit.",
  deadline: "The answer was cut by the deadline.",
  skipped: "No answer was generated within the budget: these are the passages.",
  cancelled: "The answer was stopped.",
};

export function finishWords(reason) {
  return FINISH[reason] || `The answer ended: ${reason}.`;
}

const ATTRIBUTION = {
  model: "The model cites its sources by their [n] labels.",
  attributed: "The answer carries no labels: its sentences were matched to the passages.",
  extracted: "The answer quotes the passages' own sentences, each with its [n].",
  unattributed: "No passage supports the answer's sentences.",
  skipped: "No time was left to attribute the answer to its sources.",
  empty: "There is no answer text to attribute.",
  abstained: "Nothing is cited: the documents do not answer the question.",
};

const WRITER = {
  generate: "Written by the model.",
  extract: "Taken from the passages: their own sentences, with no model call.",
  abstain: "Not answered: the documents do not answer this question, so nothing was generated.",
};

const similarity = (value) =>
  value === null || value === undefined ? "" : ` (closest sentence: similarity ${Number(value).toFixed(2)})`;

function answerableWords({ answerable, evidence_similarity: closest }) {
  return answerable
    ? `Yes: a sentence of the passages is close enough to the question to answer it${similarity(closest)}.`
    : `No: no passage is close enough to the question to answer it${similarity(closest)}.`;
}

function groundedWords({ grounded, answer_mode: mode, attribution }) {
  if (grounded === true) return "Grounded: the passages bear out what the answer adds to the question.";
  if (grounded === null || grounded === undefined) return "Not judged.";
  if (mode === "abstain") return "No: an abstention says nothing to bear out.";
  if (attribution === "empty") return "No: there is no answer text.";
  return "Unsupported: the passages do not bear out what the answer says. Check it against the sources.";
}

/** The answer's trust signals, each as {name, words, code, warn}: who wrote it, whether the
 * documents can answer the question, whether the passages bear the answer out, how its
 * citations were found. `warn` marks an answer the passages do not bear out. */
export function trustWords(report) {
  const mode = report.answer_mode || "generate";
  return [
    { name: "Who wrote it", words: WRITER[mode] || mode, code: `answer_mode: ${mode}` },
    {
      name: "Can the documents answer it?",
      words: answerableWords(report),
      code: `answerable: ${report.answerable}`,
    },
    {
      name: "Do the passages bear it out?",
      words: groundedWords(report),
      code: `grounded: ${report.grounded}`,
      warn: report.grounded === false && mode !== "abstain" && report.attribution !== "empty",
    },
    {
      name: "How its sources were found",
      words: ATTRIBUTION[report.attribution] || report.attribution,
      code: `attribution: ${report.attribution}`,
    },
  ];
}

/** Why a passage is here: which searches found it, in words. */
export function foundByWords(foundBy = []) {
  const by = new Set(foundBy);
  if (by.has("keyword") && by.has("dense")) return "both: matched your words and close in meaning";
  if (by.has("keyword")) return "matched your words";
  if (by.has("dense")) return "close in meaning";
  return "found by the search";
}

const SCORE_KINDS = {
  cosine: "cosine similarity (dense search; at most 1)",
  bm25: "BM25 (keyword search; unbounded)",
  rrf: "reciprocal rank fusion (hybrid search; only the order means anything)",
};

/** A passage's raw scores, for those who want them: its score and what kind it is, the
 * reranker's, and the searches that found it. */
export function scoreWords(passage) {
  const kind = SCORE_KINDS[passage.score_kind] || passage.score_kind || "score";
  const parts = [`score ${passage.score} (${passage.score_kind}: ${kind})`];
  if (passage.rerank_score !== null && passage.rerank_score !== undefined) {
    parts.push(`reranker ${Number(passage.rerank_score).toFixed(3)}`);
  }
  parts.push(`found by ${(passage.found_by || []).join(" and ") || "the search"}`);
  return parts.join("; ");
}

const HOPS = {
  auth: "checking your key",
  "moderate.question": "checking your question",
  embed: "reading your question's meaning",
  search: "searching by meaning",
  keyword: "searching for your words",
  rerank: "ranking the passages again",
  "moderate.passages": "screening the passages",
  assemble: "putting the prompt together",
  extract: "picking the passages' sentences",
  generate: "writing the answer",
  "moderate.answer": "checking the answer",
  attribute: "matching the answer to its sources",
};

/** A hop of a request (a stage's code name: `moderate.question`) in plain words. */
export function hopWords(stage) {
  return HOPS[stage] || stage.replaceAll(/[._]/g, " ");
}
