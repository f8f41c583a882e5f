import ArgumentParser
import BookCache

struct ConfigCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config",
        abstract: Localized.text("Show or change the settings kept with the cache."),
        discussion: """
            Settings: max-size (the size budget, such as 2GiB or 1.5GB; least-recently-used books \
            are evicted to stay under it), keep (the most books kept), reserve (free space to \
            leave on the disk, default 100MB), proxy (as curl's --proxy; "" for none, whatever \
            $http_proxy says), noproxy (hosts reached directly), limit-rate (bytes per second per \
            download, such as 2MB), netrc (a netrc file for logins), cacert (a PEM file of \
            certificate authorities), validation-workers (books judged at once, each in a worker \
            process of its own; 1-16, default 2), validation-memory (the address space a worker \
            may use for a book before three times its size; at least 256MiB, default 1GiB), \
            validation-cpu (the CPU seconds a book may take before one a MiB; default 20). A book \
            that crashes or exhausts its worker is refused, exit 70. Options of the same names on \
            the command line come first. A proxy's password is shown as ***.
            """,
        subcommands: [Set.self, Get.self, List.self, Unset.self],
        defaultSubcommand: List.self
    )

    struct Set: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set",
            abstract: Localized.text(
                "Set a setting: max-size, keep, reserve, strict, concurrency, retries, validation-workers, validation-memory, validation-cpu, proxy, noproxy, limit-rate, netrc or cacert."
            ))
        @OptionGroup var global: GlobalOptions
        @Argument(help: "A setting's name, such as max-size or validation-memory.") var key: String
        @Argument(help: "The value, such as 2GiB or 50.") var value: String

        func validate() throws {
            var scratch = CacheSettings()
            do { try scratch.set(key, to: value) } catch { throw ValidationError(error.message) }
        }

        func run() async throws {
            let manager = try global.makeManager()
            do {
                let saved = try await manager.updateSettings { settings throws(BookCacheError) in try settings.set(key, to: value) }
                Terminal.write("\(key) = \(try saved.value(of: key) ?? "(unset)")")
            } catch {
                throw fail(error)
            }
        }
    }

    struct Get: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "get", abstract: Localized.text("Print a setting; exit 1 when it is not set."))
        @OptionGroup var global: GlobalOptions
        @Argument(help: "A setting's name, such as max-size or validation-memory.") var key: String

        func validate() throws {
            try validateKey(key)
        }

        func run() async throws {
            let manager = try global.makeManager()
            do {
                guard let value = try await manager.settings().value(of: key) else {
                    Terminal.writeError("\(key) is not set")
                    throw ExitCode.failure
                }
                Terminal.write(value)
            } catch let error as BookCacheError {
                throw fail(error)
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: Localized.text("Print every setting."))
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let manager = try global.makeManager()
            do {
                let settings = try await manager.settings()
                for key in CacheSettings.keys {
                    Terminal.write("\(key) = \(try settings.value(of: key) ?? "(unset)")")
                }
            } catch {
                throw fail(error)
            }
        }
    }

    struct Unset: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "unset", abstract: Localized.text("Remove a setting, back to its default."))
        @OptionGroup var global: GlobalOptions
        @Argument(help: "A setting's name, such as max-size or validation-memory.") var key: String

        func validate() throws {
            try validateKey(key)
        }

        func run() async throws {
            let manager = try global.makeManager()
            do {
                try await manager.updateSettings { settings throws(BookCacheError) in try settings.unset(key) }
                Terminal.write("\(key) unset")
            } catch {
                throw fail(error)
            }
        }
    }
}

/// Refuses a setting name that does not exist, before any I/O.
private func validateKey(_ key: String) throws {
    guard CacheSettings.keys.contains(key) else {
        throw ValidationError("unknown setting '\(key)'; the settings are \(CacheSettings.keys.joined(separator: ", "))")
    }
}
