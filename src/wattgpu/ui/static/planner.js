// The planner page: a form whose fields are the CLI's options, three questions (ask, compare, recommend) answered by
// the server's JSON API, the answer as tables and Plotly curves. The URL's query string is the whole question: the
// page writes it on every submit and answers it on load. Computes nothing itself: it formats what the API answered.
"use strict";

const $ = (id) => document.getElementById(id);
const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
// the four curves, one subplot each: the answer's column, its title, its y axis type, its format
const METRICS = [
  { key: "power_w", title: "power (W per GPU)", type: "linear", fmt: ".0f" },
  { key: "itl_ms", title: "ITL (ms)", type: "linear", fmt: ".1f" },
  { key: "system_tokens_per_s", title: "throughput (tokens/s, replica)", type: "log", fmt: ".3s" },
  { key: "energy_per_token_j", title: "energy per token (J)", type: "log", fmt: ".3g" },
];
let OPTIONS = null;
let seq = 0;

// ------------------------------------------------------------------------------------------------ formatting
const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
const isNum = (v) => typeof v === "number" && Number.isFinite(v);
function fixed(v, digits) { return isNum(v) ? v.toFixed(digits) : ""; }
function sig(v, digits) {  // Python's format(v, ".3g")
  if (!isNum(v)) return "";
  if (v === 0) return "0";
  const exp = Math.floor(Math.log10(Math.abs(v)));
  if (exp < -4 || exp >= digits) {
    const [m, e] = v.toExponential(digits - 1).split("e");
    const mant = m.includes(".") ? m.replace(/0+$/, "").replace(/\.$/, "") : m;
    const n = parseInt(e, 10);
    return `${mant}e${n < 0 ? "-" : "+"}${String(Math.abs(n)).padStart(2, "0")}`;
  }
  return String(Number(v.toPrecision(digits)));
}
const pct = (level) => `${sig(100 * level, 6)} %`;
function fmt(v, spec) { return spec === ".3g" ? sig(v, 3) : fixed(v, Number(spec[1])); }

function value(key, v, spec) {
  return `<span class="value" data-key="${key}" data-value="${isNum(v) ? v : ""}">${fmt(v, spec)}</span>`;
}
function bands(intervals, key, spec, unit) {  // the CLI's rule: a band only where lo < hi
  return intervals.filter((b) => isNum(b[key + "_lo"]) && isNum(b[key + "_hi"]) && b[key + "_lo"] < b[key + "_hi"])
    .map((b) => `<span class="band" data-key="${key}" data-level="${b.level}" data-lo="${b[key + "_lo"]}" ` +
      `data-hi="${b[key + "_hi"]}">${pct(b.level)}: ${fmt(b[key + "_lo"], spec)}–${fmt(b[key + "_hi"], spec)}${unit}</span>`)
    .join("");
}
function ranged(r, key, spec) {
  if (!isNum(r[key])) return "";
  const band = isNum(r[key + "_lo"]) && isNum(r[key + "_hi"]) ? ` <span class="muted">(${fmt(r[key + "_lo"], spec)}–${fmt(r[key + "_hi"], spec)})</span>` : "";
  return fmt(r[key], spec) + band;
}

// ------------------------------------------------------------------------------------------------ the form
const formFields = () => [...document.querySelectorAll("#question [name]")].filter((el) => el.tagName !== "BUTTON");

function question() {
  addChip();  // a GPU typed into the search but not added yet is part of the question
  const q = {};
  for (const el of formFields()) {
    const v = el.type === "checkbox" ? (el.checked ? "true" : "") : el.value.trim();
    if (v) q[el.name] = v;
  }
  return q;
}

function restore(params) {
  for (const el of formFields()) {
    const v = params.get(el.name) ?? "";
    if (el.type === "checkbox") { el.checked = v === "true"; continue; }
    if (el.tagName === "SELECT" && v && ![...el.options].some((o) => o.value === v)) el.add(new Option(v, v));
    if (el.tagName === "SELECT" && !v) { el.selectedIndex = 0; continue; }
    el.value = v;
    if (v) el.closest("details")?.setAttribute("open", "");
  }
  renderChips();
}

