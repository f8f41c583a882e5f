import DownloadQueue
import Foundation

/// The service's jobs and scheduled sources, in tables of their own in the cache's database
/// (`index.sqlite`), so that a job is durable — committed with `synchronous=FULL` — before it is
/// acknowledged, and the queue survives restarts and `kill -9`.
///
/// The tables are made on first use with `CREATE TABLE IF NOT EXISTS`; the book index's schema
/// version is not touched, so a cache without the service is exactly as before.
final class JobStore {
    static let schema = """
        CREATE TABLE IF NOT EXISTS service_job (
            seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, bookId TEXT NOT NULL, url TEXT NOT NULL,
            title TEXT, entry TEXT, priority INTEGER NOT NULL, state TEXT NOT NULL, bytes INTEGER NOT NULL DEFAULT 0,
            total INTEGER, errorKind TEXT, errorMessage TEXT, attempts INTEGER NOT NULL DEFAULT 0,
            createdAt REAL NOT NULL, updatedAt REAL NOT NULL, nextAttemptAt REAL
        );
        CREATE INDEX IF NOT EXISTS service_job_next ON service_job(state, priority DESC, seq);
        CREATE INDEX IF NOT EXISTS service_job_book ON service_job(bookId, state);
        CREATE TABLE IF NOT EXISTS service_source (
            id TEXT PRIMARY KEY NOT NULL, source TEXT NOT NULL, keep INTEGER NOT NULL, type TEXT NOT NULL,
            formats TEXT NOT NULL, section TEXT, every REAL NOT NULL, nextRunAt REAL NOT NULL, lastRunAt REAL,
            lastResult TEXT, lastRunSucceeded INTEGER
        ) WITHOUT ROWID;
        """

    private static let jobColumns =
        "id, bookId, url, title, priority, state, bytes, total, errorKind, errorMessage, attempts, createdAt, updatedAt, nextAttemptAt"
    private static let sourceColumns = "id, source, keep, type, formats, section, every, nextRunAt, lastRunAt, lastResult, lastRunSucceeded"

    let layout: CacheLayout
    private let database: SQLiteDatabase
    /// Whether the connection syncs every commit (`synchronous=FULL`, as it is opened).
    private var synced = true

    /// Opens the cache's database (creating the cache folder and the tables when needed).
    init(layout: CacheLayout) throws(BookCacheError) {
        self.layout = layout
        do {
            try FileSystem.createDirectory(layout.root)
        } catch {
            throw .cacheDirectoryUnusable(layout.root.path, "cannot create it (\(error))")
        }
        if let problem = layout.untrustedFolderProblem() {
            throw .cacheDirectoryUnusable(layout.root.path, problem)
        }
        do {
            SecretFiles.restrict(in: layout)
            database = try SQLiteDatabase(path: layout.databaseFile.path)
            try database.execute(Self.schema)
        } catch {
            throw IndexStore.translate(error, layout: layout)
        }
        try addInterruptions()
    }

    /// How many times the service died while the job ran: a column of its own, added to a table
    /// made before it was (by another process too, meanwhile: the check runs again under the lock).
    private func addInterruptions() throws(BookCacheError) {
        let database = self.database
        func missing() throws(SQLiteError) -> Bool {
            let columns = try database.statement("SELECT count(*) FROM pragma_table_info('service_job') WHERE name = 'interruptions'")
            defer { columns.reset() }
            return try columns.step() && columns.int64(0) == 0
        }
        guard try read(missing) else { return }
        try write { () throws(SQLiteError) in
            if try missing() { try database.execute("ALTER TABLE service_job ADD COLUMN interruptions INTEGER NOT NULL DEFAULT 0") }
        }
    }

    /// The times a service may die while a job runs before the job is failed rather than started
    /// again: a book that ends the process at every start (it did, before validation moved into
    /// workers) would otherwise end it forever.
    static let maxInterruptions = 2

    /// A job to insert: the record shown, and the manifest line it runs from.
    struct NewJob {
        var job: ServiceJob
        var entry: String
    }

    // MARK: - Jobs

