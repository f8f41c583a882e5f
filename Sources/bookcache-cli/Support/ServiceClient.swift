import ArgumentParser
import BookCache
import BookCacheHTTP
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Talks to the `bookcache serve` of a cache, found through `CACHE/service.json`, with the token
/// of `CACHE/service.token`. With none running it says so and exits 69 (EX_UNAVAILABLE).
struct ServiceClient {
    let base: URL
    let token: String

    static let unavailable = ExitCode(69)

    static func connect(cacheRoot: URL) throws -> ServiceClient {
        guard let info = ServiceInfo.read(in: cacheRoot), let base = URL(string: info.url) else {
            Terminal.writeError("error: no bookcache serve is running for \(cacheRoot.path); start one with 'bookcache serve'")
            throw unavailable
        }
        let token: String
        do {
            token = try String(contentsOf: ServiceInfo.tokenFile(in: cacheRoot), encoding: .utf8)
        } catch {
            Terminal.writeError(
                "error: cannot read \(ServiceInfo.tokenFile(in: cacheRoot).path) (\(error)); is this the user that runs bookcache serve?")
            throw unavailable
        }
        return ServiceClient(base: base, token: token.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Sends a request and decodes the JSON answer; an API error is printed and exits 1
    /// (65 for a refused submission).
    func send<T: Decodable>(_ method: String, _ path: String, body: Data? = nil) async throws -> T {
        var request = URLRequest(url: base.appendingPathComponent(path))
        request.httpMethod = method
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        request.timeoutInterval = 30
        if let body {
            request.httpBody = body
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await URLSession.shared.data(for: request)
        } catch {
            Terminal.writeError(
                "error: no bookcache serve answers at \(base.absoluteString) (\(error.localizedDescription)); start one with 'bookcache serve'"
            )
            throw Self.unavailable
        }
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard (200..<300).contains(status) else {
            let message = (try? JSONDecoder().decode(APIFailure.self, from: data))?.error.message ?? "HTTP \(status)"
            Terminal.writeError("error: \(message)")
            throw status == 400 ? ExitCode(65) : ExitCode.failure
        }
        do {
            return try MetadataCoding.decoder().decode(T.self, from: data)
        } catch {
            Terminal.writeError("error: the service's answer cannot be read (\(error))")
            throw ExitCode.failure
        }
    }
}

/// An error answer of the API: `{"error": {"kind": …, "message": …}}`.
struct APIFailure: Decodable {
    struct Detail: Decodable {
        var kind: String
        var message: String
    }

    var error: Detail
}
