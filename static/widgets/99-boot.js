// Start every widget on the page with the JSON its server-side partial embedded.
for (const root of document.querySelectorAll("[data-widget]")) {
  const start = WIDGETS[root.dataset.widget];
  const data = root.querySelector("script[type='application/json']");
  if (start && data) start(root, JSON.parse(data.textContent));
}
