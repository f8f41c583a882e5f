import CBookCacheShims
import CLibzip
import DownloadQueue
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Checks an EPUB with libzip the way a reader opens it: the archive's consistency, every
/// entry's CRC, container.xml, the package document and its spine.
///
/// Refused (a reader could not open the book, or opening it is unsafe):
/// - The archive is opened with `ZIP_CHECKCONS` and every entry is read through, so a flipped
///   byte anywhere fails its CRC.
/// - `META-INF/container.xml` is well-formed and names a rootfile present in the archive; the
///   first rootfile (the package document) is well-formed XML whose spine names manifest items,
///   each of them present in the archive.
/// - No entry name is absolute, has a `..` segment or a backslash; no entry is encrypted; no
///   name appears twice, comparing the bytes as stored (names that differ only in Unicode
///   normalisation are different names, as in every ZIP reader).
///
/// Warned (``ValidationReport/warnings``, refused only when strict): the OCF packaging rules for
/// `mimetype` — the first entry, stored, no extra field, exactly `application/epub+zip`. They
/// exist for file-type sniffing; no reader needs them, and `zip` without `-X`, Finder and
/// `echo` break them every day. Also entry names not stored as UTF-8: they are read as the ZIP
/// standard says (CP437), as readers read them.
/// - Decompression is bounded by ``ValidationLimits``: a small file declaring gigabytes, or an
///   entry compressed beyond the allowed ratio, is refused before it is inflated.
struct EPUBValidator {
    static let mimetype = "application/epub+zip"
    static let containerPath = "META-INF/container.xml"

    let limits: ValidationLimits

    /// - Parameters:
    ///   - path: The file.
    ///   - arrived: What an ``ArrivingZIP`` saw of the file's bytes as they arrived: the entries it
    ///     vouches for are not read through again.
    /// - Returns: The packaging rules the book breaks, as warnings: the `mimetype` rules, and
    ///   names not stored as UTF-8.
    func validate(
        path: String, arrived: ZIPStreamReader.Verdict? = nil
    ) throws(ValidationFailure) -> (warnings: [String], metadata: PackageDocumentParser.Metadata) {
        var openError: Int32 = 0
        guard let archive = zip_open(path, ZIP_CHECKCONS | ZIP_RDONLY, &openError) else {
            if openError == ZIP_ER_EXISTS {
                throw ValidationFailure("an entry name appears twice, byte for byte, in the archive", kind: .unsafeEntryName)
            }
            throw ValidationFailure("the ZIP archive is damaged or truncated (\(Self.describe(code: openError)))")
        }
        defer { zip_discard(archive) }

        let count = zip_get_num_entries(archive, 0)
        guard count > 0 else { throw ValidationFailure("the ZIP archive has no entries", kind: .notABook) }
        guard count <= limits.maxEntries else {
            throw ValidationFailure("the archive has \(count) entries, more than the limit of \(limits.maxEntries)", kind: .tooLarge)
        }

        let entries = try describeEntries(archive, count: count)
        var warnings = try mimetypeWarnings(archive, entries: entries)
        if let legacy = entries.first(where: { Array($0.name.utf8) != $0.rawName }) {
            warnings.append(
                "the entry name '\(legacy.name.debugEscaped)' is not stored as UTF-8 (read as the ZIP standard's CP437); EPUB packaging asks for UTF-8 names"
            )
        }
        // Entries are looked up by name as the ZIP standard reads it (UTF-8 when flagged or valid,
        // else CP437, as libzip converts it), compared byte for byte: no Unicode normalisation.
        var indexByName: [[UInt8]: UInt64] = [:]
        for (position, entry) in entries.enumerated() { indexByName[Array(entry.name.utf8)] = UInt64(position) }
        guard let containerIndex = indexByName[Array(Self.containerPath.utf8)] else {
            throw ValidationFailure("\(Self.containerPath) is missing", kind: .missingPackageDocument)
        }
        let container = entries[Int(containerIndex)]
        guard container.size <= Int64(limits.maxContainerXMLBytes) else {
            throw ValidationFailure(
                "\(Self.containerPath) is \(container.size) bytes, more than the limit of \(limits.maxContainerXMLBytes)", kind: .tooLarge)
        }
        let containerXML = try readThrough(archive, containerIndex, name: container.name, keep: true)
        let rootfiles = try ContainerXMLParser(maxDepth: limits.maxContainerXMLDepth).rootfiles(in: containerXML)
        guard let packagePath = rootfiles.first else {
            throw ValidationFailure("\(Self.containerPath) names no rootfile", kind: .missingPackageDocument)
        }
        for rootfile in rootfiles where indexByName[Array(rootfile.utf8)] == nil {
            throw ValidationFailure(
                "\(Self.containerPath) names the rootfile '\(rootfile)', which is not in the archive", kind: .missingPackageDocument)
        }
        // The package document: read (its CRC checked) and parsed; its spine must be there.
        let packageIndex = indexByName[Array(packagePath.utf8)]!
        let packageEntry = entries[Int(packageIndex)]
        guard packageEntry.size <= Int64(limits.maxPackageDocumentBytes) else {
            throw ValidationFailure(
                "the package document '\(packagePath)' is \(packageEntry.size) bytes, more than the limit of \(limits.maxPackageDocumentBytes)",
                kind: .tooLarge)
        }
        let packageXML = try readThrough(archive, packageIndex, name: packageEntry.name, keep: true)
        let (spine, metadata) = try PackageDocumentParser(path: packagePath, maxDepth: limits.maxContainerXMLDepth).read(packageXML)
        warnings += try spineWarnings(spine, of: packagePath, entries: entries, indexByName: indexByName)

        // Every other entry is read through, but those whose data was checked as it arrived.
        let seen = arrived.flatMap { $0.entries.count == entries.count ? $0.entries : nil }
        var work: [(index: UInt64, entry: Entry)] = []
        for (position, entry) in entries.enumerated() {
            let index = UInt64(position)
            if index == containerIndex || index == packageIndex || seen.map({ entry.vouched(by: $0[position]) }) == true { continue }
            work.append((index, entry))
        }
        try readThrough(work, archive: archive, path: path)
        return (warnings, metadata)
    }

