"""The style and the script of the HTML report (``html_report``), as the
page carries them inline: allowed by their hashes in the page's
Content-Security-Policy, so a change here is a change of the policy too.
"""

STYLE = """
:root{color-scheme:light;--ok:#2e7d32;--error:#c62828;--timeout:#ef6c00;--aborted:#757575;
--spawn_failed:#6a1b9a;--refused:#8d6e63;--other:#455a64;--mark:#111;--esc:#1565c0}
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
.m-steer{fill:var(--mark)}.m-escalation{fill:var(--esc)}
.problems{border:1px solid #c62828;background:#fdecea;padding:8px 12px;border-radius:4px}
.problems li,.warn li{overflow-wrap:anywhere}
svg{display:block;width:100%;height:auto}svg text{font:12px system-ui,sans-serif;fill:#333}
svg .axis{stroke:#bbb}svg a rect{stroke:#fff;stroke-width:.5}
table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}
th,td{border-bottom:1px solid #e4e4e4;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f6f6f6;position:sticky;top:0;white-space:nowrap}
th.sortable{cursor:pointer}th[aria-sort=ascending]::after{content:" \\25B2"}
th[aria-sort=descending]::after{content:" \\25BC"}
td.n{text-align:right;white-space:nowrap}td.label{overflow-wrap:anywhere;max-width:420px}
tr.failed td:first-child{box-shadow:inset 3px 0 var(--error)}
.no{color:var(--error);font-weight:600}.cap{color:var(--timeout);font-weight:600}
details{border:1px solid #e4e4e4;border-radius:4px;margin:6px 0;padding:4px 10px}
summary{cursor:pointer;overflow-wrap:anywhere}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f7f7f7;padding:6px 8px;margin:4px 0;
max-height:400px;overflow:auto}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:6px 0}
dt{color:#555}dd{margin:0;overflow-wrap:anywhere}
.filters{margin:6px 0;display:flex;gap:16px;align-items:center}
.legend span{margin-right:10px}.muted{color:#666}
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
