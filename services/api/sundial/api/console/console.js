// Sundial console: plain JavaScript on the API's Connect JSON endpoints, no dependencies.
//
// Security (docs/design.md section 7): the token is kept in this tab's sessionStorage and
// sent only in the Authorization header (never in a URL, no cookies); the page builds its
// DOM with textContent only (no HTML from data) and runs under a CSP without inline code.
"use strict";

(() => {
  const TOKEN_KEY = "sundial.token";
  const ROLE_KEY = "sundial.role";
  const POLL_MS = 2000;
  const JOBS_PAGE = 25;
  const HISTORY = 100;

  // --- the API ---------------------------------------------------------------------------

  class ApiError extends Error {
    constructor(code, message, status, requestId) {
      super(message);
      this.code = code;
      this.status = status;
      this.requestId = requestId;
    }
  }

  async function rpc(service, method, body) {
    const headers = { "content-type": "application/json" };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.authorization = `Bearer ${token}`;
    const answer = await fetch(`/sundial.v1.${service}/${method}`, {
      method: "POST",
      headers,
      body: JSON.stringify(body || {}),
      cache: "no-store",
      credentials: "omit",
    });
    const text = await answer.text();
    let data = {};
    try {
      data = text ? JSON.parse(text) : {};
    } catch (_) {
      data = {};
    }
    if (!answer.ok) {
      throw new ApiError(
        data.code || "unknown",
        data.message || answer.statusText,
        answer.status,
        answer.headers.get("x-request-id"),
      );
    }
    return data;
  }
  const jobApi = (method, body) => rpc("JobService", method, body);
  const adminApi = (method, body) => rpc("AdminService", method, body);

  // --- DOM helpers -------------------------------------------------------------------------

  const $ = (selector) => document.querySelector(selector);

  function h(tag, attrs, ...children) {
    return fill(document.createElement(tag), attrs, children);
  }

  function s(tag, attrs, ...children) {
    return fill(document.createElementNS("http://www.w3.org/2000/svg", tag), attrs, children);
  }

  function fill(el, attrs, children) {
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
      else el.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      el.append(child instanceof Node ? child : String(child));
    }
    return el;
  }

  function mount(...children) {
    const app = $("#app");
    app.replaceChildren(...children);
    return app;
  }

  function say(text) {
    const box = $("#status");
    box.className = "status";
    box.textContent = text;
  }

  function fail(error) {
    if (error instanceof ApiError && error.code === "unauthenticated") {
      logout("The token was refused: log in again.");
      return;
    }
    const box = $("#status");
    box.className = "status error";
    const id = error.requestId ? ` (request id ${error.requestId})` : "";
    box.textContent = `${error.code ? error.code + ": " : ""}${error.message}${id}`;
  }

  // --- formatting --------------------------------------------------------------------------

  const enumName = (value, prefix) =>
    (value || "").replace(prefix, "").toLowerCase().replaceAll("_", " ") || "unknown";
  const runStatus = (run) => enumName(run.status, "RUN_STATUS_");

  function seconds(duration) {
    if (!duration) return null;
    const value = Number.parseFloat(duration);
    return Number.isFinite(value) ? value : null;
  }

  function fmtSeconds(value) {
    if (value === null) return "—";
    const abs = Math.abs(value);
    if (abs < 1) return `${Math.round(value * 1000)} ms`;
    if (abs < 120) return `${value.toFixed(2)} s`;
    if (abs < 7200) return `${(value / 60).toFixed(1)} min`;
    return `${(value / 3600).toFixed(1)} h`;
  }

  function fmtTime(ts) {
    if (!ts) return "—";
    const date = new Date(ts);
    if (Number.isNaN(date.getTime())) return ts;
    return `${date.toISOString().replace("T", " ").slice(0, 19)} UTC`;
  }

  function relative(ts) {
    if (!ts) return "";
    const diff = (new Date(ts).getTime() - Date.now()) / 1000;
    const text = fmtSeconds(Math.abs(diff)).replace(/\.\d+ s$/, " s");
    return diff >= 0 ? `in ${text}` : `${text} ago`;
  }

  const timeCell = (ts) =>
    h("td", {}, h("time", { datetime: ts || "" }, fmtTime(ts)), " ",
      h("span", { class: "muted" }, relative(ts)));

  const pill = (text, cls) => h("span", { class: `pill s-${cls || text}` }, text);

  // --- schedules in words ------------------------------------------------------------------

  const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
  const DAY_NAMES = { SUN: 0, MON: 1, TUE: 2, WED: 3, THU: 4, FRI: 5, SAT: 6 };
  const MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
    "September", "October", "November", "December"];
  const MACROS = {
    "@yearly": "every year at midnight on 1 January",
    "@annually": "every year at midnight on 1 January",
    "@monthly": "at midnight on the first day of every month",
    "@weekly": "every Sunday at midnight",
    "@daily": "every day at midnight",
    "@midnight": "every day at midnight",
    "@hourly": "every hour, on the hour",
  };
  const isNumber = (field) => /^\d+$/.test(field);
  const pad = (n) => String(n).padStart(2, "0");

  function dayName(token) {
    const upper = token.toUpperCase();
    if (upper in DAY_NAMES) return DAYS[DAY_NAMES[upper]];
    if (isNumber(token)) return DAYS[Number(token) % 7];
    return token;
  }

  function listOf(field, name) {
    return field.split(",").map((part) => {
      const [range, step] = part.split("/");
      const [from, to] = range.split("-");
      let text = to === undefined ? name(from) : `${name(from)} through ${name(to)}`;
      if (range === "*") text = "every one";
      if (step) text = `every ${step}${range === "*" ? "" : ` from ${text}`}`;
      return text;
    }).join(", ");
  }

  function describeCron(expr) {
    const trimmed = expr.trim();
    if (MACROS[trimmed.toLowerCase()]) return MACROS[trimmed.toLowerCase()];
    const fields = trimmed.split(/\s+/);
    let second = null;
    if (fields.length === 6) second = fields.shift();
    if (fields.length !== 5) return `cron ${expr}`;
    const [minute, hour, dom, month, dow] = fields;
    let time;
    if (isNumber(minute) && isNumber(hour)) {
      time = `at ${pad(hour)}:${pad(minute)}${second && second !== "0" ? `:${pad(second)}` : ""}`;
    } else if (minute === "*" && hour === "*") {
      time = second && second !== "*" ? `every minute at second ${second}` : "every minute";
    } else if (minute.startsWith("*/") && hour === "*") {
      time = `every ${minute.slice(2)} minutes`;
    } else if (isNumber(minute) && hour === "*") {
      time = minute === "0" ? "every hour, on the hour" : `every hour at minute ${minute}`;
    } else if (isNumber(minute) && hour.startsWith("*/")) {
      time = `every ${hour.slice(2)} hours at minute ${minute}`;
    } else {
      time = `at minute ${minute} of hour ${hour}`;
    }
    if (second && (second.startsWith("*/") || second === "*")) {
      time = second === "*" ? "every second" : `every ${second.slice(2)} seconds`;
    }
    const days = [];
    const domText = dom === "*" ? "" : `on day ${listOf(dom, (d) => d)} of the month`;
    const dowText = dow === "*" ? "" : `on ${listOf(dow, dayName)}`;
    if (domText && dowText) {
      // Both restricted: either matches, unless one starts with * (then both must).
      const both = dom.startsWith("*") || dow.startsWith("*");
      days.push(`${domText} ${both ? "and" : "or"} ${dowText}`);
    } else if (domText || dowText) {
      days.push(domText || dowText);
    } else if (isNumber(hour)) {
      days.push("every day");
    }
    if (month !== "*") days.push(`in ${listOf(month, (m) => MONTHS[Number(m) - 1] || m)}`);
    return [time, ...days].join(", ");
  }

  // One spec: a Schedule's oneof, or an entry of Schedule.specs (the same field names).
  function describeSpec(spec, zone) {
    if (spec.cron) return `${describeCron(spec.cron)} (${zone})`;
    if (spec.interval) {
      const offset = seconds(spec.interval.offset);
      return `every ${fmtSeconds(seconds(spec.interval.every))}` +
        (offset ? `, offset ${fmtSeconds(offset)}` : "") +
        (spec.interval.fromEnd ? " after each run ends" : "");
    }
    if (spec.once) return `once, at ${fmtTime(spec.once)}`;
    return null;
  }

  function describeSchedule(schedule) {
    if (!schedule) return "—";
    const zone = schedule.timeZone || "UTC";
    const specs = schedule.specs && schedule.specs.length ? schedule.specs : [schedule];
    const parts = specs.map((spec) => describeSpec(spec, zone)).filter(Boolean);
    if (!parts.length) return "no schedule";
    const calendars = schedule.calendars && schedule.calendars.length
      ? `; calendars ${schedule.calendars.join(", ")}` : "";
    return parts.join(" + ") + calendars;
  }

  const scheduleSpec = (schedule) =>
    schedule && schedule.cron ? h("code", {}, schedule.cron) : null;

  function failurePolicy(policies) {
    const count = ((policies || {}).failure || {}).pauseAfterConsecutiveDead || 0;
    if (count <= 0) return "never pause";
    if (count === 1) return "pause at the first dead run";
    return `pause after ${count} consecutive dead runs`;
  }

  function lastOutcome(stats) {
    const ok = stats && stats.lastSuccessTime;
    const bad = stats && stats.lastFailureTime;
    if (!ok && !bad) return h("span", { class: "muted" }, "no runs yet");
    if (ok && (!bad || new Date(ok) >= new Date(bad))) {
      return h("span", {}, pill("succeeded"), " ", h("span", { class: "muted" }, relative(ok)));
    }
    return h("span", {}, pill("failed", "dead"), " ", h("span", { class: "muted" }, relative(bad)));
  }

  function newRequestId() {
    const bytes = crypto.getRandomValues(new Uint8Array(16));
    return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  }

  // --- confirmation dialog -----------------------------------------------------------------

  function confirmAction(title, text, fields, okLabel) {
    const dialog = $("#confirm");
    $("#confirm-title").textContent = title;
    $("#confirm-text").textContent = text;
    $("#confirm-fields").replaceChildren(...(fields || []));
    $("#confirm-ok").textContent = okLabel || "Confirm";
    dialog.returnValue = "";
    return new Promise((resolve) => {
      dialog.addEventListener("close", () => {
        const form = new FormData($("#confirm-form"));
        resolve(dialog.returnValue === "ok" ? form : null);
      }, { once: true });
      dialog.showModal();
      const first = $("#confirm-fields input");
      (first || $("#confirm-ok")).focus();
    });
  }

  // Ask; if confirmed, make the call, say what it did and refresh the page.
  async function confirmThen(refresh, title, text, fields, okLabel, call, done) {
    const form = await confirmAction(title, text, fields, okLabel);
    if (form === null) return;
    try {
      const answer = await call(form);
      say(done(answer));
      await refresh();
    } catch (error) {
      fail(error);
    }
  }

  // --- polling -----------------------------------------------------------------------------

  let poller = null;

  function poll(refresh, everyMs) {
    stopPolling();
    let busy = false;
    const tick = async () => {
      if (busy || document.hidden || $("#confirm").open) return;
      busy = true;
      try {
        await refresh();
      } catch (error) {
        fail(error);
      } finally {
        busy = false;
      }
    };
    poller = setInterval(tick, everyMs || POLL_MS);
    return tick();
  }

  function stopPolling() {
    if (poller !== null) clearInterval(poller);
    poller = null;
  }

  // --- log in ------------------------------------------------------------------------------

  async function detectRole() {
    try {
      await jobApi("ListJobs", { pageSize: 1 });
      return "tenant";
    } catch (error) {
      if (!(error instanceof ApiError) || error.code !== "permission_denied") throw error;
    }
    await adminApi("ListTenants", { pageSize: 1 });
    return "admin";
  }

  function logout(message) {
    stopPolling();
    sessionStorage.removeItem(TOKEN_KEY);
    sessionStorage.removeItem(ROLE_KEY);
    history.replaceState(null, "", "#/");
    renderLogin(message);
  }

  function renderLogin(message) {
    $("#nav").hidden = true;
    say("");
    const input = h("input", {
      id: "token", name: "token", type: "password", autocomplete: "off", required: true,
      spellcheck: "false", "aria-describedby": "token-help",
    });
    const error = h("p", { id: "login-error", class: "error-text", role: "alert" }, message || "");
    const form = h("form", { class: "login", id: "login-form" },
      h("label", { for: "token" }, "API token", input),
      h("p", { id: "token-help", class: "muted" },
        "A tenant token shows that tenant's jobs; an admin token shows tenants and the " +
        "cluster. The token stays in this browser tab and is sent only in the " +
        "Authorization header."),
      h("button", { type: "submit", class: "primary", id: "login" }, "Log in"),
      error);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      sessionStorage.setItem(TOKEN_KEY, input.value.trim());
      try {
        const role = await detectRole();
        sessionStorage.setItem(ROLE_KEY, role);
        location.hash = role === "admin" ? "#/admin" : "#/jobs";
        route();
      } catch (err) {
        sessionStorage.removeItem(TOKEN_KEY);
        error.textContent = err.code === "unauthenticated"
          ? "This token was refused." : `Could not log in: ${err.message}`;
      }
    });
    mount(h("h1", {}, "Log in"), form);
    input.focus();
  }

  // --- jobs list ---------------------------------------------------------------------------

  const list = {
    namePrefix: "", label: "", paused: "", selector: "", text: "", tokens: [""], page: 0,
  };

  function jobsRequest() {
    const body = { pageSize: JOBS_PAGE, pageToken: list.tokens[list.page] };
    if (list.namePrefix) body.namePrefix = list.namePrefix;
    if (list.label) {
      const at = list.label.indexOf("=");
      if (at <= 0) throw new ApiError("invalid_argument", "a label filter is key=value");
      body.labels = { [list.label.slice(0, at).trim()]: list.label.slice(at + 1).trim() };
    }
    if (list.paused) body.paused = list.paused === "paused";
    if (list.selector) body.selector = list.selector;
    if (list.text) body.search = list.text;
    return body;
  }

  // A bulk action over the jobs the search form's selector and text match: count them
  // with a dry run, show the count and the first ids, then act (repeated until none is
  // left: each call acts on at most 1,000), as `sundial jobs pause -l ...` does.
  async function bulkAct(method, verb, refresh) {
    const selector = $("#search-selector").value.trim();
    const search = $("#search-text").value.trim();
    if (!selector && !search) {
      fail(new ApiError("invalid_argument", "give a selector or a text to act on many jobs"));
      return;
    }
    try {
      const dry = await jobApi(method, { selector, search, dryRun: true });
      const affected = Number(dry.affected || 0);
      const matched = Number(dry.matched || 0);
      const first = (dry.jobIds || []).slice(0, 10);
      const fields = method === "PauseJobs"
        ? [h("label", { for: "bulk-note" }, "Note (optional)",
          h("input", { id: "bulk-note", name: "note", maxlength: 500 }))]
        : [];
      const form = await confirmAction(`${verb} matching jobs`,
        `${verb} ${affected} of the ${matched} jobs matching ` +
        `${[selector, search && `"${search}"`].filter(Boolean).join(" and ")}?` +
        (first.length ? ` (${first.join(", ")}${affected > first.length ? ", …" : ""})` : ""),
        fields, `${verb} ${affected}`);
      if (form === null) return;
      let done = 0;
      for (let call = 0; call < 100; call += 1) {
        const answer = await jobApi(method, { selector, search, note: form.get("note") || "" });
        done += Number(answer.affected || 0);
        if (!Number(answer.remaining || 0) || !Number(answer.affected || 0)) break;
      }
      say(`${verb === "Pause" ? "Paused" : "Resumed"} ${done} jobs.`);
      await refresh();
    } catch (error) {
      fail(error);
    }
  }

  // The jobs ticked on the list (id -> name), kept across pages and refreshes; acted on
  // one call per job, so a selection is bounded (a selector acts on more).
  const selected = new Map();
  const MAX_SELECTED = 100;
  const SELECTED_ACTIONS = {
    pause: ["Pause", "Paused", (jobId) => jobApi("PauseJob", { jobId })],
    resume: ["Resume", "Resumed", (jobId) => jobApi("ResumeJob", { jobId })],
    trigger: ["Trigger", "Triggered",
      (jobId) => jobApi("TriggerJob", { jobId, requestId: newRequestId() })],
    delete: ["Delete", "Deleted", (jobId) => jobApi("DeleteJob", { jobId, allowMissing: true })],
  };

  // Confirm with the count and the first names, then one call per selected job; a job
  // that fails is named in the result and stays selected.
  async function actOnSelected(action, refresh) {
    const [verb, past, call] = SELECTED_ACTIONS[action];
    const names = [...selected.values()];
    const form = await confirmAction(`${verb} selected jobs`,
      `${verb} ${names.length} selected job${names.length === 1 ? "" : "s"}: ` +
      `${names.slice(0, 10).join(", ")}${names.length > 10 ? ", …" : ""}?`,
      [], `${verb} ${names.length}`);
    if (form === null) return;
    const failed = [];
    let done = 0;
    for (const [jobId, name] of [...selected]) {
      try {
        await call(jobId);
        done += 1;
        selected.delete(jobId);
      } catch (error) {
        failed.push(`${name}: ${error.message}`);
      }
    }
    say(`${past} ${done} job${done === 1 ? "" : "s"}.` +
      (failed.length ? ` Failed: ${failed.join("; ")}` : ""));
    await refresh();
  }

  function showJobs() {
    const pageBox = h("input", { type: "checkbox", id: "select-page" });
    const table = h("table", { id: "jobs-table" },
      h("caption", { class: "muted" }, "Jobs, ordered by name"),
      h("thead", {}, h("tr", {},
        h("th", { scope: "col" }, h("label", { for: "select-page", class: "check" }, pageBox,
          h("span", { class: "sr-only" }, "Select every job on this page"))),
        ["Name", "Schedule", "State", "Next run", "Last outcome", "Labels"].map(
          (title) => h("th", { scope: "col" }, title)))),
      h("tbody"));
    const count = h("span", { id: "selection-count", class: "muted", "aria-live": "polite" });
    const selectedButtons = Object.entries(SELECTED_ACTIONS).map(([action, [verb]]) =>
      h("button", { type: "button", id: `selected-${action}`,
        class: action === "delete" || action === "pause" ? "danger" : null,
        onclick: () => actOnSelected(action, load) }, `${verb} selected…`));
    const clear = h("button", { type: "button", id: "selected-clear",
      onclick: () => { selected.clear(); showSelection(); } }, "Clear selection");
    const selection = h("div", { class: "actions", id: "selection-actions",
      role: "group", "aria-label": "Act on the selected jobs" },
    count, selectedButtons, clear);

    // The count, the buttons and the boxes on the page follow `selected`.
    function showSelection() {
      count.textContent = `${selected.size} selected` +
        (selected.size >= MAX_SELECTED ? ` (at most ${MAX_SELECTED})` : "");
      for (const button of [...selectedButtons, clear]) button.disabled = !selected.size;
      const boxes = [...table.querySelectorAll("input.select-job")];
      for (const box of boxes) box.checked = selected.has(box.value);
      pageBox.checked = boxes.length > 0 && boxes.every((box) => box.checked);
    }

    function toggle(jobId, name, on) {
      if (on && selected.size < MAX_SELECTED) selected.set(jobId, name);
      if (!on) selected.delete(jobId);
      showSelection();
    }

    pageBox.addEventListener("change", () => {
      for (const box of table.querySelectorAll("input.select-job")) {
        toggle(box.value, box.dataset.name, pageBox.checked);
      }
    });
    const prev = h("button", { type: "button", id: "page-prev" }, "Previous page");
    const next = h("button", { type: "button", id: "page-next" }, "Next page");
    const where = h("span", { id: "page-number", class: "muted" });
    const field = (id, label, value, hint) => h("label", { for: id }, label,
      h("input", { id, name: id, value, placeholder: hint || "" }));
    const paused = h("select", { id: "search-paused", name: "paused" },
      h("option", { value: "" }, "any"), h("option", { value: "paused" }, "paused"),
      h("option", { value: "active" }, "not paused"));
    paused.value = list.paused;
    const form = h("form", { class: "inline", id: "search-form", role: "search" },
      field("search-name", "Name starts with", list.namePrefix),
      field("search-label", "Label", list.label, "key=value"),
      field("search-selector", "Selector", list.selector, "team=ops,tier in (a,b)"),
      field("search-text", "Name or description contains", list.text),
      h("label", { for: "search-paused" }, "Paused", paused),
      h("button", { type: "submit", class: "primary", id: "search" }, "Search"));
    const bulk = h("div", { class: "actions", id: "bulk-actions" },
      h("a", { href: "#/new", id: "new-job", class: "button" }, "New job"),
      h("button", { type: "button", id: "bulk-pause", class: "danger",
        onclick: () => bulkAct("PauseJobs", "Pause", load) }, "Pause matching…"),
      h("button", { type: "button", id: "bulk-resume",
        onclick: () => bulkAct("ResumeJobs", "Resume", load) }, "Resume matching…"));
    mount(h("h1", {}, "Jobs"), form, bulk, selection, table,
      h("div", { class: "pager" }, prev, where, next));
    showSelection();

    async function load() {
      const answer = await jobApi("ListJobs", jobsRequest());
      const rows = (answer.jobs || []).map((job) => h("tr", { "data-job-id": job.jobId },
        h("td", {}, h("label", { class: "check" },
          h("input", { type: "checkbox", class: "select-job", value: job.jobId,
            "data-name": job.name, onchange: (event) => toggle(job.jobId, job.name,
              event.target.checked) }),
          h("span", { class: "sr-only" }, `Select ${job.name}`))),
        h("td", {}, h("a", { href: `#/jobs/${encodeURIComponent(job.jobId)}` }, job.name)),
        h("td", {}, describeSchedule(job.schedule)),
        h("td", {}, job.paused ? pill("paused") : pill("active", "succeeded")),
        job.paused ? h("td", { class: "muted" }, "paused") : timeCell(job.nextRunAt),
        h("td", {}, lastOutcome(job.stats)),
        h("td", {}, Object.entries(job.labels || {}).map(([k, v]) => `${k}=${v}`).join(", "))));
      if (!rows.length) {
        rows.push(h("tr", {}, h("td", { colspan: 7, class: "muted" }, "No jobs match.")));
      }
      table.tBodies[0].replaceChildren(...rows);
      showSelection();
      list.tokens[list.page + 1] = answer.nextPageToken || "";
      prev.disabled = list.page === 0;
      next.disabled = !answer.nextPageToken;
      where.textContent = `page ${list.page + 1}`;
    }

    form.addEventListener("submit", (event) => {
      event.preventDefault();
      list.namePrefix = $("#search-name").value.trim();
      list.label = $("#search-label").value.trim();
      list.selector = $("#search-selector").value.trim();
      list.text = $("#search-text").value.trim();
      list.paused = paused.value;
      list.tokens = [""];
      list.page = 0;
      poll(load);
    });
    prev.addEventListener("click", () => { list.page -= 1; poll(load); });
    next.addEventListener("click", () => { list.page += 1; poll(load); });
    return poll(load);
  }

  // --- one job -----------------------------------------------------------------------------

  function renderChart(runs) {
    const points = runs
      .filter((run) => run.lateness && run.scheduledAt)
      .map((run) => ({ t: new Date(run.scheduledAt).getTime(), y: seconds(run.lateness), run }))
      .sort((a, b) => a.t - b.t);
    const width = 900;
    const height = 220;
    const left = 60;
    const bottom = 30;
    const top = 12;
    const right = 12;
    const chart = s("svg", {
      class: "chart", id: "lateness-chart", viewBox: `0 0 ${width} ${height}`,
      role: "img", "aria-labelledby": "lateness-title",
    });
    const values = points.map((p) => p.y);
    const max = Math.max(0.001, ...values);
    const summary = points.length
      ? `Start lateness of the last ${points.length} scheduled runs: ` +
        `latest ${fmtSeconds(values[values.length - 1])}, highest ${fmtSeconds(max)}.`
      : "No scheduled run has started yet.";
    chart.append(s("title", { id: "lateness-title" }, summary));
    chart.append(s("line", { class: "axis", x1: left, y1: height - bottom, x2: width - right,
      y2: height - bottom }));
    chart.append(s("line", { class: "axis", x1: left, y1: top, x2: left, y2: height - bottom }));
    chart.append(s("text", { x: 4, y: top + 8 }, fmtSeconds(max)));
    chart.append(s("text", { x: 4, y: height - bottom }, "0"));
    if (points.length) {
      const t0 = points[0].t;
      const span = Math.max(1, points[points.length - 1].t - t0);
      const x = (p) => left + ((p.t - t0) / span) * (width - left - right);
      const y = (p) => height - bottom - (Math.max(0, p.y) / max) * (height - bottom - top);
      chart.append(s("polyline", {
        class: "line", points: points.map((p) => `${x(p).toFixed(1)},${y(p).toFixed(1)}`).join(" "),
      }));
      for (const p of points) {
        const bad = ["dead", "cancelled"].includes(runStatus(p.run));
        chart.append(s("circle", { class: bad ? "dot bad" : "dot", cx: x(p), cy: y(p), r: 3 },
          s("title", {}, `${fmtTime(p.run.scheduledAt)}: ${fmtSeconds(p.y)} late`)));
      }
      chart.append(s("text", { x: left, y: height - 8 }, fmtTime(points[0].run.scheduledAt)));
      chart.append(s("text", { x: width - right, y: height - 8, "text-anchor": "end" },
        fmtTime(points[points.length - 1].run.scheduledAt)));
    }
    return [chart, h("p", { class: "muted", id: "lateness-summary" }, summary)];
  }

  function renderStrip(runs) {
    const ordered = [...runs].reverse();
    const strip = h("ul", {
      class: "strip", id: "outcomes",
      "aria-label": `Outcomes of the last ${ordered.length} runs, oldest first`,
    });
    for (const run of ordered) {
      const status = runStatus(run);
      const kind = status === "succeeded" ? "ok" : ["dead", "cancelled"].includes(status)
        ? "bad" : "other";
      const mark = kind === "ok" ? "✓" : kind === "bad" ? "✗" : "·";
      const label = `${status}, ${fmtTime(run.scheduledAt)}`;
      strip.append(h("li", { class: kind, title: label, "aria-label": label }, mark));
    }
    return strip;
  }

  function runRow(run, withReplay, onReplay) {
    const status = runStatus(run);
    return h("tr", { "data-run-key": run.runKey, "data-status": status },
      h("td", {}, h("time", { datetime: run.scheduledAt }, fmtTime(run.scheduledAt))),
      h("td", {}, enumName(run.kind, "RUN_KIND_")),
      h("td", {}, pill(status)),
      h("td", { class: "num" }, run.attempt || 0),
      h("td", { class: "num" }, fmtSeconds(seconds(run.lateness))),
      h("td", {}, run.lastError ? h("span", { class: "error-text" }, run.lastError) : ""),
      withReplay ? h("td", {}, h("button", {
        type: "button", class: "replay", "aria-label": `Replay the run of ${run.scheduledAt}`,
        onclick: () => onReplay(run),
      }, "Replay")) : null);
  }

  function runsTable(id, caption, runs, withReplay, onReplay) {
    const head = ["Scheduled at", "Kind", "Status", "Attempt", "Lateness", "Last error"];
    if (withReplay) head.push("Action");
    const rows = runs.map((run) => runRow(run, withReplay, onReplay));
    if (!rows.length) {
      rows.push(h("tr", {}, h("td", { colspan: head.length, class: "muted" }, "None.")));
    }
    return h("table", { id },
      h("caption", { class: "muted" }, caption),
      h("thead", {}, h("tr", {}, head.map((title) => h("th", { scope: "col" }, title)))),
      h("tbody", {}, rows));
  }

  function fireTable(id, fires) {
    if (!fires.length) return h("p", { class: "muted", id }, "No more fire times.");
    return h("table", { id },
      h("thead", {}, h("tr", {}, ["UTC", "Local time", "DST"].map(
        (title) => h("th", { scope: "col" }, title)))),
      h("tbody", {}, fires.map((fire) => h("tr", {},
        h("td", {}, fire.dropped ? h("s", {}, fmtTime(fire.at)) : fmtTime(fire.at)),
        h("td", {}, fire.localTime || ""),
        h("td", { class: fire.note ? "dst" : "muted" }, fire.dropped
          ? `dropped: ${fire.note || "the local time does not exist"}`
          : fire.note || "—")))));
  }

  // --- SLO, policies, revisions --------------------------------------------------------

  const count = (value) => Number(value || 0);

  // A window's length as people say it: 1 h, 24 h, 7 d, 90 min.
  function fmtWindow(duration) {
    const value = seconds(duration) || 0;
    if (value >= 172800 && value % 86400 === 0) return `${value / 86400} d`;
    if (value >= 3600 && value % 3600 === 0) return `${value / 3600} h`;
    if (value % 60 === 0) return `${value / 60} min`;
    return fmtSeconds(value);
  }

  function sloTable(slos) {
    if (!slos.length) return h("p", { class: "muted", id: "slo-table" }, "No SLO.");
    const threshold = fmtSeconds(seconds(slos[0].latenessThreshold));
    const head = ["Window", "Due", "On time", "Late", "Throttled (own limits)",
      "Missed (misfire)", "Skipped (overlap)", "Failed", "On time %"];
    return h("table", { id: "slo-table" },
      h("caption", { class: "muted" }, "Scheduled occurrences by nominal time, ending now; " +
        `on time = first attempt started within ${threshold} of its due time`),
      h("thead", {}, h("tr", {}, head.map((title) => h("th", { scope: "col" }, title)))),
      h("tbody", {}, slos.map((slo) => {
        const due = count(slo.due);
        const onTime = count(slo.onTime);
        const late = count(slo.late);
        const missed = count(slo.missed);
        const failed = count(slo.failed);
        return h("tr", { "data-window": slo.window },
          h("th", { scope: "row" }, fmtWindow(slo.window)),
          h("td", { class: "num", "data-count": "due" }, due),
          h("td", { class: "num", "data-count": "on-time" }, onTime),
          h("td", { class: `num${late ? " warn" : ""}`, "data-count": "late" }, late),
          h("td", { class: "num", "data-count": "throttled" }, count(slo.throttled)),
          h("td", { class: `num${missed ? " warn" : ""}`, "data-count": "missed" }, missed),
          h("td", { class: "num", "data-count": "skipped" }, count(slo.skipped)),
          h("td", { class: `num${failed ? " bad" : ""}`, "data-count": "failed" }, failed),
          h("td", { class: "num", "data-count": "ratio" },
            due ? `${((100 * onTime) / due).toFixed(1)} %` : "—"));
      })));
  }

  function policyText(policies) {
    const p = policies || {};
    const retry = p.retry || {};
    return [
      `misfire ${enumName(p.misfire, "MISFIRE_POLICY_")} ` +
        `(after ${fmtSeconds(seconds(p.misfireThreshold))})`,
      `overlap ${enumName(p.overlap, "OVERLAP_POLICY_")}`,
      `${retry.maxAttempts || 0} attempts (backoff ${fmtSeconds(seconds(retry.baseDelay))} ` +
        `to ${fmtSeconds(seconds(retry.maxDelay))})`,
      `timeout ${fmtSeconds(seconds(p.runTimeout))}`,
      `late after ${fmtSeconds(seconds(p.latenessThreshold))}`,
    ].join(", ");
  }

  // A job's flow policy (job.proto FlowPolicy), defaults spelled out.
  function flowText(policies) {
    const flow = (policies || {}).flow || {};
    return [
      `priority ${flow.priority || 3} (1 first, 5 last)`,
      `rate-limit key ${flow.rateLimitKey || "the target's origin"}`,
      `concurrency key ${flow.concurrencyKey || "none"}`,
    ].join(", ");
  }

  // How a target's calls prove they come from Sundial beyond Sundial-Signature
  // (job.proto TargetAuth): Standard Webhooks on or off, and the identity token's
  // audience and lifetime (their defaults spelled out).
  function authText(target) {
    const auth = ((target && (target.http || target.grpc)) || {}).auth || {};
    const token = auth.identityToken;
    const audience = token && (token.audience ||
      (target.http ? "the target's URL" : "the target's address"));
    return [
      `Standard Webhooks ${auth.standardWebhooks ? "on" : "off"}`,
      token ? `identity token for ${audience}, ` +
        `valid ${fmtSeconds(seconds(token.lifetime) ?? 300)}` : "no identity token",
    ].join(", ");
  }

  const targetText = (target) => target && target.http
    ? `${target.http.method || "POST"} ${target.http.url}`
    : target && target.grpc ? `gRPC ${target.grpc.address}` : "—";

  // A job's definition as facts; with `against`, the facts that differ are marked.
  function definitionFacts(id, job, against) {
    const labels = (j) => Object.entries(j.labels || {}).sort()
      .map(([k, v]) => `${k}=${v}`).join(", ") || "—";
    const rows = [
      ["Name", (j) => j.name || ""],
      ["Description", (j) => j.description || "—"],
      ["Schedule", (j) => `${describeSchedule(j.schedule)}` +
        (j.schedule && j.schedule.cron ? ` [${j.schedule.cron}]` : "")],
      ["Target", (j) => targetText(j.target)],
      ["Target auth", (j) => authText(j.target)],
      ["Policies", (j) => policyText(j.policies)],
      ["Labels", labels],
      ["Paused", (j) => (j.paused ? `yes${j.pauseNote ? ` (${j.pauseNote})` : ""}` : "no")],
    ];
    return h("dl", { class: "facts", id }, rows.flatMap(([term, value]) => {
      const text = value(job);
      const changed = against && value(against) !== text;
      return [h("dt", {}, term), h("dd", changed
        ? { class: "changed", title: `now: ${value(against)}` } : {}, text,
      changed ? h("span", { class: "muted" }, " (changed since)") : "")];
    }));
  }

  function revisionsTable(revisions, onView) {
    const rows = revisions.map((rev) => h("tr", { "data-version": rev.version },
      h("td", { class: "num" }, rev.version),
      timeCell(rev.createTime),
      h("td", {}, (rev.changedFields || []).join(", ")),
      h("td", {}, h("code", {}, rev.changedBy || "")),
      h("td", {}, h("button", {
        type: "button", class: "view-revision",
        "aria-label": `Show version ${rev.version}`, onclick: () => onView(rev.version),
      }, "Show"))));
    if (!rows.length) rows.push(h("tr", {}, h("td", { colspan: 5, class: "muted" }, "None.")));
    return h("table", { id: "revisions-table" },
      h("caption", { class: "muted" }, "Every change to the job, newest first"),
      h("thead", {}, h("tr", {}, ["Version", "When", "Changed", "By", ""].map(
        (title) => h("th", { scope: "col" }, title)))),
      h("tbody", {}, rows));
  }

  function dateField(id, label) {
    return h("label", { for: id }, `${label} (UTC)`,
      h("input", { id, name: id, type: "datetime-local", step: 1, required: true }));
  }

  function showJob(jobId) {
    const sections = {
      title: h("h1", { id: "job-name" }, "Job"),
      facts: h("dl", { class: "facts", id: "job-facts" }),
      actions: h("div", { class: "actions", id: "job-actions" }),
      upcoming: h("div", { id: "upcoming" }),
      preview: h("div", { id: "preview-result", "aria-live": "polite" }),
      chart: h("div", { id: "chart" }),
      strip: h("div", { id: "strip" }),
      runs: h("div", { id: "runs" }),
      dead: h("div", { id: "dead" }),
      slo: h("div", { id: "slo" }),
      revisions: h("div", { id: "revisions" }),
      revision: h("div", { id: "revision", "aria-live": "polite" }),
    };
    mount(h("p", {}, h("a", { href: "#/jobs" }, "← All jobs")), sections.title, sections.facts,
      sections.actions,
      h("h2", {}, "On time? (SLO)"), sections.slo,
      h("h2", {}, "Next fire times"), sections.upcoming, previewForm(), sections.preview,
      h("h2", {}, "Lateness over time"), sections.chart,
      h("h2", {}, "Successes and failures"), sections.strip,
      h("h2", {}, "Run history"), sections.runs,
      h("h2", {}, "Dead runs"), sections.dead,
      h("h2", {}, "Revisions"), sections.revisions, sections.revision);
    let current = null;
    let revisionsOf = null; // the job version the revisions table was read at

    // A rollback is the server's RollbackJob at the version shown (as `sundial jobs
    // rollback`): a new revision; the paused state is not rolled back.
    function rollBack(version) {
      const now = current;
      return act("Roll back", `Restore ${now.name}'s definition as version ${version} left ` +
        `it? This makes version ${Number(now.version) + 1}; paused or not stays as it is.`,
      [], "Roll back",
      () => jobApi("RollbackJob", {
        jobId: now.uid || now.jobId,
        version,
        expectedVersion: now.version,
      }),
      (a) => {
        sections.revision.replaceChildren();
        return `Rolled back to version ${version}: now version ${a.job.version}.`;
      });
    }

    async function showRevision(version) {
      try {
        const answer = await jobApi("GetJob", { jobId, version });
        const latest = current && String(current.version) === String(version);
        sections.revision.replaceChildren(
          h("h3", { id: "revision-title" }, `Version ${version}`),
          h("p", { class: "muted" }, `The definition as version ${version} left it; marked: ` +
            `what differs from the current version ${current ? current.version : ""}.`),
          definitionFacts("revision-facts", answer.job, current),
          h("div", { class: "actions" },
            latest ? null : h("button", { type: "button", id: "revision-rollback",
              class: "danger", onclick: () => rollBack(version) },
            `Roll back to version ${version}…`),
            h("button", { type: "button", id: "revision-close",
              onclick: () => sections.revision.replaceChildren() }, "Close")));
        sections.revision.scrollIntoView({ block: "end" });
      } catch (error) {
        fail(error);
      }
    }

    function previewForm() {
      const after = h("input", { id: "preview-after", name: "after", type: "date", required: true });
      const form = h("form", { class: "inline", id: "preview-form" },
        h("label", { for: "preview-after" }, "Fire times after (UTC date)", after),
        h("button", { type: "submit", id: "preview" }, "Preview"));
      form.addEventListener("submit", async (event) => {
        event.preventDefault();
        if (!current) return;
        try {
          const answer = await jobApi("PreviewSchedule", {
            schedule: current.schedule, jobId, count: 10,
            after: new Date(`${after.value}T00:00:00Z`).toISOString(),
          });
          sections.preview.replaceChildren(
            h("p", { class: "muted" }, `The 10 fire times after ${after.value}, with DST notes:`),
            fireTable("preview-table", answer.fireTimes || []));
        } catch (error) {
          fail(error);
        }
      });
      return form;
    }

    const act = (...args) => confirmThen(refresh, ...args);

    function renderActions(job) {
      const button = (id, label, onclick, cls) =>
        h("button", { type: "button", id, class: cls || "", onclick }, label);
      sections.actions.replaceChildren(
        h("a", { href: `#/jobs/${encodeURIComponent(jobId)}/edit`, id: "action-edit",
          class: "button" }, "Edit"),
        button("action-trigger", "Trigger now", () => act("Trigger a run",
          `Start a manual run of ${job.name} now?`, [], "Trigger",
          () => jobApi("TriggerJob", { jobId, requestId: newRequestId() }),
          (a) => `Triggered: run ${a.run.runKey}`), "primary"),
        job.paused
          ? button("action-resume", "Resume", () => act("Resume the job",
            `Resume ${job.name}? Occurrences missed while paused are not run.`, [], "Resume",
            () => jobApi("ResumeJob", { jobId }), () => "Resumed."))
          : button("action-pause", "Pause", () => act("Pause the job",
            `Pause ${job.name}? No scheduled run starts until it is resumed.`,
            [h("label", { for: "pause-note" }, "Note (optional)",
              h("input", { id: "pause-note", name: "note", maxlength: 500 }))], "Pause",
            (form) => jobApi("PauseJob", { jobId, note: form.get("note") || "" }),
            () => "Paused."), "danger"),
        button("action-backfill", "Backfill…", () => act("Backfill a range",
          `Create runs for ${job.name}'s occurrences in a past range (at most 1,000).`,
          [dateField("backfill-start", "From"), dateField("backfill-end", "To")], "Backfill",
          (form) => jobApi("BackfillJob", {
            jobId,
            startTime: new Date(`${form.get("backfill-start")}Z`).toISOString(),
            endTime: new Date(`${form.get("backfill-end")}Z`).toISOString(),
          }),
          (a) => `Backfill: ${(a.runs || []).length} runs created, ${a.existingCount || 0} ` +
            "already existed.")));
    }

    function replay(run) {
      return act("Replay a dead run", `Run ${run.runKey} again under the same run key?`, [],
        "Replay", () => jobApi("ReplayRun", { runKey: run.runKey }),
        (a) => `Replayed: ${a.run.runKey} is ${runStatus(a.run)}.`);
    }

    async function refresh() {
      const [described, history, dead] = await Promise.all([
        jobApi("DescribeJob", { jobId }),
        jobApi("ListRuns", { jobId, pageSize: HISTORY }),
        jobApi("ListRuns", { jobId, statuses: ["RUN_STATUS_DEAD"], pageSize: 50 }),
      ]);
      const job = described.job;
      const runs = history.runs || [];
      const named = (job.schedule && job.schedule.calendars) || [];
      document.title = `${job.name} · Sundial console`;
      sections.title.textContent = job.name;
      const fact = (term, ...value) => [h("dt", {}, term), h("dd", {}, ...value)];
      sections.facts.replaceChildren(
        ...fact("Schedule", describeSchedule(job.schedule && { ...job.schedule, calendars: [] }),
          " ", scheduleSpec(job.schedule)),
        ...(named.length ? fact("Calendars", h("span", { id: "job-calendars" },
          named.flatMap((name, i) => (i ? [", ", calendarLink(name)] : [calendarLink(name)])))) : []),
        ...fact("State", job.paused ? pill("paused") : pill("active", "succeeded"),
          job.paused && job.pauseNote ? ` ${job.pauseNote}` : ""),
        ...fact("Next run", job.paused ? "paused" : `${fmtTime(job.nextRunAt)} ` +
          relative(job.nextRunAt)),
        ...fact("Last outcome", lastOutcome(job.stats)),
        ...fact("Active runs", String(described.activeRuns || 0)),
        ...fact("Failure policy", failurePolicy(job.policies)),
        ...fact("Target", job.target && job.target.http ? job.target.http.url
          : job.target && job.target.grpc ? `gRPC ${job.target.grpc.address}` : "—"),
        ...fact("Target auth", h("span", { id: "job-auth" }, authText(job.target))),
        ...fact("Policies", h("span", { id: "job-policies" }, policyText(job.policies))),
        ...fact("Flow", h("span", { id: "job-flow" }, flowText(job.policies))),
        ...fact("Version", String(job.version || "")),
        ...fact("Job id", h("code", {}, job.jobId)));
      sections.slo.replaceChildren(sloTable(described.slo || []));
      if (revisionsOf !== job.version) {
        const listed = await jobApi("ListJobRevisions", { jobId, pageSize: 20 });
        revisionsOf = job.version;
        sections.revisions.replaceChildren(revisionsTable(listed.revisions || [], showRevision),
          listed.nextPageToken
            ? h("p", { class: "muted" }, "The 20 latest; sundial jobs history shows all.") : "");
      }
      if (!current || current.paused !== job.paused || current.name !== job.name) {
        renderActions(job);
      }
      current = job;
      sections.upcoming.replaceChildren(fireTable("upcoming-table", described.upcoming || []));
      sections.chart.replaceChildren(...renderChart(runs));
      sections.strip.replaceChildren(renderStrip(runs));
      sections.runs.replaceChildren(runsTable("runs-table",
        `The ${runs.length} most recent runs, newest first`, runs, false));
      sections.dead.replaceChildren(runsTable("dead-table", "Runs that failed for good",
        dead.runs || [], true, replay));
    }

    return poll(refresh);
  }

  // --- calendars and notification channels ------------------------------------------------

  const LIST_PAGE = 100;
  const CALENDAR_KINDS = {
    CALENDAR_KIND_EXCLUDE: "exclude: no fire time on these dates",
    CALENDAR_KIND_INCLUDE: "include: fire times only on these dates",
  };
  const calendarKind = (kind) => CALENDAR_KINDS[kind] || enumName(kind, "CALENDAR_KIND_");
  const calendarLink = (name) =>
    h("a", { href: `#/calendars/${encodeURIComponent(name)}`, class: "calendar-link" }, name);

  function table(id, caption, head, rows, empty) {
    if (!rows.length) {
      rows.push(h("tr", {}, h("td", { colspan: head.length, class: "muted" }, empty)));
    }
    return h("table", { id },
      caption ? h("caption", { class: "muted" }, caption) : null,
      h("thead", {}, h("tr", {}, head.map((title) => h("th", { scope: "col" }, title)))),
      h("tbody", {}, rows));
  }

  const moreThan = (listed, what) => listed.nextPageToken
    ? h("p", { class: "muted" }, `Showing the first ${LIST_PAGE} ${what}.`) : "";

  function showCalendars() {
    const box = h("div", { id: "calendars" });
    mount(h("h1", {}, "Calendars"),
      h("p", { class: "muted" }, "Named sets of dates that filter the fire times of the " +
        "schedules naming them, on local dates in each schedule's own time zone."), box);

    async function refresh() {
      const listed = await jobApi("ListCalendars", { pageSize: LIST_PAGE });
      const rows = (listed.calendars || []).map((c) => h("tr", { "data-calendar": c.name },
        h("td", {}, calendarLink(c.name)),
        h("td", {}, calendarKind(c.kind)),
        h("td", { class: "num", "data-count": "dates" }, (c.dates || []).length),
        h("td", {}, c.description || ""),
        timeCell(c.updateTime)));
      box.replaceChildren(table("calendars-table", "Calendars, ordered by name",
        ["Name", "Kind", "Dates", "Description", "Changed"], rows, "No calendars yet."),
      moreThan(listed, "calendars"));
    }

    return poll(refresh, 5000);
  }

  // A calendar date in words: "YYYY-MM-DD" once (with its weekday), "MM-DD" every year.
  function calendarDate(date) {
    if (/^\d{4}-\d{2}-\d{2}$/.test(date)) {
      const day = new Date(`${date}T00:00:00Z`);
      return ["once", Number.isNaN(day.getTime()) ? "" : DAYS[day.getUTCDay()]];
    }
    const [month, day] = date.split("-").map(Number);
    const text = `${day} ${MONTHS[month - 1] || month}`;
    return ["every year", month === 2 && day === 29 ? `${text} (leap years only)` : text];
  }

  function showCalendar(name) {
    const title = h("h1", { id: "calendar-name" }, name);
    const facts = h("dl", { class: "facts", id: "calendar-facts" });
    const dates = h("div", { id: "calendar-dates" });
    mount(h("p", {}, h("a", { href: "#/calendars" }, "← All calendars")), title, facts,
      h("h2", {}, "Dates"), dates);

    async function refresh() {
      const { calendar } = await jobApi("GetCalendar", { name });
      const all = calendar.dates || [];
      document.title = `${calendar.name} · Sundial console`;
      const fact = (term, value) => [h("dt", {}, term), h("dd", {}, value)];
      facts.replaceChildren(
        ...fact("Kind", calendarKind(calendar.kind)),
        ...fact("Description", calendar.description || "—"),
        ...fact("Dates", String(all.length)),
        ...fact("Version", String(calendar.version || "")),
        ...fact("Created", fmtTime(calendar.createTime)),
        ...fact("Changed", fmtTime(calendar.updateTime)));
      dates.replaceChildren(table("dates-table",
        "Single dates first, then yearly ones; a schedule reads them in its own time zone",
        ["Date", "Repeats", "Day"], all.map((date) => h("tr", { "data-date": date },
          h("td", {}, h("code", {}, date)), ...calendarDate(date).map((t) => h("td", {}, t)))),
        "No dates."));
    }

    return poll(refresh, 5000);
  }

  const digestText = (span) => (seconds(span)
    ? `${fmtWindow(span)} (one digest per window)` : "none (one notification per event)");

  function showChannels() {
    const box = h("div", { id: "channels" });
    mount(h("h1", {}, "Notification channels"),
      h("p", { class: "muted" }, "Where this tenant's job events are sent, signed like runs " +
        "and delivered at least once."), box);

    const remove = (c) => confirmThen(refresh, "Delete the channel",
      `Delete ${c.displayName}? Its notifications not yet delivered are dropped.`, [], "Delete",
      () => jobApi("DeleteNotificationChannel", { channelId: c.channelId }),
      () => `Deleted ${c.displayName}.`);

    async function refresh() {
      const listed = await jobApi("ListNotificationChannels", { pageSize: LIST_PAGE });
      const rows = (listed.channels || []).map((c) => h("tr", { "data-channel-id": c.channelId },
        h("td", {}, c.displayName),
        h("td", {}, h("code", {}, targetText(c.target))),
        h("td", {}, (c.eventKinds || []).map((k) => enumName(k, "NOTIFICATION_EVENT_KIND_"))
          .join(", ")),
        h("td", {}, digestText(c.digestWindow)),
        timeCell(c.updateTime),
        h("td", {}, h("button", {
          type: "button", class: "danger delete-channel",
          "aria-label": `Delete the channel ${c.displayName}`, onclick: () => remove(c),
        }, "Delete…"))));
      box.replaceChildren(table("channels-table", "Channels, ordered by display name",
        ["Name", "Target", "Events", "Digest window", "Changed", "Action"], rows,
        "No notification channels yet."), moreThan(listed, "channels"));
    }

    return poll(refresh, 5000);
  }

  // --- flow limits -------------------------------------------------------------------------

  // Calls a second as people set them: 50/s, or 30/min below one a second.
  function fmtRate(rate) {
    const value = Number(rate || 0);
    if (!value) return "—";
    if (value >= 1) return `${Number(value.toFixed(3))}/s`;
    const perMinute = value * 60;
    return perMinute >= 1 ? `${Number(perMinute.toFixed(3))}/min`
      : `${Number((value * 3600).toFixed(3))}/h`;
  }

  function showFlow() {
    const box = h("div", { id: "flow" });
    mount(h("h1", {}, "Flow"),
      h("p", { class: "muted" }, "Limits per key: how fast the runs of a rate-limit key " +
        "start and how many runs of a concurrency key run at once. Runs over a limit wait " +
        "(queued) and are never dropped. Set them with sundial flow set."), box);

    async function refresh() {
      const listed = await jobApi("ListFlowLimits", { pageSize: LIST_PAGE });
      const rows = (listed.limits || []).map((f) => h("tr", { "data-flow-key": f.key },
        h("td", {}, h("code", {}, f.key)),
        h("td", { "data-count": "rate" }, fmtRate(f.ratePerSecond)),
        h("td", { class: "num" }, f.ratePerSecond ? count(f.burst) : "—"),
        h("td", { class: "num", "data-count": "max-running" }, count(f.maxRunning) || "—"),
        h("td", { class: "num", "data-count": "waiting" }, count(f.waitingRuns)),
        h("td", { class: "num", "data-count": "running" }, count(f.runningRuns)),
        h("td", { class: "num" }, f.ratePerSecond ? count(f.availableTokens).toFixed(1) : "—"),
        f.blockedUntil ? timeCell(f.blockedUntil) : h("td", { class: "muted" }, "—")));
      box.replaceChildren(table("flow-table", "Limits, ordered by key",
        ["Key", "Rate", "Burst", "Max running", "Waiting", "Running", "Tokens",
          "Blocked until (Retry-After)"], rows, "No flow limits yet."),
      moreThan(listed, "limits"));
    }

    return poll(refresh, 5000);
  }

  // --- admin -------------------------------------------------------------------------------

  function showAdmin() {
    const tenants = h("div", { id: "tenants" });
    const cluster = h("div", { id: "cluster" });
    mount(h("h1", {}, "Admin"), h("h2", {}, "Tenants"), tenants, h("h2", {}, "Cluster"), cluster);

    async function refresh() {
      const listed = await adminApi("ListTenants", { pageSize: 100 });
      const rows = (listed.tenants || []).map((t) => h("tr", { "data-tenant-id": t.tenantId },
        h("td", {}, h("code", {}, t.tenantId)),
        h("td", {}, t.displayName || ""),
        h("td", { class: "num" }, (t.quotas && t.quotas.maxJobs) || "default"),
        h("td", { class: "num" }, (t.quotas && t.quotas.maxConcurrentRuns) || "default"),
        h("td", { class: "num" }, (t.quotas && t.quotas.fairWeight) || "default"),
        h("td", {}, fmtTime(t.createTime))));
      tenants.replaceChildren(h("table", { id: "tenants-table" },
        h("thead", {}, h("tr", {},
          ["Tenant", "Name", "Max jobs", "Max running", "Fair weight", "Created"].map(
            (title) => h("th", { scope: "col" }, title)))),
        h("tbody", {}, rows)),
      listed.nextPageToken ? h("p", { class: "muted" }, "Showing the first 100 tenants.") : "");
      try {
        const status = await adminApi("ClusterStatus", {});
        const members = status.members || [];
        cluster.replaceChildren(h("dl", { class: "facts", id: "cluster-facts" },
          h("dt", {}, "Cluster"), h("dd", {}, status.cluster || ""),
          h("dt", {}, "Dispatch lag"), h("dd", {}, fmtSeconds(seconds(status.dispatchLag) || 0)),
          h("dt", {}, "Oldest due job"), h("dd", {}, fmtTime(status.oldestDueTime)),
          h("dt", {}, "Partitions"), h("dd", {}, `${(status.partitions || []).length} owned of ` +
            `${status.partitionCount || 0}`)),
        h("table", { id: "members-table" },
          h("thead", {}, h("tr", {}, ["Scheduler", "Address", "Partitions", "Since", "Version"]
            .map((title) => h("th", { scope: "col" }, title)))),
          h("tbody", {}, members.map((m) => h("tr", {},
            h("td", {}, m.nodeId), h("td", {}, m.address || ""),
            h("td", { class: "num" }, m.partitionsOwned || 0), h("td", {}, fmtTime(m.since)),
            h("td", {}, m.version || ""))))));
      } catch (error) {
        if (!(error instanceof ApiError) || error.code === "unauthenticated") throw error;
        cluster.replaceChildren(h("p", { class: "muted" }, `Cluster status: ${error.message}`));
      }
    }

    return poll(refresh, 5000);
  }

  // --- routing -----------------------------------------------------------------------------

  // Pages defined by the console's other scripts (operate.js: the Runs page, the job
  // form), which reach these helpers through window.sundialConsole.
  const extraRoutes = [];
  window.sundialConsole = {
    ApiError, confirmAction, enumName, fail, fmtSeconds, fmtTime, h, jobApi, mount,
    newRequestId, pill, poll, runStatus, say, seconds, timeCell, $,
    route: (pattern, show) => extraRoutes.push([pattern, show]),
    go: (hash) => { location.hash = hash; },
  };

  function route() {
    stopPolling();
    say("");
    if (!sessionStorage.getItem(TOKEN_KEY)) return renderLogin();
    const role = sessionStorage.getItem(ROLE_KEY) || "tenant";
    $("#nav").hidden = false;
    for (const id of ["#nav-jobs", "#nav-runs", "#nav-calendars", "#nav-channels", "#nav-flow"]) {
      $(id).hidden = role === "admin";
    }
    $("#nav-admin").hidden = role !== "admin";
    $("#who").textContent = role === "admin" ? "admin token" : "tenant token";
    const hash = location.hash || "#/";
    for (const link of document.querySelectorAll("#nav a")) {
      const here = hash.startsWith(link.getAttribute("href"));
      if (here) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    }
    if (role === "admin") return showAdmin();
    for (const [pattern, show] of extraRoutes) {
      const found = hash.match(pattern);
      if (found) return show(...found.slice(1).map(decodeURIComponent));
    }
    const job = hash.match(/^#\/jobs\/([^/]+)$/);
    if (job) return showJob(decodeURIComponent(job[1]));
    const calendar = hash.match(/^#\/calendars\/([^/]+)$/);
    if (calendar) return showCalendar(decodeURIComponent(calendar[1]));
    if (hash === "#/calendars") return showCalendars();
    if (hash === "#/channels") return showChannels();
    if (hash === "#/flow") return showFlow();
    return showJobs();
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("#logout").addEventListener("click", () => logout("Logged out."));
    window.addEventListener("hashchange", route);
    route();
  });
})();