    /// Every entry described once (libzip converts its DOS time with mktime every time), each
    /// checked as it is met: a safe name, stored once byte for byte (what a reader looks entries
    /// up by), not encrypted, and within the limits on declared size and compression ratio.
    private func describeEntries(_ archive: OpaquePointer, count: Int64) throws(ValidationFailure) -> [Entry] {
        var names = Set<[UInt8]>()
        var totalDeclared: Int64 = 0
        var entries: [Entry] = []
        entries.reserveCapacity(Int(count))
        for index in 0..<UInt64(count) {
            let entry = try stat(archive, index)
            entries.append(entry)
            try checkName(entry.name)
            guard names.insert(entry.rawName).inserted else {
                throw ValidationFailure("the entry name '\(entry.name.debugEscaped)' appears twice, byte for byte", kind: .unsafeEntryName)
            }
            if entry.encrypted {
                throw ValidationFailure(
                    "the entry '\(entry.name)' is encrypted (DRM-protected books cannot be validated)", kind: .encrypted)
            }
            totalDeclared += entry.size
            if totalDeclared > limits.maxTotalUncompressedBytes {
                throw ValidationFailure(
                    "the entries declare more than \(limits.maxTotalUncompressedBytes) uncompressed bytes (a zip bomb?)", kind: .tooLarge)
            }
            if entry.size > limits.ratioCheckThreshold && entry.size / max(entry.compressedSize, 1) > limits.maxCompressionRatio {
                throw ValidationFailure(
                    "the entry '\(entry.name)' expands \(entry.size / max(entry.compressedSize, 1))× (limit \(limits.maxCompressionRatio)×): a zip bomb?",
                    kind: .tooLarge)
            }
        }
        return entries
    }

    /// Warnings for the spine's items stored only in another Unicode normalisation (EPUB asks
    /// names to be unique after it): a reader that compares bytes will not find them.
    /// - Throws: ``ValidationFailure`` for an item that is not in the archive at all.
    private func spineWarnings(
        _ spine: [String], of packagePath: String, entries: [Entry], indexByName: [[UInt8]: UInt64]
    ) throws(ValidationFailure) -> [String] {
        var warnings: [String] = []
        var normalized: [[UInt8]: String]?
        for item in spine where indexByName[Array(item.utf8)] == nil {
            if normalized == nil {
                normalized = Dictionary(
                    entries.map { (Array($0.name.precomposedStringWithCanonicalMapping.utf8), $0.name) },
                    uniquingKeysWith: { first, _ in first })
            }
            guard let stored = normalized?[Array(item.precomposedStringWithCanonicalMapping.utf8)] else {
                throw ValidationFailure(
                    "the spine of '\(packagePath)' names '\(item)', which is not in the archive", kind: .invalidPackageDocument)
            }
            warnings.append(
                "the spine names '\(item.debugEscaped)', stored as '\(stored.debugEscaped)' in another Unicode normalisation; readers that compare names byte for byte will not find it"
            )
        }
        return warnings
    }

