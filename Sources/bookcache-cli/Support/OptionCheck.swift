import ArgumentParser

/// Catches mistyped options and subcommands before they are taken for something else: with
/// URLs as arguments, `download --concurency 2 URL` read '2' as a URL and said "invalid URL '2'".
/// Unknown names get "did you mean"; `-o`/`--output` gets why a cache has no output file.
enum OptionCheck {
    /// A usage error for `arguments` (without the program name), or `nil` when none is found.
    static func problem(in arguments: [String]) -> String? {
        // ArgumentParser's own machinery: completion scripts, the completion protocol, help dumps.
        if arguments.contains(where: { $0 == "--generate-completion-script" || $0.hasPrefix("---") || $0 == "--experimental-dump-help" }) {
            return nil
        }
        var command: any ParsableCommand.Type = BookCacheCommand.self
        var index = 0
        var path = ["bookcache"]
        // Walk down the subcommands named at the front (options of the root may come first).
        while index < arguments.count {
            let token = arguments[index]
            if token.hasPrefix("-") {
                if token == "--cache-dir" { index += 1 }
                index += 1
                continue
            }
            let subcommands = command.configuration.subcommands
            guard !subcommands.isEmpty else { break }
            if let next = subcommands.first(where: { $0.configuration.commandName == token }) {
                command = next
                path.append(token)
                index += 1
                continue
            }
            if token == "help" { return nil }
            let names = subcommands.compactMap { $0.configuration.commandName }
            let hint = closest(token, in: names).map { " Did you mean '\($0)'?" } ?? ""
            return
                "Unknown subcommand '\(token)' of '\(path.joined(separator: " "))'.\(hint) Run '\(path.joined(separator: " ")) --help' for the list."
        }
        let known = optionNames(of: command)
        for token in arguments {
            if token == "--" { break }
            guard token.hasPrefix("-"), token != "-", token.count > 1 else { continue }
            let name = String(token.split(separator: "=", maxSplits: 1)[0])
            if known.contains(name) { continue }
            if name == "-o" || name == "--output" || name == "-O" || name == "--output-dir" {
                return
                    "\(name): bookcache decides where books live — in the cache (--cache-dir DIR picks another). After the download, 'bookcache path ID' prints the file's path; copy it from there if you need it elsewhere."
            }
            // Short flags bundled together (-vq) or an option's value that starts with '-'.
            if !name.hasPrefix("--"), name.dropFirst().allSatisfy({ known.contains("-\($0)") }) { continue }
            let hint = closest(name, in: Array(known.filter { $0.hasPrefix("--") })).map { " Did you mean '\($0)'?" } ?? ""
            return "Unknown option '\(name)' for '\(path.joined(separator: " "))'.\(hint)"
        }
        return nil
    }

    /// Every option and flag name of a command, read from its help (which lists them all).
    static func optionNames(of command: any ParsableCommand.Type) -> Set<String> {
        let help = command.helpMessage(columns: 10_000)
        var names: Set<String> = ["-h", "--help", "--version", "--cache-dir", "--verbose", "-v"]
        var current = ""
        func flush() {
            if current.count > 1 { names.insert(current) }
            current = ""
        }
        var previous: Character = " "
        for character in help {
            if current.isEmpty {
                if character == "-", previous == " " || previous == "[" || previous == "," || previous == "\n" || previous == "|" {
                    current = "-"
                }
            } else if character.isLetter || character.isNumber || character == "-" {
                current.append(character)
            } else {
                flush()
            }
            previous = character
        }
        flush()
        return names.filter { $0 != "--" && !$0.hasSuffix("-") }
    }

    /// The candidate nearest to `word` by edit distance, when it is near enough to be a typo.
    static func closest(_ word: String, in candidates: [String]) -> String? {
        let scored = candidates.map { ($0, distance(word.lowercased(), $0.lowercased())) }.min { $0.1 < $1.1 }
        guard let (best, score) = scored, score <= max(2, best.count / 3) else { return nil }
        return best
    }

    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a)
        let b = Array(b)
        var row = Array(0...b.count)
        for i in 1...max(1, a.count) where !a.isEmpty {
            var previous = row[0]
            row[0] = i
            for j in stride(from: 1, through: b.count, by: 1) {
                let current = row[j]
                row[j] = min(row[j] + 1, row[j - 1] + 1, previous + (a[i - 1] == b[j - 1] ? 0 : 1))
                previous = current
            }
        }
        return a.isEmpty ? b.count : row[b.count]
    }
}
