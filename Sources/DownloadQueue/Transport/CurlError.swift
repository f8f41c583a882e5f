import CCurl
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

extension DownloadError {
    /// The download error a libcurl result code means: its kind (retryable or not) and its
    /// words. `connected` tells a refused connection from one cut after it was made.
    static func curl(_ code: CURLcode, url: URL, connected: Bool, systemError: Int32) -> DownloadError {
        let detail = String(cString: curl_easy_strerror(code)).lowercased()
        switch code {
        case CURLE_RECV_ERROR where systemError == ECONNRESET, CURLE_SEND_ERROR where systemError == ECONNRESET:
            return DownloadError(kind: .bodyCutShort, url: url, detail: "the connection was reset")
        case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST:
            return DownloadError(kind: .connectionFailed, url: url, detail: detail)
        case CURLE_OPERATION_TIMEDOUT:
            return connected
                ? DownloadError(kind: .timedOut, url: url, detail: "no data received within the idle-read timeout")
                : DownloadError(kind: .connectionFailed, url: url, detail: "connect timed out")
        case CURLE_PARTIAL_FILE, CURLE_RECV_ERROR, CURLE_GOT_NOTHING, CURLE_SEND_ERROR:
            return DownloadError(kind: .bodyCutShort, url: url, detail: detail)
        case CURLE_PEER_FAILED_VERIFICATION:
            return DownloadError(
                kind: .untrustedServer, url: url,
                detail:
                    "its TLS certificate is not signed by an authority this system trusts (a private authority's certificate can be trusted as a CA file)"
            )
        case CURLE_SSL_CACERT_BADFILE:
            return DownloadError(kind: .untrustedServer, url: url, detail: "the certificate authorities file cannot be read or is not PEM")
        case CURLE_COULDNT_RESOLVE_PROXY:
            return DownloadError(
                kind: .connectionFailed, url: url,
                detail: "the proxy's host name could not be resolved (check --proxy, the proxy setting, or $http_proxy / $https_proxy)")
        case CURLE_TOO_MANY_REDIRECTS:
            return DownloadError(kind: .tooManyRedirects, url: url, detail: detail)
        case CURLE_UNSUPPORTED_PROTOCOL, CURLE_URL_MALFORMAT:
            return DownloadError(kind: .invalidURL, url: url, detail: detail)
        case CURLE_WEIRD_SERVER_REPLY, CURLE_BAD_CONTENT_ENCODING:
            return DownloadError(kind: .invalidResponse, url: url, detail: detail)
        default:
            return DownloadError(kind: .transport, url: url, detail: detail)
        }
    }
}
