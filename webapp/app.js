// The adlrec web UI: reads the service's JSON API (the folder above this page) and shows each node's
// plan (who gets how many workers, and why), each job's curve, and the plans over time.  It only
// reads; it never holds the write token.  Every value from the API is put in the page as text, never
// as HTML, so a job id cannot inject markup.

const query = new URLSearchParams(location.search);
// seconds between refreshes, 1 s to a day: a browser runs a longer setInterval delay (over 2^31 ms) at once.
// What is not a positive number (0, -1, abc) is the default 5 s, not the fastest (-1 polled every second).
const ASKED_S = Number(query.get("refresh"));
const EVERY_S = ASKED_S > 0 ? Math.min(86400, Math.max(1, ASKED_S)) : 5;
const API = new URL("..", location.href);
const SVG = "http://www.w3.org/2000/svg";
const TITLE = document.title;
const state = { historyLimit: 30, chartNode: null, lastOk: null, titled: false, idleOpen: false };

// -- DOM helpers ---------------------------------------------------------------------------------
function el(ns, tag, attrs, kids) {
  const node = ns ? document.createElementNS(ns, tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const kid of kids.flat(Infinity)) {
    if (kid === undefined || kid === null || kid === false) continue;
    node.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return node;
}
const h = (tag, attrs, ...kids) => el(null, tag, attrs, kids);
const s = (tag, attrs, ...kids) => el(SVG, tag, attrs, kids);

// -- formatting ----------------------------------------------------------------------------------
// at most `digits` decimals, but a value under 1 keeps its significant digits (0.0025 samples/s showed as "0")
const num = (x, digits = 1) => {
  if (x === null || x === undefined) return "–";
  const v = Number(x);
  const small = v !== 0 && Math.abs(v) < 1;
  return v.toLocaleString("en", small ? { maximumSignificantDigits: Math.max(2, digits) } : { maximumFractionDigits: digits });
};
// an axis tick: short (1.2B: "1,200,000,000" did not fit the margin) and exact enough that ticks differ ("0, 0, 1, 1, 1")
const tick = (x) => Number(x).toLocaleString("en", { notation: "compact", maximumSignificantDigits: 3 });
const pct = (x) => (x === null || x === undefined ? "–" : `${Math.round(100 * x)}%`);
// a time of day, with its date when that is not today (a plan of last week read as one of this morning)
const clock = (epochS) => {
  const t = new Date(epochS * 1000);
  return t.toDateString() === new Date().toDateString()
    ? t.toLocaleTimeString("en-GB")
    : t.toLocaleString("en-GB", { dateStyle: "medium", timeStyle: "medium" });
};
// whether a plan's map names the job itself: `id in map` is also true of every object's inherited names, so a
// job called "constructor" or "toString" was read as planned, with a function for its count and reason
const has = (map, id) => map != null && Object.hasOwn(map, id);
const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;
const mb = (x) => (x >= 1024 ? `${num(x / 1024)} GB` : `${x} MB`);
// A job's colour: one of PALETTE's, which differ to the eye (the greatest least CIELAB distance, 32, of 12 taken
// from Paul Tol's, Tableau's and Kelly's palettes, none near the bar's greys).  Colours drawn from a hash of the id
// as hues (hsl) gave two jobs of one node greens 28 degrees apart that looked the same.  A job keeps its colour
// for as long as the page is open; a job new to the page takes its id's colour (FNV-1a, mixed again at the end
// so that ids differing in a last character land far apart) unless another job of its node has it, then the next
// free one.  Jobs are given colours in the order they registered, ended ones named by the plans read included, so
// a reload gives each the same colour unless a job registered before it has left the plans read (given in the
// order they were first drawn, a reload that drew another job first swapped colours).
const PALETTE = ["#4477aa", "#dcd300", "#be0032", "#117733", "#f38400", "#654522", "#aa4499", "#ff9da7", "#ddcc77",
  "#332288", "#44aa99", "#66ccee"];
const given = new Map(); // job id -> colour
const hashOf = (id) => {
  let x = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) x = Math.imul(x ^ id.charCodeAt(i), 0x01000193);
  x = Math.imul(x ^ (x >>> 16), 0x85ebca6b);
  x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35);
  return (x ^ (x >>> 16)) >>> 0;
};
const colour = (id) => given.get(id) ?? PALETTE[hashOf(id) % PALETTE.length];

