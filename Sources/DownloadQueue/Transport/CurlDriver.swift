import CCurl
import Foundation
import Synchronization

/// Runs libcurl's multi interface on a thread of its own: transfers are added, cancelled and
/// unpaused through a command queue, and `curl_multi_poll` sleeps until there is work.
// Unchecked: the multi handle is used on the driver thread only; commands reach it through a Mutex-guarded queue.
final class CurlDriver: @unchecked Sendable {
    enum Command {
        case add(CurlTransfer)
        case cancel(CurlTransfer)
        case unpause(CurlTransfer)
        case stop
    }

    // The multi handle is used on the driver thread only, except curl_multi_wakeup, which is
    // thread-safe.
    private let multi: UnsafeMutableRawPointer
    private let commands = Mutex<(queue: [Command], stopped: Bool)>(([], false))
    private var running: [UnsafeMutableRawPointer: CurlTransfer] = [:]
    /// Origins (`scheme://host:port`) whose server asked for Basic — and only Basic — and took
    /// the login: later requests there send it with the first request, as curl `-u` and browsers
    /// do, instead of once without it and again after the 401 (a catalogue's failed-login log,
    /// which fail2ban watches, saw one line per request). Driver thread only.
    private var basicOrigins: Set<String> = []
    /// Easy handles that answered a Digest challenge, by login (a driver serves one transport,
    /// so every transfer has the same settings): libcurl keeps the server's nonce and its count
    /// in the handle, so a transfer that takes one answers with its first request (as a browser
    /// does) instead of once without the login and again after the 401. Each handle learns the
    /// nonce once: n downloads at once ask at most n times. Driver thread only.
    private var digestHandles: [HTTPCredentials: [UnsafeMutableRawPointer]] = [:]
    /// The most connections kept open between transfers. libcurl's default is four per transfer
    /// running at the moment one ends — between one book and the next a batch may have only one or
    /// two running, so it closed idle connections the next books then opened again (20 connections
    /// for 500 books at 8 at once; a new one pays its handshake and TCP's slow start again).
    static let idleConnectionsKept = 64
    /// The body bytes its transfers keep unread, bounded together (see ``BufferBudget``).
    let budget = BufferBudget(limit: CurlDriver.keptUnread)
    /// The bound on the bytes its transfers keep unread together, when more than one keeps some
    /// (alone, a transfer has its own, ``CurlTransfer/pauseAbove``: a large download runs as
    /// before). 1 MiB: 500 books of 1 MiB at 8 transfers peaked at 12.0–14.3 MiB of private
    /// memory against 12.7–15.4 with 2 MiB (24 runs each; without a shared bound 15.1–17.1), in
    /// about the same time (7–9-round A/Bs against 2 MiB, B/A: 0.96–1.02 on loopback, 0.95 at a
    /// 40 ms round trip, 0.99 for a lone 1 GiB book).
    static let keptUnread = 1 << 20
    /// The most idle Digest handles kept for one login (more than a batch runs at once).
    private static let digestHandlesKept = 64

