"""The style and the script of the HTML report (``html_report``), as the
page carries them inline: allowed by their hashes in the page's
Content-Security-Policy, so a change here is a change of the policy too.
"""

STYLE = """
:root{color-scheme:light;--ok:#2e7d32;--error:#c62828;--timeout:#ef6c00;--aborted:#757575;
--spawn_failed:#6a1b9a;--refused:#8d6e63;--other:#455a64;--mark:#111;--esc:#00838f;
--outside:#1565c0;--retry:#f9a825;--signal:#4a148c}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;
max-width:1400px;padding:16px 24px;color:#1b1b1b;background:#fff}
h1{font-size:22px;margin:0 0 8px}h2{font-size:17px;margin:24px 0 8px;border-bottom:1px solid #ddd}
h3{font-size:15px;margin:0}
.meta{display:flex;flex-wrap:wrap;gap:6px 20px;margin:0;padding:0;list-style:none}
.meta b{font-weight:600}
.chip{display:inline-block;padding:0 8px;border-radius:9px;color:#fff;font-weight:600;
margin-right:4px}
.o-ok{background:var(--ok);fill:var(--ok)}.o-error{background:var(--error);fill:var(--error)}
.o-timeout{background:var(--timeout);fill:var(--timeout)}
.o-aborted{background:var(--aborted);fill:var(--aborted)}
.o-spawn_failed{background:var(--spawn_failed);fill:var(--spawn_failed)}
.o-refused{background:var(--refused);fill:var(--refused)}.o-other{background:var(--other);fill:var(--other)}
.m *{stroke:#fff;stroke-width:1}.m-steer{fill:var(--mark)}.m-escalation{fill:var(--esc)}
.m-outside{fill:var(--outside)}.m-retry{fill:var(--retry)}.m-agent_retry{fill:#fff}
.m-agent_retry *{stroke:var(--retry);stroke-width:2}.m-abort{fill:#000}.m-signal{fill:var(--signal)}
svg .reused{opacity:.45}svg .rerun{stroke:#111;stroke-dasharray:4 3}
svg text.rerun{stroke:none;fill:#111}
.tl{display:grid;grid-template-columns:minmax(0,13em) minmax(0,1fr);gap:0 8px}
.tl.lanes{grid-template-columns:minmax(0,1fr)}
.tl-head{height:22px}.tl-label{height:22px;line-height:18px;font-size:12px;color:#333;
white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.cut{white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
td.label .cut{max-width:16em}summary .cut{display:inline-block;max-width:70%;vertical-align:bottom}
.wide{overflow-x:auto}.key svg{display:inline-block;vertical-align:middle;width:14px;height:14px}
.problems{border:1px solid #c62828;background:#fdecea;padding:8px 12px;border-radius:4px}
.problems li,.warn li{overflow-wrap:anywhere}
.tl-bars{display:block;width:100%}svg text{font:12px system-ui,sans-serif;fill:#333}
svg .axis{stroke:#bbb}svg a rect{stroke:#fff;stroke-width:.5}
table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}
th,td{border-bottom:1px solid #e4e4e4;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f6f6f6;position:sticky;top:0;white-space:nowrap}
th.sortable{cursor:pointer}th[aria-sort=ascending]::after{content:" \\25B2"}
th[aria-sort=descending]::after{content:" \\25BC"}
td.n{text-align:right;white-space:nowrap}
tr.failed td:first-child{box-shadow:inset 3px 0 var(--error)}
.no{color:var(--error);font-weight:600}.cap{color:var(--timeout);font-weight:600}
details{border:1px solid #e4e4e4;border-radius:4px;margin:6px 0;padding:4px 10px}
summary{cursor:pointer}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f7f7f7;padding:6px 8px;margin:4px 0;
max-height:400px;overflow:auto}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:6px 0}
dt{color:#555}dd{margin:0;overflow-wrap:anywhere}
.filters{margin:6px 0;display:flex;gap:16px;align-items:center}
.legend span{margin-right:10px;white-space:nowrap}.muted{color:#666}
@media (max-width:900px){body{padding:12px;font-size:13px}table{font-size:12px}
th,td{padding:3px 3px}th{white-space:normal}.chip{padding:0 5px}
.tl{grid-template-columns:minmax(0,8em) minmax(0,1fr)}td.label .cut{max-width:7em}}
"""

SCRIPT = """
(() => {
  "use strict";
  const table = document.getElementById("runs");
  if (!table) return;
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  const value = (row, i) => {
    const cell = row.cells[i];
    const v = cell.getAttribute("data-v");
    return v === null ? cell.textContent.toLowerCase() : Number(v);
  };
  Array.from(table.tHead.rows[0].cells).forEach((th, i) => {
    th.classList.add("sortable");
    th.tabIndex = 0;
    const sort = () => {
      const down = th.getAttribute("aria-sort") === "ascending";
      for (const other of table.tHead.rows[0].cells) other.removeAttribute("aria-sort");
      th.setAttribute("aria-sort", down ? "descending" : "ascending");
      const sign = down ? -1 : 1;
      const sorted = Array.from(body.rows).sort((a, b) => {
        const x = value(a, i), y = value(b, i);
        const c = x < y ? -1 : x > y ? 1 : 0;
        return c * sign || Number(a.dataset.i) - Number(b.dataset.i);
      });
      body.append(...sorted);
    };
    th.addEventListener("click", sort);
    th.addEventListener("keydown", (e) => {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sort(); }
    });
  });
  const bar = document.createElement("div");
  bar.className = "filters";
  const search = document.createElement("input");
  search.type = "search";
  search.placeholder = "filter: label, outcome, stop reason";
  search.setAttribute("aria-label", "filter the runs");
  const box = document.createElement("label");
  const failed = document.createElement("input");
  failed.type = "checkbox";
  box.append(failed, " only runs that did not pass");
  const shown = document.createElement("span");
  shown.className = "muted";
  bar.append(search, box, shown);
  table.before(bar);
  const filter = () => {
    const words = search.value.toLowerCase().split(/\\s+/).filter(Boolean);
    let count = 0;
    for (const row of rows) {
      const text = row.textContent.toLowerCase();
      const hide = (failed.checked && !row.classList.contains("failed")) ||
        !words.every((w) => text.includes(w));
      row.hidden = hide;
      if (!hide) count += 1;
    }
    shown.textContent = count + " of " + rows.length + " runs shown";
  };
  search.addEventListener("input", filter);
  failed.addEventListener("change", filter);
  filter();
})();
"""
