// Making the page's elements. Every text from the server goes in as text, never as markup:
// passages are other people's documents, answers are a model's words.

/** Make an element: el("li", {class: "x"}, "text", child, ...); null attributes and children
 * are left out. */
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
