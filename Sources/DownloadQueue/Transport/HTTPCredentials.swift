import Crypto
import Foundation

/// A user name and password for one host, answered to the server's challenge with Basic or
/// Digest authentication, whichever it asks for.
///
/// They are sent only after a `401` from the host they are for (never preemptively, so a
/// password never crosses plain HTTP to a server that did not ask), and never to another host:
/// a redirect to another origin drops them. Their description never shows the password.
public struct HTTPCredentials: Sendable, Hashable, CustomStringConvertible {
    /// The user name.
    public var user: String
    /// The password.
    public var password: String
    /// The origin they are for, `scheme://host:port`, lowercased.
    public var origin: String

    /// Creates credentials for the host of `url`.
    /// - Parameters:
    ///   - user: The user name.
    ///   - password: The password.
    ///   - url: Any URL on the host they are for.
    public init(user: String, password: String, for url: URL) {
        self.user = user
        self.password = password
        self.origin = Self.origin(of: url)
    }

    /// The credentials a URL carries as `user:password@`, percent-decoded, or `nil`.
    public init?(userInfoOf url: URL) {
        guard let components = URLComponents(url: url, resolvingAgainstBaseURL: false), let user = components.user, !user.isEmpty else {
            return nil
        }
        self.init(user: user, password: components.password ?? "", for: url)
    }

    /// The credentials a `.netrc` file gives for the host of `url`: its `machine` entry, else
    /// `default`, as curl and ftp read the file (`macdef` blocks are skipped). `nil` when neither
    /// names a login.
    /// - Parameters:
    ///   - netrc: The file's text.
    ///   - url: The URL to log in to.
    public init?(netrc: String, for url: URL) {
        guard let host = url.host?.lowercased() else { return nil }
        // The words of the file, leaving out macro bodies (a `macdef` runs to the next empty line).
        var words: [Substring] = []
        var inMacro = false
        for line in netrc.split(separator: "\n", omittingEmptySubsequences: false) {
            let lineWords = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" })
            if inMacro {
                if lineWords.isEmpty { inMacro = false }
                continue
            }
            if let macro = lineWords.firstIndex(of: "macdef") {
                words += lineWords[..<macro]
                inMacro = true
            } else {
                words += lineWords
            }
        }
        var entries: [(machine: String?, login: String?, password: String?)] = []
        var index = words.startIndex
        func next() -> String? {
            guard index < words.endIndex else { return nil }
            defer { index += 1 }
            return String(words[index])
        }
        while let word = next() {
            switch word {
            case "machine": entries.append((next()?.lowercased(), nil, nil))
            case "default": entries.append((nil, nil, nil))
            case "login" where !entries.isEmpty: entries[entries.count - 1].login = next()
            case "password" where !entries.isEmpty: entries[entries.count - 1].password = next()
            default: continue
            }
        }
        guard let entry = entries.first(where: { $0.machine == host }) ?? entries.first(where: { $0.machine == nil }), let login = entry.login else {
            return nil
        }
        self.init(user: login, password: entry.password ?? "", for: url)
    }

    /// Whether these credentials may be sent to `url`: the same scheme, host and port.
    public func applies(to url: URL) -> Bool {
        Self.origin(of: url) == origin
    }

    public var description: String { "\(user):***@\(origin)" }

    static func origin(of url: URL) -> String {
        let scheme = url.scheme?.lowercased() ?? ""
        let port = url.port ?? (scheme == "https" ? 443 : 80)
        return "\(scheme)://\(url.host?.lowercased() ?? ""):\(port)"
    }

