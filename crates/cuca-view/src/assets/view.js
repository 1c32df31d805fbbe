// cuca view: the filter box on the sessions list, copy buttons, go to turn N, and live
// records on a session's last page, placed into their turn as a reload would show them.
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

  // The search box in the header: Enter searches every session.
  const search = document.getElementById("search");
  if (search) {
    const params = new URLSearchParams(location.search);
    if (location.pathname === "/search") {
      search.value = params.get("q") || "";
      const re = document.getElementById("search-re");
      if (re) re.checked = params.get("re") === "1";
    }
    search.addEventListener("keydown", (e) => {
      if (e.key !== "Enter" || search.value === "") return;
      const re = document.getElementById("search-re");
      location.href = "/search?q=" + encodeURIComponent(search.value) + (re && re.checked ? "&re=1" : "");
    });
  }

  // Copy buttons: the clipboard where the browser allows it, else a selected text field.
  document.addEventListener("click", (event) => {
    const button = event.target.closest ? event.target.closest("button.copy") : null;
    if (!button) return;
    const text = button.dataset.copy;
    const done = () => { button.classList.add("copied"); button.dataset.copied = "yes"; };
    const fallback = () => {
      const field = document.createElement("textarea");
      field.value = text;
      document.body.appendChild(field);
      field.select();
      try { document.execCommand("copy"); } catch (e) { /* nothing more to try */ }
      field.remove();
      done();
    };
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(text).then(done, fallback);
    } else {
      fallback();
    }
  });

  // Go to turn N: the page that holds it, scrolled to it.
  for (const button of document.querySelectorAll("button.goto-button")) {
    const input = button.parentElement.querySelector("input.goto-turn");
    const go = () => {
      const n = parseInt(input.value, 10);
      if (n > 0) location.href = input.dataset.sessionHref + "?turn=" + n + "#turn-" + n;
    };
    button.addEventListener("click", go);
    input.addEventListener("keydown", (e) => { if (e.key === "Enter") go(); });
  }

  const live = document.getElementById("live");
  if (!live) return;
  const session = live.dataset.session;
  const status = document.getElementById("live-status");
  let after = live.dataset.after === "" ? null : Number(live.dataset.after);
  let nextTurn = Number(live.dataset.nextTurn || "1");
  let lastWasLatency = false;

  // The header's counts and the pager, kept as a reload would show them: a record, a turn,
  // tokens or an error that arrives live counts at once.
  const firstTurn = Number(live.dataset.firstTurn || "0");
  const perPage = Number(live.dataset.perPage || "20");
  const turnsDd = document.getElementById("summary-turns");
  const tokensDd = document.getElementById("summary-tokens");
  const errorsDd = document.getElementById("summary-errors");
  const counts = {
    records: Number(live.dataset.records || "0"),
    prompt: Number(live.dataset.prompt || "0"),
    completion: Number(live.dataset.completion || "0"),
    errors: Number(live.dataset.errors || "0"),
  };
  function thousands(n) { return n.toLocaleString("en-US"); }
  function plural(n, one, many) { return thousands(n) + " " + (n === 1 ? one : many); }
  function header() {
    const turns = nextTurn - 1;
    if (turnsDd) turnsDd.textContent = thousands(turns) + " · " + plural(counts.records, "record", "records");
    if (tokensDd) tokensDd.textContent = thousands(counts.prompt) + " / " + thousands(counts.completion);
    // The count is the cell's first text; a link to the first error may follow it.
    if (errorsDd) {
      const first = errorsDd.firstChild;
      if (first && first.nodeType === Node.TEXT_NODE) first.textContent = thousands(counts.errors);
      else errorsDd.insertBefore(document.createTextNode(thousands(counts.errors)), first);
    }
    const page = Math.floor(firstTurn / perPage) + 1;
    const pages = Math.max(page, Math.ceil(turns / perPage));
    let text = "page " + thousands(page) + " of " + thousands(pages);
    if (turns > firstTurn) text += " · turns " + thousands(firstTurn + 1) + "–" + thousands(turns) + " of " + thousands(turns);
    for (const node of document.querySelectorAll(".page-of")) node.textContent = text;
    for (const input of document.querySelectorAll("input.goto-turn")) input.max = Math.max(turns, 1);
  }

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // The turn live records go into: the page's last turn while it is open, else a new one.
  // Notes (a fork audit, a model swap) after a closed turn are a notes block, as a reload
  // shows them; a call's record after them makes that block the next turn.
  function openTurn(note) {
    const turns = document.querySelectorAll("section.turn");
    const last = turns.length ? turns[turns.length - 1] : null;
    if (last && last.dataset.complete === "false") {
      if (last.id !== "notes-after" || note) return last;
      last.id = "turn-" + nextTurn;
      last.querySelector(".turn-head strong").textContent = "Turn " + nextTurn;
      last.querySelector(".turn-head").appendChild(el("span", "pill", "unfinished"));
      nextTurn += 1;
      return last;
    }
    const turn = el("section", "turn live-turn");
    turn.dataset.complete = "false";
    const head = el("div", "turn-head");
    if (note) {
      turn.id = "notes-after";
      head.appendChild(el("strong", "", "Notes after turn " + (nextTurn - 1)));
    } else {
      turn.id = "turn-" + nextTurn;
      head.appendChild(el("strong", "", "Turn " + nextTurn));
      head.appendChild(el("span", "pill", "unfinished"));
      nextTurn += 1;
    }
    turn.appendChild(head);
    live.parentNode.insertBefore(turn, live);
    return turn;
  }

  function anchor(record) {
    const a = el("span", "point");
    a.id = "p-" + record.sequence;
    return a;
  }

  function place(record) {
    const turn = openTurn(record.kind === "Fork" || record.kind === "ModelSwap");
    const closes = lastWasLatency && record.kind === "TokenUsage";
    lastWasLatency = record.kind === "Latency";
    const lastRec = turn.lastElementChild;
    const streamed = record.kind === "Output" || record.kind === "Reasoning";
    if (streamed && lastRec && lastRec.dataset.kind === record.kind) {
      // Streamed blocks join into one text, as a reload shows them.
      lastRec.querySelector(".text").textContent += record.text;
      lastRec.insertBefore(anchor(record), lastRec.firstChild);
      lastRec.querySelector(".who").textContent = lastRec.dataset.label + " · #" + lastRec.dataset.first + "–#" + record.sequence;
    } else {
      const labels = { Output: "assistant output", Reasoning: "reasoning", Message: record.role || "message",
                       SystemPrompt: "system", ToolCall: "tool call", ToolResult: "tool result" };
      const label = labels[record.kind] || record.kind;
      const cls = record.kind === "Latency" || record.kind === "TokenUsage" ? "rec meta live-new" : "rec live-new";
      const div = el("div", cls + " kind-" + record.kind);
      div.dataset.kind = record.kind;
      div.dataset.label = label;
      div.dataset.first = record.sequence;
      div.appendChild(anchor(record));
      div.appendChild(el("div", "who", label + " · #" + record.sequence));
      div.appendChild(el("div", "text", record.text));
      turn.appendChild(div);
    }
    if (record.clipped) {
      // The answer clipped this record's text; a reload pages it, `cuca show` prints it whole.
      turn.appendChild(el("p", "clipped", "… " + record.clipped + " more bytes of #" + record.sequence + " not shown live"));
    }
    const head = turn.querySelector(".turn-head");
    if (record.error && head) head.appendChild(el("span", "badge error", "error"));
    // One error a call, as the header counts them: a turn's second error record is not another.
    if (record.error && turn.dataset.errored !== "yes") {
      turn.dataset.errored = "yes";
      counts.errors += 1;
    }
    if (record.latency_ms !== undefined && head) head.appendChild(el("span", "latency", record.latency_ms + " ms"));
    if (closes) {
      turn.dataset.complete = "true";
      if (head) {
        const pill = head.querySelector(".pill");
        if (pill) pill.remove();
        head.appendChild(el("span", "tokens", record.tokens || ""));
      }
    }
  }

  function forks(list) {
    const ul = document.getElementById("fork-list");
    if (!ul) return;
    const known = new Set(Array.from(ul.querySelectorAll("a.child-link")).map((a) => a.textContent));
    for (const fork of list) {
      if (known.has(fork.id)) continue;
      const li = el("li", "live-new");
      const a = el("a", "child-link", fork.id);
      a.href = fork.href;
      li.appendChild(a);
      li.appendChild(el("span", "muted", " at "));
      const p = el("a", "", fork.point);
      p.href = fork.point_href;
      li.appendChild(p);
      li.appendChild(document.createTextNode(" "));
      const c = el("a", "compare-link", "compare");
      c.href = fork.compare_href;
      li.appendChild(c);
      ul.appendChild(li);
    }
    const head = document.getElementById("fork-list-head");
    if (head && list.length > 0) {
      head.hidden = false;
      head.textContent = list.length + (list.length === 1 ? " fork" : " forks") + " of this session:";
    }
  }

  async function poll() {
    let delay = 1000;
    try {
      const query = after === null ? "" : "?after=" + after;
      const response = await fetch("/api/sessions/" + encodeURIComponent(session) + "/records" + query);
      if (response.ok) {
        const batch = await response.json();
        for (const record of batch.records) {
          place(record);
          after = record.sequence;
          counts.records += 1;
          if (record.prompt_tokens !== undefined) {
            counts.prompt += record.prompt_tokens;
            counts.completion += record.completion_tokens;
          }
        }
        if (batch.records.length > 0) header();
        forks(batch.forks || []);
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
  // Whether the page's last record was a Latency (a TokenUsage next closes the turn).
  const metas = document.querySelectorAll("section.turn:last-of-type .rec.meta");
  if (metas.length && /^latency/.test(metas[metas.length - 1].textContent)) lastWasLatency = true;
  if (status) status.textContent = "live: watching for new records";
  setTimeout(poll, 1000);
})();