// Give each job of each node a colour its node's other jobs lack (while there are colours enough): the active
// jobs, and those named by the current plans and the plan history, taken in the order they were first known.
function giveColours(jobs, plans) {
  const byNode = new Map(); // node -> Map(job id -> when it registered, or its first plan's time)
  const note = (node, id, when) => {
    const ids = byNode.get(node) ?? byNode.set(node, new Map()).get(node);
    if (!ids.has(id) || when < ids.get(id)) ids.set(id, when);
  };
  for (const j of jobs) note(j.node, j.job_id, j.registered_at);
  for (const p of plans) for (const id of Object.keys(p.workers)) note(p.node, id, p.created_at);
  for (const ids of byNode.values()) {
    const queue = [...ids].sort(([a, t], [b, u]) => t - u || (a < b ? -1 : a > b ? 1 : 0)).map(([id]) => id);
    const taken = new Set(queue.filter((id) => given.has(id)).map((id) => given.get(id)));
    for (const id of queue.filter((id) => !given.has(id))) {
      const first = hashOf(id) % PALETTE.length;
      const c = PALETTE.map((_, k) => PALETTE[(first + k) % PALETTE.length]).find((c) => !taken.has(c)) ?? PALETTE[first];
      given.set(id, c);
      taken.add(c);
    }
  }
}

// -- the API -------------------------------------------------------------------------------------
async function get(path, absent = [404]) {
  const r = await fetch(new URL(path, API), { headers: { Accept: "application/json" } });
  if (absent.includes(r.status)) return null;
  if (!r.ok) {
    // the API says why in `detail` (a 503: its job store did not answer); a proxy's error page may not
    const detail = await r.json().then((body) => body.detail, () => null);
    const err = new Error(`${path}: HTTP ${r.status}`);
    err.reason = `HTTP ${r.status}${typeof detail === "string" ? `: ${detail}` : ""}`;
    throw err;
  }
  return r.json();
}

// what the API accepts as a job id (adlrec/service/api.py, Name); anything else in the address is no job
const JOB_ID = /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$/;

