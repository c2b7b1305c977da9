// The embed view (?embed=<widget id>): the page shows that widget's figure alone, without the site's header,
// the other content or the widget's controls (static/site.css), with a link to the full page and the licence,
// for an iframe or a slide. Any widget state in the same URL applies as usual. (A block: this file defines no
// top-level name, so every page's script includes it.)
{
  const embedded = new URLSearchParams(location.search).get("embed");
  const framed = embedded && document.getElementById(embedded);
  if (framed && framed.matches("[data-widget]")) {
    document.documentElement.dataset.embed = embedded;
    framed.dataset.embedded = "";
    // The headings the widget sits under stay for screen readers (hidden from view), so its own keep their order.
    let level = 7;
    for (let el = framed.previousElementSibling; el && level > 2; el = el.previousElementSibling) {
      const at = /^H([2-6])$/.exec(el.tagName);
      if (at && +at[1] < level) {
        level = +at[1];
        el.dataset.embedHeading = "";
      }
    }
    const full = new URL(location.href), credit = document.createElement("p"), licence = document.querySelector(".site-footer .licence");
    full.searchParams.delete("embed");
    credit.className = "embed-credit";
    credit.innerHTML = '<a target="_blank" rel="noopener"></a>';
    credit.firstChild.href = full.href;
    credit.firstChild.textContent = "Open the full page: " + document.title;
    framed.append(credit);
    if (licence) framed.append(licence.cloneNode(true));
  }
}

// Start every widget on the page with the JSON its server-side partial embedded (each start is timed as a
// performance measure, "widget start <id>"). A large value an earlier widget
// on the page already carries comes as {same_as_widget: its id} (builder/render.py widget_json): the same value.
{
  const sent = {};
  for (const root of document.querySelectorAll("[data-widget]")) {
    const start = WIDGETS[root.dataset.widget];
    const block = root.querySelector("script[type='application/json']");
    if (!block) continue;
    const data = JSON.parse(block.textContent);
    for (const key in data) {
      const from = data[key] && data[key].same_as_widget;
      if (from !== undefined) data[key] = sent[from][key];
    }
    sent[root.id] = data;
    const begun = performance.now();
    if (start) start(root, data);
    performance.measure("widget start " + root.id, { start: begun });  // read by benchmarks/widgets.py
  }
}
