// Shared helper: a select's options once the script runs. The page sends only the chosen option and those whose
// words only it has (builder/widgets/choices.py, issue 14's page weight); fillChoices puts every value of the
// link's choices (`values`, in order) back: a sent option as it came, any other named by `name(value)` (a model's or
// GPU's name from the widget's data) or else shown as its value. The chosen value stays chosen.
function fillChoices(select, values, name = () => undefined) {
  const sent = Object.fromEntries([...select.options].map((o) => [o.value, o])), chosen = select.value;
  select.replaceChildren(...values.map((v) => sent[v] ?? new Option(name(v) ?? v, v)));
  select.value = chosen;
}
