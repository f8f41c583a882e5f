import BookCache
import Foundation

/// The web page at `/`: plain HTML, CSS and JavaScript, no build step. It talks to the API with
/// the session cookie the login link set, and follows `/api/v1/events` for live progress.
///
/// It is served in the browser's language (`Accept-Language`: English, German or Simplified
/// Chinese): each double-braced English text in the template is replaced from the service's string table, and the
/// script's own text comes from the same table as `T`. What the API returns (states, kinds,
/// error messages) stays as it is; the page translates states, types and statuses for display.
enum WebPage {
    /// The page in `language`, made once per language.
    static func html(_ language: BookCacheLanguage) -> String {
        switch language {
        case .english: english
        case .german: german
        case .chinese: chinese
        }
    }

    private static let english = render(language: .english)
    private static let german = render(language: .german)
    private static let chinese = render(language: .chinese)

    private static func render(language: BookCacheLanguage) -> String {
        let strings = language.strings(in: .module)
        var page = template
        // Static text: the double-braced English text → the language's text, escaped for HTML.
        let pattern = /\{\{([^{}]+)\}\}/
        page = page.replacing(pattern) { match in
            let key = String(match.1)
            switch key {
            case "lang": return language.rawValue
            case "strings":
                // The script's table; "</" is written "<\/" so no string can end the script.
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys]
                let data: Data
                do {
                    data = try encoder.encode(strings)
                } catch {
                    preconditionFailure("a dictionary of strings always encodes: \(error)")
                }
                return String(decoding: data, as: UTF8.self).replacingOccurrences(of: "</", with: "<\\/")
            default: return escapeHTML(strings[key] ?? key)
            }
        }
        return page
    }

    private static func escapeHTML(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }

    private static let template = """
        <!doctype html>
        <html lang="{{lang}}">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>BookCache</title>
        <style>
          :root { font-family: system-ui, sans-serif; color: #222; background: #fafafa; }
          body { margin: 0 auto; max-width: 60rem; padding: 0.75rem; }
          h1 { font-size: 1.4rem; margin: 0.2rem 0 0.8rem; }
          h2 { font-size: 1.1rem; margin: 1.2rem 0 0.4rem; }
          form { display: flex; gap: 0.4rem; flex-wrap: wrap; }
          input { flex: 1 1 14rem; padding: 0.45rem; font-size: 1rem; min-width: 0; }
          button { padding: 0.4rem 0.7rem; font-size: 0.95rem; cursor: pointer; }
          .job, .book, .source { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 0.5rem; margin: 0.35rem 0; }
          .row { display: flex; justify-content: space-between; gap: 0.5rem; align-items: center; flex-wrap: wrap; }
          .muted { color: #666; font-size: 0.85rem; }
          .title { font-weight: 600; overflow-wrap: anywhere; }
          progress { width: 100%; height: 0.9rem; }
          .state-failed { color: #a00; } .state-cached { color: #070; } .state-waiting-for-network, .state-retrying { color: #a60; }
          #notice { background: #fff4d6; border: 1px solid #e0c060; padding: 0.6rem; border-radius: 6px; display: none; }
          #usage { margin-bottom: 0.4rem; }
          select { padding: 0.4rem; font-size: 0.95rem; }
          .grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(9.5rem, 1fr)); gap: 0.6rem; margin: 0.5rem 0; }
          .grid .book { margin: 0; display: flex; flex-direction: column; gap: 0.25rem; }
          .cover { display: block; aspect-ratio: 2 / 3; border-radius: 4px; overflow: hidden; background: #e8e4dc; text-decoration: none; }
          .cover img { width: 100%; height: 100%; object-fit: cover; display: block; }
          .cover .placeholder { display: flex; align-items: center; justify-content: center; height: 100%; padding: 0.5rem;
            box-sizing: border-box; text-align: center; color: #444; font-weight: 600; overflow-wrap: anywhere; }
          .cover:focus-visible, button:focus-visible, summary:focus-visible { outline: 3px solid #36c; outline-offset: 2px; }
          .badges { display: flex; gap: 0.25rem; flex-wrap: wrap; }
          .badge { font-size: 0.75rem; border-radius: 3px; padding: 0.05rem 0.35rem; background: #e6f3e6; color: #070; }
          .badge.outdated { background: #fff0d6; color: #a60; } .badge.pinned { background: #e3ebff; color: #225; }
          details { font-size: 0.85rem; } details dl { margin: 0.3rem 0; } details dt { color: #666; } details dd { margin: 0 0 0.2rem; overflow-wrap: anywhere; }
          .row > h2 { margin: 0.9rem 0 0.4rem; }
          .pager { display: flex; gap: 0.4rem; justify-content: space-between; }
        </style>
        </head>
        <body>
        <h1>BookCache</h1>
        <div id="notice"></div>
        <section>
          <form id="add">
            <input id="url" type="url" placeholder="https://example.com/book.epub" required aria-label="{{Book URL}}">
            <button type="submit">{{Download}}</button>
          </form>
        </section>
        <section>
          <div class="row"><h2>{{Downloads}}</h2><button id="clearfinished">{{Clear finished}}</button></div>
          <div id="jobs"><p class="muted">{{Nothing is downloading.}}</p></div>
        </section>
        <section>
          <div class="row"><h2>{{Shelf}}</h2><button id="clearall">{{Clear all}}</button></div>
          <div id="usage" class="muted"></div>
          <form id="find" role="search">
            <input id="q" type="search" placeholder="{{Title or author}}" aria-label="{{Search the shelf}}">
            <select id="ftype" aria-label="{{Type}}"><option value="">{{All types}}</option><option value="ebook">{{E-books}}</option><option value="magazine">{{Magazines}}</option></select>
            <select id="fstatus" aria-label="{{Status}}"><option value="all">{{Any status}}</option><option value="pinned">{{Pinned}}</option><option value="outdated">{{Outdated}}</option></select>
            <select id="sort" aria-label="{{Order}}"><option value="recentlyRead">{{Recently read}}</option><option value="newest">{{Newest}}</option><option value="title">{{Title}}</option><option value="size">{{Largest}}</option></select>
          </form>
          <div id="books" class="grid"></div>
          <div class="pager"><button id="prev" hidden>{{Previous page}}</button><span id="pageno" class="muted"></span><button id="next" hidden>{{Next page}}</button></div>
        </section>
        <section>
          <h2>{{Sources}}</h2>
          <form id="addsource">
            <input id="source" type="url" placeholder="{{OPDS or manifest URL}}" required aria-label="{{Source URL}}">
            <input id="keep" type="number" min="1" value="10" style="flex: 0 0 5rem" aria-label="{{Books to keep}}">
            <input id="every" value="4h" style="flex: 0 0 5rem" aria-label="{{Every}}">
            <button type="submit">{{Sync on schedule}}</button>
          </form>
          <div id="sources"></div>
        </section>
        <footer class="muted">
          <p>{{Catalogue for e-readers (OPDS), with the reader login bookcache serve --opds-password sets:}}
            <code id="opds"></code></p>
        </footer>
        <script>
        "use strict";
        const LANG = "{{lang}}";
        const T = {{strings}};
        // The page's text in its language: t("%1$@ of %2$@", a, b).
        const t = (key, ...args) => (T[key] ?? key).replace(/%(\\d+)\\$@/g, (_, n) => args[n - 1]);
        // Every call says it sends JSON: the service takes a write from the page's session only
        // with that content type and the page's own Origin.
        const api = (path, options = {}) => fetch("/api/v1" + path,
            Object.assign({ credentials: "same-origin" }, options, { headers: { "Content-Type": "application/json" } }))
          .then(async (response) => {
            const body = await response.json().catch(() => ({}));
            if (response.status === 401) { notice(t("Open the login link that <code>bookcache serve</code> printed to use this page.")); throw new Error("unauthorized"); }
            if (!response.ok) { notice(escapeHTML((body.error && body.error.message) || response.statusText)); throw new Error(response.statusText); }
            return body;
          });
        const escapeHTML = (text) => String(text ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
        const size = (bytes) => { if (bytes == null) return "?"; const units = ["B", "KB", "MB", "GB", "TB"]; let value = bytes, unit = 0;
          while (value >= 1000 && unit < units.length - 1) { value /= 1000; unit++; }
          return (unit ? value.toLocaleString(LANG, { minimumFractionDigits: 1, maximumFractionDigits: 1 }) : value) + " " + units[unit]; };
        const when = (iso) => iso ? new Date(iso).toLocaleString(LANG) : t("never");
        document.getElementById("opds").textContent = location.origin + "/opds";
        function notice(html) { const box = document.getElementById("notice"); box.innerHTML = html; box.style.display = "block"; }
        const jobs = new Map();

        function renderJobs() {
          const list = [...jobs.values()].filter((job) => job.state !== "cached" || Date.now() - Date.parse(job.updatedAt) < 60000);
          const box = document.getElementById("jobs");
          if (!list.length) { box.innerHTML = `<p class="muted">${escapeHTML(t("Nothing is downloading."))}</p>`; return; }
          box.innerHTML = list.map((job) => {
            const active = !["cached", "failed", "cancelled"].includes(job.state);
            const bar = job.total ? `<progress max="${job.total}" value="${job.bytes}"></progress>` : (job.state === "downloading" ? "<progress></progress>" : "");
            return `<div class="job" data-job="${escapeHTML(job.id)}"><div class="row"><span class="title">${escapeHTML(job.title || job.bookId)}</span>
              <span class="state-${escapeHTML(job.state)}">${escapeHTML(t(job.state))}</span></div>${bar}
              <div class="row"><span class="muted">${job.total ? t("%1$@ of %2$@", size(job.bytes), size(job.total)) : size(job.bytes)}${job.error ? " — " + escapeHTML(job.error.message) : ""}</span>
              ${active ? `<button data-cancel="${escapeHTML(job.id)}">${escapeHTML(t("Cancel"))}</button>` : ""}
              ${["failed", "cancelled"].includes(job.state) ? `<button data-retry="${escapeHTML(job.id)}">${escapeHTML(t("Retry"))}</button>` : ""}</div></div>`;
          }).join("");
        }


        // The shelf, a page at a time (50 books: never the whole index), searched and filtered by
        // the service; `cursors` holds where each page read so far began.
        const PAGE = 50;
        const shelf = { cursors: [null], page: 0, next: null };
        const id = (book) => encodeURIComponent(book.id);
        const card = (book) => {
          const cover = book.coverPath
            ? `<img src="/api/v1/books/${id(book)}/cover" alt="" loading="lazy">`
            : `<span class="placeholder">${escapeHTML(book.title)}</span>`;
          const badges = [`<span class="badge ${escapeHTML(book.status)}">${escapeHTML(t(book.status))}</span>`]
            .concat(book.pinned ? [`<span class="badge pinned">${escapeHTML(t("pinned"))}</span>`] : []).join("");
          const sources = (book.syncSources || []).map(escapeHTML).join("<br>") || escapeHTML(t("downloaded by hand"));
          const warnings = (book.warnings || []).length ? `<dt>${escapeHTML(t("Warnings"))}</dt><dd>${book.warnings.map(escapeHTML).join("<br>")}</dd>` : "";
          return `<article class="book" data-book="${escapeHTML(book.id)}">
            <a class="cover" href="/api/v1/books/${id(book)}/file" aria-label="${escapeHTML(t("Open %1$@", book.title))}">${cover}</a>
            <span class="title">${escapeHTML(book.title)}</span>
            ${(book.authors || []).length ? `<span class="muted">${escapeHTML(book.authors.join(", "))}</span>` : ""}
            <span class="muted">${escapeHTML(t(book.bookType))}, ${size(book.fileSize)}</span>
            <div class="badges">${badges}</div>
            <details><summary>${escapeHTML(t("Details"))}</summary><dl>
              <dt>${escapeHTML(t("From"))}</dt><dd>${escapeHTML(book.fileUrl)}</dd>
              <dt>${escapeHTML(t("Kept for"))}</dt><dd>${sources}</dd>
              <dt>${escapeHTML(t("Downloaded"))}</dt><dd>${escapeHTML(when(book.downloadedAt))}</dd>
              <dt>${escapeHTML(t("Last read"))}</dt><dd>${escapeHTML(when(book.lastAccessedAt))}</dd>${warnings}</dl>
              <button data-pin="${escapeHTML(book.id)}" data-pinned="${book.pinned}">${escapeHTML(t(book.pinned ? "Unpin" : "Pin"))}</button>
              <button data-refresh="${escapeHTML(book.id)}">${escapeHTML(t("Refresh"))}</button>
              <button data-delete="${escapeHTML(book.id)}">${escapeHTML(t("Delete"))}</button></details></article>`;
        };

        async function loadShelf() {
          const params = new URLSearchParams({ limit: PAGE, sort: document.getElementById("sort").value,
            status: document.getElementById("fstatus").value });
          const q = document.getElementById("q").value.trim();
          if (q) params.set("q", q);
          const type = document.getElementById("ftype").value;
          if (type) params.set("type", type);
          const after = shelf.cursors[shelf.page];
          if (after) params.set("after", after);
          const [page, stats] = await Promise.all([api("/books?" + params), api("/stats")]);
          const count = stats.totalCount, one = count === 1;
          document.getElementById("usage").textContent = stats.maxSize
            ? t(one ? "%1$@ book, %2$@ used of %3$@ (the budget)" : "%1$@ books, %2$@ used of %3$@ (the budget)", count, size(stats.totalBytes), size(stats.maxSize))
            : t(one ? "%1$@ book, %2$@ used" : "%1$@ books, %2$@ used", count, size(stats.totalBytes));
          shelf.next = page.next;
          document.getElementById("books").innerHTML = page.books.map(card).join("")
            || `<p class="muted">${escapeHTML(t(q || type || params.get("status") !== "all" ? "No book matches." : "No books yet."))}</p>`;
          document.getElementById("prev").hidden = shelf.page === 0;
          document.getElementById("next").hidden = !page.next;
          document.getElementById("pageno").textContent = shelf.page > 0 || page.next ? t("Page %1$@", shelf.page + 1) : "";
        }
        // Books cached or removed: the page shown is read again, at most once a second.
        let shelfTimer = null;
        function shelfChanged() { if (!shelfTimer) shelfTimer = setTimeout(() => { shelfTimer = null; loadShelf(); }, 1000); }
        function firstPage() { shelf.cursors = [null]; shelf.page = 0; return loadShelf(); }
        let typing;
        document.getElementById("q").addEventListener("input", () => { clearTimeout(typing); typing = setTimeout(firstPage, 250); });
        document.getElementById("find").addEventListener("submit", (event) => { event.preventDefault(); clearTimeout(typing); firstPage(); });
        for (const select of ["ftype", "fstatus", "sort"]) document.getElementById(select).addEventListener("change", firstPage);
        document.getElementById("next").addEventListener("click", () => { if (!shelf.next) return;
          shelf.cursors[shelf.page + 1] = shelf.next; shelf.page += 1; loadShelf(); });
        document.getElementById("prev").addEventListener("click", () => { if (shelf.page > 0) { shelf.page -= 1; loadShelf(); } });

        async function loadSources() {
          const body = await api("/sources");
          document.getElementById("sources").innerHTML = body.sources.map((source) => `<div class="source"><div class="row">
            <span class="title">${escapeHTML(source.source)}</span><button data-unsource="${escapeHTML(source.id)}">${escapeHTML(t("Remove"))}</button></div>
            <div class="muted">${escapeHTML(t("keeps %1$@, every %2$@ h, next run %3$@", source.keep, (Math.round(source.every / 3600 * 10) / 10).toLocaleString(LANG), when(source.nextRunAt)))}${source.lastResult ? " — " + escapeHTML(source.lastResult) : ""}</div></div>`).join("");
        }

        document.getElementById("add").addEventListener("submit", async (event) => {
          event.preventDefault();
          const input = document.getElementById("url");
          const body = await api("/jobs", { method: "POST", body: JSON.stringify({ url: input.value, priority: "high" }) });
          body.jobs.forEach((job) => jobs.set(job.id, job)); renderJobs(); input.value = "";
        });
        document.getElementById("addsource").addEventListener("submit", async (event) => {
          event.preventDefault();
          await api("/sources", { method: "POST",
            body: JSON.stringify({ source: document.getElementById("source").value, keep: Number(document.getElementById("keep").value), every: document.getElementById("every").value }) });
          document.getElementById("source").value = ""; loadSources();
        });
        document.body.addEventListener("click", async (event) => {
          const target = event.target;
          if (target.dataset.refresh) { const body = await api("/books/" + encodeURIComponent(target.dataset.refresh) + "/refresh", { method: "POST" });
            body.jobs.forEach((job) => jobs.set(job.id, job)); renderJobs(); }
          if (target.dataset.retry) { const job = await api("/jobs/" + encodeURIComponent(target.dataset.retry) + "/retry", { method: "POST" }); jobs.set(job.id, job); renderJobs(); }
          if (target.id === "clearfinished") { await api("/jobs", { method: "DELETE" });
            for (const [key, job] of jobs) if (["cached", "failed", "cancelled"].includes(job.state)) jobs.delete(key); renderJobs(); }
          if (target.id === "clearall" && confirm(t("Delete every book from the cache? Pinned books too."))) { await api("/books", { method: "DELETE" }); firstPage(); }
          if (target.dataset.cancel) { const job = await api("/jobs/" + encodeURIComponent(target.dataset.cancel), { method: "DELETE" }); jobs.set(job.id, job); renderJobs(); }
          if (target.dataset.delete && confirm(t("Delete this book from the cache?"))) { await api("/books/" + encodeURIComponent(target.dataset.delete), { method: "DELETE" }); loadShelf(); }
          if (target.dataset.pin) { await api("/books/" + encodeURIComponent(target.dataset.pin) + "/pin", { method: target.dataset.pinned === "true" ? "DELETE" : "PUT" }); loadShelf(); }
          if (target.dataset.unsource) { await api("/sources/" + encodeURIComponent(target.dataset.unsource), { method: "DELETE" }); loadSources(); }
        });

        function follow() {
          const events = new EventSource("/api/v1/events");
          // Every (re)connect begins with a snapshot of the jobs (the stream then carries changes,
          // and drops a client that falls behind); the shelf and sources are read again too.
          let opened = false;
          events.addEventListener("snapshot", (event) => { jobs.clear(); JSON.parse(event.data).jobs.forEach((job) => jobs.set(job.id, job)); renderJobs(); });
          events.addEventListener("open", () => { if (opened) { loadShelf(); loadSources(); } opened = true; });
          events.addEventListener("job", (event) => { const job = JSON.parse(event.data); jobs.set(job.id, job); renderJobs(); if (job.state === "cached") shelfChanged(); });
          events.addEventListener("progress", (event) => { const p = JSON.parse(event.data); const job = jobs.get(p.id);
            if (job) { job.bytes = p.bytes; job.total = p.total; job.state = p.state; renderJobs(); } });
          events.addEventListener("book", () => shelfChanged());
          events.addEventListener("source", () => loadSources());
        }

        Promise.all([loadShelf(), loadSources()]).then(follow).catch(() => {});
        </script>
        </body>
        </html>
        """
}
