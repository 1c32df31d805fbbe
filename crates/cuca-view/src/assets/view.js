// cuca view: the filter box on the sessions list, and live records on a session's last page.
// Recorded text is only ever set through textContent, never parsed as HTML.
"use strict";

(function () {
  const filter = document.getElementById("filter");
  if (filter) {
    const rows = Array.from(document.querySelectorAll("tr[data-filter]"));
    filter.addEventListener("input", () => {
      const needle = filter.value.toLowerCase();
      for (const row of rows) {
        row.hidden = needle !== "" && !row.dataset.filter.toLowerCase().includes(needle);
      }
    });
  }

  const live = document.getElementById("live");
  if (!live) return;
  const session = live.dataset.session;
  const status = document.getElementById("live-status");
  let after = live.dataset.after === "" ? null : Number(live.dataset.after);

  function line(record) {
    const div = document.createElement("div");
    div.className = "rec live-new kind-" + record.kind;
    div.id = "p-" + record.sequence;
    const who = document.createElement("div");
    who.className = "who";
    who.textContent = record.kind + " · #" + record.sequence;
    const text = document.createElement("div");
    text.className = "text";
    text.textContent = record.text;
    div.appendChild(who);
    div.appendChild(text);
    return div;
  }

  async function poll() {
    let delay = 1000;
    try {
      const query = after === null ? "" : "?after=" + after;
      const response = await fetch("/api/sessions/" + encodeURIComponent(session) + "/records" + query);
      if (response.ok) {
        const batch = await response.json();
        for (const record of batch.records) {
          live.appendChild(line(record));
          after = record.sequence;
        }
        if (batch.records.length > 0 && status) {
          status.textContent = "live: " + batch.records.length + " new record(s), last #" + after;
        }
        if (batch.full) delay = 0;
      } else if (status) {
        status.textContent = "live: the server answered " + response.status;
      }
    } catch (error) {
      if (status) status.textContent = "live: the server is not answering";
    }
    setTimeout(poll, delay);
  }
  if (status) status.textContent = "live: watching for new records";
  setTimeout(poll, 1000);
})();