function chips() { return $("gpus").value.split(",").map((s) => s.trim()).filter(Boolean); }
function renderChips() {
  const ul = $("gpu-chips");
  ul.innerHTML = "";
  for (const name of chips()) {
    const li = document.createElement("li");
    li.textContent = name;
    const x = document.createElement("button");
    x.type = "button"; x.textContent = "×"; x.title = `remove ${name}`;
    x.onclick = () => { $("gpus").value = chips().filter((n) => n !== name).join(", "); renderChips(); };
    li.appendChild(x);
    ul.appendChild(li);
  }
}
function addChip() {
  const name = $("gpu-add").value.trim();
  if (!name) return;
  if (!chips().includes(name)) $("gpus").value = [...chips(), name].join(", ");
  $("gpu-add").value = "";
  renderChips();
}

function clearErrors() {
  document.querySelectorAll(".error").forEach((e) => { e.textContent = ""; });
  document.querySelectorAll(".field.invalid").forEach((e) => e.classList.remove("invalid"));
}
function showErrors(errors) {
  for (const e of errors) {
    const box = (e.field && $("error-" + e.field)) || $("error-general");
    box.textContent = box.textContent ? `${box.textContent}\n${e.message}` : e.message;
    const field = box.closest(".field");
    if (field) { field.classList.add("invalid"); field.closest("details")?.setAttribute("open", ""); }
  }
}

function setState(state, text) {
  $("result").dataset.state = state;
  $("result").dataset.seq = String(++seq);
  $("status").textContent = text || "";
}

// ------------------------------------------------------------------------------------------------ asking
async function submit(mode) {
  clearErrors();
  const q = { ...question(), mode };
  const query = new URLSearchParams(q).toString();
  history.replaceState(null, "", `${location.pathname}?${query}`);  // the URL is the question: share or reload it
  $("result").dataset.state = "asking";
  const started = performance.now();
  let res, body;
  try {
    res = await fetch(`/api/${mode}`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(q) });
    body = await res.json();
  } catch (err) {
    showErrors([{ field: null, message: `no answer from the planner server: ${err}` }]);
    return setState("error");
  }
  if (!res.ok) { showErrors(body.errors || [{ field: null, message: res.statusText }]); return setState("error"); }
  $("toolbar").hidden = false;
  $("csv").href = `/api/${mode}.csv?${query}`;
  $("csv").setAttribute("download", `wattgpu-${mode}.csv`);
  ({ ask: renderAsk, compare: renderCompare, recommend: renderRecommend })[mode](body);
  setState("answered", `${mode}: answered in ${Math.round(performance.now() - started)} ms`);
}

function coverageWords(extrapolation) {
  if (extrapolation === null || extrapolation === undefined) return ["", "not recorded with these models"];
  if (!extrapolation.length) return ["inside", "inside the range of the measured GPUs, LLMs and workloads"];
  return ["", "EXTRAPOLATING: " + extrapolation.join("; ")];
}

function renderAsk(b) {
  const p = b.prediction;
  const iv = b.intervals;
  const [cls, words] = coverageWords(b.extrapolation);
  const bounded = iv.some((x) => ["power_w_lo", "power_w_hi", "itl_ms_lo", "itl_ms_hi"].some((k) => isNum(x[k])));
  const rows = [
    ["GPU", `${esc(p.gpu)} <span class="muted">(${esc(b.origins.gpu)})</span>`],
    ["LLM", `${esc(p.llm)} <span class="muted">(${esc(b.origins.llm)})</span>`],
    ["workload", esc(b.workload_text)],
    ["power", `${value("power_w", p.power_w, ".1f")} W per GPU${bands(iv, "power_w", ".0f", " W")}`],
    ["ITL", `${value("itl_ms", p.itl_ms, ".2f")} ms per request (${value("tokens_per_s", p.tokens_per_s, ".1f")} ` +
      `tokens/s per request stream)${bands(iv, "itl_ms", ".1f", " ms")}`],
    ["tokens/s", `${value("system_tokens_per_s", p.system_tokens_per_s, ".1f")} tokens/s in all (requests in flight / ITL)` +
      bands(iv, "system_tokens_per_s", ".1f", " tokens/s") +
      (p.overloaded ? ' <strong>OVERLOADED</strong>: the arrivals outpace the replica; requests queue at the engine\'s cap' : "")],
    ["energy per token", `${value("energy_per_token_j", p.energy_per_token_j, ".3g")} J per generated token` +
      bands(iv, "energy_per_token_j", ".3g", " J") + ' <span class="muted">(conservative: the power and throughput bounds combined)</span>'],
    ["interval", esc(b.interval_note || (bounded ? "" : "none for power and ITL: these models carry no interval calibration"))],
    ["memory", esc(b.memory)],
    ["models", esc(Object.entries(b.models).map(([k, v]) => `${k}: ${v}`).join(", "))],
  ];
  $("answer").innerHTML = `<div class="flags ${cls}" id="extrapolation">${esc(words)}</div>` +
    `<table id="ask-table"><tbody>${rows.filter((r) => r[1]).map(([k, v]) => `<tr data-row="${esc(k)}"><th>${esc(k)}</th><td>${v}</td></tr>`).join("")}</tbody></table>`;
  Plotly.purge("plot");
  $("plot").innerHTML = "";
}

