import BookCache
import DownloadQueue
import Foundation
import Hummingbird
import NIOCore

extension APIServer {
    /// The only routes open without the token or a session: the page (which holds no data
    /// until it is logged in), the login link and the proof that this is the token's holder.
    func pageRoutes() -> RouteCollection<ServiceRequestContext> {
        let routes = RouteCollection(context: ServiceRequestContext.self)
        let access = self.access
        routes.get("/") { request, _ in
            // In the browser's language; the answer varies with it.
            let language = BookCacheLanguage(acceptLanguage: request.headers[.acceptLanguage])
            return Response(
                status: .ok,
                headers: [
                    .contentType: "text/html; charset=utf-8", .cacheControl: "no-store",
                    .contentLanguage: language.rawValue, .vary: "Accept-Language",
                    .contentSecurityPolicy: "default-src 'self'; style-src 'self' 'unsafe-inline'; script-src 'self' 'unsafe-inline'",
                    .init("X-Frame-Options")!: "DENY",
                ],
                body: ResponseBody(byteBuffer: ByteBuffer(string: WebPage.html(language))))
        }
        routes.get("/login") { request, _ in
            guard let code = request.uri.queryParameters.get("code"), let session = access.redeem(code) else {
                return Response(
                    status: .unauthorized, headers: [.contentType: "text/plain; charset=utf-8"],
                    body: ResponseBody(
                        byteBuffer: ByteBuffer(
                            string:
                                "This login link was used already, is older than 5 minutes, or is unknown. Run `bookcache serve --login-link` for a new one.\n"
                        )))
            }
            return Response(
                status: .seeOther,
                headers: [
                    .location: "/", .cacheControl: "no-store",
                    .setCookie: "\(ServiceAccess.cookieName)=\(session); Path=/; HttpOnly; SameSite=Strict",
                ])
        }

        // The service proves it holds the token before a client sends it (ServiceAccess.proof).
        routes.get("/api/v1/proof") { request, _ -> Response in
            guard let nonce = request.uri.queryParameters.get("nonce"), let proof = ServiceAccess.proof(token: access.token, nonce: nonce)
            else {
                return APIResponse.error(.badRequest, kind: "invalidNonce", "nonce must be 64 lowercase hex digits")
            }
            struct Proof: Encodable { var proof: String }
            return APIResponse.json(Proof(proof: proof))
        }

        return routes
    }
}
