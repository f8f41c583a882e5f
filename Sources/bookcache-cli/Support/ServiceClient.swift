import ArgumentParser
import BookCache
import BookCacheHTTP
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Talks to the `bookcache serve` of a cache, found through `CACHE/service.json`, with the token
/// of `CACHE/service.token`. With none running it says so and exits 69 (EX_UNAVAILABLE).
///
/// The port in `service.json` is not trusted: a service killed with -9 leaves it behind, and
/// another local user may have taken the port since. Before the token is sent, whatever listens
/// there must prove it holds the token (``ServiceAccess/proof(token:nonce:)``: an HMAC of a fresh
/// nonce); one that cannot is refused, exit 69, and never sees the token.
struct ServiceClient {
    let base: URL
    let token: String

    static let unavailable = ExitCode(69)

    static func connect(cacheRoot: URL) async throws -> ServiceClient {
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
        let client = ServiceClient(base: base, token: token.trimmingCharacters(in: .whitespacesAndNewlines))
        try await client.checkProof()
        return client
    }

    /// Asks the listener for the proof of a fresh nonce, without the token.
    private func checkProof() async throws {
        let nonce = ServiceAccess.randomHex(bytes: 32)
        var components = URLComponents(url: base.appendingPathComponent("api/v1/proof"), resolvingAgainstBaseURL: false)
        components?.queryItems = [URLQueryItem(name: "nonce", value: nonce)]
        guard let url = components?.url else { throw Self.unavailable }
        var request = URLRequest(url: url)
        request.timeoutInterval = 30
        let (data, _) = try await exchange(request)
        struct Proof: Decodable { var proof: String }
        guard let answer = try? JSONDecoder().decode(Proof.self, from: data),
            answer.proof == ServiceAccess.proof(token: token, nonce: nonce)
        else {
            Terminal.writeError(
                "error: what listens at \(base.absoluteString) is not this cache's bookcache serve (it cannot prove it holds the token), so the token was not sent; start bookcache serve again"
            )
            throw Self.unavailable
        }
    }

    /// Sends `request`; when nothing answers, says so and exits 69.
    private func exchange(_ request: URLRequest) async throws -> (Data, URLResponse) {
        do {
            return try await URLSession.shared.data(for: request)
        } catch {
            Terminal.writeError(
                "error: no bookcache serve answers at \(base.absoluteString) (\(error.localizedDescription)); start one with 'bookcache serve'"
            )
            throw Self.unavailable
        }
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
        let (data, response) = try await exchange(request)
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