    init() {
        curl_global_init(3)  // CURL_GLOBAL_ALL
        guard let multi = curl_multi_init() else { fatalError("libcurl could not make a multi handle (out of memory)") }
        bc_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, Self.idleConnectionsKept)
        self.multi = multi
        Thread { [self] in
            BlockingPool.nameCurrentThread("bookcache-curl")
            run()
        }.start()
    }

    func submit(_ command: Command) {
        let multi = self.multi
        commands.withLock { commands in
            // Once stopped, the multi handle is gone: nothing more is taken. The wake-up happens
            // under the lock, so the driver cannot free the handle in between.
            guard !commands.stopped else { return }
            if case .stop = command { commands.stopped = true }
            commands.queue.append(command)
            curl_multi_wakeup(multi)
        }
    }

    private func run() {
        var stopping = false
        while !stopping {
            for command in commands.withLock({ commands in
                defer { commands.queue = [] }; return commands.queue
            }) {
                switch command {
                case .stop:
                    stopping = true
                    for transfer in running.values { finish(transfer, result: nil, cancelled: true) }
                case .add(let transfer): add(transfer)
                case .cancel(let transfer): finish(transfer, result: nil, cancelled: true)
                case .unpause(let transfer):
                    // 0 is CURLPAUSE_CONT.
                    if let handle = transfer.handle, transfer.resumeIfPaused() { curl_easy_pause(handle, 0) }
                }
            }
            var active: Int32 = 0
            curl_multi_perform(multi, &active)
            var left: Int32 = 0
            while let message = curl_multi_info_read(multi, &left) {
                guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle,
                    let transfer = running[handle]
                else { continue }
                finish(transfer, result: bc_message_result(message), cancelled: false)
            }
            if !stopping { curl_multi_poll(multi, nil, 0, 1000, nil) }
        }
        for handle in digestHandles.values.joined() { curl_easy_cleanup(handle) }
        digestHandles = [:]
        curl_multi_cleanup(multi)
    }

    private func add(_ transfer: CurlTransfer) {
        // A handle that knows the origin's Digest nonce, if one is idle: every option below is
        // set again (the header list too, to none), and libcurl's login state stays.
        let reused = transfer.credentials.flatMap { digestHandles[$0]?.popLast() }
        transfer.answersDigestUpFront = reused != nil
        guard let handle = reused ?? curl_easy_init() else {
            transfer.finished(
                status: 0, effectiveURL: nil,
                error: DownloadError(kind: .transport, url: transfer.url, detail: "libcurl could not make a handle"))
            return
        }
        let context = Unmanaged.passUnretained(transfer).toOpaque()
        bc_setopt_string(handle, CURLOPT_URL, transfer.url.absoluteString)
        bc_setopt_long(handle, CURLOPT_NOSIGNAL, 1)
        bc_setopt_long(handle, CURLOPT_FOLLOWLOCATION, transfer.followsRedirects ? 1 : 0)
        bc_setopt_long(handle, CURLOPT_MAXREDIRS, transfer.configuration.maxRedirects)
        bc_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "http,https")
        bc_setopt_string(handle, CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
        bc_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, Int(transfer.configuration.connectTimeout.wholeMilliseconds))
        bc_setopt_long(handle, CURLOPT_LOW_SPEED_LIMIT, 1)
        bc_setopt_long(handle, CURLOPT_LOW_SPEED_TIME, max(1, Int(transfer.configuration.idleReadTimeout.wholeMilliseconds / 1000)))
        bc_setopt_pointer(handle, CURLOPT_WRITEDATA, context)
        bc_setopt_pointer(handle, CURLOPT_HEADERDATA, context)
        bc_setopt_callback(handle, CURLOPT_WRITEFUNCTION, curlWrite)
        bc_setopt_callback(handle, CURLOPT_HEADERFUNCTION, curlHeader)
        var list: UnsafeMutablePointer<curl_slist>?
        for header in transfer.requestHeaders {
            list = curl_slist_append(list, "\(header.name): \(header.value)")
        }
        bc_setopt_list(handle, CURLOPT_HTTPHEADER, list)
        transfer.headerList = list
        let configuration = transfer.configuration
        if let credentials = transfer.credentials {
            bc_setopt_string(handle, CURLOPT_USERNAME, credentials.user)
            bc_setopt_string(handle, CURLOPT_PASSWORD, credentials.password)
        }
        if let netrc = configuration.netrcFile {
            bc_setopt_long(handle, CURLOPT_NETRC, 1)  // CURL_NETRC_OPTIONAL: the request's own login first
            bc_setopt_string(handle, CURLOPT_NETRC_FILE, netrc)
        }
        if let credentials = transfer.credentials, credentials.applies(to: transfer.url), basicOrigins.contains(credentials.origin) {
            // This origin asked for Basic before: the login goes with the first request.
            bc_setopt_long(handle, CURLOPT_HTTPAUTH, 1)  // CURLAUTH_BASIC
        } else if transfer.credentials != nil || configuration.netrcFile != nil {
            // Basic or Digest, as the server's 401 asks: never the password before it asks.
            bc_setopt_long(handle, CURLOPT_HTTPAUTH, 1 | 2)  // CURLAUTH_BASIC | CURLAUTH_DIGEST
        }
        if let proxy = configuration.proxy { bc_setopt_string(handle, CURLOPT_PROXY, proxy) }
        if let noProxy = configuration.noProxy { bc_setopt_string(handle, CURLOPT_NOPROXY, noProxy) }
        if let rate = configuration.maxReceiveBytesPerSecond { bc_setopt_off(handle, CURLOPT_MAX_RECV_SPEED_LARGE, curl_off_t(rate)) }
        if let caFile = configuration.caFile { bc_setopt_string(handle, CURLOPT_CAINFO, caFile) }
        // HTTP/2 when a TLS server offers it (ALPN), HTTP/1.1 otherwise, as curl does.
        bc_setopt_long(handle, CURLOPT_HTTP_VERSION, 4)  // CURL_HTTP_VERSION_2TLS
        transfer.handle = handle
        running[handle] = transfer
        curl_multi_add_handle(multi, handle)
    }

    private func finish(_ transfer: CurlTransfer, result: CURLcode?, cancelled: Bool) {
        guard let raw = transfer.handle, running.removeValue(forKey: raw) != nil else { return }
        let (status, effective) = headInfo(raw)
        let error: DownloadError?
        if cancelled {
            error = DownloadError(kind: .cancelled, url: transfer.url)
        } else if let result, result != CURLE_OK {
            error = DownloadError.curl(
                result, url: effective ?? transfer.url, connected: bc_getinfo_long(raw, CURLINFO_PRIMARY_PORT) != 0 && status != 0,
                systemError: Int32(bc_getinfo_long(raw, CURLINFO_OS_ERRNO)))
        } else {
            error = nil
        }
        let offered = bc_getinfo_long(raw, CURLINFO_HTTPAUTH_AVAIL)
        if let credentials = transfer.credentials, error == nil, credentials.applies(to: transfer.url) {
            learnScheme(of: credentials.origin, status: status, offered: offered)
        }
        curl_multi_remove_handle(multi, raw)
        // Kept when it answered Digest and the login was taken on its own origin.
        if let credentials = transfer.credentials, error == nil, status != 401, credentials.applies(to: effective ?? transfer.url),
            offered & 2 != 0 || transfer.answersDigestUpFront,  // CURLAUTH_DIGEST
            digestHandles[credentials, default: []].count < Self.digestHandlesKept
        {
            digestHandles[credentials, default: []].append(raw)
        } else {
            curl_easy_cleanup(raw)
        }
        curl_slist_free_all(transfer.headerList)
        transfer.handle = nil
        transfer.headerList = nil
        transfer.finished(status: status, effectiveURL: effective, error: error)
    }

}

