import CLibzip
import Foundation

/// Checks an EPUB with libzip: the archive's consistency, every entry's CRC, and the EPUB
/// container rules.
///
/// - The archive is opened with `ZIP_CHECKCONS` and every entry is read through, so a flipped
///   byte anywhere fails its CRC.
/// - `mimetype` is the first entry, stored (not compressed), without an extra field, and holds
///   exactly `application/epub+zip`.
/// - `META-INF/container.xml` is well-formed and names a rootfile present in the archive.
/// - No entry name is absolute, has a `..` segment or a backslash; no entry is encrypted; no
///   name appears twice.
/// - Decompression is bounded by ``ValidationLimits``: a small file declaring gigabytes, or an
///   entry compressed beyond the allowed ratio, is refused before it is inflated.
struct EPUBValidator {
    static let mimetype = "application/epub+zip"
    static let containerPath = "META-INF/container.xml"

    let limits: ValidationLimits

    func validate(path: String) throws(ValidationFailure) {
        var openError: Int32 = 0
        guard let archive = zip_open(path, ZIP_CHECKCONS | ZIP_RDONLY, &openError) else {
            if openError == ZIP_ER_EXISTS {
                throw ValidationFailure("an entry name appears twice in the archive")
            }
            throw ValidationFailure("the ZIP archive is damaged or truncated (\(Self.describe(code: openError)))")
        }
        defer { zip_discard(archive) }

        let count = zip_get_num_entries(archive, 0)
        guard count > 0 else { throw ValidationFailure("the ZIP archive has no entries") }
        guard count <= limits.maxEntries else {
            throw ValidationFailure("the archive has \(count) entries, more than the limit of \(limits.maxEntries)")
        }

        var names = Set<String>()
        var totalDeclared: Int64 = 0
        for index in 0..<UInt64(count) {
            let entry = try stat(archive, index)
            try checkName(entry.name)
            guard names.insert(entry.name).inserted else {
                throw ValidationFailure("the entry name '\(entry.name)' appears twice")
            }
            if entry.encrypted { throw ValidationFailure("the entry '\(entry.name)' is encrypted (DRM-protected books cannot be validated)") }
            totalDeclared += entry.size
            if totalDeclared > limits.maxTotalUncompressedBytes {
                throw ValidationFailure("the entries declare more than \(limits.maxTotalUncompressedBytes) uncompressed bytes (a zip bomb?)")
            }
            if entry.size > limits.ratioCheckThreshold && entry.size / max(entry.compressedSize, 1) > limits.maxCompressionRatio {
                throw ValidationFailure(
                    "the entry '\(entry.name)' expands \(entry.size / max(entry.compressedSize, 1))× (limit \(limits.maxCompressionRatio)×): a zip bomb?")
            }
        }

        try checkMimetype(archive)
        var containerXML: [UInt8] = []
        var found = false
        for index in 0..<UInt64(count) {
            let entry = try stat(archive, index)
            let keep = entry.name == Self.containerPath
            if keep {
                found = true
                guard entry.size <= Int64(limits.maxContainerXMLBytes) else {
                    throw ValidationFailure("\(Self.containerPath) is \(entry.size) bytes, more than the limit of \(limits.maxContainerXMLBytes)")
                }
            }
            let bytes = try readThrough(archive, index, name: entry.name, keep: keep)
            if keep { containerXML = bytes }
        }
        guard found else { throw ValidationFailure("\(Self.containerPath) is missing") }
        let rootfiles = try ContainerXMLParser(maxDepth: limits.maxContainerXMLDepth).rootfiles(in: containerXML)
        guard let first = rootfiles.first else {
            throw ValidationFailure("\(Self.containerPath) names no rootfile")
        }
        for rootfile in rootfiles where !names.contains(rootfile) {
            throw ValidationFailure("\(Self.containerPath) names the rootfile '\(rootfile)', which is not in the archive")
        }
        _ = first
    }

    private struct Entry {
        let name: String
        let size: Int64
        let compressedSize: Int64
        let method: Int32
        let encrypted: Bool
    }

