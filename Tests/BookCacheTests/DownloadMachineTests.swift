import Testing

@testable import BookCache

/// Every transition of one book download's steps, without I/O.
@Suite("DownloadMachine")
struct DownloadMachineTests {
    typealias Outcome = DownloadMachine.Outcome
    typealias Action = DownloadMachine.Action
    typealias Phase = DownloadMachine.Phase

    /// Feeds `outcomes` from the start and returns each action and the phase after it.
    func run(_ outcomes: [Outcome]) -> (actions: [Action], phases: [Phase], machine: DownloadMachine) {
        var machine = DownloadMachine()
        var actions: [Action] = []
        var phases: [Phase] = []
        for outcome in outcomes {
            actions.append(machine.next(outcome))
            phases.append(machine.phase)
        }
        return (actions, phases, machine)
    }

    static let toReceiving: [Outcome] = [.admitted, .locked, .found(cached: false), .opened, .roomMade]

    @Test("a new book goes through every step in order, and is returned published")
    func wholePath() {
        let (actions, phases, _) = run(Self.toReceiving + [.bodyArrived, .placeTaken, .validated, .published])
        #expect(actions == [.lock, .readIndex, .open, .makeRoom, .receive, .takePlace, .validate, .publish, .returnPublished])
        #expect(phases == [.admitted, .locked, .opening, .head, .receiving, .received, .validating, .publishing, .cached])
    }

    @Test("a book found cached once the lock is held is returned as it is, without a request")
    func foundCached() {
        let (actions, phases, _) = run([.admitted, .locked, .found(cached: true)])
        #expect(actions == [.lock, .readIndex, .returnCached])
        #expect(phases.last == .cached)
    }

    @Test("a transfer that is retried opens again, and the new response's room is checked again")
    func transferRetried() {
        let (actions, phases, _) = run(Self.toReceiving + [.transferRetrying, .opened, .roomMade, .transferRetrying, .opened])
        #expect(Array(actions.suffix(5)) == [.open, .makeRoom, .receive, .open, .makeRoom])
        #expect(Array(phases.suffix(5)) == [.opening, .head, .receiving, .opening, .head])
    }

    @Test("an attempt that fails before its head is retried through the machine: it opens again, then makes room for the head it gets")
    func openRetried() {
        let (actions, phases, _) = run(Array(Self.toReceiving.prefix(3)) + [.transferRetrying, .transferRetrying, .opened])
        #expect(Array(actions.suffix(3)) == [.open, .open, .makeRoom])
        #expect(Array(phases.suffix(3)) == [.opening, .opening, .head])
    }

    @Test("a resumed file that is refused is fetched once more from the start; refused again, the download fails")
    func refusedAfterResume() {
        let arrived: [Outcome] = [.bodyArrived, .placeTaken]
        let (actions, phases, machine) = run(Self.toReceiving + arrived + [.refused(resumed: true)])
        #expect(actions.last == .open)
        #expect(phases.last == .opening)
        #expect(machine.restartedFromStart)
        let again = run(Self.toReceiving + arrived + [.refused(resumed: true), .opened, .roomMade] + arrived + [.refused(resumed: true)])
        #expect(again.actions.last == .fail)
        #expect(again.phases.last == .failed)
    }

    @Test("a file refused that was fetched whole in one go fails at once")
    func refusedWithoutResume() {
        let (actions, phases, _) = run(Self.toReceiving + [.bodyArrived, .placeTaken, .refused(resumed: false)])
        #expect(actions.last == .fail)
        #expect(phases.last == .failed)
    }

    @Test("a failure at any step fails the download")
    func failureAnywhere() {
        let path: [Outcome] = Self.toReceiving + [.bodyArrived, .placeTaken, .validated]
        for count in 0...path.count {
            let (actions, phases, _) = run(Array(path.prefix(count)) + [.failed])
            #expect(actions.last == .fail, "after \(count) steps")
            #expect(phases.last == .failed, "after \(count) steps")
        }
    }

    @Test("an outcome the phase cannot have fails the download instead of guessing")
    func outOfOrder() {
        for wrong: [Outcome] in [
            [.locked], [.admitted, .opened], [.admitted, .locked, .bodyArrived], Self.toReceiving + [.placeTaken],
            Self.toReceiving + [.bodyArrived, .validated], [.admitted, .locked, .found(cached: true), .opened],
        ] {
            let (actions, phases, _) = run(wrong)
            #expect(actions.last == .fail, "\(wrong)")
            #expect(phases.last == .failed, "\(wrong)")
        }
    }

    @Test("nothing follows a failure but failing")
    func failedIsFinal() {
        let (actions, _, _) = run([.admitted, .failed, .locked, .found(cached: false)])
        #expect(actions == [.lock, .fail, .fail, .fail])
    }
}
