// cuca export --format html: search within the saved page. Every turn (and failed call) that
// holds the words stays, the rest is hidden, and each match is marked. It reads and changes
// the page only: no request is made, so it works from file:// with no network.
// Recorded text is only ever split into text nodes, never parsed as HTML.
"use strict";

(function () {
  const box = document.getElementById("page-search");
  if (!box) return;
  const count = document.getElementById("page-search-count");
  const sections = Array.from(document.querySelectorAll("main section.turn, main section.failed-call"));
  // A page of many turns marks the first hits only, so a one-letter search stays quick.
  const MAX_MARKS = 2000;

  function unmark() {
    for (const mark of Array.from(document.querySelectorAll("mark.page-hit"))) {
      const parent = mark.parentNode;
      parent.replaceChild(document.createTextNode(mark.textContent), mark);
      parent.normalize();
    }
    for (const details of document.querySelectorAll("details[data-search-opened]")) {
      details.open = false;
      delete details.dataset.searchOpened;
    }
  }

  function markIn(section, needle, budget) {
    const walker = document.createTreeWalker(section, NodeFilter.SHOW_TEXT);
    const nodes = [];
    for (let node = walker.nextNode(); node; node = walker.nextNode()) nodes.push(node);
    let marked = 0;
    for (const node of nodes) {
      if (marked >= budget) break;
      const text = node.nodeValue;
      const lower = text.toLowerCase();
      let at = lower.indexOf(needle);
      if (at < 0) continue;
      const parts = document.createDocumentFragment();
      let from = 0;
      while (at >= 0 && marked < budget) {
        parts.appendChild(document.createTextNode(text.slice(from, at)));
        const mark = document.createElement("mark");
        mark.className = "page-hit";
        mark.textContent = text.slice(at, at + needle.length);
        parts.appendChild(mark);
        marked += 1;
        from = at + needle.length;
        at = lower.indexOf(needle, from);
      }
      parts.appendChild(document.createTextNode(text.slice(from)));
      const details = node.parentNode.closest("details");
      if (details && !details.open) {
        details.open = true;
        details.dataset.searchOpened = "yes";
      }
      node.parentNode.replaceChild(parts, node);
    }
    return marked;
  }

  function apply() {
    unmark();
    const needle = box.value.trim().toLowerCase();
    let shown = 0;
    let budget = MAX_MARKS;
    let first = null;
    for (const section of sections) {
      const hit = needle === "" || section.textContent.toLowerCase().includes(needle);
      section.hidden = !hit;
      if (!hit) continue;
      shown += 1;
      if (needle !== "" && budget > 0) budget -= markIn(section, needle, budget);
      if (!first) first = section;
    }
    document.body.dataset.searching = needle === "" ? "no" : "yes";
    if (count) {
      count.textContent = needle === "" ? "" : shown + " of " + sections.length + (sections.length === 1 ? " turn" : " turns");
    }
    const hit = document.querySelector("mark.page-hit");
    if (hit && hit.scrollIntoView) hit.scrollIntoView({ block: "center" });
    else if (first && needle !== "" && first.scrollIntoView) first.scrollIntoView();
  }

  let timer = null;
  box.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(apply, 120);
  });
  box.addEventListener("keydown", (e) => {
    if (e.key === "Enter") { clearTimeout(timer); apply(); }
    if (e.key === "Escape") { box.value = ""; apply(); }
  });
})();
