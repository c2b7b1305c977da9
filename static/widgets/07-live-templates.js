// A figure drawn from its partial's templates (strings with {0}, {1}, ... for their values, sent in the widget's
// data) and redrawn in place. Each template is parsed once, its places marked; a view (a template's name and its
// values) becomes a copy of that parse with its values written in, and drawing the next view into it writes only
// what changed: an attribute, a text, or the views nested in a place (matched by template name, in order; nodes
// are made or removed only when the set of views changes). A value with markup (< or &) is parsed where it goes.
// The nodes are what the page's parser makes of fillText(template, ...values), so a drawing serializes to the same
// markup as the server's render of the same state (tests/browser/test_widget_calculator.py).
function liveTemplates(tpl) {
  const OPEN = "\uE000", CLOSE = "\uE001", MARK = /\uE000(\d+)\uE001/, SVG = "http://www.w3.org/2000/svg", PREFIX = "data-live-";
  const parse = (html, svg) => {
    const t = document.createElement("template"), frag = document.createDocumentFragment();
    t.innerHTML = svg ? "<svg>" + html + "</svg>" : html;
    frag.append(...(svg ? t.content.firstChild : t.content).childNodes);
    return frag;
  };
  // A template parsed with its places marked, and where they are: [path of child indexes, attribute, its pieces
  // (texts and value indexes, as fillText splits)] for an attribute, [path, value index] for a place in content
  // (an empty text node: its value's text, or empty after the nodes of the views or markup put there). A place in
  // content is marked by a comment while parsed (text would leave a table), then becomes that text node; an
  // attribute with places is parsed under another name (an SVG length would log an error), then written back in
  // its place with 0 for its values until a drawing writes them (names in lower case, as the parser writes them).
  const protos = new Map();
  const proto = (name, svg) => {
    const key = name + (svg ? " svg" : "");
    if (protos.has(key)) return protos.get(key);
    const marks = (text) => text.replace(/\{(\d+)\}/g, (_, i) => OPEN + i + CLOSE);
    const inTag = (tag) => tag.replace(/([\w:-]+)="([^"]*\{\d+\}[^"]*)"/g, (_, attr, value) => PREFIX + attr + '="' + marks(value) + '"');
    const marked = tpl[name].replace(/<[^>]*>|\{(\d+)\}/g, (m, i) => (i === undefined ? inTag(m) : "<!--" + i + "-->"));
    const frag = parse(marked, svg), attrs = [], places = [];
    if (frag.firstChild && frag.firstChild.nodeType == Node.COMMENT_NODE) frag.prepend("");  // a drawing's first node stays first
    const walk = (node, path) => {
      const all = [...(node.attributes || [])].map((a) => [a.name, a.value]);
      if (all.some(([attr]) => attr.startsWith(PREFIX))) {
        for (const [attr] of all) node.removeAttribute(attr);
        for (const [attr, value] of all) {
          const real = attr.startsWith(PREFIX) ? attr.slice(PREFIX.length) : attr;
          if (real != attr) attrs.push([path, real, value.split(MARK)]);
          node.setAttribute(real, value.replace(/\uE000\d+\uE001/g, "0"));
        }
      }
      node.childNodes.forEach((child, i) => {
        if (child.nodeType == Node.COMMENT_NODE) {
          places.push([[...path, i], +child.data]);
          child.replaceWith("");
        } else walk(child, [...path, i]);
      });
    };
    walk(frag, []);
    const made = { frag, attrs, places };
    protos.set(key, made);
    return made;
  };
  const at = (root, path) => path.reduce((node, i) => node.childNodes[i], root);
  // A copy of a template for a view, its values written (its nodes not yet placed: frag).
  const make = (name, values, svg) => {
    const p = proto(name, svg), frag = p.frag.cloneNode(true);
    const attrs = p.attrs.map(([path, attr, pieces]) => ({ el: at(frag, path), attr, pieces, text: null }));
    const places = p.places.map(([path, index]) => ({ anchor: at(frag, path), shown: "", index, items: [], markup: null, value: undefined,
      svg: at(frag, path).parentNode === frag ? svg : at(frag, path).parentNode.namespaceURI == SVG }));
    const made = { name, attrs, places, first: frag.firstChild, last: frag.lastChild, values: [], frag };
    write(made, values);
    return made;
  };
  const write = (made, values) => {
    const old = made.values;
    if (values === old) return;  // the same view (see view)
    made.values = values;
    for (const a of made.attrs) {
      let same = a.text !== null;
      for (let i = 1; same && i < a.pieces.length; i += 2) same = values[a.pieces[i]] === old[a.pieces[i]];
      if (same) continue;  // none of its values changed
      let text = a.pieces[0];
      for (let i = 1; i < a.pieces.length; i += 2) text += values[a.pieces[i]] + a.pieces[i + 1];
      if (a.text !== text) a.el.setAttribute(a.attr, a.text = text);
    }
    for (const place of made.places) put(place, values[place.index]);
  };
  const remove = (made) => {
    for (let node = made.first, next; node; node = next) {
      next = node === made.last ? null : node.nextSibling;
      node.remove();
    }
  };
  // One place's value: a text, markup, a view or a list of views.
  const put = (place, value) => {
    if (value === place.value) return;  // the same text (a view is a new object every time)
    place.value = value;
    const { anchor } = place;
    if (value && typeof value == "object") {
      if (place.markup !== null) { remove(place.markup); place.markup = null; }
      views(place, Array.isArray(value) ? value : [value]);
      if (place.shown) anchor.data = place.shown = "";
      return;
    }
    const text = String(value), markup = /[<&]/.test(text);
    if (place.items.length) views(place, []);
    if (place.markup !== null && place.markup.text !== text) { remove(place.markup); place.markup = null; }
    if (markup && place.markup === null) {
      const frag = parse(text, place.svg);
      place.markup = { text, first: frag.firstChild, last: frag.lastChild };
      if (frag.firstChild) anchor.before(frag); else place.markup = null;
    }
    const shown = markup ? "" : text;
    if (place.shown !== shown) anchor.data = place.shown = shown;
  };
  // The views of a place: each drawn into the next unused copy of its template there, or a new one; unused copies go.
  const views = (place, list) => {
    const had = place.items;
    if (had.length == list.length && list.every((v, i) => v.name == had[i].name)) {
      list.forEach((v, i) => write(had[i], v.values));  // the same templates in the same order
      return;
    }
    // The copies of each template kept, in order, as many as the list uses; the others removed first (else a copy
    // that goes would make each one after it move).
    const wanted = new Map(), unused = new Map(), kept = [];
    for (const v of list) wanted.set(v.name, (wanted.get(v.name) || 0) + 1);
    for (const made of place.items) {
      const left = wanted.get(made.name);
      if (!left) { remove(made); continue; }
      wanted.set(made.name, left - 1);
      kept.push(made);
      (unused.get(made.name) || unused.set(made.name, []).get(made.name)).push(made);
    }
    const items = [];
    let next = kept.length ? kept[0].first : place.anchor;
    for (const view of list) {
      const free = unused.get(view.name), made = free && free.length ? free.shift() : null;
      let item = made;
      if (made) write(made, view.values);
      else item = make(view.name, view.values, place.svg);
      if (item.frag) { next.before(item.frag); item.frag = null; } else if (item.first !== next) move(item, next);
      items.push(item);
      next = item.last.nextSibling;
    }
    place.items = items;
  };
  const move = (made, next) => {
    const nodes = [];
    for (let node = made.first; node; node = node === made.last ? null : node.nextSibling) nodes.push(node);
    next.before(...nodes);
  };
  // A view: a template's name and its values. A view of texts and numbers only is the one made before for the same
  // ones (the last ten thousand kept), so that drawing it where it is drawn already writes nothing and compares nothing
  // (a slider step leaves most parts' rows and many of the chart's marks as they were).
  const same = keepLast(10 * 1000);
  const view = (name, ...values) => {
    if (values.some((v) => v && typeof v == "object")) return { name, values };
    return same(name + "\u0000" + values.join("\u0000"), () => ({ name, values }));
  };
  // Draw a view as the whole content of `parent`: in place when the parent holds a drawing of the same template.
  const drawn = new WeakMap();
  const draw = (parent, v) => {
    const had = drawn.get(parent);
    if (had && had.name == v.name) write(had, v.values);
    else {
      const made = make(v.name, v.values, parent.namespaceURI == SVG);
      parent.replaceChildren(made.frag);
      made.frag = null;
      drawn.set(parent, made);
    }
    return drawn.get(parent);
  };
  return { view, draw };
}
