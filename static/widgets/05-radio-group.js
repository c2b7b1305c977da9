// Shared helper: custom radio groups (the bytes-per-param and memory-budget pills).
// role=radiogroup of role=radio buttons: click, arrow keys, Home/End; roving tabindex and
// aria-checked. Returns a setter that selects a value without calling onPick.
function radioGroup(group, onPick) {
  const radios = $$(group, "[role=radio]");
  const select = (radio) => radios.forEach((r) => {
    r.setAttribute("aria-checked", String(r === radio));
    r.tabIndex = r === radio ? 0 : -1;
  });
  const pick = (radio, focus) => {
    select(radio);
    if (focus) radio.focus();
    onPick(radio.dataset.value);
  };
  radios.forEach((radio, index) => {
    radio.addEventListener("click", () => pick(radio));
    radio.addEventListener("keydown", (event) => {
      const step = { ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1 }[event.key];
      let next = null;
      if (step) next = radios[(index + step + radios.length) % radios.length];
      if (event.key === "Home") next = radios[0];
      if (event.key === "End") next = radios[radios.length - 1];
      if (next) { event.preventDefault(); pick(next, true); }
    });
  });
  return (value) => {
    const radio = radios.find((r) => r.dataset.value === String(value));
    if (radio) select(radio);
  };
}
