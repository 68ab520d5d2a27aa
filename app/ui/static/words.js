// What the page says in words: refusals, 504s and other failures, the budget's degradations,
// how an answer ended and how its citations were found. The server's own message follows each.

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
  abstained: "No passage is close enough to the question to answer it: nothing was generated.",
};

const WRITER = {
  generate: "Written by the model.",
  extract: "Taken from the passages, with no model call.",
  abstain: "The documents do not answer this question.",
};

export function attributionWords(method, grounded, mode = "generate") {
  const who = WRITER[mode] || "";
  const how = ATTRIBUTION[method] || "";
  if (mode === "abstain") return `${who} ${how}`;
  if (grounded === true) return `${who} ${how} The passages bear out what it adds.`;
  if (grounded === false) return `${who} ${how} Unsupported: the passages do not bear it out.`;
  return `${who} ${how}`;
}
