// Sundial console, part two: the tenant-wide Runs page and the job form (create, edit),
// on the helpers console.js exposes as window.sundialConsole (docs/design.md section 13).
// Same rules as console.js: DOM built with textContent only, no inline code, no CDN.
"use strict";

(() => {
  const c = window.sundialConsole;
  const { h, jobApi, $ } = c;
  const RUNS_PAGE = 100;
  const STATUSES = ["", "dead", "running", "queued", "retrying", "pending", "succeeded",
    "skipped", "cancelled"];

  // --- the Runs page: every job's runs, filtered, live ------------------------------------

  const runsFilter = { status: "dead", selector: "", late: false };

  function showRuns() {
    const status = h("select", { id: "runs-status", name: "status" },
      STATUSES.map((name) => h("option", { value: name }, name || "any")));
    status.value = runsFilter.status;
    const selector = h("input", {
      id: "runs-selector", name: "selector", value: runsFilter.selector,
      placeholder: "team=ops,tier in (a,b)",
    });
    const late = h("input", { id: "runs-late", name: "late", type: "checkbox" });
    late.checked = runsFilter.late;
    const form = h("form", { class: "inline", id: "runs-form", role: "search" },
      h("label", { for: "runs-status" }, "Status", status),
      h("label", { for: "runs-selector" }, "Jobs (label selector)", selector),
      h("label", { for: "runs-late" }, late, " Late only"),
      h("button", { type: "submit", class: "primary", id: "runs-search" }, "Show"));
    const table = h("table", { id: "tenant-runs-table" },
      h("caption", { class: "muted" }, "Runs of every job, newest first (refreshed every 2 s)"),
      h("thead", {}, h("tr", {}, ["Scheduled at", "Job", "Kind", "Status", "Attempt",
        "Last error", "Action"].map((title) => h("th", { scope: "col" }, title)))),
      h("tbody"));
    const more = h("p", { class: "muted", id: "runs-more" });
    c.mount(h("h1", {}, "Runs"), form, table, more);

    function replay(run) {
      return c.confirmAction("Replay a dead run", `Run ${run.runKey} again under the same run key?`,
        [], "Replay").then(async (answer) => {
        if (answer === null) return;
        try {
          const done = await jobApi("ReplayRun", { runKey: run.runKey });
          c.say(`Replayed: ${done.run.runKey} is ${c.runStatus(done.run)}.`);
          await load();
        } catch (error) {
          c.fail(error);
        }
      });
    }

    async function load() {
      const body = { pageSize: RUNS_PAGE };
      if (runsFilter.status) body.statuses = [`RUN_STATUS_${runsFilter.status.toUpperCase()}`];
      if (runsFilter.selector) body.selector = runsFilter.selector;
      if (runsFilter.late) body.lateOnly = true;
      const answer = await jobApi("ListRuns", body);
      const rows = (answer.runs || []).map((run) => {
        const state = c.runStatus(run);
        return h("tr", { "data-run-key": run.runKey, "data-status": state, "data-job": run.jobId },
          h("td", {}, h("time", { datetime: run.scheduledAt }, c.fmtTime(run.scheduledAt))),
          h("td", {}, h("a", { href: `#/jobs/${encodeURIComponent(run.jobId)}` }, run.jobId)),
          h("td", {}, c.enumName(run.kind, "RUN_KIND_")),
          h("td", {}, c.pill(state)),
          h("td", { class: "num" }, run.attempt || 0),
          h("td", {}, run.lastError ? h("span", { class: "error-text" }, run.lastError) : ""),
          h("td", {}, state === "dead" ? h("button", {
            type: "button", class: "replay", "aria-label": `Replay ${run.runKey}`,
            onclick: () => replay(run),
          }, "Replay") : ""));
      });
      if (!rows.length) rows.push(h("tr", {}, h("td", { colspan: 7, class: "muted" }, "None.")));
      table.tBodies[0].replaceChildren(...rows);
      more.textContent = answer.nextPageToken ? `Showing the newest ${RUNS_PAGE}.` : "";
    }

    form.addEventListener("submit", (event) => {
      event.preventDefault();
      runsFilter.status = status.value;
      runsFilter.selector = selector.value.trim();
      runsFilter.late = late.checked;
      c.poll(load);
    });
    return c.poll(load);
  }

  // --- the job form: create or edit, a live preview, errors on the field ------------------

  // The form's fields: [id, label, the field path the server names, kind].
  const FIELDS = [
    ["job-name", "Name", "name", "text"],
    ["job-id", "Id (a-z, 0-9, -; optional)", "job_id", "text"],
    ["job-description", "Description", "description", "text"],
    ["job-cron", "Cron", "schedule.cron", "text"],
    ["job-every", "Or every (30s, 15m, 2h, 1d; instead of a cron)", "schedule.interval.every",
      "text"],
    ["job-from-end", "Count it from the end of the previous run (fixed delay)",
      "schedule.interval.from_end", "checkbox"],
    ["job-zone", "Time zone", "schedule.time_zone", "text"],
    ["job-calendars", "Calendars (comma-separated)", "schedule.calendars", "text"],
    ["job-url", "Target URL", "target.http.url", "text"],
    ["job-method", "Method", "target.http.method", "method"],
    ["job-payload", "Payload", "payload", "area"],
    ["job-labels", "Labels (key=value, one per line)", "labels", "area"],
    ["job-overlap", "When runs overlap", "policies.overlap", "overlap"],
    ["job-misfire", "When occurrences are missed", "policies.misfire", "misfire"],
    ["job-attempts", "Attempts per run", "policies.retry.max_attempts", "number"],
  ];
  const CHOICES = {
    method: ["POST", "GET", "PUT", "PATCH", "DELETE"],
    overlap: ["OVERLAP_POLICY_SKIP", "OVERLAP_POLICY_BUFFER_ONE", "OVERLAP_POLICY_BUFFER_ALL",
      "OVERLAP_POLICY_ALLOW_ALL", "OVERLAP_POLICY_CANCEL_OTHER"],
    misfire: ["MISFIRE_POLICY_RUN_ONCE", "MISFIRE_POLICY_SKIP", "MISFIRE_POLICY_CATCH_UP"],
  };
  // UpdateJob's mask: what the form edits (the job's other fields are kept as they are).
  // (FieldMask's JSON form: lowerCamelCase paths, comma-separated.)
  // The schedule's path is the one of its kind the form holds (cron or interval): a mask
  // naming both would set the other member of the oneof to its empty value.
  const EDITED = ["name", "description", "schedule.timeZone",
    "schedule.calendars", "target.http.url", "target.http.method", "payload", "labels",
    "policies.overlap", "policies.misfire", "policies.retry.maxAttempts"];
  const UNITS = { s: 1, m: 60, h: 3600, d: 86400 };

  // "15m" -> "900s" (a Duration's JSON form); refused on the field, as the server would.
  function durationOf(text, field) {
    const match = /^(\d+)\s*([smhd]?)$/.exec(text);
    if (!match) {
      throw new c.ApiError("invalid_argument",
        `${field}: not a duration (a number and s, m, h or d): ${text}`);
    }
    return `${Number(match[1]) * UNITS[match[2] || "s"]}s`;
  }

  const b64 = (text) => btoa(String.fromCharCode(...new TextEncoder().encode(text)));
  const unb64 = (text) => new TextDecoder().decode(
    Uint8Array.from(atob(text || ""), (ch) => ch.charCodeAt(0)));

  function control(id, field, kind) {
    const attrs = { id, name: id, "data-field": field, "aria-describedby": `${id}-error` };
    if (kind === "area") return h("textarea", { ...attrs, rows: 3 });
    if (kind === "checkbox") return h("input", { ...attrs, type: "checkbox" });
    if (CHOICES[kind]) {
      return h("select", attrs, CHOICES[kind].map((value) => h("option", { value },
        c.enumName(value, /^(OVERLAP|MISFIRE)_POLICY_/) || value)));
    }
    return h("input", { ...attrs, type: kind === "number" ? "number" : "text",
      min: kind === "number" ? 1 : null });
  }

  function readForm() {
    const value = (id) => $(`#${id}`).value.trim();
    const labels = {};
    for (const line of value("job-labels").split("\n")) {
      const at = line.indexOf("=");
      if (line.trim() && at > 0) labels[line.slice(0, at).trim()] = line.slice(at + 1).trim();
      else if (line.trim()) labels[line.trim()] = "";
    }
    const schedule = {
      timeZone: value("job-zone") || "UTC",
      calendars: value("job-calendars").split(",").map((n) => n.trim()).filter(Boolean),
    };
    if (value("job-every") && !value("job-cron")) {
      schedule.interval = {
        every: durationOf(value("job-every"), "schedule.interval.every"),
        fromEnd: $("#job-from-end").checked,
      };
    } else {
      schedule.cron = value("job-cron");
    }
    return {
      jobId: value("job-id") || undefined,
      name: value("job-name"),
      description: value("job-description"),
      schedule,
      target: { http: { url: value("job-url"), method: value("job-method") } },
      payload: b64($("#job-payload").value),
      labels,
      policies: {
        overlap: value("job-overlap"),
        misfire: value("job-misfire"),
        retry: { maxAttempts: Number(value("job-attempts") || 0) },
      },
    };
  }

  function fillForm(job) {
    const set = (id, text) => { $(`#${id}`).value = text || ""; };
    set("job-name", job.name);
    set("job-id", job.jobId);
    set("job-description", job.description);
    set("job-cron", (job.schedule || {}).cron);
    const interval = (job.schedule || {}).interval || {};
    set("job-every", interval.every);
    $("#job-from-end").checked = Boolean(interval.fromEnd);
    set("job-zone", (job.schedule || {}).timeZone || "UTC");
    set("job-calendars", ((job.schedule || {}).calendars || []).join(", "));
    set("job-url", ((job.target || {}).http || {}).url);
    set("job-method", ((job.target || {}).http || {}).method || "POST");
    set("job-payload", job.payload ? unb64(job.payload) : "");
    set("job-labels", Object.entries(job.labels || {}).map(([k, v]) => `${k}=${v}`).join("\n"));
    set("job-overlap", (job.policies || {}).overlap || "OVERLAP_POLICY_SKIP");
    set("job-misfire", (job.policies || {}).misfire || "MISFIRE_POLICY_RUN_ONCE");
    set("job-attempts", String(((job.policies || {}).retry || {}).maxAttempts || 5));
  }

  function clearErrors() {
    for (const el of document.querySelectorAll("[data-field]")) el.removeAttribute("aria-invalid");
    for (const el of document.querySelectorAll(".field-error")) el.textContent = "";
  }

  // The server names the field first in its message ("job.schedule.cron: ..."): shown on
  // the form's control for that field (or the nearest one above it), else in the status.
  function showError(error) {
    clearErrors();
    const match = /^([a-z_.\[\]0-9']+): (.*)$/.exec(error.message || "");
    if (error.code === "invalid_argument" && match) {
      let path = match[1].replace(/^job\./, "").replace(/\[.*$/, "");
      while (path) {
        const el = document.querySelector(`[data-field="${path}"]`);
        if (el) {
          el.setAttribute("aria-invalid", "true");
          $(`#${el.id}-error`).textContent = match[2];
          el.focus();
          c.say("");
          return;
        }
        path = path.includes(".") ? path.slice(0, path.lastIndexOf(".")) : "";
      }
    }
    c.fail(error);
  }

  function showJobForm(jobId) {
    const editing = Boolean(jobId);
    const preview = h("ol", { id: "form-preview", class: "preview", "aria-live": "polite" });
    const previewNote = h("p", { id: "form-preview-note", class: "muted" });
    const form = h("form", { id: "job-form", class: "job-form", novalidate: true },
      FIELDS.map(([id, label, field, kind]) => h("div", { class: "field" },
        h("label", { for: id }, label, control(id, field, kind)),
        h("span", { id: `${id}-error`, class: "field-error error-text", role: "alert" }))),
      h("section", { "aria-labelledby": "form-preview-title" },
        h("h2", { id: "form-preview-title" }, "Next fire times"), previewNote, preview),
      h("div", { class: "buttons" },
        h("a", { href: editing ? `#/jobs/${encodeURIComponent(jobId)}` : "#/jobs",
          class: "button" }, "Cancel"),
        h("button", { type: "submit", class: "primary", id: "job-save" },
          editing ? "Save" : "Create")));
    c.mount(h("h1", {}, editing ? "Edit job" : "New job"), form);
    fillForm({});
    let version = 0;

    let timer = null;
    async function refreshPreview() {
      let schedule;
      try {
        ({ schedule } = readForm());
      } catch (error) {
        preview.replaceChildren();
        showError(error);
        return;
      }
      if (!schedule.cron && !schedule.interval) {
        preview.replaceChildren();
        previewNote.textContent = "Type a cron expression or an interval to see when it fires.";
        return;
      }
      try {
        const body = { schedule, count: 5 };
        if (editing) body.jobId = jobId;
        const answer = await jobApi("PreviewSchedule", body);
        clearErrors();
        previewNote.textContent = (schedule.interval || {}).fromEnd
          ? "The earliest times, if every run took no time: each one is counted from the " +
            "end of the previous run."
          : `In ${schedule.timeZone}; times DST moved or dropped are marked.`;
        preview.replaceChildren(...(answer.fireTimes || []).map((fire) => h("li", {},
          fire.dropped ? h("s", {}, c.fmtTime(fire.at)) : c.fmtTime(fire.at),
          ` (${fire.localTime || ""})`,
          fire.note ? h("span", { class: "dst" }, ` ${fire.note}`) : "")));
      } catch (error) {
        preview.replaceChildren();
        previewNote.textContent = "";
        showError(error);
      }
    }
    form.addEventListener("input", (event) => {
      const watched = ["job-cron", "job-every", "job-from-end", "job-zone", "job-calendars"];
      if (!watched.includes(event.target.id)) return;
      clearTimeout(timer);
      timer = setTimeout(refreshPreview, 300);
    });

    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      try {
        const job = readForm();
        let saved;
        if (editing) {
          job.jobId = jobId;
          const kind = job.schedule.interval ? "schedule.interval" : "schedule.cron";
          saved = await jobApi("UpdateJob", {
            job, updateMask: [...EDITED, kind].join(","), expectedVersion: String(version),
          });
        } else {
          saved = await jobApi("CreateJob", { job, requestId: c.newRequestId() });
        }
        c.say(editing ? `Saved ${saved.job.name}.` : `Created ${saved.job.name}.`);
        c.go(`#/jobs/${encodeURIComponent(saved.job.jobId)}`);
      } catch (error) {
        showError(error);
      }
    });

    if (editing) {
      return jobApi("GetJob", { jobId }).then((answer) => {
        fillForm(answer.job);
        version = answer.job.version;
        $("#job-id").disabled = true;
        return refreshPreview();
      }).catch(c.fail);
    }
    return refreshPreview();
  }

  c.route(/^#\/runs$/, showRuns);
  c.route(/^#\/new$/, () => showJobForm(""));
  c.route(/^#\/jobs\/([^/]+)\/edit$/, showJobForm);
})();