    /// Compressed bytes worth spreading over several cores when entries are read through.
    static let parallelReadMinimumBytes: Int64 = 8 << 20

    /// A stored entry at least this large is read in pieces on several cores, each piece's CRC
    /// taken on its own and the pieces' joined (zlib's `crc32_combine`): one large stored entry — a
    /// video, a scanned book in one file — would otherwise keep a single core busy.
    static let splitStoredBytes: Int64 = 64 << 20

    /// A part of the read-through: a whole entry, which libzip reads and checks; or a piece of a
    /// large stored one, whose CRC is taken here.
    private struct Part {
        let index: UInt64
        let entry: Entry
        /// The piece's bytes within the entry; `nil` for the whole entry.
        let piece: Range<Int64>?
        var bytes: Int64 { piece.map { $0.upperBound - $0.lowerBound } ?? entry.compressedSize }
    }

    /// Reads `entries` through so their CRCs are checked. When they are large, they are spread
    /// over the cores (inflating is the slow part), each lane with its own handle on the archive;
    /// a large stored entry is cut into pieces for several lanes. The damage reported is the
    /// first in archive order, as a single pass would find.
    private func readThrough(_ entries: [(index: UInt64, entry: Entry)], archive: OpaquePointer, path: String) throws(ValidationFailure) {
        let cores = min(Lanes.available, 4)
        let parts = entries.flatMap { index, entry -> [Part] in
            guard Self.splits(entry) else { return [Part(index: index, entry: entry, piece: nil)] }
            let (size, pieces) = (entry.size, Int64(cores))
            return (0..<pieces).map { Part(index: index, entry: entry, piece: (size * $0 / pieces)..<(size * ($0 + 1) / pieces)) }
        }
        let lanes = min(cores, parts.count)
        let total = entries.reduce(Int64(0)) { $0 + $1.entry.compressedSize }
        // `archive` serves the single-lane case; lanes open their own.
        guard lanes > 1, total >= Self.parallelReadMinimumBytes else {
            for (index, entry) in entries { _ = try readThrough(archive, index, name: entry.name, keep: false) }
            return
        }
        // Largest first, each to the lane with the fewest bytes so far; each lane then goes in archive order.
        var assigned = Array(repeating: [Int](), count: lanes)
        var load = Array(repeating: Int64(0), count: lanes)
        for position in parts.indices.sorted(by: { parts[$0].bytes > parts[$1].bytes }) {
            let lane = load.indices.min { load[$0] < load[$1] }!
            assigned[lane].append(position)
            load[lane] += parts[position].bytes
        }
        let plan = assigned.map { $0.sorted() }
        let validator = self
        // Each lane answers with the first damage it found, if any, and the CRCs of its pieces.
        let results = Lanes.map(lanes) { lane -> (failure: (index: UInt64, failure: ValidationFailure)?, crcs: [Int: UInt32]) in
            // libzip handles are not shared between threads: each lane opens its own.
            var openError: Int32 = 0
            guard let handle = zip_open(path, ZIP_RDONLY, &openError) else {
                return ((0, ValidationFailure("the archive cannot be opened again (\(Self.describe(code: openError)))")), [:])
            }
            defer { zip_discard(handle) }
            var crcs: [Int: UInt32] = [:]
            for position in plan[lane] {
                let part = parts[position]
                do throws(ValidationFailure) {
                    if let piece = part.piece {
                        var crc: UInt32 = 0
                        try validator.read(handle, part.index, name: part.entry.name, piece: piece) {
                            crc = bookcache_crc32(crc, $0.baseAddress, UInt64($0.count))
                        }
                        crcs[position] = crc
                    } else {
                        _ = try validator.readThrough(handle, part.index, name: part.entry.name, keep: false)
                    }
                } catch {
                    return ((part.index, error), crcs)
                }
            }
            return (nil, crcs)
        }
        var failures = results.compactMap(\.failure)
        // A split entry's pieces' CRCs joined in order, against the CRC the archive gives. (A piece
        // without one sat behind damage its lane found first, which is reported instead.)
        let crcs = results.reduce(into: [Int: UInt32]()) { $0.merge($1.crcs) { first, _ in first } }
        let pieces = Dictionary(grouping: parts.indices.filter { parts[$0].piece != nil }) { parts[$0].index }
        for positions in pieces.values where positions.allSatisfy({ crcs[$0] != nil }) {
            let (index, entry) = (parts[positions[0]].index, parts[positions[0]].entry)
            let combined = positions.reduce(UInt32(0)) { bookcache_crc32_combine($0, crcs[$1]!, parts[$1].bytes) }
            if combined != entry.crc32 {
                failures.append((index, ValidationFailure("the entry '\(entry.name)' is damaged (CRC error)", kind: .damagedEntry)))
            }
        }
        if let first = failures.min(by: { $0.index < $1.index }) {
            throw first.failure
        }
    }

