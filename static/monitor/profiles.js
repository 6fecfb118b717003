// Live profile status, from /monitor/profiles/status.json, asked for only while something on the page is in
// motion: a profile loading, llama-server down (its supervisor is restarting it) or a load or unload this
// admin just started. The server says which (in_motion); once everything has settled the page stops asking.
(function () {
  "use strict";
  const table = document.getElementById("profiles");
  if (!table) return;
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
      if (pending) pending.hidden = !profile.pending;
      if (log && profile.log_tail && profile.log_tail.length) log.textContent = profile.log_tail.join("\n");
    }
    table.dataset.inMotion = data.in_motion ? "1" : "0";
    return data.in_motion;
  }

  Qw.follow(table.dataset.statusUrl, render, { moving: table.dataset.inMotion === "1" });
})();
