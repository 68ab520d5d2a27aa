// The answer's Markdown, drawn safely as it streams. marked (vendor/) parses it; any HTML in it,
// the model's or a document's, is shown as text, never as markup; links and images are shown as
// their words and address (the page follows no link a model wrote); each [n] that names a
// source becomes a link to it; then DOMPurify (vendor/) keeps only the elements and attributes
// below, as a second guard. The answer is drawn again at most once per frame while it grows.

import { Marked } from "./vendor/marked.esm.js";
import DOMPurify from "./vendor/purify.es.mjs";

/** What may be drawn: text formatting, lists, code, quotes, tables, and links to sources. */
const KEPT = {
  ALLOWED_TAGS: [
    "p", "br", "hr", "em", "strong", "del", "code", "pre", "blockquote", "ul", "ol", "li",
    "table", "thead", "tbody", "tr", "th", "td", "a", "span",
  ],
  ALLOWED_ATTR: ["href", "class", "aria-label", "start"],
  ALLOWED_URI_REGEXP: /^#source-\d+$/,
  ALLOW_DATA_ATTR: false,
  RETURN_DOM_FRAGMENT: true,
};

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
const escape = (text) => String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);

/** `[1]`, `[2, 3]`: labels the model cites its sources by (not a Markdown link's `[text](...)`). */
const CITATION = /^\[(\d{1,3}(?:\s*,\s*\d{1,3})*)\](?!\()/;

function citationExtension(labels) {
  return {
    name: "citation",
    level: "inline",
    start(source) {
      const at = source.search(/\[\d/);
      return at < 0 ? undefined : at;
    },
    tokenizer(source) {
      const match = CITATION.exec(source);
      if (!match) return undefined;
      const numbers = match[1].split(",").map((n) => Number(n.trim()));
      return { type: "citation", raw: match[0], numbers };
    },
    renderer({ numbers, raw }) {
      if (!numbers.every((n) => labels.has(n))) return escape(raw);
      const links = numbers.map(
        (n) => `<a class="cite" href="#source-${n}" aria-label="source ${n}">${n}</a>`,
      );
      return `[${links.join(", ")}]`;
    },
  };
}

/** Markup the model (or a document it quotes) wrote, links and images: drawn as text. */
const TEXT_ONLY = {
  html({ text, block }) {
    return block ? `<p class="raw">${escape(text.trim())}</p>` : escape(text);
  },
  link({ href, tokens }) {
    const words = this.parser.parseInline(tokens);
    return words === escape(href) ? words : `${words} (${escape(href)})`;
  },
  image({ href, text }) {
    return escape(`[image: ${text || href}]`);
  },
  heading({ tokens }) {
    // Not a heading of the page's own outline: the answer sits under the page's "Answer".
    return `<p><strong>${this.parser.parseInline(tokens)}</strong></p>\n`;
  },
  checkbox({ checked }) {
    return checked ? "[x] " : "[ ] ";
  },
};

function markdownParser(labels) {
  const parser = new Marked({ gfm: true, breaks: false, async: false });
  parser.use({ renderer: TEXT_ONLY, extensions: [citationExtension(labels)] });
  return parser;
}

/** The answer's Markdown as a safe fragment of the page; `labels`: the sources' [n]. */
export function renderMarkdown(markdown, labels = new Set()) {
  return DOMPurify.sanitize(markdownParser(labels).parse(markdown), KEPT);
}

/** Where a streamed answer is drawn: `add` a delta, `replace` the whole, `finish` at the end.
 * Deltas only schedule a drawing; at most one drawing a frame parses the whole answer so far
 * (1 to 4 KB, an answer's length: 2 to 5 ms measured in headless Chromium on a shared 2-core
 * machine), so the answer grows token by token. The Markdown as written stays on the element,
 * as its `data-markdown`. */
export function answerView(target, labels = new Set()) {
  const parser = markdownParser(labels);
  let markdown = "";
  let pending = 0;
  const draw = () => {
    pending = 0;
    target.replaceChildren(DOMPurify.sanitize(parser.parse(markdown), KEPT));
    target.dataset.markdown = markdown;
  };
  const later = () => {
    if (!pending) pending = requestAnimationFrame(draw);
  };
  return {
    add(delta) {
      markdown += delta;
      later();
    },
    replace(text) {
      markdown = text;
      later();
    },
    finish() {
      if (pending) cancelAnimationFrame(pending);
      draw();
    },
  };
}
