import Foundation

/// Removes credentials from URLs before they reach logs, errors or listings.
package enum URLRedaction {
    /// The URL as a string with any user name and password replaced by `***`.
    /// - Parameter url: A URL that may carry `user:password@`.
    /// - Returns: The URL's string form, safe to show.
    public static func redacted(_ url: URL) -> String {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false),
            components.user != nil || components.password != nil
        else { return url.absoluteString }
        components.user = "***"
        components.password = nil
        return components.string ?? "<url with credentials>"
    }
}
