// The usage page's chart: tokens per day or week, a series per value of the view's dimension
// (data from the page itself, json_script; labels are people's and keys' names: set as text by uPlot).
(function () {
  "use strict";
  const source = document.getElementById("usage-data");
  const holder = document.getElementById("usage-chart");
  if (!source || !holder || typeof uPlot === "undefined") return;
  const data = JSON.parse(source.textContent);
  const COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4b5563", "#ca8a04", "#a3a3a3"];
  const ink = getComputedStyle(document.body).color;
  const columns = [data.t].concat(data.series.map((s) => s.values));
  const opts = {
    width: Math.max(holder.clientWidth, 320),
    height: 260,
    series: [{}].concat(data.series.map((s, i) => ({ label: s.label, stroke: COLORS[i % COLORS.length], width: 1.5 }))),
    axes: [{ stroke: ink }, { size: 70, stroke: ink }],
    legend: { live: false },
  };
  new uPlot(opts, columns, holder);
  holder.dataset.series = String(data.series.length);
  holder.dataset.points = String(data.t.length);
})();
