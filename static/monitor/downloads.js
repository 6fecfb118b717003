// Live download progress, a row per node a download goes to: the table is redrawn from
// /monitor/models/downloads.json every second while a download is queued or running, and not at all once
// every one has ended (or the tab is hidden).
(function () {
  "use strict";
  const urls = document.getElementById("monitor-urls").dataset;
  const body = document.querySelector("#jobs tbody");
  const actionForm = document.getElementById("job-action");
  const size = Qw.bytes;

  function button(label, url, id) {
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = label;
    b.addEventListener("click", () => {
      actionForm.action = url.replace("/0/", "/" + id + "/");
      actionForm.submit();
    });
    return b;
  }

  function draw(jobs) {
    body.textContent = "";
    for (const job of jobs) {
      const row = body.insertRow();
      row.dataset.id = job.id;
      row.dataset.status = job.status;
      row.dataset.node = job.node;
      row.insertCell().textContent = job.node;
      const parts = ngettext("%(count)s part", "%(count)s parts", job.parts);
      row.insertCell().textContent = job.name + (job.parts > 1 ? " (" + interpolate(parts, { count: job.parts }, true) + ")" : "");
      const status = row.insertCell();
      status.textContent = job.status_label;
      if (job.error) {
        const why = document.createElement("div");
        why.className = "error-text";
        why.textContent = job.error;
        status.append(why);
      }
      const progress = document.createElement("progress");
      progress.max = job.bytes_total || 1;
      progress.value = job.status === "done" ? progress.max : job.bytes_done;
      const cell = row.insertCell();
      cell.append(progress, " " + size(job.bytes_done) + " / " + size(job.bytes_total));
      row.insertCell().textContent = job.rate_bps ? size(job.rate_bps) + "/s" : "";
      row.insertCell().textContent = job.active ? Qw.duration(job.eta_s) : "";
      const actions = row.insertCell();
      if (job.active) actions.append(button(gettext("Cancel"), urls.cancel, job.id));
      if (job.status === "failed") actions.append(button(gettext("Resume"), urls.resume, job.id));
    }
    return jobs.some((job) => job.active);
  }

  const moving = draw(Qw.readJson("jobs-data"));
  Qw.follow(urls.jobs, (answer) => draw(answer.jobs), { moving });
})();
