import Foundation

/// A user name and password for one host, answered to the server's challenge with Basic or
/// Digest authentication, whichever it asks for (``CurlTransport`` hands them to libcurl).
///
/// They are sent only once the host they are for has asked with a `401` (so a password never
/// crosses plain HTTP to a server that did not ask): after that, later requests to it answer up
/// front, Basic with the login and Digest with the host's nonce. Never to another host: a
/// redirect to another origin drops them. Their description never shows the password.
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

    /// Whether these credentials may be sent to `url`: the same scheme, host and port.
    public func applies(to url: URL) -> Bool {
        Self.origin(of: url) == origin
    }

    public var description: String { "\(user):***@\(origin)" }

    /// Whether two URLs have the same scheme, host and port (default ports filled in).
    public static func sameOrigin(_ a: URL, _ b: URL) -> Bool {
        origin(of: a) == origin(of: b)
    }

    static func origin(of url: URL) -> String {
        let scheme = url.scheme?.lowercased() ?? ""
        let port = url.port ?? (scheme == "https" ? 443 : 80)
        return "\(scheme)://\(url.host?.lowercased() ?? ""):\(port)"
    }

    /// `url` without `user:password@`.
    public static func removingUserInfo(from url: URL) -> URL {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false), components.user != nil || components.password != nil
        else {
            return url
        }
        components.user = nil
        components.password = nil
        return components.url ?? url
    }
}