function curveTable(curves) {
  const rows = curves.map((c) => `<tr data-gpu="${esc(c.gpu)}"><td>${esc(c.gpu)} <span class="muted">(${esc(c.origin)})</span></td>` +
    `<td class="num">${c.fits ? Math.round(c.memory_limit).toLocaleString("en") : ""}</td>` +
    `<td class="num">${fixed(c.need_gb, 1)}/${fixed(c.usable_gb, 1)}</td>` +
    `<td>${c.fits ? esc((c.extrapolation || []).join("; ")) : "DOES NOT FIT: " + esc(c.reason)}</td></tr>`);
  return `<table id="curve-table"><thead><tr><th>GPU</th><th>memory limit (requests in flight)</th><th>GB need/usable</th>` +
    `<th>extrapolating</th></tr></thead><tbody>${rows.join("")}</tbody></table>`;
}

function renderCompare(b) {
  $("answer").innerHTML = `<div class="summary">${esc(b.llm)}: ${esc(b.workload_text)}; bands: ${pct(b.level)} ` +
    `prediction intervals. Dotted lines: each GPU's memory limit (the requests its KV cache holds beside the weights).</div>` +
    curveTable(b.curves);
  drawCurves(b.curves, { level: b.level, maxItl: b.max_itl_ms, pick: null, mode: "compare" });
}

function renderRecommend(b) {
  const costCol = b.objective === "total-cost" || (b.price_per_kwh != null && b.gpu_price_per_hour != null) ? "total_cost_per_mtok"
    : b.price_per_kwh != null ? "energy_cost_per_mtok" : b.gpu_price_per_hour != null ? "gpu_cost_per_mtok" : null;
  const head = ["#", "GPU", "status", "kWh/Mtok", ...(costCol ? ["cost/Mtok"] : []), "W/GPU", "ITL ms", "margin",
    "replica tok/s", "GB need/usable", "why"];
  const gpuNotes = (b.extrapolation && b.extrapolation.gpus) || {};
  const rows = [...b.ranking, ...b.excluded].map((r) => {
    const why = [r.reason, ...(gpuNotes[r.gpu] ? [`specs outside the measured GPUs': ${gpuNotes[r.gpu].join("; ")}`] : [])]
      .filter(Boolean).join("; ");
    const cls = r.status === "pick" ? "pick" : b.ranking.includes(r) ? "ranked" : "excluded";
    const cells = [r.rank ?? "", esc(r.gpu), esc(r.status) + (b.near_target.includes(r.gpu) ? " *" : ""),
      ranged(r, "energy_kwh_per_mtok", ".3g"), ...(costCol ? [ranged(r, costCol, ".3g")] : []), ranged(r, "power_w", ".0f"),
      ranged(r, "itl_ms", ".1f"), isNum(r.itl_margin_pct) && r.fits ? `${r.itl_margin_pct >= 0 ? "+" : ""}${r.itl_margin_pct.toFixed(0)}%` : "",
      fixed(r.system_tokens_per_s, 0), `${fixed(r.need_gb, 1)}/${fixed(r.usable_gb, 1)}`, esc(why)];
    return `<tr class="${cls}" data-gpu="${esc(r.gpu)}" data-status="${esc(r.status)}">` +
      cells.map((c, i) => `<td class="${i >= 3 && i < cells.length - 1 ? "num" : ""}">${c}</td>`).join("") + "</tr>";
  });
  const shared = (b.extrapolation && b.extrapolation.workload_and_llm) || [];
  $("answer").innerHTML = `<div class="summary" id="recommend-summary">${esc(b.summary)}</div>` +
    `<div class="muted">${esc(b.llm)} | ${esc(b.workload_text)} | ITL target ${b.max_itl_ms} ms at the ${b.confidence_pct} % ` +
    `upper bound | ranked by ${esc(b.objective)}; ranges: ${b.confidence_pct} % intervals. Memory rule: ${esc(b.memory_rule)}. ` +
    (b.near_target.length ? `* within the ITL model's error (${b.itl_error_pct} %) of the target. ` : "") + "</div>" +
    (shared.length ? `<div class="flags">EXTRAPOLATING (every GPU): ${esc(shared.join("; "))}</div>` : "") +
    `<table id="recommend-table"><thead><tr>${head.map((h) => `<th>${h}</th>`).join("")}</tr></thead><tbody>${rows.join("")}</tbody></table>` +
    `<p class="muted">Curves: the ${b.curves.length} first GPUs that hold the model (${esc(b.curve_words)}); the pick drawn thick.</p>`;
  drawCurves(b.curves, { level: b.confidence_pct / 100, maxItl: b.max_itl_ms, pick: b.pick, mode: "recommend" });
}