    /// Whether an entry is read in pieces: stored, not encrypted, with a CRC to check, and large.
    private static func splits(_ entry: Entry) -> Bool {
        entry.method == ZIP_CM_STORE && !entry.encrypted && entry.crc32 != nil && entry.size == entry.compressedSize
            && entry.size >= splitStoredBytes
    }

    private struct Entry {
        /// The name for messages (libzip's UTF-8 rendering).
        let name: String
        /// The name's bytes as stored in the archive.
        let rawName: [UInt8]
        let size: Int64
        let compressedSize: Int64
        let method: Int32
        let encrypted: Bool
        let crc32: UInt32?

        /// Whether the entry the reader of the arriving bytes saw at the same index is this one,
        /// and its data was whole and right. (An encrypted entry never gets here: the archive is
        /// refused when its entries are described.)
        func vouched(by seen: ZIPStreamReader.Entry) -> Bool {
            let header = seen.header
            return seen.vouched && header.rawName == rawName && Int32(header.method) == method && header.crc32 == crc32
                && header.compressedSize == compressedSize && header.size == size
        }
    }

    private func stat(_ archive: OpaquePointer, _ index: UInt64) throws(ValidationFailure) -> Entry {
        var info = zip_stat_t()
        zip_stat_init(&info)
        guard zip_stat_index(archive, index, 0, &info) == 0, let cName = info.name,
            let raw = zip_get_name(archive, index, zip_flags_t(ZIP_FL_ENC_RAW))
        else {
            throw ValidationFailure("cannot read entry \(index) (\(Self.describe(archive)))", kind: .damagedEntry)
        }
        return Entry(
            name: String(cString: cName),
            rawName: Array(UnsafeBufferPointer(start: UnsafeRawPointer(raw).assumingMemoryBound(to: UInt8.self), count: strlen(raw))),
            size: Int64(clamping: info.size),
            compressedSize: Int64(clamping: info.comp_size),
            method: Int32(info.comp_method),
            encrypted: info.encryption_method != UInt16(ZIP_EM_NONE),
            crc32: info.valid & UInt64(ZIP_STAT_CRC) != 0 ? info.crc : nil
        )
    }

    private func checkName(_ name: String) throws(ValidationFailure) {
        if name.isEmpty { throw ValidationFailure("an entry has an empty name", kind: .unsafeEntryName) }
        if name.contains("\\") { throw ValidationFailure("the entry name '\(name)' contains a backslash", kind: .unsafeEntryName) }
        if name.hasPrefix("/") { throw ValidationFailure("the entry name '\(name)' is an absolute path", kind: .unsafeEntryName) }
        let scalars = Array(name.unicodeScalars)
        if scalars.count >= 2, scalars[1] == ":", scalars[0].properties.isAlphabetic {
            throw ValidationFailure("the entry name '\(name)' is an absolute path", kind: .unsafeEntryName)
        }
        if name.split(separator: "/", omittingEmptySubsequences: false).contains("..") {
            throw ValidationFailure("the entry name '\(name)' escapes the archive with '..'", kind: .unsafeEntryName)
        }
        if name.unicodeScalars.contains(where: { $0.value < 0x20 }) {
            throw ValidationFailure("the entry name '\(name.debugEscaped)' contains control characters", kind: .unsafeEntryName)
        }
    }