    /// Inserts every job in one transaction: all are durable when it returns — synced to the
    /// disk, surviving power loss — or none.
    func insert(_ jobs: [NewJob]) throws(BookCacheError) {
        try write(durable: true) { () throws(SQLiteError) in
            for new in jobs {
                // (Fetched for each row: the cache hands it back reset, ready for new bindings.)
                let insert = try database.statement(
                    "INSERT INTO service_job (\(Self.jobColumns), entry) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
                bind(new.job, to: insert)
                insert.bind(new.entry, at: 15)
                try insert.run()
            }
        }
    }

    /// Writes a job's state, progress, error and schedule. A job that ended loses its manifest
    /// line (which may carry headers with tokens): nothing runs it again.
    ///
    /// Not synced to the disk at once (`synchronous=NORMAL`; in WAL mode a killed process loses
    /// nothing, only a power cut can): a state lost that way is harmless — the job runs again at
    /// the next start, and a book cached meanwhile ends it at once without a download. This
    /// saves an `fsync` per state change.
    func update(_ job: ServiceJob) throws(BookCacheError) {
        try write { () throws(SQLiteError) in try updateRow(job) }
    }

    /// Writes `job`'s state, progress, error and times to its row, and `entry` as its manifest line
    /// when given; an ended job's manifest line is dropped (it may hold a login or headers, not
    /// kept at rest). The parameters are numbered as ``bind(_:to:)`` numbers a job's columns.
    private func updateRow(_ job: ServiceJob, entry: String? = nil) throws(SQLiteError) {
        let update = try database.statement(
            """
            UPDATE service_job SET state = ?6, bytes = ?7, total = ?8, errorKind = ?9, errorMessage = ?10, attempts = ?11,
                updatedAt = ?13, nextAttemptAt = ?14, entry = CASE WHEN ?15 THEN NULL ELSE coalesce(?16, entry) END WHERE id = ?1
            """)
        bind(job, to: update)
        update.bind(Int64(job.state.isFinal ? 1 : 0), at: 15)
        update.bind(entry, at: 16)
        try update.run()
    }

    /// One job, or `nil`.
    func job(_ id: String) throws(BookCacheError) -> ServiceJob? {
        try read { () throws(SQLiteError) in
            let statement = try database.statement("SELECT \(Self.jobColumns) FROM service_job WHERE id = ?")
            defer { statement.reset() }
            statement.bind(id, at: 1)
            return try statement.step() ? Self.job(from: statement) : nil
        }
    }

    /// Jobs in the order they were accepted; the newest `limit` when given.
    func jobs(limit: Int? = nil) throws(BookCacheError) -> [ServiceJob] {
        try read { () throws(SQLiteError) in
            let statement = try database.statement(
                limit.map { "SELECT \(Self.jobColumns) FROM service_job ORDER BY seq DESC LIMIT \($0)" }
                    ?? "SELECT \(Self.jobColumns) FROM service_job ORDER BY seq")
            defer { statement.reset() }
            var jobs: [ServiceJob] = []
            while try statement.step() { jobs.append(try Self.job(from: statement)) }
            return limit == nil ? jobs : jobs.reversed()
        }
    }

    /// The job of a book that has not ended, if there is one.
    func activeJob(forBook bookId: String) throws(BookCacheError) -> ServiceJob? {
        try read { () throws(SQLiteError) in
            let statement = try database.statement(
                "SELECT \(Self.jobColumns) FROM service_job WHERE bookId = ? AND state NOT IN ('cached', 'failed', 'cancelled') LIMIT 1")
            defer { statement.reset() }
            statement.bind(bookId, at: 1)
            return try statement.step() ? Self.job(from: statement) : nil
        }
    }

    /// Up to `limit` jobs ready to run at `now`, highest priority first, then oldest: queued
    /// ones, and waiting or retrying ones whose time has come (a running job is `downloading`,
    /// so never among them) — each with the manifest line it runs from (`nil` if it was erased).
    func runnable(limit: Int, now: Date) throws(BookCacheError) -> [(job: ServiceJob, entry: String?)] {
        try read { () throws(SQLiteError) in
            let statement = try database.statement(
                """
                SELECT \(Self.jobColumns), entry FROM service_job
                WHERE state = 'queued' OR (state IN ('waiting-for-network', 'retrying') AND nextAttemptAt <= ?)
                ORDER BY priority DESC, seq
                """)
            defer { statement.reset() }
            statement.bind(now.timeIntervalSince1970, at: 1)
            var jobs: [(job: ServiceJob, entry: String?)] = []
            while jobs.count < limit, try statement.step() {
                jobs.append((try Self.job(from: statement), statement.text(14)))
            }
            return jobs
        }
    }

    /// When the next waiting or retrying job is due, if any is.
    func nextAttempt() throws(BookCacheError) -> Date? {
        try read { () throws(SQLiteError) in
            let statement = try database.statement(
                "SELECT min(nextAttemptAt) FROM service_job WHERE state IN ('waiting-for-network', 'retrying')")
            defer { statement.reset() }
            guard try statement.step(), !statement.isNull(0) else { return nil }
            return Date(timeIntervalSince1970: statement.double(0))
        }
    }

    /// Jobs a killed service left downloading (a stopped one queues them itself) go back to the
    /// queue, their partial files resumed. A job whose book was being judged when the service died
    /// (`diedJudging`, given its book id) is counted; one counted ``maxInterruptions`` times is
    /// failed instead, with words that say so. (A death while bytes arrive is not counted: it is
    /// the network's or the machine's, and the job resumes.)
    /// - Returns: How many were queued again, and how many failed.
    func requeueInterrupted(now: Date, diedJudging: (String) -> Bool) throws(BookCacheError) -> (requeued: Int, failed: Int) {
        try write(durable: true) { () throws(SQLiteError) in
            let interrupted = try database.statement("SELECT id, bookId FROM service_job WHERE state = 'downloading'")
            var judging: [String] = []
            while try interrupted.step() {
                if let id = interrupted.text(0), let book = interrupted.text(1), diedJudging(book) { judging.append(id) }
            }
            interrupted.reset()
            for id in judging {
                let count = try database.statement("UPDATE service_job SET interruptions = interruptions + 1 WHERE id = ?")
                count.bind(id, at: 1)
                try count.run()
            }
            let fail = try database.statement(
                """
                UPDATE service_job SET state = 'failed', errorKind = 'unexpected', errorMessage = ?, nextAttemptAt = NULL, entry = NULL,
                    updatedAt = ?
                WHERE state = 'downloading' AND interruptions >= ?
                """)
            fail.bind(
                "the service stopped unexpectedly \(Self.maxInterruptions) times while it judged this book (a crash, an out-of-memory kill or a power cut), so it is not started again; retry it once the cause is known",
                at: 1)
            fail.bind(now.timeIntervalSince1970, at: 2)
            fail.bind(Int64(Self.maxInterruptions), at: 3)
            try fail.run()
            let failed = database.changes()
            let requeue = try database.statement("UPDATE service_job SET state = 'queued', updatedAt = ? WHERE state = 'downloading'")
            requeue.bind(now.timeIntervalSince1970, at: 1)
            try requeue.run()
            return (database.changes(), failed)
        }
    }

    /// How many jobs are in each state.
    func counts() throws(BookCacheError) -> [ServiceJob.State: Int] {
        try read { () throws(SQLiteError) in
            let statement = try database.statement("SELECT state, count(*) FROM service_job GROUP BY state")
            defer { statement.reset() }
            var counts: [ServiceJob.State: Int] = [:]
            while try statement.step() {
                if let state = statement.text(0).flatMap(ServiceJob.State.init(rawValue:)) { counts[state] = Int(statement.int64(1)) }
            }
            return counts
        }
    }

    /// Writes `job` (an ended job made queued again) and `entry` as its manifest line, durably.
    func requeue(_ job: ServiceJob, entry: String) throws(BookCacheError) {
        try write(durable: true) { () throws(SQLiteError) in
            try updateRow(job, entry: entry)
            let reset = try database.statement("UPDATE service_job SET interruptions = 0 WHERE id = ?")
            reset.bind(job.id, at: 1)
            try reset.run()
        }
    }

    /// Removes the jobs that have ended (cached, failed, cancelled).
    /// - Returns: How many were removed.
    func removeEnded() throws(BookCacheError) -> Int {
        try write(durable: true) { () throws(SQLiteError) in
            try database.execute("DELETE FROM service_job WHERE state IN ('cached', 'failed', 'cancelled')")
            return database.changes()
        }
    }

    // MARK: - Sources

    /// Inserts or replaces a scheduled source, durably.
    func put(_ source: ScheduledSource) throws(BookCacheError) {
        try write(durable: true) { () throws(SQLiteError) in
            let statement = try database.statement(
                "INSERT OR REPLACE INTO service_source (\(Self.sourceColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
            statement.bind(source.id, at: 1)
            statement.bind(source.source, at: 2)
            statement.bind(Int64(source.keep), at: 3)
            statement.bind(source.type.rawValue, at: 4)
            statement.bind(source.formats.map(\.rawValue).joined(separator: ","), at: 5)
            statement.bind(source.section, at: 6)
            statement.bind(source.every, at: 7)
            statement.bind(source.nextRunAt.timeIntervalSince1970, at: 8)
            statement.bind(source.lastRunAt?.timeIntervalSince1970, at: 9)
            statement.bind(source.lastResult, at: 10)
            statement.bind(source.lastRunSucceeded.map { Int64($0 ? 1 : 0) }, at: 11)
            try statement.run()
        }
    }

    /// Removes a scheduled source, durably. - Returns: Whether there was one.
    func removeSource(_ id: String) throws(BookCacheError) -> Bool {
        try write(durable: true) { () throws(SQLiteError) in
            let delete = try database.statement("DELETE FROM service_source WHERE id = ?")
            delete.bind(id, at: 1)
            try delete.run()
            return database.changes() > 0
        }
    }

    /// Every scheduled source, soonest first.
    func sources() throws(BookCacheError) -> [ScheduledSource] {
        try read { () throws(SQLiteError) in
            let statement = try database.statement("SELECT \(Self.sourceColumns) FROM service_source ORDER BY nextRunAt, id")
            defer { statement.reset() }
            var sources: [ScheduledSource] = []
            while try statement.step() {
                guard let type = statement.text(3).flatMap(BookType.init(rawValue:)) else { continue }
                sources.append(
                    ScheduledSource(
                        id: statement.text(0) ?? "", source: statement.text(1) ?? "", keep: Int(statement.int64(2)), type: type,
                        formats: (statement.text(4) ?? "").split(separator: ",").compactMap { BookFormat(rawValue: String($0)) },
                        section: statement.text(5), every: statement.double(6),
                        nextRunAt: Date(timeIntervalSince1970: statement.double(7)),
                        lastRunAt: statement.isNull(8) ? nil : Date(timeIntervalSince1970: statement.double(8)),
                        lastResult: statement.text(9), lastRunSucceeded: statement.isNull(10) ? nil : statement.int64(10) != 0))
            }
            return sources
        }
    }

    // MARK: - Rows

    private func bind(_ job: ServiceJob, to statement: SQLiteStatement) {
        statement.bind(job.id, at: 1)
        statement.bind(job.bookId, at: 2)
        statement.bind(job.url, at: 3)
        statement.bind(job.title, at: 4)
        statement.bind(Int64(job.priority.rawValue), at: 5)
        statement.bind(job.state.rawValue, at: 6)
        statement.bind(job.bytes, at: 7)
        statement.bind(job.total, at: 8)
        statement.bind(job.error?.kind, at: 9)
        statement.bind(job.error?.message, at: 10)
        statement.bind(Int64(job.attempts), at: 11)
        statement.bind(job.createdAt.timeIntervalSince1970, at: 12)
        statement.bind(job.updatedAt.timeIntervalSince1970, at: 13)
        statement.bind(job.nextAttemptAt?.timeIntervalSince1970, at: 14)
    }

    private static func job(from row: SQLiteStatement) throws(SQLiteError) -> ServiceJob {
        guard let id = row.text(0), let state = row.text(5).flatMap(ServiceJob.State.init(rawValue:)) else {
            throw SQLiteError(.invalidRow, operation: "read a job", message: "a job row has no id or an unknown state")
        }
        return ServiceJob(
            id: id, bookId: row.text(1) ?? "", url: row.text(2) ?? "", title: row.text(3),
            priority: DownloadPriority(rawValue: Int(row.int64(4))) ?? .normal, state: state, bytes: row.int64(6),
            total: row.isNull(7) ? nil : row.int64(7),
            error: row.text(8).map { ServiceJob.Failure(kind: $0, message: row.text(9) ?? "") }, attempts: Int(row.int64(10)),
            createdAt: Date(timeIntervalSince1970: row.double(11)), updatedAt: Date(timeIntervalSince1970: row.double(12)),
            nextAttemptAt: row.isNull(13) ? nil : Date(timeIntervalSince1970: row.double(13)))
    }

    private func write<T>(durable: Bool = false, _ body: () throws(SQLiteError) -> T) throws(BookCacheError) -> T {
        if durable != synced {
            do {
                try database.execute(durable ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL")
            } catch {
                throw IndexStore.translate(error, layout: layout)
            }
            synced = durable
        }
        do {
            return try database.writing(body)
        } catch {
            switch error {
            case .database(let failure), .body(let failure): throw IndexStore.translate(failure, layout: layout)
            }
        }
    }

    private func read<T>(_ body: () throws(SQLiteError) -> T) throws(BookCacheError) -> T {
        do {
            return try body()
        } catch {
            throw IndexStore.translate(error, layout: layout)
        }
    }
}
