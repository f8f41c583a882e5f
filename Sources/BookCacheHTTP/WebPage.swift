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
          <h2>{{Downloads}}</h2>
          <div id="jobs"><p class="muted">{{Nothing is downloading.}}</p></div>
        </section>
        <section>
          <h2>{{Shelf}}</h2>
          <div id="usage" class="muted"></div>
          <div id="books"></div>
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
          const list = [...jobs.values()].filter((job) => !["cached", "cancelled"].includes(job.state) || Date.now() - Date.parse(job.updatedAt) < 60000);
          const box = document.getElementById("jobs");
          if (!list.length) { box.innerHTML = `<p class="muted">${escapeHTML(t("Nothing is downloading."))}</p>`; return; }
          box.innerHTML = list.map((job) => {
            const active = !["cached", "failed", "cancelled"].includes(job.state);
            const bar = job.total ? `<progress max="${job.total}" value="${job.bytes}"></progress>` : (job.state === "downloading" ? "<progress></progress>" : "");
            return `<div class="job" data-job="${escapeHTML(job.id)}"><div class="row"><span class="title">${escapeHTML(job.title || job.bookId)}</span>
              <span class="state-${escapeHTML(job.state)}">${escapeHTML(t(job.state))}</span></div>${bar}
              <div class="row"><span class="muted">${job.total ? t("%1$@ of %2$@", size(job.bytes), size(job.total)) : size(job.bytes)}${job.error ? " — " + escapeHTML(job.error.message) : ""}</span>
              ${active ? `<button data-cancel="${escapeHTML(job.id)}">${escapeHTML(t("Cancel"))}</button>` : ""}</div></div>`;
          }).join("");
        }


        async function loadShelf() {
          const [shelf, stats] = await Promise.all([api("/books"), api("/stats")]);
          const count = shelf.books.length;
          const one = count === 1;
          document.getElementById("usage").textContent = stats.maxSize
            ? t(one ? "%1$@ book, %2$@ used of %3$@ (the budget)" : "%1$@ books, %2$@ used of %3$@ (the budget)", count, size(stats.totalBytes), size(stats.maxSize))
            : t(one ? "%1$@ book, %2$@ used" : "%1$@ books, %2$@ used", count, size(stats.totalBytes));
          document.getElementById("books").innerHTML = shelf.books.map((book) => `<div class="book" data-book="${escapeHTML(book.id)}">
            <div class="row"><span class="title">${escapeHTML(book.title)}</span><span class="muted">${escapeHTML(t(book.bookType))}, ${size(book.fileSize)}, ${escapeHTML(t(book.status))}${book.pinned ? ", " + escapeHTML(t("pinned")) : ""}</span></div>
            <div class="row"><span class="muted">${escapeHTML(t("last read %1$@", when(book.lastAccessedAt)))}</span><span>
              <button data-pin="${escapeHTML(book.id)}" data-pinned="${book.pinned}">${escapeHTML(t(book.pinned ? "Unpin" : "Pin"))}</button>
              <button data-delete="${escapeHTML(book.id)}">${escapeHTML(t("Delete"))}</button></span></div></div>`).join("") || `<p class="muted">${escapeHTML(t("No books yet."))}</p>`;
        }

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
          events.addEventListener("job", (event) => { const job = JSON.parse(event.data); jobs.set(job.id, job); renderJobs(); if (job.state === "cached") loadShelf(); });
          events.addEventListener("progress", (event) => { const p = JSON.parse(event.data); const job = jobs.get(p.id);
            if (job) { job.bytes = p.bytes; job.total = p.total; job.state = p.state; renderJobs(); } });
          events.addEventListener("book", () => loadShelf());
          events.addEventListener("source", () => loadSources());
        }

        Promise.all([loadShelf(), loadSources()]).then(follow).catch(() => {});
        </script>
        </body>
        </html>
        """
}
