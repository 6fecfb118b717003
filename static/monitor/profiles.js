// Live profile status: rows are refreshed from /monitor/profiles/status.json every second.
(function () {
  "use strict";
  const table = document.getElementById("profiles");
  if (!table) return;
  const url = table.dataset.statusUrl;
  const down = document.getElementById("router-down");
  const pending = document.querySelector(".pending");
  const log = document.getElementById("log-tail");

  function render(data) {
    if (down) {
      down.hidden = !data.down;
      down.querySelector("span").textContent = data.down || "";
    }
    for (const profile of data.profiles) {
      const row = table.querySelector('tr[data-profile="' + profile.id + '"]');
      if (!row) continue;
      const state = row.querySelector(".state");
      state.textContent = profile.state_label;
      state.dataset.state = profile.state;
      const served = row.querySelector(".served");
      if (served) served.textContent = profile.served_id;
      const last = row.querySelector(".last-event");
      if (last) {
        last.textContent = profile.last_event ? profile.last_event.message : "";
        last.className = "last-event " + (profile.last_event ? profile.last_event.level : "");
      }
      if (pending && row.closest("#profiles")) pending.hidden = !profile.pending;
      if (log && profile.log_tail && profile.log_tail.length) log.textContent = profile.log_tail.join("\n");
    }
  }

  // The page was drawn with the current status: the first poll waits one round. A failed one leaves the page as it is.
  Qw.pollJson(url, render, { immediate: false });
})();