function selectedJob() {
  const m = location.hash.match(/^#job\/(.+)$/);
  if (!m) return null;
  try {
    return decodeURIComponent(m[1]);
  } catch {
    return m[1]; // not percent-decodable (a hand-edited address): shown as typed, and no job has that id
  }
}

// The selected job, or null when there is none by that id.  A bad id in the address must not fail the
// whole refresh: "." and ".." would resolve to another route if put in the path, so only ids the API
// could hold are asked for, and a refusal (422) is no job either.
const getJob = (id) => (JOB_ID.test(id) ? get(`jobs/${encodeURIComponent(id)}`, [404, 422]) : null);

// Refreshes overlap (the timer's, a picked job's, "older plans"), and a slow service can answer an older one
// last: each is numbered, and one that ends after a newer one was drawn is dropped, so the page never goes
// back to what was read before (the job picked before the last, or none).
let refreshes = 0;
let drawn = 0;

// The nodes as far as the service's memory knows them, when the store (which holds their budgets) did not answer.
const nodesInMemory = (jobs, current) =>
  [...new Set([...current.map((p) => p.node), ...jobs.map((j) => j.node)])].sort().map((name) => ({
    name,
    cores: null,
    memory_mb: null,
    active_jobs: jobs.filter((j) => j.node === name).length,
    plan_id: current.find((p) => p.node === name)?.plan_id ?? null,
    problem: null,
  }));

async function refresh() {
  const mine = ++refreshes;
  // What the service answers from memory (active jobs, each node's current plan, the model) is what the page
  // needs; what it reads from its job store (health, node budgets, plan history, an ended job) may fail alone
  // (a store that is down: HTTP 503): the page shows the rest, and the banner says what is missing and why.
  const missing = []; // [what, why] of each such read that failed, in the order they were asked for
  const optional = (what, read, failed = null) => {
    const slot = missing.push(null) - 1;
    return Promise.resolve(read).catch((err) => {
      missing[slot] = [what, err.reason ?? err.message];
      return failed;
    });
  };
  try {
    const [model, jobs, current, health, stored, page] = await Promise.all([
      get("model"),
      get("jobs?status=active"), // ended jobs stay reachable by id (their page), not listed forever
      get("plans/current"), // every node's current plan in one request (it was one request per node)
      optional("the service's health", get("health")),
      optional("the nodes' budgets", get("nodes")),
      optional("the plan history", get(`plans?limit=${state.historyLimit}`)),
    ]);
    const nodes = stored ?? nodesInMemory(jobs, current);
    const picked = selectedJob();
    // false: the job could not be read now; null: the service knows no such job
    const job = picked ? await optional(`the job ${picked}`, getJob(picked), false) : null;
    if (!state.chartNode || !nodes.some((n) => n.name === state.chartNode)) {
      // a node with active jobs first: one whose jobs all ended long ago has only history to show
      state.chartNode =
        (nodes.find((n) => n.plan_id && n.active_jobs) || nodes.find((n) => n.plan_id) || nodes[0] || {}).name || null;
    }
    const nodeHistory =
      state.chartNode && page
        ? await optional("the plan history", get(`plans?node=${encodeURIComponent(state.chartNode)}&limit=40`))
        : null;
    if (mine < drawn) return;
    drawn = mine;
    giveColours(jobs, [...current, ...(nodeHistory ? nodeHistory.plans : []), ...(page ? page.plans : [])]);
    renderStatus(health, model);
    keepFocus(() => {
      const today = new Date().toDateString(); // past midnight, times of yesterday get their date
      draw("nodes", [nodes, current, jobs, picked, today], () => renderNodes(nodes, current, jobs));
      draw("job", [picked, job, current], () => renderJob(picked, job, current));
      const history = nodeHistory ? nodeHistory.plans : [];
      draw("history", [page, history, nodes, state.chartNode, state.historyLimit, today], () =>
        renderHistory(page, history, nodes),
      );
    });
    state.lastOk = Date.now();
    showMissing(missing.filter(Boolean));
  } catch (err) {
    if (mine < drawn) return;
    const box = document.getElementById("error");
    const since = state.lastOk ? `; showing what was read at ${new Date(state.lastOk).toLocaleTimeString("en-GB")}` : "";
    box.textContent = `cannot read the service (${err.message})${since}`;
    box.hidden = false;
  }
}

// The banner for the reads that failed alone, each reason said once: "cannot read the service's health, the
// nodes' budgets, the plan history (HTTP 503: the job store is unavailable ...); the rest is current ...".
function showMissing(missing) {
  const box = document.getElementById("error");
  const byWhy = new Map();
  for (const [what, why] of missing) byWhy.set(why, [...(byWhy.get(why) ?? []), what]);
  const said = [...byWhy].map(([why, whats]) => `${whats.join(", ")} (${why})`).join("; ");
  box.textContent = said
    ? `cannot read ${said}; the rest is current (the active jobs and each node's plan come from the service's memory)`
    : "";
  box.hidden = !said;
}

// -- rendering -----------------------------------------------------------------------------------
// A part of the page is drawn again only when what it shows has changed: drawing everything anew on each
// refresh took away, every few seconds, a text selection, the keyboard's focus and a click under way.
const drawnFrom = new Map(); // part of the page -> the JSON of what it was last drawn from
function draw(part, inputs, render) {
  const key = JSON.stringify(inputs);
  if (drawnFrom.get(part) === key) return;
  drawnFrom.set(part, key);
  render();
}

// Where a link sits: its address and the section, node card and table row around it.
const place = (e) =>
  [e.tagName, e.getAttribute("href"), e.closest("section")?.id, e.closest("[data-node]")?.dataset.node,
    e.closest("tr")?.dataset.job ?? e.closest("tr")?.dataset.plan].join("\u0000");

// A focused link (or the idle nodes' toggle) that a redraw replaced gives its focus to the one drawn in its place.
function keepFocus(redraw) {
  const was = document.activeElement;
  const key = was && was !== document.body ? place(was) : null;
  redraw();
  if (key === null || was.isConnected) return;
  const again = [...document.querySelectorAll("a[href], summary")].find((e) => place(e) === key);
  if (again) again.focus({ preventScroll: true });
}

function renderStatus(health, model) {
  const service = health ? `service ${health.version} · policy ${health.policy} · store ${health.store}` : "service: version and store unknown";
  const which = model.version
    ? `model ${model.source} (@${model.alias})`
    // why, as text: a tooltip (title) reached no keyboard, touch screen or screen reader
    : h("span", { class: "fallback" }, "model: analytic fallback", h("span", { class: "note" }, ` (${model.note || "no registered model"})`));
  document.getElementById("status").replaceChildren(
    `${service} · `,
    which,
    ` · read at ${new Date().toLocaleTimeString("en-GB")}`,
  );
}

// The nodes with active jobs (or a problem) first, as cards; a long-running service also knows every node whose
// jobs all ended (they stayed listed among the current ones forever): those are counted under the cards, in a
// closed box that opens on a click and stays open across refreshes.
function renderNodes(nodes, current, jobs) {
  const list = document.getElementById("node-list");
  if (!nodes.length) {
    list.replaceChildren(h("p", { class: "empty" }, "no node yet: jobs appear here when they register"));
    return;
  }
  const jobsOn = (node) => jobs.filter((j) => j.node === node.name);
  const card = (node) => nodeCard(node, current.find((p) => p.node === node.name) ?? null, jobsOn(node));
  const busy = nodes.filter((n) => n.problem || jobsOn(n).length);
  const idle = nodes.filter((n) => !busy.includes(n));
  const box = idle.length
    ? h(
        "details",
        { class: "idle", open: state.idleOpen, ontoggle: (e) => { state.idleOpen = e.target.open; } },
        h("summary", {}, `${plural(idle.length, "node")} without an active job`),
        idle.map(card),
      )
    : null;
  const none = busy.length ? null : h("p", { class: "empty" }, "no active job on any node");
  list.replaceChildren(...[...busy.map(card), none, box].filter(Boolean));
}

function nodeCard(node, plan, active) {
  const planText = plan
    ? `plan #${plan.plan_id} by ${plan.policy} at ${clock(plan.created_at)}`
    : "no plan yet";
  const budgets = node.cores === null
    ? "cores and memory unknown (the store did not answer)"
    : `${plural(node.cores, "core")} · ${mb(node.memory_mb)} for workers`;
  return h(
    "article",
    { class: "node", "data-node": node.name },
    h(
      "h3",
      {},
      node.name,
      h("span", { class: "meta" }, ` · ${budgets} · ${plural(node.active_jobs, "active job")} · ${planText}`),
    ),
    node.problem ? h("p", { class: "problem" }, `no plan fits: ${node.problem}`) : null,
    plan && node.cores !== null ? coreBar(node, plan, active) : null,
    active.length ? jobTable(active, plan) : h("p", { class: "empty" }, "no active job"),
  );
}

function coreBar(node, plan, active) {
  const mains = active.reduce((a, j) => a + j.main_cores, 0);
  const parts = Object.entries(plan.workers).filter(([, w]) => w > 0);
  const free = Math.max(0, node.cores - plan.cores_used);
  const seg = (width, cls, label, style) =>
    h("span", { class: `seg ${cls}`, style: `flex-grow:${width};${style || ""}`, title: label });
  const bar = h(
    "div",
    { class: "cores", role: "img", "aria-label": `${plan.cores_used} of ${node.cores} cores used` },
    mains ? seg(mains, "mains", `${plural(mains, "core")} for training processes`) : null,
    parts.map(([id, w]) => seg(w, "job", `${id}: ${plural(w, "worker")}`, `background:${colour(id)}`)),
    free ? seg(free, "free", `${plural(free, "core")} free`) : null,
  );
  // each job's colour is keyed by the swatch in its row below; the grey of the main processes and the free
  // cores' light grey were said only in a tooltip (title), which no keyboard, touch screen or screen reader reached
  const key = (cls, label, style) => h("span", { class: "key" }, h("span", { class: `swatch ${cls}`, style }), label);
  // a job that ended after the plan was made keeps its segment until the next plan, but has no row to key it
  const rowed = new Set(active.map((j) => j.job_id));
  const keys = [
    mains ? key("mains", `training processes: ${plural(mains, "core")}`) : null,
    ...parts
      .filter(([id]) => !rowed.has(id))
      .map(([id, w]) => key("job", `${id} (ended since this plan): ${plural(w, "worker")}`, `background:${colour(id)}`)),
    free ? key("free", `free: ${plural(free, "core")}`) : null,
  ].filter(Boolean);
  return [bar, keys.length ? h("p", { class: "legend bar-key" }, keys) : null];
}

function jobLink(id) {
  return h("a", { href: `#job/${encodeURIComponent(id)}`, class: "job-link" }, id);
}

function jobTable(jobs, plan) {
  // "expected": the allocator's curve at the planned count (measured where a heartbeat measured it, else predicted)
  const head = ["job", "GPUs", "plan: workers", "running with", "samples/s measured", "expected", "of peak", "data wait", "why"];
  const numeric = (c) => c !== "job" && c !== "why";
  const rows = jobs.map((j) => {
    // a job of several ranks: its curve and counts are one rank's, a plan's count and throughput the whole job's
    const r = j.ranks ?? 1;
    const w = plan && has(plan.workers, j.job_id) ? plan.workers[j.job_id] : r * j.assignment.workers;
    const expected = plan && has(plan.throughput, j.job_id) ? plan.throughput[j.job_id] : r * j.curve[Math.min(Math.floor(w / r), j.curve.length - 1)];
    const peak = r * Math.max(...j.curve);
    const perRank = (n) => (r > 1 && n != null ? `${r} × ${n}` : n ?? "–");
    const reason = plan && has(plan.reasons, j.job_id) ? plan.reasons[j.job_id] : "not in a plan yet";
    return h(
      "tr",
      // the picked job's row: tinted, its link bold, and announced as the current one
      { "data-job": j.job_id, class: j.job_id === selectedJob() ? "selected" : null, "aria-current": j.job_id === selectedJob() ? "true" : null },
      h("td", { class: "job" }, h("span", { class: "swatch", style: `background:${colour(j.job_id)}` }), jobLink(j.job_id)),
      h("td", { class: "n" }, r > 1 ? `${j.gpus} (${r} ranks)` : j.gpus),
      h("td", { class: "n workers" }, r > 1 ? `${w} (${r} × ${Math.floor(w / r)})` : w),
      h("td", { class: "n" }, perRank(j.reported_workers)),
      h("td", { class: "n" }, r > 1 && j.reported_throughput != null ? `${r} × ${num(j.reported_throughput)}` : num(j.reported_throughput)),
      h("td", { class: "n" }, num(expected)),
      h("td", { class: "n" }, peak > 0 ? pct(expected / peak) : "–"),
      h("td", { class: "n" }, pct(j.data_wait)),
      h("td", { class: "why" }, reason),
    );
  });
  const table = h("table", { class: "jobs" }, h("thead", {}, h("tr", {}, head.map((c) => h("th", { class: numeric(c) ? "n" : null }, c)))), h("tbody", {}, rows));
  return h("div", { class: "scroll" }, table);
}

function renderJob(id, job, plans) {
  const section = document.getElementById("job");
  // the tab's and the history's title name the job (every page was "adlrec: loader workers per job"); without
  // a job, the page's own title comes back only in place of one set here
  if (id) document.title = `Job ${id} · adlrec`;
  else if (state.titled) document.title = TITLE;
  state.titled = Boolean(id);
  if (!id) {
    section.hidden = true;
    return;
  }
  section.hidden = false;
  document.getElementById("job-title").textContent = `Job ${id}`;
  const detail = document.getElementById("job-detail");
  if (job === false) {
    detail.replaceChildren(h("p", { class: "empty" }, `the job ${id} cannot be read now (the banner above says why)`));
    return;
  }
  if (!job) {
    detail.replaceChildren(h("p", { class: "empty" }, `the service knows no job ${id}`));
    return;
  }
  const plan = plans.find((p) => p && has(p.workers, job.job_id));
  const a = job.assignment;
  const r = job.ranks ?? 1;
  const each = r > 1 ? " a rank" : "";
  detail.replaceChildren(
    h(
      "p",
      { class: "meta" },
      `node ${job.node} · ${job.status} · ${plural(job.gpus, "GPU")} · ` +
        (r > 1 ? `${r} ranks stepping together, each with its own loader (counts and curve: one rank's) · ` : "") +
        // no plan holds it: the count it is told is what it runs with or asked for, not a plan's (it said "plan: 1 worker"
        // above "not in a plan yet")
        (job.status !== "active" ? "in no plan"
          : a.plan_id ? `plan: ${plural(a.workers, "worker")}${each} (plan #${a.plan_id})`
          : `no plan yet: told ${plural(a.workers, "worker")}${each} (what it runs with or asked for, within its bounds)`) +
        // an ended job runs nothing: what it said last (it read "finished · ... · running with 2")
        ` · ${job.status === "active" ? "running" : "last ran"} with ${job.reported_workers ?? "–"}${each}` +
        ` · asked for ${job.requested_workers}${each} · curve: ${job.curve_source}`,
    ),
    h("p", { class: "why" }, job.status !== "active" ? `in no plan: the job has ${job.status}`
      : plan && has(plan.reasons, job.job_id) ? `why: ${plan.reasons[job.job_id]}` : "not in a plan yet"),
    curveChart(job),
    job.measured.length
      ? h("div", { class: "scroll" }, h(
          "table",
          { class: "points" },
          h("thead", {}, h("tr", {}, ["workers", "samples/s measured", "predicted", "heartbeats", "data wait"].map((c) => h("th", { class: "n" }, c)))),
          h(
            "tbody",
            {},
            job.measured.map((p) =>
              h(
                "tr",
                {},
                h("td", { class: "n" }, p.workers),
                h("td", { class: "n" }, num(p.throughput)),
                h("td", { class: "n" }, num(job.predicted[p.workers])),
                h("td", { class: "n" }, num(p.samples, 0)),
                h("td", { class: "n" }, pct(p.data_wait)),
              ),
            ),
          ),
        ))
      : h("p", { class: "empty" }, "nothing measured yet: the curve is the prediction"),
  );
}

// The y axis for values up to v > 0: 4 to 6 steps of 1, 2, 2.5 or 5 times a power of ten, the lowest top that
// reaches v. Four steps of any top drew gridlines at 62.5 and 187.5 (labelled 188) under a top of 250.
function yAxis(v) {
  let best = null;
  const q = Math.floor(Math.log10(v));
  for (const p of [q - 1, q]) {
    for (const k of [1, 2, 2.5, 5]) {
      const step = k * 10 ** p;
      const n = Math.ceil(v / step - 1e-9); // v / step of a float that is a whole number is not always one
      if (n >= 4 && n <= 6 && (best === null || n * step < best.n * best.step)) best = { step, n };
    }
  }
  return best; // for every v one of the eight steps gives 4 to 6 (r = v / 10^q in [1, 10) is in a range of each)
}

function curveChart(job) {
  const W = 620, H = 290, m = { l: 64, r: 16, t: 38, b: 40 }; // the legend sits above the plot, never on a curve
  // the axis reaches the last count measured or planned too: a point measured past the curve's end was drawn at it
  const n = Math.max(1, job.curve.length - 1, job.predicted.length - 1, ...job.measured.map((p) => p.workers), job.assignment.workers);
  const peak = Math.max(0, ...job.curve, ...job.predicted, ...job.measured.map((p) => p.throughput));
  const axis = yAxis(peak > 0 ? peak * 1.05 : 1); // not at least 1: a curve of 0.003 samples/s was a flat line
  const top = axis.n * axis.step;
  const yt = Array.from({ length: axis.n + 1 }, (_, i) => i * axis.step);
  const x = (w) => m.l + (Math.min(w, n) / n) * (W - m.l - m.r);
  const y = (v) => H - m.b - (v / top) * (H - m.t - m.b);
  const line = (values, cls) => [
    s("polyline", { class: cls, points: values.map((v, w) => `${x(w).toFixed(1)},${y(v).toFixed(1)}`).join(" ") }),
    // a curve of one point (0 workers only) is a line of no length: mark the point
    values.length === 1 ? s("circle", { class: `${cls}-dot`, cx: x(0), cy: y(values[0]), r: 3.5 }) : null,
  ];
  const a = job.assignment.workers;
  const told = `${job.assignment.plan_id ? "plan" : "told (no plan)"}: ${plural(a, "worker")}${(job.ranks ?? 1) > 1 ? " a rank" : ""}`;
  const step = Math.max(1, Math.ceil(n / 16));
  const xt = [];
  for (let w = 0; w <= n; w += step) xt.push(w);
  return s(
    "svg",
    { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img", "aria-label": `samples/s of ${(job.ranks ?? 1) > 1 ? "one rank of " : ""}${job.job_id} against loader workers` },
    yt.map((v) => [
      s("line", { class: "grid", x1: m.l, x2: W - m.r, y1: y(v), y2: y(v) }),
      s("text", { class: "tick", x: m.l - 6, y: y(v) + 4, "text-anchor": "end" }, tick(v)),
    ]),
    xt.map((w) => s("text", { class: "tick", x: x(w), y: H - m.b + 16, "text-anchor": "middle" }, w)),
    s("text", { class: "axis", x: (m.l + W - m.r) / 2, y: H - 6, "text-anchor": "middle" }, (job.ranks ?? 1) > 1 ? "loader workers of one rank" : "loader workers"),
    s("text", { class: "axis", x: 14, y: H / 2, "text-anchor": "middle", transform: `rotate(-90 14 ${H / 2})` }, (job.ranks ?? 1) > 1 ? "samples/s of one rank" : "samples/s"),
    line(job.predicted, "predicted"),
    line(job.curve, "used"),
    job.measured.map((p) =>
      s("circle", { class: "measured", cx: x(p.workers), cy: y(p.throughput), r: 4.5 },
        s("title", {}, `${plural(p.workers, "worker")}: ${num(p.throughput)} samples/s measured`)),
    ),
    job.status === "active" && [  // an ended job's assignment is only a fallback count, not a plan
      s("line", { class: "assigned", x1: x(a), x2: x(a), y1: m.t, y2: H - m.b }),
      // right of the line, or left of it near the right edge (where it was cut off)
      x(a) + 5 + 7 * told.length > W - m.r // about 7 units a character
        ? s("text", { class: "assigned-label", x: x(a) - 5, y: m.t + 10, "text-anchor": "end" }, told)
        : s("text", { class: "assigned-label", x: x(a) + 5, y: m.t + 10 }, told),
    ],
    s("g", { class: "legend", transform: `translate(${m.l} 12)` },
      s("line", { class: "predicted", x1: 0, x2: 22, y1: 0, y2: 0 }), s("text", { x: 28, y: 4 }, "predicted"),
      s("line", { class: "used", x1: 110, x2: 132, y1: 0, y2: 0 }), s("text", { x: 138, y: 4 }, "used by the allocator"),
      s("circle", { class: "measured", cx: 291, cy: 0, r: 4.5 }), s("text", { x: 302, y: 4 }, "measured")),
  );
}

function renderHistory(page, nodePlans, nodes) {
  const body = document.querySelector("#history-table tbody");
  const older = document.getElementById("older");
  renderPicker(nodes);
  document.getElementById("history-chart").replaceChildren(historyChart(nodePlans));
  if (!page) {  // the store did not answer (the banner says so)
    body.replaceChildren(h("tr", {}, h("td", { colspan: 7, class: "empty" }, "the plan history cannot be read now")));
    older.hidden = true;
    return;
  }
  body.replaceChildren(
    ...page.plans.map((p) =>
      h(
        "tr",
        { "data-plan": p.plan_id },
        h("td", { class: "n" }, `#${p.plan_id}`),
        h("td", { class: "ids" }, p.node),
        h("td", {}, clock(p.created_at)),
        h("td", {}, p.policy),
        h("td", { class: "n" }, num(p.objective, 3)),
        h("td", { class: "n" }, p.cores_used),
        Object.keys(p.workers).length
          ? h("td", { class: "ids" }, Object.entries(p.workers).map(([id, w], i) => [i ? ", " : "", jobLink(id), `: ${w}`]))
          : h("td", { class: "empty" }, noWorkersText(p)),
      ),
    ),
  );
  if (!page.plans.length) body.append(h("tr", {}, h("td", { colspan: 7, class: "empty" }, "no plan yet")));
  older.hidden = page.next_before === null || state.historyLimit >= 500;
}

// The node menu stays the same element (drawn anew, it closed under the user's pointer); its options
// change only when the nodes with plans do.
function renderPicker(nodes) {
  const names = nodes.filter((n) => n.plan_id).map((n) => n.name);
  const select = document.getElementById("history-node");
  if ([...select.options].map((o) => o.value).join("\n") !== names.join("\n")) {
    select.replaceChildren(...names.map((name) => h("option", { value: name }, name)));
  }
  if (state.chartNode !== null && select.value !== state.chartNode) select.value = state.chartNode;
  document.getElementById("history-pick").hidden = names.length < 2;
}

// What a plan that gave no worker says, in the history's table and chart: it holds no job, or only jobs at 0.
const noWorkersText = (p) => (Object.keys(p.workers).length ? "0 workers" : "no jobs");

// Its column in the plans chart: the words, written upwards from the foot of the column.
const noWorkers = (p, cx, foot) =>
  s("text", { class: "tick no-workers", x: cx + 4, y: foot - 4, transform: `rotate(-90 ${cx + 4} ${foot - 4})` },
    noWorkersText(p), s("title", {}, `plan #${p.plan_id} at ${clock(p.created_at)}: ${noWorkersText(p)}`));

function historyChart(plans) {
  if (!plans.length) return h("div", {});
  const ordered = [...plans].reverse(); // oldest first
  const W = 620, H = 200, m = { l: 40, r: 10, t: 10, b: 30 };
  const most = Math.max(1, ...ordered.map((p) => Object.values(p.workers).reduce((a, b) => a + b, 0)));
  const bw = (W - m.l - m.r) / ordered.length;
  const y = (v) => H - m.b - (v / most) * (H - m.t - m.b);
  const ids = [...new Set(ordered.flatMap((p) => Object.keys(p.workers)))];
  const bars = ordered.map((p, i) => {
    // a plan that gave no worker (its node's last job ended: no job at all) drew an empty column
    if (!Object.values(p.workers).some((w) => w > 0)) return noWorkers(p, m.l + (i + 0.5) * bw, y(0));
    let base = 0;
    return Object.entries(p.workers).map(([id, w]) => {
      const rect = s("rect", { x: m.l + i * bw + 1, width: Math.max(1, bw - 2), y: y(base + w), height: y(base) - y(base + w), fill: colour(id) },
        s("title", {}, `plan #${p.plan_id} at ${clock(p.created_at)}: ${id} ${plural(w, "worker")}`));
      base += w;
      return rect;
    });
  });
  const first = ordered[0], last = ordered[ordered.length - 1];
  return h(
    "div",
    {},
    s(
      "svg",
      { viewBox: `0 0 ${W} ${H}`, class: "chart history", role: "img", "aria-label": `workers per job over the last ${ordered.length} plans of ${state.chartNode}` },
      s("text", { class: "tick", x: m.l - 6, y: y(most) + 4, "text-anchor": "end" }, most),
      s("text", { class: "tick", x: m.l - 6, y: y(0) + 4, "text-anchor": "end" }, 0),
      bars,
      s("text", { class: "tick", x: m.l, y: H - 10 }, `#${first.plan_id} ${clock(first.created_at)}`),
      // one plan: its label once (it was written at both ends)
      last === first ? null : s("text", { class: "tick", x: W - m.r, y: H - 10, "text-anchor": "end" }, `#${last.plan_id} ${clock(last.created_at)}`),
    ),
    h("p", { class: "legend" }, `${state.chartNode}: workers per job, one column per plan · `,
      ids.map((id) => h("span", { class: "key" }, h("span", { class: "swatch", style: `background:${colour(id)}` }), id))),
  );
}

// -- wiring ------------------------------------------------------------------------------------
document.getElementById("every").textContent = EVERY_S;
document.getElementById("history-node").addEventListener("change", (e) => {
  state.chartNode = e.target.value;
  refresh();
});
document.getElementById("older").addEventListener("click", () => {
  state.historyLimit = Math.min(500, state.historyLimit + 30);
  refresh();
});
// A job's page is drawn below the nodes, and "#job/<id>" names no element, so the browser scrolls nowhere:
// bring the page into view, and the keyboard's and a screen reader's focus to its title, when a job is
// picked (a link, a typed address) and when the page opens on one.
async function showPicked() {
  await refresh();
  if (!selectedJob()) return;
  const title = document.getElementById("job-title");
  title.tabIndex = -1;
  title.scrollIntoView({ block: "start" });
  title.focus({ preventScroll: true });
}
window.addEventListener("hashchange", showPicked);
showPicked();
setInterval(refresh, EVERY_S * 1000);
