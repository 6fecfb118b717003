// The admin dashboard: live samples over /ws/monitor/, charts drawn with the vendored uPlot,
// tables (request figures, self-tests, timeline) refreshed from dashboard.json when the samples show
// they can have changed (never on a clock while the box is idle, nor while the tab is hidden).
(function () {
  "use strict";
  const root = document.getElementById("dashboard");
  const initial = Qw.readJson("dashboard-data");
  const kinds = Qw.readJson("profile-kinds");  // embeddings and reranking profiles: their kind, shown
  // As many samples as the socket's history holds: MONITOR_LIVE_SECONDS / MONITOR_SAMPLE_INTERVAL_S.
  const LIVE_POINTS = Qw.dataNumber(root, "livePoints");
  let live = [];            // samples, oldest first
  let range = "live";
  let dayHistory = null;
  let knownSelfTest = Math.max(0, ...initial.self_tests.map((r) => r.id));
  let waitingSelfTest = false;

  // ---- formatting
  const num = Qw.number;
  const gb = Qw.gigabytes;
  const el = Qw.el;
  function figure(label, value) {
    const row = el("div", "figure");
    row.append(el("span", null, label), el("b", null, value));
    return row;
  }
  function when(iso) { return new Date(iso).toLocaleString(); }

  // ---- cards
  function drawCards(sample) {
    const gpuBody = document.querySelector("#card-gpu .body");
    gpuBody.textContent = "";
    gpuBody.className = "body";
    if (!sample.gpu.available) {
      gpuBody.append(el("div", "muted", gettext("no GPU")));
    }
    for (const g of sample.gpu.gpus) {
      gpuBody.append(el("div", null, "#" + g.index + " " + g.name));
      gpuBody.append(figure(gettext("VRAM"), gb(g.used_bytes) + " / " + gb(g.total_bytes)));
      gpuBody.append(figure(gettext("Utilization"), num(g.utilization_pct, 0) + " %"));
      gpuBody.append(figure(gettext("Temperature"), num(g.temperature_c, 0) + " °C"));
      gpuBody.append(figure(gettext("Power"), num(g.power_w, 0) + " / " + num(g.power_limit_w, 0) + " W"));
      gpuBody.append(figure(gettext("Clocks (SM / memory)"), num(g.sm_clock_mhz, 0) + " / " + num(g.memory_clock_mhz, 0) + " MHz"));
      gpuBody.append(figure(gettext("Throttling"), g.throttle_reasons.length ? g.throttle_reasons.join(", ") : gettext("none")));
    }
    const hostBody = document.querySelector("#card-host .body");
    hostBody.textContent = "";
    const h = sample.host || {};
    hostBody.append(figure(gettext("CPU"), num(h.cpu_pct) + " %"));
    hostBody.dataset.cpu = h.cpu_pct;
    hostBody.append(figure(gettext("RAM"), gb(h.ram_used_bytes) + " / " + gb(h.ram_total_bytes)));
    hostBody.append(figure(gettext("Swap"), gb(h.swap_used_bytes)));
    hostBody.append(figure(gettext("Load (1 min)"), num(h.load1, 2)));
    const serverBody = document.querySelector("#card-servers .body");
    serverBody.textContent = "";
    if (!sample.servers.length) serverBody.append(el("div", "muted", gettext("No llama-server to sample.")));
    for (const s of sample.servers) {
      const box = el("div", s.ok ? "server" : "server is-stale");
      box.dataset.profile = s.profile;
      box.append(el("div", null, s.profile + (s.ok ? "" : " — " + gettext("not answering") + ": " + s.error)));
      if (s.ok) {
        box.append(figure(gettext("Generation"), num(s.generation_tps) + " tok/s"));
        box.append(figure(gettext("Prompt"), num(s.prompt_tps) + " tok/s"));
        box.append(figure(gettext("Requests (processing / deferred)"), num(s.requests_processing, 0) + " / " + num(s.requests_deferred, 0)));
        box.append(figure(gettext("KV cache in use"), num(s.kv_used_pct) + " %"));
        if (s.draft_tokens) {
          box.append(figure(gettext("Draft acceptance (since start)"), num(s.draft_accept_pct) + " % (" + s.draft_accepted + " / " + s.draft_tokens + ")"));
        }
        for (const slot of s.slots) {
          box.append(figure(gettext("Slot") + " " + slot.id, slot.used + " / " + slot.n_ctx + (slot.processing ? " ●" : "")));
        }
      }
      serverBody.append(box);
    }
    const stale = document.getElementById("stale");
    if (sample.stale.length) {
      stale.hidden = false;
      stale.textContent = gettext("Not updating:") + " " + sample.stale.join("; ");
    } else {
      stale.hidden = true;
    }
    const last = document.getElementById("last-sample");
    last.dataset.t = sample.t;
    last.textContent = gettext("Last sample:") + " " + new Date(sample.t * 1000).toLocaleTimeString();
  }

  // ---- nodes: a card each, rebuilt from every push (names, GPU names and served ids are the nodes' own
  // words: text nodes only)
  function ago(seconds) { return interpolate(gettext("%(age)s ago"), { age: Qw.duration(seconds) }, true); }

  function nodeState(n) {
    if (n.up) return gettext("up") + " · " + gettext("Heartbeat") + " " + ago(n.beat_age_s);
    const last = n.silent_s == null ? gettext("never seen") : ago(n.silent_s);
    return gettext("down") + " · " + gettext("Heartbeat") + " " + last;
  }

  function nodeFigures(card, n) {
    const gpu = n.gpu || { available: false, gpus: [] };
    if (!gpu.available) {
      card.append(figure(gettext("GPU"), gettext("No NVIDIA GPU")));
      if (gpu.reason) card.append(el("div", "muted gpu-reason", gpu.reason)); // NVML's own words
    }
    for (const g of gpu.gpus) {
      const box = el("div", "gpu");
      box.dataset.gpu = g.index;
      box.append(el("div", null, "#" + g.index + " " + g.name));
      box.append(figure(gettext("VRAM used / free"), gb(g.used_bytes) + " / " + gb(g.total_bytes - g.used_bytes)));
      box.append(figure(gettext("Utilization"), num(g.utilization_pct, 0) + " %"));
      card.append(box);
    }
    const h = n.host || {};
    card.append(figure(gettext("RAM"), gb(h.ram_used_bytes) + " / " + gb(h.ram_total_bytes)));
    card.append(figure(gettext("CPU"), num(h.cpu_pct) + " %"));
  }

  function servedRow(n, served) {
    const server = (n.servers || []).find((s) => s.ok && s.profile === served.profile);
    const row = el("div", "served");
    row.dataset.profile = served.profile;
    const kind = Object.hasOwn(kinds, served.profile) ? kinds[served.profile] : "";
    row.dataset.kind = kind ? "embedder" : "chat";
    row.append(el("div", null, served.profile + (kind ? " (" + kind + ")" : "") + " · " + served.model));
    const busy = server ? server.slots_busy : null;
    const total = server && server.slots_total ? server.slots_total : served.slots;
    row.append(figure(gettext("slots busy / free"), busy == null ? "— / " + total : busy + " / " + (total - busy)));
    row.append(figure(gettext("tokens/s generation / prompt"), num(server && server.generation_tps) + " / " + num(server && server.prompt_tps)));
    return row;
  }

  function nodeCard(n) {
    const card = el("div", n.up ? "card node" : "card node is-down");
    card.dataset.node = n.name;
    card.dataset.state = n.up ? "up" : "down";
    card.append(el("h2", null, n.is_local ? n.name + " (" + gettext("main box") + ")" : n.name));
    card.append(el("div", "node-state", nodeState(n)));
    if (n.up && !n.router) card.append(el("div", "node-warning", gettext("llama-server is not answering")));
    if (n.sample_age_s == null) card.append(el("div", "muted no-figures", gettext("No figures from this node's sampler (manage.py run_sampler).")));
    else nodeFigures(card, n);
    card.append(el("div", "node-head", gettext("Serves")));
    if (!n.serving.length) card.append(el("div", "muted", gettext("no profile loaded")));
    for (const served of n.serving) card.append(servedRow(n, served));
    if (n.sample_age_s != null) card.append(el("div", "muted", gettext("Figures:") + " " + ago(n.sample_age_s)));
    return card;
  }

  function drawNodes(nodes) {
    const holder = document.getElementById("nodes");
    holder.textContent = "";
    for (const n of nodes) holder.append(nodeCard(n));
  }

  // ---- charts
  const CHARTS = [
    { id: "chart-throughput", match: /^llama\..+\.(generation_tps|prompt_tps)$/, scale: 1 },
    { id: "chart-load", match: /^(host\.cpu_pct|gpu\d+\.utilization_pct)$/, scale: 1 },
    { id: "chart-memory", match: /^(host\.ram_used_bytes|gpu\d+\.used_bytes)$/, scale: 1e-9 },
    { id: "chart-requests", match: /^llama\..+\.(requests_processing|requests_deferred|kv_used_pct)$/, scale: 1 },
  ];
  const COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4b5563", "#ca8a04"];
  const plots = {};

  function columns() {
    if (range === "day" && dayHistory) return dayHistory;
    const t = live.map((s) => s.t);
    const names = new Set();
    for (const s of live) for (const k in s.values || {}) names.add(k);
    const series = {};
    for (const name of names) series[name] = live.map((s) => (s.values && name in s.values ? s.values[name] : null));
    return { t: t, series: series };
  }

  function drawCharts() {
    const data = columns();
    for (const chart of CHARTS) {
      const holder = document.getElementById(chart.id);
      const names = Object.keys(data.series).filter((n) => chart.match.test(n)).sort();
      const key = names.join("|");
      const rows = [data.t].concat(names.map((n) => data.series[n].map((v) => (v == null ? null : v * chart.scale))));
      let plot = plots[chart.id];
      if (!plot || plot.key !== key) {
        if (plot) plot.uplot.destroy();
        holder.textContent = "";
        const ink = getComputedStyle(document.body).color;
        const opts = {
          width: Math.max(300, holder.clientWidth || 500),
          height: 200,
          series: [{}].concat(names.map((n, i) => ({ label: n, stroke: COLORS[i % COLORS.length], width: 1.5, spanGaps: false }))),
          axes: [{ stroke: ink }, { size: 50, stroke: ink }], // the page's text colour, dark mode included
          legend: { live: false },
        };
        plot = plots[chart.id] = { key: key, uplot: new uPlot(opts, rows, holder) };
      } else {
        plot.uplot.setData(rows);
      }
      holder.dataset.points = String(data.t.length);
      holder.dataset.series = String(names.length);
    }
  }

  // ---- tables
  function fillTable(id, rows, cells, rowClass) {
    const body = document.querySelector("#" + id + " tbody");
    body.textContent = "";
    if (!rows.length) {
      const row = body.insertRow();
      const cell = row.insertCell();
      cell.colSpan = 8;
      cell.textContent = gettext("Nothing yet.");
      cell.className = "muted";
      return;
    }
    for (const item of rows) {
      const row = body.insertRow();
      if (rowClass) row.className = rowClass(item);
      if (item.id != null) row.dataset.id = item.id;
      for (const value of cells(item)) row.insertCell().textContent = value;
    }
  }

  function drawTables(body) {
    fillTable("request-figures", body.request_figures, (r) => [
      r.profile, r.answers, num(r.ttft_p50_ms, 0), num(r.ttft_p95_ms, 0), num(r.generation_tps_p50), num(r.generation_tps_p95),
    ]);
    fillTable("selftest-latest", body.latest_self_tests, (r) => [
      r.profile, when(r.at), num(r.prompt_tps), num(r.generation_tps), num(r.ttft_ms, 0), r.ok ? r.settings : r.error,
    ], (r) => (r.ok ? "ok" : "failed"));
    fillTable("selftests", body.self_tests, (r) => [
      r.profile, when(r.at), num(r.prompt_tps), num(r.generation_tps), num(r.ttft_ms, 0), r.ok ? gettext("passed") : r.error,
    ], (r) => (r.ok ? "ok" : "failed"));
    fillTable("timeline", body.timeline, (e) => [when(e.at), e.kind_label, e.node, e.profile, e.message], (e) => e.level);
    const newest = Math.max(0, ...body.self_tests.map((r) => r.id));
    if (waitingSelfTest && newest > knownSelfTest) {
      waitingSelfTest = false;
      const result = body.self_tests.find((r) => r.id === newest);
      document.getElementById("selftest-status").textContent = result.ok ? gettext("Self-test finished.") : gettext("Self-test failed:") + " " + result.error;
      document.getElementById("selftest-run").disabled = false;
    }
    knownSelfTest = Math.max(knownSelfTest, newest);
  }

  async function refreshTables(withHistory) {
    try {
      const response = await fetch(root.dataset.json + (withHistory ? "?history=1" : ""), { credentials: "same-origin" });
      if (!response.ok) return;
      const body = await response.json();
      drawTables(body);
      if (body.history) { dayHistory = body.history; drawCharts(); }
    } catch (error) { /* the next refresh tries again */ }
  }

  // ---- self-test
  document.getElementById("selftest-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const form = event.target;
    const status = document.getElementById("selftest-status");
    document.getElementById("selftest-run").disabled = true;
    status.textContent = gettext("Running the self-test…");
    try {
      const response = await fetch(root.dataset.selftest, { method: "POST", body: new FormData(form), credentials: "same-origin" });
      const body = await response.json();
      if (!response.ok) throw new Error(body.error || response.statusText);
      waitingSelfTest = true;
      selfTest.start();
    } catch (error) {
      status.textContent = gettext("Self-test failed:") + " " + error.message;
      document.getElementById("selftest-run").disabled = false;
    }
  });

  document.getElementById("range").addEventListener("change", (event) => {
    range = event.target.value;
    if (range === "day") refreshTables(true); else drawCharts();
  });

  // ---- live socket
  function connect() {
    const socket = new WebSocket(Qw.socketUrl(root.dataset.wsPath));
    socket.onmessage = (message) => {
      const event = JSON.parse(message.data);
      if (event.type === "history") {
        live = event.samples.slice(-LIVE_POINTS);
        if (live.length) {
          drawCards(live[live.length - 1]);
          shownActivity = activity(live[live.length - 1]); // the tables came with the page
        }
        drawCharts();
      } else if (event.type === "sample") {
        live.push(event.sample);
        if (live.length > LIVE_POINTS) live.shift();
        drawCards(event.sample);
        if (range === "live") drawCharts();
        noteActivity(event.sample);
      } else if (event.type === "nodes") {
        drawNodes(event.nodes);
        noteNodes(event.nodes);
      } else if (event.type === "stale") {
        const stale = document.getElementById("stale");
        stale.hidden = false;
        stale.textContent = event.reason === "redis" ? gettext("Redis is not answering: the figures are old.") : gettext("The sampler is not running: the figures are old. Start it with manage.py run_sampler.");
      }
    };
    socket.onclose = () => {
      const stale = document.getElementById("stale");
      stale.hidden = false;
      stale.textContent = gettext("Connection to the dashboard lost; reconnecting…");
      setTimeout(connect, 3000);
    };
  }

  // ---- when the tables are asked for again
  // Request figures and the timeline change while llama-server answers someone, and when a server or a
  // source comes or goes: while a sample shows requests, at most every TABLES_EVERY_MS, once more after
  // the last, and after such a change. The self-test's result is followed by itself (selfTest).
  const TABLES_EVERY_MS = 5000;
  let shownActivity = "";
  let tablesDue = false;
  let tablesAskedAt = 0;

  function busy(sample) {
    return sample.servers.some((s) => (s.requests_processing || 0) + (s.requests_deferred || 0) > 0);
  }

  function activity(sample) {
    return JSON.stringify([sample.servers.map((s) => [s.profile, s.ok]), sample.stale.length, busy(sample)]);
  }

  function noteActivity(sample) {
    const now = activity(sample);
    if (busy(sample) || now !== shownActivity) tablesDue = true;
    shownActivity = now;
    refreshTablesIfDue();
  }

  // A node going down or coming back is on the timeline once the main box's sampler has recorded it
  // (recorded_up changes with it); a node joining or leaving changes the list.
  let shownNodes = "";
  function noteNodes(nodes) {
    const now = JSON.stringify(nodes.map((n) => [n.name, n.up, n.recorded_up]));
    if (shownNodes && now !== shownNodes) tablesDue = true;
    shownNodes = now;
    refreshTablesIfDue();
  }

  function refreshTablesIfDue() {
    if (!tablesDue || document.hidden || Date.now() - tablesAskedAt < TABLES_EVERY_MS) return;
    tablesDue = false;
    tablesAskedAt = Date.now();
    refreshTables(false);
  }

  document.addEventListener("visibilitychange", refreshTablesIfDue);
  const selfTest = Qw.follow(root.dataset.json, (body) => {
    drawTables(body);
    return waitingSelfTest;
  });

  drawTables(initial);
  connect();
})();
