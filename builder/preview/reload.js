/* Live reload for `python -m builder serve`. The preview server adds this script to the HTML it
   serves; it is never part of the built site. It listens to the server's build events:
   - built: if the build changed this page or a stylesheet or script it loads, reload, keeping the
     scroll position (the URL keeps the widgets' state); a build error overlay goes away;
   - failed: show every 'path:line: message' over the page (the last good page stays underneath);
   - hello: sent on (re)connecting, with the current errors; a different server id means the
     server restarted, so reload. */
(() => {
  "use strict";
  const script = document.currentScript;
  const previewDir = new URL(".", script.src);
  const base = new URL("..", previewDir).pathname;
  const scrollKey = "preview-scroll:" + location.pathname + location.search;
  let server = null;

  function restoreScroll() {
    const saved = sessionStorage.getItem(scrollKey);
    if (saved === null) return;
    sessionStorage.removeItem(scrollKey);
    const [x, y] = JSON.parse(saved);
    const go = () => window.scrollTo(x, y);
    go();
    if (document.readyState !== "complete") window.addEventListener("load", go, { once: true });
  }

  function sitePath(url) {
    const path = decodeURIComponent(new URL(url, location.href).pathname);
    if (!path.startsWith(base)) return null;
    const relative = path.slice(base.length);
    return relative === "" || relative.endsWith("/") ? relative + "index.html" : relative;
  }

  function usesAny(changed) {
    if (changed.includes("*")) return true;
    const mine = [location.href];
    for (const element of document.querySelectorAll('link[rel~="stylesheet"][href], script[src]')) {
      if (element !== script) mine.push(element.href || element.src);
    }
    return mine.map(sitePath).some((path) => path !== null && changed.includes(path));
  }

  function reload() {
    sessionStorage.setItem(scrollKey, JSON.stringify([window.scrollX, window.scrollY]));
    location.reload();
  }

  function hideErrors() {
    const box = document.getElementById("preview-build-errors");
    if (box) box.remove();
  }

  function showErrors(errors) {
    hideErrors();
    const box = document.createElement("div");
    box.id = "preview-build-errors";
    box.className = "preview-build-errors";
    box.setAttribute("role", "alert");
    box.setAttribute("aria-labelledby", "preview-build-errors-title");
    const title = document.createElement("p");
    title.id = "preview-build-errors-title";
    title.className = "preview-build-errors-title";
    title.textContent = "The build failed: " + errors.length + (errors.length === 1 ? " error" : " errors");
    const note = document.createElement("p");
    note.textContent = "The page below is the last good build. Fix the content and save: this message goes away on the next good build.";
    const list = document.createElement("ul");
    list.tabIndex = 0;
    list.setAttribute("aria-label", "Build errors");
    for (const error of errors) {
      const item = document.createElement("li");
      const code = document.createElement("code");
      code.textContent = error;
      item.append(code);
      list.append(item);
    }
    const hide = document.createElement("button");
    hide.type = "button";
    hide.textContent = "Hide";
    hide.addEventListener("click", hideErrors);
    box.append(title, note, list, hide);
    document.body.append(box);
  }

  function onEvent(name, handle) {
    events.addEventListener(name, (event) => handle(JSON.parse(event.data)));
  }

  const style = document.createElement("link");
  style.rel = "stylesheet";
  style.href = new URL("overlay.css", previewDir).href;
  document.head.append(style);
  restoreScroll();

  const events = new EventSource(new URL("events", previewDir).href);
  onEvent("hello", (data) => {
    if (server !== null && data.server !== server) { reload(); return; }
    server = data.server;
    document.documentElement.dataset.preview = "live";
    if (data.errors.length) showErrors(data.errors); else hideErrors();
  });
  onEvent("built", (data) => {
    hideErrors();
    if (usesAny(data.changed)) reload();
  });
  onEvent("failed", (data) => showErrors(data.errors));
  window.addEventListener("pagehide", () => events.close());
})();
