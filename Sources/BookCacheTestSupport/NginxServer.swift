import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A real nginx on 127.0.0.1 serving a folder over HTTPS with HTTP/2, with a certificate made for
/// the test by `openssl` (its own authority, trusted by nobody until a client is given its file).
/// Its access log names the protocol of every request.
public final class NginxServer: Sendable {
    /// Whether `nginx` and `openssl` are installed.
    public static var isInstalled: Bool {
        ["/usr/sbin/nginx", "/usr/bin/openssl"].allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// The server's root, `https://127.0.0.1:PORT`.
    public let baseURL: String
    /// The certificate (PEM) a client must trust, as with `curl --cacert`.
    public let certificateFile: URL
    private let work: URL
    private let process: RunningProcess

    private init(baseURL: String, certificateFile: URL, work: URL, process: RunningProcess) {
        self.baseURL = baseURL
        self.certificateFile = certificateFile
        self.work = work
        self.process = process
    }

    /// The access log's lines: `"GET /path HTTP/2.0" 200`.
    public func accessLog() throws -> [String] {
        try String(contentsOf: work.appendingPathComponent("access.log"), encoding: .utf8).split(separator: "\n").map(String.init)
    }

    /// Starts nginx over `directory` with its state in `work`, runs `body`, and stops it however
    /// `body` ends.
    public static func with<T>(serving directory: URL, work: URL, _ body: (NginxServer) async throws -> T) async throws -> T {
        let server = try await start(serving: directory, work: work)
        do {
            let result = try await body(server)
            try await server.stop()
            return result
        } catch {
            try? await server.stop()
            throw error
        }
    }

    private static func start(serving directory: URL, work: URL) async throws -> NginxServer {
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        let certificate = work.appendingPathComponent("cert.pem")
        let key = work.appendingPathComponent("key.pem")
        let made = try await ProcessRunner.run(
            at: URL(fileURLWithPath: "/usr/bin/openssl"),
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
                "-keyout", key.path, "-out", certificate.path, "-subj", "/CN=BookCache test authority",
                "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
            ])
        guard made.status == 0 else { throw ProcessRunnerError(message: "openssl could not make a certificate: \(made.stderr)") }
        let port = try await TestHTTPServer.freePort()
        let configuration = """
            daemon off;
            worker_processes 1;
            error_log \(work.path)/error.log warn;
            pid \(work.path)/nginx.pid;
            events { worker_connections 64; }
            http {
              log_format protocol '"$request" $status';
              access_log \(work.path)/access.log protocol;
              client_body_temp_path \(work.path)/body;
              proxy_temp_path \(work.path)/proxy;
              fastcgi_temp_path \(work.path)/fastcgi;
              uwsgi_temp_path \(work.path)/uwsgi;
              scgi_temp_path \(work.path)/scgi;
              types { application/epub+zip epub; application/pdf pdf; }
              server {
                listen 127.0.0.1:\(port) ssl http2;
                ssl_certificate \(certificate.path);
                ssl_certificate_key \(key.path);
                root \(directory.path);
              }
            }
            """
        let file = work.appendingPathComponent("nginx.conf")
        try Data(configuration.utf8).write(to: file)
        // nginx binds its port before it goes into the background, so once this command returns
        // the server accepts connections.
        // In the foreground, as this process's child: it is stopped with a signal and waited for.
        let process = try ProcessRunner.launch(at: URL(fileURLWithPath: "/usr/sbin/nginx"), ["-c", file.path, "-p", work.path])
        let server = NginxServer(baseURL: "https://127.0.0.1:\(port)", certificateFile: certificate, work: work, process: process)
        // nginx says nothing when it is ready: it is ready when its port takes a connection.
        for _ in 0..<200 {
            if Self.accepts(port: port) { return server }
            try await Task.sleep(for: .milliseconds(25))
        }
        try await server.stop()
        throw ProcessRunnerError(
            message:
                "nginx did not start listening: \((try? String(contentsOf: work.appendingPathComponent("error.log"), encoding: .utf8)) ?? "")"
        )
    }

    private static func accepts(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    /// Stops nginx (SIGQUIT, a graceful stop) and waits for it to exit.
    public func stop() async throws {
        process.send(SIGQUIT)
        _ = await process.wait()
    }
}
