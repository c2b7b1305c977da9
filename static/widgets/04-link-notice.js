// A link's settings that a widget could not use. checkLink sorts a link's state into what the widget takes and
// what it refuses, by the widget's own description of each key: ["whole", low, high], ["fraction", low, high] (empty:
// the default) or ["choice", ...values].
// linkNotice says, one sentence per refused setting, what was left out; the widget keeps every other setting.
// The words come from the page (builder/widgets/link_notice.py).
function checkLink(saved, keys) {
  const taken = {}, refused = [];
  for (const [key, value] of Object.entries(saved)) {
    const [kind, ...allowed] = keys[key] || ["unknown"];
    const ok = kind === "whole" ? Number.isSafeInteger(+value) && value.trim() !== "" && +value >= allowed[0] && +value <= allowed[1]
      : kind === "fraction" ? value === "" || (/^\d*\.?\d+$/.test(value) && +value >= +allowed[0] && +value <= +allowed[1])
      : kind === "choice" && allowed.includes(value);
    if (ok) taken[key] = value;
    else refused.push([key, value, kind, ...(kind === "choice" ? [allowed.join(", ")] : allowed.map(commas))]);
  }
  return { taken, refused };
}

function linkNotice(root, words, refused) {
  if (!refused.length) return;
  const box = document.createElement("p");
  box.className = "wdg-link-notice";
  box.setAttribute("role", "status");
  box.textContent = refused.map(([key, value, kind, ...allowed]) => fillText(words.line, root.id + "." + key, value,
    fillText(words[kind], ...allowed))).concat(words.rest).join(" ");
  root.prepend(box);
}