extension CurlDriver {
    /// Remembers an origin that asked for Basic alone and took the login (`offered` is the
    /// methods of the 401 answered, `CURLINFO_HTTPAUTH_AVAIL`; 0 when the login went up front);
    /// forgets it when the login is refused, so the next request asks again.
    fileprivate func learnScheme(of origin: String, status: Int, offered: Int) {
        if status == 401 {
            basicOrigins.remove(origin)
        } else if offered == 1 {  // CURLAUTH_BASIC, and no Digest offered
            basicOrigins.insert(origin)
        }
    }
}

/// The status and URL of the response a handle is on (the last one, after redirects).
private func headInfo(_ handle: UnsafeMutableRawPointer) -> (status: Int, url: URL?) {
    let url = bc_getinfo_string(handle, CURLINFO_EFFECTIVE_URL).flatMap { URL(string: String(cString: $0)) }
    return (Int(bc_getinfo_long(handle, CURLINFO_RESPONSE_CODE)), url)
}

private func transferFrom(_ user: UnsafeMutableRawPointer?) -> CurlTransfer? {
    user.map { Unmanaged<CurlTransfer>.fromOpaque($0).takeUnretainedValue() }
}

/// libcurl's write callback: body bytes of the final response.
private let curlWrite: bc_curl_data_callback = { data, size, count, user in
    guard let transfer = transferFrom(user), let data else { return 0 }
    let length = size * count
    guard let handle = transfer.handle else { return 0 }
    let accepted = transfer.received(body: UnsafeRawBufferPointer(start: data, count: length), head: { headInfo(handle) })
    return accepted ? length : bc_write_pause()
}

/// libcurl's header callback: one header line at a time, status lines included.
private let curlHeader: bc_curl_data_callback = { data, size, count, user in
    guard let transfer = transferFrom(user), let data else { return 0 }
    let length = size * count
    transfer.received(headerLine: UnsafeRawBufferPointer(start: data, count: length))
    return length
}

extension Duration {
    fileprivate var wholeMilliseconds: Int64 {
        components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }
}
