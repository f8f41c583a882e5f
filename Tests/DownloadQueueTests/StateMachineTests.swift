import Foundation
import Testing

@testable import DownloadQueue

/// Every order of events of one transfer, without libcurl: what the state machine tells the
/// transfer to do.
@Suite("CurlTransferState")
struct CurlTransferStateTests {
    @Test("bytes before the reader are buffered and read in order, then the end; the head goes with the first bytes, once")
    func bufferThenRead() {
        var state = CurlTransferState(pauseAbove: 100)
        state.headRequested()
        let r1 = state.bodyArrived(count: 3)
        #expect(r1 == (true, .buffer))
        state.buffer([1, 2, 3])
        let r2 = state.bodyArrived(count: 2)
        #expect(r2 == (false, .buffer), "the head is delivered once")
        state.buffer([4, 5])
        #expect(state.bufferedBytes == 5)
        let r3 = state.finished(.success)
        #expect(r3 == (false, false), "bytes are left: the reader is not ended yet")
        let r4 = state.read()
        #expect(r4 == .give([1, 2, 3]))
        let r5 = state.read()
        #expect(r5 == .give([4, 5]))
        let r6 = state.read()
        #expect(r6 == .end)
        let r7 = state.read()
        #expect(r7 == .end, "and stays ended")
    }

    @Test("a waiting reader is handed the bytes directly; the next read waits")
    func readerWaiting() {
        var state = CurlTransferState(pauseAbove: 100)
        let r8 = state.read()
        #expect(r8 == .wait(unpause: false))
        #expect(state.readerWaiting)
        let r9 = state.bodyArrived(count: 4)
        #expect(r9 == (false, .toReader))
        #expect(!state.readerWaiting)
        let r10 = state.read()
        #expect(r10 == .wait(unpause: false))
    }

    @Test("nobody reads: past the bound the transfer pauses; the reader that comes unpauses it, once")
    func pauseAndUnpause() {
        var state = CurlTransferState(pauseAbove: 4)
        let r11 = state.bodyArrived(count: 4)
        #expect(r11 == (false, .buffer))
        state.buffer([0, 0, 0, 0])
        let r12 = state.bodyArrived(count: 4)
        #expect(r12 == (false, .pause), "4 bytes wait: the next are not taken")
        #expect(state.paused)
        let r13 = state.read()
        #expect(r13 == .give([0, 0, 0, 0]))
        let r14 = state.read()
        #expect(r14 == .wait(unpause: true), "empty and paused: unpause, then wait")
        let r15 = state.unpause()
        #expect(r15)
        let r16 = state.unpause()
        #expect(!r16, "only once")
        let r17 = state.bodyArrived(count: 4)
        #expect(r17 == (false, .toReader), "the bytes handed over again go to the reader")
    }

    @Test("a failure: a waiting head is failed; what was buffered is read first, then the failure")
    func failure() {
        var state = CurlTransferState(pauseAbove: 100)
        state.headRequested()
        let r18 = state.finished(.failure)
        #expect(r18 == (true, false), "no body: the head waiter gets the failure")
        var other = CurlTransferState(pauseAbove: 100)
        let r19 = other.bodyArrived(count: 1)
        #expect(r19 == (false, .buffer))
        other.buffer([9])
        let r20 = other.finished(.failure)
        #expect(r20 == (false, false))
        let r21 = other.read()
        #expect(r21 == .give([9]))
        let r22 = other.read()
        #expect(r22 == .fail)
    }

    @Test("a reader waiting when the transfer ends is ended at once; a transfer with no body delivers its head at the end")
    func endWhileWaiting() {
        var state = CurlTransferState(pauseAbove: 100)
        state.headRequested()
        let r23 = state.finished(.success)
        #expect(r23 == (true, false), "a 304: the head at the end")
        var waiting = CurlTransferState(pauseAbove: 100)
        let r24 = waiting.read()
        #expect(r24 == .wait(unpause: false))
        let r25 = waiting.finished(.success)
        #expect(r25 == (false, true))
        #expect(!waiting.readerWaiting)
    }
}

/// A job's standing with the queue's slots, without a queue.
@Suite("SlotState")
struct SlotStateTests {
    @Test("admitted: the first attempt holds the slot; giving it up releases once; a retry gets in line again")
    func lifecycle() {
        var slot = SlotState()
        slot.admitted()
        #expect(slot.hold(cancelled: false) == .alreadyHeld)
        #expect(slot.hold(cancelled: true) == .alreadyHeld, "a held slot is used even by a cancelled job's last step")
        let first = slot.giveUp()
        let second = slot.giveUp()
        #expect(first && !second, "released to the queue once")
        #expect(slot.hold(cancelled: false) == .lineAgain)
        #expect(slot.hold(cancelled: true) == .cancelled)
        slot.admitted()
        #expect(slot.phase == .holding)
    }

    @Test("cancelled in line: never admitted, nothing to give up, no attempt")
    func neverAdmitted() {
        var slot = SlotState()
        #expect(slot.hold(cancelled: false) == .cancelled, "not admitted yet")
        slot.notAdmitted()
        #expect(slot.phase == .neverAdmitted)
        let released = slot.giveUp()
        #expect(!released)
        #expect(slot.hold(cancelled: false) == .cancelled)
    }
}

/// A response's header lines as libcurl hands them over: bytes with their line end.
@Suite("CurlTransfer header lines")
struct CurlHeaderLineTests {
    @Test("a header is split at its first colon and trimmed; a status line starts a new response's headers")
    func headerLines() throws {
        let transfer = CurlTransfer(
            url: try #require(URL(string: "http://127.0.0.1:1/b.epub")), headers: [], credentials: nil,
            configuration: CurlTransport.Configuration(), budget: BufferBudget(limit: 1))
        func receive(_ line: String) {
            Array(line.utf8).withUnsafeBytes { transfer.received(headerLine: $0) }
        }
        receive("HTTP/1.1 302 Found\r\n")
        receive("Location: http://127.0.0.1:1/elsewhere\r\n")
        receive("HTTP/1.1 200 OK\r\n")
        receive("Content-Type:\t application/epub+zip \r\n")
        receive("Location:  http://127.0.0.1:2/x:y \r\n")
        receive("X-Empty:\r\n")
        receive("no colon here\r\n")
        receive("\r\n")
        let head = transfer.makeHead(status: 200, effectiveURL: nil)
        #expect(head.headers.map(\.name) == ["Content-Type", "Location", "X-Empty"])
        #expect(head.headers.map(\.value) == ["application/epub+zip", "http://127.0.0.1:2/x:y", ""])
    }
}
