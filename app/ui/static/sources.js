// The passages a request found, as a reader checks them: the sources of an answer (before the
// answer, then marked as it cites them) and the hits of a search. Each says where it comes from
// (its file, page and section path), why it is here in words (its raw scores in a tooltip and
// beside the text), and holds its text behind a disclosure.

import { el } from "./dom.js";
import { foundByWords, scoreWords } from "./words.js";

const PREVIEW_CHARS = 280;

function origin(passage) {
  const where = [passage.source];
  if (passage.page) where.push(`page ${passage.page}`);
  if (passage.kind) where.push(passage.kind);
  return where.join(", ");
}

/** A section path ("A > B | A > C": the sections a passage holds text of) as a reader says it. */
function sectionPath(section) {
  return section
    .split(" | ")
    .map((path) => path.split(" > ").join(" › "))
    .join("; ");
}

/** Where a passage comes from and why it is here: title, section path, file, the searches. */
function heading(passage) {
  return [
    el("strong", { class: "title" }, passage.title || passage.source),
    passage.section ? el("span", { class: "section" }, ` · ${sectionPath(passage.section)}`) : null,
    el("span", { class: "source" }, ` (${origin(passage)})`),
    " ",
    el("span", { class: "why", title: scoreWords(passage) }, foundByWords(passage.found_by)),
  ];
}

/** A passage's text behind a disclosure, its raw scores under it. */
function passageDetails(passage, summary) {
  return el(
    "details",
    { class: "passage" },
    el("summary", {}, summary),
    el("p", { class: "text" }, passage.text || ""),
    el("p", { class: "scores" }, scoreWords(passage)),
  );
}

/** The passages the prompt holds, labelled [n] as the model saw them, none cited yet. Each is
 * `#source-n`, the target of the answer's [n] links. */
export function showCitations(list, citations) {
  list.replaceChildren(
    ...citations.map((c) =>
      el(
        "li",
        { id: `source-${c.label}`, value: c.label, "data-label": c.label, class: "citation" },
        el("span", { class: "label" }, `[${c.label}]`),
        " ",
        heading(c),
        el("span", { class: "cited-mark" }),
        passageDetails(c, `The passage (${(c.text || "").length} characters)`),
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

/** Open the passage of the source an answer's [n] link points to, and move the focus to it. */
export function openSource(link) {
  const target = document.getElementById(link.hash.slice(1));
  const details = target && target.querySelector("details");
  if (!details) return;
  details.open = true;
  details.querySelector("summary").focus();
}

/** Search results: each hit's origin, why it was found, and its text (the opening lines, and
 * the whole of it behind a disclosure when it is longer). */
export function showHits(list, passages) {
  list.replaceChildren(
    ...passages.map((p) => {
      const whole = p.text.length <= PREVIEW_CHARS;
      const preview = whole ? p.text : `${p.text.slice(0, PREVIEW_CHARS).trimEnd()}…`;
      return el(
        "li",
        { class: "hit" },
        heading(p),
        el("p", { class: "text" }, preview),
        whole
          ? el("p", { class: "scores" }, scoreWords(p))
          : passageDetails(p, `The whole passage (${p.text.length} characters)`),
      );
    }),
  );
}
