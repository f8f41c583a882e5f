// swift-tools-version:6.1
// GRDB against SQLite's C API for the index of issue 15: the same schema and the same operations,
// built as two executables. Run by Benchmarks/sqlite.sh; not part of the main package, so GRDB
// costs no build minutes there.
import PackageDescription

let package = Package(
    name: "IndexBench",
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift.git", exact: "7.10.0")
    ],
    targets: [
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .target(name: "IndexShared"),
        .executableTarget(name: "IndexC", dependencies: ["CSQLite", "IndexShared"]),
        .executableTarget(name: "IndexGRDB", dependencies: [.product(name: "GRDB", package: "GRDB.swift"), "IndexShared"]),
    ]
)