    /// `url` without `user:password@`.
    public static func removingUserInfo(from url: URL) -> URL {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false), components.user != nil || components.password != nil else {
            return url
        }
        components.user = nil
        components.password = nil
        return components.url ?? url
    }

    /// The `Authorization` header value answering `challenge` (a `WWW-Authenticate` value) for a
    /// `GET` of `url`, or `nil` when the challenge names no scheme we support.
    /// - Parameters:
    ///   - challenges: The `WWW-Authenticate` header values of the `401`.
    ///   - url: The URL that answered.
    ///   - cnonce: The client nonce for Digest (random by default).
    public func authorization(answering challenges: [String], for url: URL, cnonce: String = Self.randomNonce()) -> String? {
        let parsed = challenges.flatMap(AuthChallenge.parse)
        // Digest first: it never sends the password itself.
        if let digest = parsed.first(where: { $0.scheme == "digest" && Self.digestAlgorithms.contains(($0.parameters["algorithm"] ?? "MD5").uppercased()) }) {
            return digestAuthorization(digest, url: url, cnonce: cnonce)
        }
        if parsed.contains(where: { $0.scheme == "basic" }) {
            return "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
        }
        return nil
    }

    private static let digestAlgorithms: Set<String> = ["MD5", "MD5-SESS", "SHA-256", "SHA-256-SESS"]

    private func digestAuthorization(_ challenge: AuthChallenge, url: URL, cnonce: String) -> String? {
        guard let realm = challenge.parameters["realm"], let nonce = challenge.parameters["nonce"] else { return nil }
        let algorithm = (challenge.parameters["algorithm"] ?? "MD5").uppercased()
        let sha = algorithm.hasPrefix("SHA-256")
        func hash(_ text: String) -> String { sha ? Self.sha256(text) : Self.md5(text) }
        var uri = url.path.isEmpty ? "/" : url.path
        if let query = url.query { uri += "?" + query }
        var ha1 = hash("\(user):\(realm):\(password)")
        if algorithm.hasSuffix("-SESS") { ha1 = hash("\(ha1):\(nonce):\(cnonce)") }
        let ha2 = hash("GET:\(uri)")
        let qops = (challenge.parameters["qop"] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        let nc = "00000001"
        var fields = [
            "username=\"\(Self.quoted(user))\"", "realm=\"\(Self.quoted(realm))\"", "nonce=\"\(Self.quoted(nonce))\"",
            "uri=\"\(Self.quoted(uri))\"",
        ]
        if qops.contains("auth") {
            fields += ["qop=auth", "nc=\(nc)", "cnonce=\"\(cnonce)\"", "response=\"\(hash("\(ha1):\(nonce):\(nc):\(cnonce):auth:\(ha2)"))\""]
        } else if qops.isEmpty {
            fields.append("response=\"\(hash("\(ha1):\(nonce):\(ha2)"))\"")
        } else {
            return nil  // only auth-int is offered, which a GET without a body does not need
        }
        fields.append("algorithm=\(challenge.parameters["algorithm"] ?? "MD5")")
        if let opaque = challenge.parameters["opaque"] { fields.append("opaque=\"\(Self.quoted(opaque))\"") }
        return "Digest " + fields.joined(separator: ", ")
    }

    private static func quoted(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
    }

    private static func md5(_ text: String) -> String {
        Insecure.MD5.hash(data: Data(text.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    private static func sha256(_ text: String) -> String {
        SHA256.hash(data: Data(text.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    /// 16 random bytes in hex.
    public static func randomNonce() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }
}

/// One challenge of a `WWW-Authenticate` header: a scheme and its parameters.
struct AuthChallenge: Equatable {
    var scheme: String
    var parameters: [String: String]

    /// Parses a header value, which may hold several challenges (`Digest realm="x", nonce="y", Basic realm="x"`).
    static func parse(_ header: String) -> [AuthChallenge] {
        var challenges: [AuthChallenge] = []
        var scanner = Substring(header)
        func skipSpaces() { scanner = scanner.drop { $0 == " " || $0 == "\t" || $0 == "," } }
        func token() -> String {
            let value = scanner.prefix { !" \t,=\"".contains($0) }
            scanner = scanner.dropFirst(value.count)
            return String(value)
        }
        while true {
            skipSpaces()
            let word = token()
            guard !word.isEmpty else { break }
            scanner = scanner.drop { $0 == " " || $0 == "\t" }
            if scanner.first == "=" {
                // A parameter of the current challenge.
                scanner = scanner.dropFirst()
                scanner = scanner.drop { $0 == " " || $0 == "\t" }
                var value = ""
                if scanner.first == "\"" {
                    scanner = scanner.dropFirst()
                    while let character = scanner.first, character != "\"" {
                        scanner = scanner.dropFirst()
                        if character == "\\", let escaped = scanner.first {
                            value.append(escaped)
                            scanner = scanner.dropFirst()
                        } else {
                            value.append(character)
                        }
                    }
                    scanner = scanner.dropFirst()
                } else {
                    value = token()
                }
                if !challenges.isEmpty { challenges[challenges.count - 1].parameters[word.lowercased()] = value }
            } else {
                challenges.append(AuthChallenge(scheme: word.lowercased(), parameters: [:]))
            }
        }
        return challenges
    }
}
