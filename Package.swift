// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "BookCache",
    defaultLocalization: "en",
    // Linux only: the libraries link the system's libcurl, OpenSSL, libzip, qpdf and SQLite, and
    // nothing has been built or tested on Apple platforms (the README keeps that as a plan).
    products: [
        .library(name: "DownloadQueue", targets: ["DownloadQueue"]),
        .library(name: "BookCache", targets: ["BookCache"]),
        .library(name: "BookCacheHTTP", targets: ["BookCacheHTTP"]),
        .executable(name: "bookcache", targets: ["bookcache-cli"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        // The HTTP server of `bookcache serve` (without its swift-configuration trait).
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1", traits: []),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        // Already Hummingbird's: its HTTP/1 codec, named by the handler that sends book files (sendfile).
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
    ],
    targets: [
        // C calls Swift's Glibc module does not export (sync_file_range, open file description locks),
        // CRC-32 from libdeflate (libdeflate-dev: 5.4 GB/s here against zlib's 2.0), zlib's inflate
        // (zlib comes with libzip-dev) and OpenSSL's SHA-256 (libssl-dev; libcurl already loads libcrypto).
        .target(name: "CBookCacheShims", linkerSettings: [.linkedLibrary("z"), .linkedLibrary("deflate"), .linkedLibrary("crypto")]),
        // libcurl, from Debian's libcurl4-openssl-dev, for the curl transport.
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"]), .brew(["curl"])]
        ),
        // Knows nothing about books: transport seam, streaming to disk with SHA-256, the queue.
        .target(
            name: "DownloadQueue",
            dependencies: [
                "CBookCacheShims",
                "CCurl",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // libzip, from Debian's libzip-dev, for EPUB integrity checks.
        .systemLibrary(
            name: "CLibzip",
            pkgConfig: "libzip",
            providers: [.apt(["libzip-dev"]), .brew(["libzip"])]
        ),
        // qpdf, from Debian's libqpdf-dev (Apache-2.0), to judge PDFs as a parser does.
        .systemLibrary(
            name: "CQPDF",
            pkgConfig: "libqpdf",
            providers: [.apt(["libqpdf-dev"]), .brew(["qpdf"])]
        ),
        // qpdf's C++ API, for what its C API cannot do: decode a stream through a counting bound
        // rather than whole into one buffer (a PDF's decompression bomb).
        .target(name: "CBookCachePDF", linkerSettings: [.linkedLibrary("qpdf")]),
        // SQLite, from Debian's libsqlite3-dev, for the index (see Benchmarks/sqlite.sh for why the C API).
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]
        ),
        .target(
            name: "BookCache",
            dependencies: [
                "DownloadQueue",
                "CLibzip",
                "CQPDF",
                "CBookCachePDF",
                "CSQLite",
                "CBookCacheShims",
                .product(name: "Logging", package: "swift-log"),
            ],
            // Error messages, refusal kinds and statuses in English, German and Chinese.
            resources: [.process("Resources")]
        ),
        // The HTTP API and web page of `bookcache serve`, over the library's DownloadService.
        .target(
            name: "BookCacheHTTP",
            dependencies: [
                "BookCache",
                "DownloadQueue",
                // OpenSSL's PBKDF2 and random bytes for the OPDS reader password.
                "CBookCacheShims",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ],
            // The web page's text in English, German and Chinese.
            resources: [.process("Resources")]
        ),
        .executableTarget(
            name: "bookcache-cli",
            dependencies: [
                "BookCache",
                "DownloadQueue",
                "BookCacheHTTP",
                "CBookCacheShims",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            // The command line's text in English, German and Simplified Chinese (see Localized).
            resources: [.process("Resources")]
        ),
        // The bookshelf example of the README and DocC, on the library alone; built with everything
        // else, so the documented API cannot stop compiling unnoticed.
        .executableTarget(
            name: "bookshelf-example",
            dependencies: ["BookCache", "DownloadQueue"],
            path: "Examples/Bookshelf"
        ),
        // A loopback HTTP server with fault injection, shared by the tests and the demo.
        .target(
            name: "BookCacheTestSupport",
            dependencies: [
                "DownloadQueue",
                "CBookCacheShims",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        .executableTarget(
            name: "bookcache-fixture-server",
            dependencies: ["BookCacheTestSupport"]
        ),
        .testTarget(
            name: "DownloadQueueTests",
            dependencies: [
                "DownloadQueue", "BookCacheTestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "BookCacheTests",
            dependencies: ["BookCache", "DownloadQueue", "BookCacheTestSupport", .product(name: "Logging", package: "swift-log")]
        ),
        .testTarget(
            name: "BookCacheHTTPTests",
            dependencies: [
                "BookCacheHTTP", "BookCache", "BookCacheTestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ]
        ),
        .testTarget(
            name: "BookCacheCLITests",
            dependencies: ["BookCache", "BookCacheTestSupport"]
        ),
    ],
    swiftLanguageModes: [.v6],
    cxxLanguageStandard: .cxx17
)

for target in package.targets where target.type != .system {
    var settings = target.swiftSettings ?? []
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    settings.append(.enableUpcomingFeature("MemberImportVisibility"))
    target.swiftSettings = settings
}
