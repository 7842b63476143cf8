// mindstore console: the live feed of a task page. Polls the feed endpoint for the messages
// after the last one shown and appends them. Stored content is only ever set as textContent
// (never as HTML), and image sources are the server's checked data: URLs.
"use strict";
(function () {
  const section = document.getElementById("conversation");
  if (!section || !section.dataset.feed) return;
  // a live page opens at its newest message (a link to one message keeps its #anchor)
  if (!window.location.hash && section.lastElementChild) {
    section.lastElementChild.scrollIntoView({ block: "end" });
  }
  const counter = document.getElementById("count");
  const url = section.dataset.feed;
  let count = Number(section.dataset.count) || 0;
  const every = Math.max(Number(section.dataset.every) || 2000, 100);

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text) node.textContent = text;
    return node;
  }

  function block(b) {
    const div = el("div", "block " + b.kind + (b.failed ? " failed" : ""));
    if (b.title) div.appendChild(el("div", "label", b.title));
    if (b.image && b.image.startsWith("data:image/")) {
      const img = document.createElement("img");
      img.src = b.image;
      img.alt = b.text || "";
      div.appendChild(img);
    } else if (b.text) {
      div.appendChild(el("div", "body", b.text));
    }
    if (b.result) div.appendChild(block(b.result));
    return div;
  }

  function message(row) {
    const depth = Math.min(Math.max(Number(row.depth) || 0, 0), 6);
    const role = String(row.role).split(":")[0].replace(/[^a-z]/g, "");
    const article = el("article", "message role-" + role + " depth-" + depth);
    article.id = "m" + row.index;
    article.dataset.index = String(row.index);
    const header = el("header");
    header.appendChild(el("span", "index", "#" + row.index));
    header.appendChild(el("span", "role", row.role));
    if (depth) header.appendChild(el("span", "level", "level " + row.depth));
    header.appendChild(el("span", "time", row.time));
    if (row.usage) header.appendChild(el("span", "usage", row.usage));
    article.appendChild(header);
    if (row.redacted) article.appendChild(el("div", "tombstone", row.redacted));
    for (const b of row.blocks) article.appendChild(block(b));
    return article;
  }

  async function poll() {
    try {
      const response = await fetch(url + "?after=" + count, {
        credentials: "same-origin", headers: { "Accept": "application/json" } });
      const type = response.headers.get("Content-Type") || "";
      if (!response.ok && type.startsWith("application/json")) {
        // the tenant was shredded (or its keyring is missing) while the page was open:
        // say so above the conversation and stop asking
        const data = await response.json();
        if (data.error) {
          const notice = el("p", "notice sealed", String(data.error));
          notice.id = "feed-notice";
          section.parentNode.insertBefore(notice, section);
          return;
        }
      }
      if (response.ok) {
        const data = await response.json();
        if (data.reload) { window.location.reload(); return; }
        for (const row of data.rows) {
          if (row.index >= count) section.appendChild(message(row));
        }
        count = Math.max(count, data.count);
        if (counter) counter.textContent = String(count);
      }
    } catch (error) {
      // the server is away for a moment: try again at the next tick
    }
    window.setTimeout(poll, every);
  }

  window.setTimeout(poll, every);
})();
