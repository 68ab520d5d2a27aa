// A request's waterfall: each hop in words (its code name beside), when it started, what it spent
// and was allocated, drawn against the budget on a time axis with a ruler. The hops before and
// after generation last a few milliseconds, generation seconds: on a linear axis they would be
// slivers. The axis is stretched instead: the time between any two hops' edges is drawn by its
// square root (and never under about 1% of the track; the budget left after the request, at most
// half of it), linear within it, so that a 0.1 ms hop shows; the ruler marks the real times, and
// "Draw to scale" draws the linear axis. A hop is red only when the server says it ran past its
// allocation (`exceeded`), the whole request only when it ran past its budget.

import { el } from "./dom.js";
import { hopWords } from "./words.js";

const ms = (value) => `${Number(value).toFixed(1)} ms`;
/** The least share of the track any stretch between two edges gets, when it lasts at all. */
const LEAST_SHARE = 0.015;
/** The least distance between two labelled marks of the ruler, as a share of the track. */
const RULER_GAP = 0.14;

/** Positions along the track (0 to 1) of times from 0 to `end` ms, linear. */
function linearAxis(end) {
  return (t) => Math.min(Math.max(t / end, 0), 1);
}

/** Positions along the track of times from 0 to `end` ms: between consecutive `edges`, each
 * stretch is as wide as the square root of its length (at least LEAST_SHARE of the whole), but
 * the budget left after `tailFrom` (the request's end) takes at most half the track. */
function stretchedAxis(edges, end, tailFrom) {
  const points = [...new Set([0, end, ...edges])]
    .filter((t) => t >= 0 && t <= end)
    .sort((a, b) => a - b);
  const roots = points.slice(1).map((t, i) => Math.sqrt(t - points[i]));
  const total = roots.reduce((a, b) => a + b, 0) || 1;
  const widths = roots.map((r) => (r > 0 ? Math.max(r, LEAST_SHARE * total) : 0));
  // The budget left after the request's end, the last stretch, gets at most half the track.
  const before = widths.slice(0, -1).reduce((a, b) => a + b, 0);
  if (points[points.length - 2] >= tailFrom && before > 0) {
    widths[widths.length - 1] = Math.min(widths[widths.length - 1], before);
  }
  const whole = widths.reduce((a, b) => a + b, 0) || 1;
  const at = [0];
  for (const width of widths) at.push(at[at.length - 1] + width / whole);
  return (t) => {
    const time = Math.min(Math.max(t, 0), end);
    let i = 1;
    while (i < points.length - 1 && points[i] < time) i += 1;
    const span = points[i] - points[i - 1];
    const within = span > 0 ? (time - points[i - 1]) / span : 0;
    return at[i - 1] + within * (at[i] - at[i - 1]);
  };
}

/** Round times for the ruler: 1, 2 and 5 times the powers of ten below `end` (to scale: steps
 * of one of them, some six to the end). */
function rulerTimes(end, linear) {
  if (linear) {
    const rough = end / 6;
    const power = 10 ** Math.floor(Math.log10(rough));
    const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= rough);
    const times = [];
    for (let t = step; t < end; t += step) times.push(t);
    return times;
  }
  const times = [];
  for (let power = 0.1; power <= end; power *= 10) {
    for (const m of [1, 2, 5]) if (m * power < end) times.push(Math.round(m * power * 10) / 10);
  }
  return times;
}

const timeLabel = (t) => (t >= 1000 ? `${+(t / 1000).toFixed(2)} s` : `${+t.toFixed(1)} ms`);

/** The ruler's marks: 0, the budget and the request's end (what it spent) always, then round
 * times, none closer than RULER_GAP of the track to another. */
function rulerMarks(place, end, spent, linear) {
  const kept = [];
  const fits = (x) => kept.every((mark) => Math.abs(mark.x - x) >= RULER_GAP);
  const always = [[0, "mark"], [end, "mark end"], [spent, "mark spent"]];
  for (const [t, kind] of [...always, ...rulerTimes(end, linear).map((t) => [t, "mark"])]) {
    const x = place(t);
    if (fits(x)) kept.push({ t, x, kind });
  }
  return kept.sort((a, b) => a.x - b.x);
}