    /// The OCF packaging rules for `mimetype` that the archive breaks, as warnings. The entry is
    /// read (so its CRC is checked) when it is there.
    private func mimetypeWarnings(_ archive: OpaquePointer, entries: [Entry]) throws(ValidationFailure) -> [String] {
        guard let position = entries.firstIndex(where: { $0.rawName == Array("mimetype".utf8) }) else {
            return ["there is no mimetype entry (an EPUB packaging rule; readers do not need it)"]
        }
        var warnings: [String] = []
        let entry = entries[position]
        if position != 0 {
            warnings.append(
                "the first entry is '\(entries[0].name.debugEscaped)', not 'mimetype' (an EPUB packaging rule; readers do not need it)")
        }
        if entry.method != ZIP_CM_STORE {
            warnings.append("the mimetype entry is compressed; EPUB packaging asks for it stored (readers do not need it)")
        }
        let index = UInt64(position)
        if zip_file_extra_fields_count(archive, index, zip_flags_t(ZIP_FL_LOCAL)) > 0
            || zip_file_extra_fields_count(archive, index, zip_flags_t(ZIP_FL_CENTRAL)) > 0
        {
            warnings.append(
                "the mimetype entry has an extra field, which EPUB packaging forbids (zip without -X adds one; readers do not mind)")
        }
        guard entry.size <= 1024 else {
            warnings.append("the mimetype entry is \(entry.size) bytes, not '\(Self.mimetype)'")
            return warnings
        }
        let bytes = try readThrough(archive, index, name: "mimetype", keep: true)
        if bytes != Array(Self.mimetype.utf8) {
            let text = String(decoding: bytes, as: UTF8.self)
            if text.trimmingCharacters(in: .whitespacesAndNewlines) == Self.mimetype {
                warnings.append(
                    "the mimetype entry is '\(text.debugEscaped)': '\(Self.mimetype)' with white space around it (an EPUB packaging rule; readers do not need it)"
                )
            } else {
                warnings.append("the mimetype entry says '\(text.debugEscaped)', not '\(Self.mimetype)' (readers go by container.xml)")
            }
        }
        return warnings
    }

    /// Reads an entry to its end so libzip checks its CRC; keeps the bytes only when asked.
    private func readThrough(_ archive: OpaquePointer, _ index: UInt64, name: String, keep: Bool) throws(ValidationFailure) -> [UInt8] {
        var kept: [UInt8] = []
        try read(archive, index, name: name) { if keep { kept.append(contentsOf: $0) } }
        return kept
    }

    /// Reads entry `index`, handing `body` each chunk: whole, libzip checking its CRC when it is
    /// closed; or only the bytes `piece` of a stored entry, where libzip checks no CRC (it cannot
    /// after a seek) and the caller takes it.
    private func read(
        _ archive: OpaquePointer, _ index: UInt64, name: String, piece: Range<Int64>? = nil, _ body: (UnsafeRawBufferPointer) -> Void
    ) throws(ValidationFailure) {
        guard let file = zip_fopen_index(archive, index, 0) else {
            throw ValidationFailure("cannot open the entry '\(name)' (\(Self.describe(archive)))", kind: .damagedEntry)
        }
        func damaged(_ message: String) -> ValidationFailure {
            zip_fclose(file)
            return ValidationFailure("the entry '\(name)' is damaged (\(message))", kind: .damagedEntry)
        }
        if let piece, zip_fseek(file, piece.lowerBound, SEEK_SET) != 0 {
            throw damaged(String(cString: zip_error_strerror(zip_file_get_error(file))))
        }
        let chunk = 64 * 1024
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buffer.deallocate() }
        var remaining = piece.map { $0.upperBound - $0.lowerBound } ?? .max
        while remaining > 0 {
            let n = zip_fread(file, buffer, zip_uint64_t(min(Int64(chunk), remaining)))
            if n < 0 { throw damaged(String(cString: zip_error_strerror(zip_file_get_error(file)))) }
            if n == 0 {
                if piece != nil { throw damaged("it ends early") }
                break
            }
            body(UnsafeRawBufferPointer(start: buffer, count: Int(n)))
            remaining -= Int64(n)
        }
        let closeResult = zip_fclose(file)
        if piece == nil, closeResult != 0 {
            throw ValidationFailure("the entry '\(name)' is damaged (\(Self.describe(code: closeResult)))", kind: .damagedEntry)
        }
    }

    private static func describe(_ archive: OpaquePointer) -> String {
        String(cString: zip_error_strerror(zip_get_error(archive)))
    }

    private static func describe(code: Int32) -> String {
        var error = zip_error_t()
        zip_error_init_with_code(&error, code)
        defer { zip_error_fini(&error) }
        return String(cString: zip_error_strerror(&error))
    }
}