// ------------------------------------------------------------------------------------------------ the curves
function rgba(hex, alpha) {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${(n >> 16) & 255},${(n >> 8) & 255},${n & 255},${alpha})`;
}

function drawCurves(curves, { level, maxItl, pick, mode }) {
  const traces = [], shapes = [], annotations = [];
  curves.filter((c) => c.points).forEach((c, i) => {
    const color = PALETTE[i % PALETTE.length];
    const picked = pick !== null && c.gpu === pick;
    const dim = pick !== null && !picked;
    METRICS.forEach((m, j) => {
      const ax = j === 0 ? "" : String(j + 1);
      const x = c.points.concurrency, y = c.points[m.key], lo = c.points[m.key + "_lo"], hi = c.points[m.key + "_hi"];
      const at = x.map((_, k) => k).filter((k) => isNum(lo[k]) && isNum(hi[k]) && lo[k] < hi[k]);
      if (at.length) {
        traces.push({ type: "scatter", mode: "lines", x: [...at.map((k) => x[k]), ...at.map((k) => x[k]).reverse()],
          y: [...at.map((k) => hi[k]), ...at.map((k) => lo[k]).reverse()], fill: "toself",
          fillcolor: rgba(color, picked ? 0.28 : dim ? 0.07 : 0.15), line: { width: 0 }, hoverinfo: "skip",
          showlegend: false, legendgroup: c.gpu, name: `${c.gpu} ${pct(level)} band`, xaxis: "x" + ax, yaxis: "y" + ax,
          meta: { kind: "band", gpu: c.gpu, metric: m.key } });
      }
      traces.push({ type: "scatter", mode: "lines+markers", x, y, name: picked ? `${c.gpu} (pick)` : c.gpu,
        legendgroup: c.gpu, showlegend: j === 0, line: { color, width: picked ? 4.5 : dim ? 1.5 : 2.2 },
        marker: { size: picked ? 6 : 4 }, opacity: dim ? 0.6 : 1, xaxis: "x" + ax, yaxis: "y" + ax,
        meta: { kind: "line", gpu: c.gpu, metric: m.key },
        hovertemplate: `${esc(c.gpu)}<br>%{x} requests in flight<br>${m.title}: %{y:${m.fmt}}<extra></extra>` });
      shapes.push({ type: "line", xref: "x" + ax, yref: `y${ax} domain`, x0: c.memory_limit, x1: c.memory_limit, y0: 0, y1: 1,
        line: { color, width: 1.5, dash: "dot" }, name: `memory limit: ${c.gpu}` });
    });
  });
  if (isNum(maxItl)) {
    shapes.push({ type: "line", xref: "x2 domain", yref: "y2", x0: 0, x1: 1, y0: maxItl, y1: maxItl,
      line: { color: "#c0392b", width: 2, dash: "dash" }, name: "latency target" });
    annotations.push({ xref: "x2 domain", yref: "y2", x: 0.01, y: maxItl, xanchor: "left", yanchor: "bottom",
      text: `latency target ${maxItl} ms`, showarrow: false, font: { color: "#c0392b", size: 11 } });
  }
  const axes = {};
  METRICS.forEach((m, j) => {
    const ax = j === 0 ? "" : String(j + 1);
    axes["xaxis" + ax] = { type: "log", title: { text: "requests in flight" }, gridcolor: "#eceff4" };
    axes["yaxis" + ax] = { type: m.type, title: { text: m.title }, gridcolor: "#eceff4", rangemode: "tozero" };
  });
  const layout = { ...axes, grid: { rows: 2, columns: 2, pattern: "independent", xgap: 0.12, ygap: 0.2 }, shapes, annotations,
    height: 720, margin: { t: 40, r: 20, b: 40, l: 60 }, legend: { orientation: "h", y: -0.1 }, hovermode: "closest",
    title: { text: `${mode === "recommend" ? "recommend" : "compare"}: bands ${pct(level)} intervals; dotted: memory limit`, font: { size: 13 } },
    paper_bgcolor: "#fff", plot_bgcolor: "#fff" };
  const config = { displaylogo: false, responsive: true,
    toImageButtonOptions: { format: "png", filename: `wattgpu-${mode}`, width: 1400, height: 900 } };
  Plotly.react("plot", traces, layout, config);
}

function downloadPlot(format) {
  const plot = $("plot");
  if (!plot.data || !plot.data.length) return setState($("result").dataset.state, "no plot to download: compare or recommend first");
  Plotly.downloadImage(plot, { format, filename: "wattgpu-plot", width: 1400, height: 900 });
}

// ------------------------------------------------------------------------------------------------ start
function buildFields() {  // <div class="field" data-field=NAME data-label=.. data-kind=select|checkbox|text|decimal|numeric>
  document.querySelectorAll(".field[data-kind]").forEach((div) => {
    const { field, kind, label, blank, placeholder } = div.dataset;
    const lab = document.createElement("label");
    lab.htmlFor = field;
    lab.textContent = label;
    const el = document.createElement(kind === "select" ? "select" : "input");
    if (kind === "select" && blank !== undefined) el.add(new Option(blank, ""));
    if (kind === "checkbox") el.type = "checkbox";
    if (kind === "decimal" || kind === "numeric") el.inputMode = kind;
    el.id = el.name = field;
    for (const key of ["choices", "help", "default"]) if (div.dataset[key]) el.dataset[key] = div.dataset[key];
    if (placeholder) el.placeholder = placeholder;
    const error = document.createElement("div");
    error.className = "error";
    error.id = `error-${field}`;
    div.append(lab, el, error);
  });
}

async function init() {
  buildFields();
  OPTIONS = await (await fetch("/api/options")).json();
  $("gpu-names").innerHTML = OPTIONS.gpus.flatMap((g) => [g.key, ...g.aliases].map((n) =>
    `<option value="${esc(n)}">${n === g.key ? "" : esc(g.key) + ", "}${g.memory_gb} GB</option>`)).join("");
  $("llm-names").innerHTML = OPTIONS.llms.map((n) => `<option value="${esc(n)}"></option>`).join("");
  document.querySelectorAll("select[data-choices]").forEach((el) => {
    for (const c of OPTIONS.choices[el.dataset.choices]) el.add(new Option(c, c));
  });
  document.querySelectorAll("[data-help]").forEach((el) => { el.title = OPTIONS.help[el.dataset.help] || ""; });
  document.querySelectorAll("[data-default]").forEach((el) => { el.placeholder = String(OPTIONS.defaults[el.dataset.default]); });
  document.querySelectorAll(".max-compared").forEach((el) => { el.textContent = OPTIONS.max_compared; });
  $("models").textContent = "Models: " + Object.entries(OPTIONS.models).map(([k, v]) => `${k}: ${v}`).join(", ") + ".";
  document.querySelectorAll("input[type=file][data-target]").forEach((el) => {
    el.onchange = async () => { if (el.files.length) $(el.dataset.target).value = await el.files[0].text(); };
  });
  $("gpu-add-button").onclick = addChip;
  $("gpu-add").addEventListener("keydown", (e) => { if (e.key === "Enter") { e.preventDefault(); addChip(); } });
  $("question").addEventListener("submit", (e) => { e.preventDefault(); submit(e.submitter ? e.submitter.value : "ask"); });
  $("png").onclick = () => downloadPlot("png");
  $("svg").onclick = () => downloadPlot("svg");
  $("copy-link").onclick = async () => {
    try { await navigator.clipboard.writeText(location.href); setState($("result").dataset.state, "link copied"); }
    catch { setState($("result").dataset.state, location.href); }
  };
  const params = new URLSearchParams(location.search);
  restore(params);
  $("result").dataset.state = "ready";
  if (["ask", "compare", "recommend"].includes(params.get("mode"))) await submit(params.get("mode"));
}

init().catch((err) => { showErrors([{ field: null, message: `the page could not start: ${err}` }]); setState("error"); });