function placed(node, left, width = null) {
  node.style.left = `${100 * left}%`;
  if (width !== null) node.style.width = `${100 * width}%`;
  return node;
}

function bar(stage, place, marks) {
  const track = el("div", { class: "track", "aria-hidden": "true" });
  const from = place(stage.start_ms);
  const allocated = el("div", { class: "allocated" });
  const spent = el("div", { class: stage.exceeded ? "spent over" : "spent" });
  const grid = marks.map(({ x }) => placed(el("div", { class: "grid" }), x));
  track.append(
    ...grid,
    placed(allocated, from, place(stage.start_ms + stage.allocated_ms) - from),
    placed(spent, from, place(stage.start_ms + stage.spent_ms) - from),
  );
  return track;
}

function ruler(marks) {
  const line = el("div", { class: "ruler", "aria-hidden": "true" });
  line.append(...marks.map(({ t, x, kind }) => placed(el("span", { class: kind }, timeLabel(t)), x)));
  return line;
}

function hopName(stage) {
  return [el("span", { class: "hop" }, hopWords(stage)), " ", el("code", {}, stage)];
}

function rows(report, place, marks) {
  const budget = report.budget;
  const hops = report.stages.map((stage) =>
    el(
      "tr",
      { "data-stage": stage.stage, class: stage.exceeded ? "over" : null },
      el("th", { scope: "row" }, hopName(stage.stage)),
      el("td", {}, ms(stage.start_ms)),
      el("td", {}, ms(stage.spent_ms), stage.exceeded ? el("span", { class: "flag" }, " over") : null),
      el("td", {}, ms(stage.allocated_ms)),
      el("td", { class: "bar" }, bar(stage, place, marks)),
    ),
  );
  const total = { start_ms: 0, spent_ms: budget.spent_ms, allocated_ms: budget.budget_ms, exceeded: budget.exceeded };
  hops.push(
    el(
      "tr",
      { class: budget.exceeded ? "total over" : "total" },
      el("th", { scope: "row" }, "the whole request"),
      el("td", {}, ms(0)),
      el("td", {}, ms(budget.spent_ms), budget.exceeded ? el("span", { class: "flag" }, " over budget") : null),
      el("td", {}, ms(budget.budget_ms)),
      el("td", { class: "bar" }, bar(total, place, marks)),
    ),
  );
  return hops;
}

/** The table's body and ruler, on the stretched axis or (`linear`) to scale. */
function drawn(report, linear) {
  const end = Math.max(report.budget.budget_ms, report.budget.spent_ms);
  const edges = report.stages.flatMap((s) => [s.start_ms, s.start_ms + s.spent_ms]);
  const spent = report.budget.spent_ms;
  const place = linear ? linearAxis(end) : stretchedAxis([...edges, spent], end, spent);
  const marks = rulerMarks(place, end, spent, linear);
  const foot = el(
    "tr",
    { class: "ruler-row" },
    el("td", { colspan: 4 }, linear ? "Time, to scale" : "Time (short hops stretched)"),
    el("td", { class: "bar" }, ruler(marks)),
  );
  return [el("tbody", {}, rows(report, place, marks)), el("tfoot", {}, foot)];
}

let drawnTables = 0;

/** The waterfall of a finished request (its `stages` and `budget`), with its own switch
 * between the stretched axis and the linear one. */
export function waterfall(report) {
  const budget = report.budget;
  const id = `to-scale-${(drawnTables += 1)}`;
  const toScale = el("input", { type: "checkbox", id, class: "to-scale" });
  const table = el(
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
    ...drawn(report, false),
  );
  toScale.addEventListener("change", () => {
    table.querySelector("tbody").remove();
    table.querySelector("tfoot").remove();
    table.append(...drawn(report, toScale.checked));
  });
  return el(
    "figure",
    { class: "waterfall-figure" },
    table,
    el(
      "p",
      { class: "note axis-note" },
      el("label", {}, toScale, " Draw to scale"),
      " The axis stretches short hops (each stretch between two hops' edges by its square " +
        "root), so that they show; the ruler marks the real times. Red: a hop that ran past " +
        "its allocation, or a request past its budget.",
    ),
  );
}
