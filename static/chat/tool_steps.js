// An answer's tool calls (chat/tools/loop.py): the tool, its arguments and its result folded away, and
// Allow / Deny for a writing tool that waits. Arguments are the model's text (shown as text); results
// are a tool's, hostile like the model's own output: rendered through QwRender's strict profile.
(function () {
  "use strict";

  const STATES = {
    running: gettext("running…"),
    waiting: gettext("waiting for your answer"),
    done: gettext("done"),
    error: gettext("failed"),
    denied: gettext("did not run"),
    stopped: gettext("stopped"),
  };

  function stepView(step, decide) {
    const el = document.createElement("details");
    el.className = "tool-step";
    el.dataset.step = step.id;
    const summary = document.createElement("summary");
    const name = document.createElement("span");
    name.className = "tool-name";
    const state = document.createElement("span");
    state.className = "tool-state";
    summary.append(gettext("Tool") + " ", name, " · ", state);
    const args = document.createElement("pre");
    args.className = "tool-arguments";
    const result = document.createElement("div");
    result.className = "tool-result";
    const buttons = document.createElement("div");
    buttons.className = "tool-approval";
    const allow = document.createElement("button");
    allow.type = "button";
    allow.className = "tool-allow";
    allow.textContent = gettext("Allow");
    const deny = document.createElement("button");
    deny.type = "button";
    deny.className = "tool-deny danger";
    deny.textContent = gettext("Deny");
    allow.addEventListener("click", () => decide(step.id, true));
    deny.addEventListener("click", () => decide(step.id, false));
    const ask = document.createElement("span");
    ask.textContent = gettext("This tool can change things. Let it run?") + " ";
    buttons.append(ask, allow, " ", deny);
    el.append(summary, buttons, args, result);
    return { el, name, state, args, result, buttons };
  }

  function update(view, step) {
    view.el.dataset.state = step.state;
    view.name.textContent = step.title || step.name;
    view.state.textContent = STATES[step.state] || step.state;
    view.args.textContent = step.arguments;
    view.buttons.hidden = step.state !== "waiting";
    if (step.state === "waiting") view.el.open = true;
    view.result.replaceChildren(QwRender.renderMarkdown(step.result || ""));
  }

  // The steps of one answer, in the container given; ``show`` adds or updates one.
  function list(container, decide) {
    const views = new Map();
    function show(step) {
      let view = views.get(step.id);
      if (!view) {
        view = stepView(step, decide);
        views.set(step.id, view);
        container.append(view.el);
      }
      update(view, step);
      container.hidden = false;
    }
    return { show, showAll: (steps) => (steps || []).forEach(show) };
  }

  window.QwToolSteps = Object.freeze({ list });
})();