    private func stat(_ archive: OpaquePointer, _ index: UInt64) throws(ValidationFailure) -> Entry {
        var info = zip_stat_t()
        zip_stat_init(&info)
        guard zip_stat_index(archive, index, 0, &info) == 0, let cName = info.name else {
            throw ValidationFailure("cannot read entry \(index) (\(Self.describe(archive)))")
        }
        return Entry(
            name: String(cString: cName),
            size: Int64(clamping: info.size),
            compressedSize: Int64(clamping: info.comp_size),
            method: Int32(info.comp_method),
            encrypted: info.encryption_method != UInt16(ZIP_EM_NONE)
        )
    }

    private func checkName(_ name: String) throws(ValidationFailure) {
        if name.isEmpty { throw ValidationFailure("an entry has an empty name") }
        if name.contains("\\") { throw ValidationFailure("the entry name '\(name)' contains a backslash") }
        if name.hasPrefix("/") { throw ValidationFailure("the entry name '\(name)' is an absolute path") }
        let scalars = Array(name.unicodeScalars)
        if scalars.count >= 2, scalars[1] == ":", scalars[0].properties.isAlphabetic {
            throw ValidationFailure("the entry name '\(name)' is an absolute path")
        }
        if name.split(separator: "/", omittingEmptySubsequences: false).contains("..") {
            throw ValidationFailure("the entry name '\(name)' escapes the archive with '..'")
        }
        if name.unicodeScalars.contains(where: { $0.value < 0x20 }) {
            throw ValidationFailure("the entry name '\(name.debugEscaped)' contains control characters")
        }
    }

    private func checkMimetype(_ archive: OpaquePointer) throws(ValidationFailure) {
        let first = try stat(archive, 0)
        guard first.name == "mimetype" else {
            throw ValidationFailure("the first entry is '\(first.name)', not 'mimetype'")
        }
        guard first.method == ZIP_CM_STORE else {
            throw ValidationFailure("the mimetype entry is compressed; EPUB requires it stored")
        }
        if zip_file_extra_fields_count(archive, 0, ZIP_FL_LOCAL) > 0 || zip_file_extra_fields_count(archive, 0, ZIP_FL_CENTRAL) > 0 {
            throw ValidationFailure("the mimetype entry has an extra field; EPUB forbids one")
        }
        guard first.size == Int64(Self.mimetype.utf8.count) else {
            throw ValidationFailure("the mimetype entry is not '\(Self.mimetype)'")
        }
        let bytes = try readThrough(archive, 0, name: "mimetype", keep: true)
        guard bytes == Array(Self.mimetype.utf8) else {
            throw ValidationFailure("the mimetype is '\(String(decoding: bytes, as: UTF8.self).debugEscaped)', not '\(Self.mimetype)'")
        }
    }

    /// Reads an entry to its end so libzip checks its CRC; keeps the bytes only when asked.
    private func readThrough(_ archive: OpaquePointer, _ index: UInt64, name: String, keep: Bool) throws(ValidationFailure) -> [UInt8] {
        guard let file = zip_fopen_index(archive, index, 0) else {
            throw ValidationFailure("cannot open the entry '\(name)' (\(Self.describe(archive)))")
        }
        var kept: [UInt8] = []
        let chunk = 64 * 1024
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let n = zip_fread(file, buffer, zip_uint64_t(chunk))
            if n < 0 {
                let message = String(cString: zip_error_strerror(zip_file_get_error(file)))
                zip_fclose(file)
                throw ValidationFailure("the entry '\(name)' is damaged (\(message))")
            }
            if n == 0 { break }
            if keep {
                kept.append(contentsOf: UnsafeRawBufferPointer(start: buffer, count: Int(n)))
            }
        }
        let closeResult = zip_fclose(file)
        if closeResult != 0 {
            throw ValidationFailure("the entry '\(name)' is damaged (\(Self.describe(code: closeResult)))")
        }
        return kept
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
