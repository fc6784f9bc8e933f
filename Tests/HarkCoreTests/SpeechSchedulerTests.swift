import HarkCore
import Synchronization
import Testing

/// A speech server that speaks nothing: it records requests and cancels, and the test plays
/// the server's events.
final class FakeBackend: SpeechBackend {
    struct State {
        var requests: [(message: Int, request: SynthesisRequest)] = []
        var cancelled: [Int] = []
        var nextMessage = 100
        var failNext = false
        var alive = true
    }
    let state = Mutex(State())

    func speak(_ request: SynthesisRequest) async throws -> Int {
        try state.withLock { state in
            if state.failNext {
                state.failNext = false
                throw HarkError(.failed, "refused")
            }
            state.nextMessage += 1
            state.requests.append((state.nextMessage, request))
            return state.nextMessage
        }
    }

    func cancel(message: Int) { state.withLock { $0.cancelled.append(message) } }
    func isAlive() async -> Bool { state.withLock { $0.alive } }

    var requests: [(message: Int, request: SynthesisRequest)] { state.withLock { $0.requests } }
    var cancelled: [Int] { state.withLock { $0.cancelled } }
}

final class NoticeLog: Sendable {
    let notices = Mutex<[SpeechNotice]>([])
    func append(_ notice: SpeechNotice) { notices.withLock { $0.append(notice) } }
    var all: [SpeechNotice] { notices.withLock { $0 } }
    var ended: [UInt64: EndReason] {
        var result: [UInt64: EndReason] = [:]
        for case .ended(let id, _, let reason) in all {
            #expect(result[id] == nil, "utterance \(id) ended twice")
            result[id] = reason
        }
        return result
    }
}

/// Waits (bounded) until `condition` holds; the scheduler works in its own tasks.
func eventually(_ what: Comment, _ condition: () async -> Bool) async {
    for _ in 0..<500 {
        if await condition() { return }
        try? await Task.sleep(for: .milliseconds(2))
    }
    Issue.record("never happened: \(what)")
}

struct Harness {
    let backend = FakeBackend()
    let log = NoticeLog()
    let scheduler: SpeechScheduler

    init(limit: Int = 1000, stallCheck: Duration = .seconds(5)) {
        let log = log
        scheduler = SpeechScheduler(backend: backend, maximumQueuedPerOwner: limit, stallCheckInterval: stallCheck) { log.append($0) }
    }

    func utterance(_ id: UInt64, owner: String = ":1.1", text: String = "one two three", interrupts: Bool = false,
                   detached: Bool = false, postDelay: Double = 0) throws -> Utterance {
        Utterance(id: id, owner: owner, kind: .speak, document: try SpeechDocument.plainText(text), voice: VoiceSettings(),
                  priority: interrupts ? .important : .text, interrupts: interrupts, postDelay: postDelay, detached: detached)
    }

    /// Waits until `count` requests were sent and returns the last one's message id.
    func sent(_ count: Int) async -> Int {
        await eventually("request \(count) sent") { backend.requests.count >= count }
        return backend.requests.last?.message ?? -1
    }

    /// Plays a whole utterance: begin, a mark per word, end.
    func play(_ message: Int, words: Int) async {
        await scheduler.handle(.begin(message: message))
        for word in 0..<words { await scheduler.handle(.indexMark(message: message, name: "hark-\(word)")) }
        await scheduler.handle(.end(message: message))
    }
}

@Suite struct SpeechSchedulerTests {
    @Test func speaksInOrderWithStartedRangesEnded() async throws {
        let h = Harness()
        try await h.scheduler.enqueue(h.utterance(1, text: "hi there"))
        try await h.scheduler.enqueue(h.utterance(2, text: "bye"))
        await h.play(await h.sent(1), words: 2)
        await h.play(await h.sent(2), words: 1)
        await eventually("both ended") { h.log.ended.count == 2 }
        let forOne = h.log.all.filter {
            switch $0 {
            case .started(1, _), .range(1, _, _, _), .ended(1, _, _): true
            default: false
            }
        }
        #expect(forOne == [.started(id: 1, owner: ":1.1"), .range(id: 1, owner: ":1.1", start: 0, length: 2),
                           .range(id: 1, owner: ":1.1", start: 3, length: 5), .ended(id: 1, owner: ":1.1", reason: .completed)])
        #expect(h.log.ended == [1: .completed, 2: .completed])
        #expect(h.backend.requests.count == 2)
    }

    @Test func onlyOneUtteranceIsWithTheServerAtATime() async throws {
        let h = Harness()
        for id in UInt64(1)...3 { try await h.scheduler.enqueue(h.utterance(id)) }
        _ = await h.sent(1)
        try await Task.sleep(for: .milliseconds(20))
        #expect(h.backend.requests.count == 1)
    }

    @Test func clientsTakeTurns() async throws {
        let h = Harness()
        for id in UInt64(1)...3 { try await h.scheduler.enqueue(h.utterance(id, owner: ":1.1", text: "a\(id)")) }
        try await h.scheduler.enqueue(h.utterance(4, owner: ":1.2", text: "b"))
        for count in 1...4 { await h.play(await h.sent(count), words: 1) }
        let order = h.backend.requests.map(\.request.markup)
        #expect(order.map { $0.contains(">a1<") || $0.contains(">b<") } == [true, true, false, false])
        #expect(order[1].contains(">b<"), "a second client waited behind the first one's queue")
    }

    @Test func eventsBeforeTheMessageIDAreKept() async throws {
        let h = Harness()
        // The server's "begin" can overtake the reply to the speak request.
        try await h.scheduler.enqueue(h.utterance(1, text: "x"))
        await h.scheduler.handle(.begin(message: 101))
        let message = await h.sent(1)
        #expect(message == 101)
        await eventually("started from the early event") { h.log.all.contains(.started(id: 1, owner: ":1.1")) }
    }

    @Test func onlyTheOwnerCanCancel() async throws {
        let h = Harness()
        try await h.scheduler.enqueue(h.utterance(1, owner: ":1.1"))
        await #expect(throws: HarkError.self) { try await h.scheduler.cancel(1, owner: ":1.2") }
        try await h.scheduler.cancel(1, owner: ":1.1")
        #expect(h.log.ended == [1: .cancelled])
        await #expect(throws: HarkError.self) { try await h.scheduler.cancel(1, owner: ":1.1") }
    }

    @Test func cancellingTheSpeakingOneStopsTheServerAndMovesOn() async throws {
        let h = Harness()
        try await h.scheduler.enqueue(h.utterance(1))
        try await h.scheduler.enqueue(h.utterance(2))
        let first = await h.sent(1)
        await h.scheduler.handle(.begin(message: first))
        try await h.scheduler.cancel(1, owner: ":1.1")
        #expect(h.backend.cancelled == [first])
        _ = await h.sent(2)
        // The server's late cancel event for the old message changes nothing.
        await h.scheduler.handle(.cancel(message: first))
        #expect(h.log.ended == [1: .cancelled])
    }

    @Test func stopEndsEverythingOfTheOwnerOnly() async throws {
        let h = Harness()
        try await h.scheduler.enqueue(h.utterance(1, owner: ":1.1"))
        try await h.scheduler.enqueue(h.utterance(2, owner: ":1.1"))
        try await h.scheduler.enqueue(h.utterance(3, owner: ":1.2"))
        _ = await h.sent(1)
        await h.scheduler.stop(owner: ":1.1", afterCurrentWord: false)
        #expect(h.log.ended == [1: .cancelled, 2: .cancelled])
        await h.play(await h.sent(2), words: 3)
        await eventually("3 completed") { h.log.ended[3] == .completed }
    }

    @Test func stopAfterTheCurrentWordWaitsForTheNextMark() async throws {
        let h = Harness()
        try await h.scheduler.enqueue(h.utterance(1, text: "one two three"))
        let message = await h.sent(1)
        await h.scheduler.handle(.begin(message: message))
        await h.scheduler.handle(.indexMark(message: message, name: "hark-0"))
        await h.scheduler.stop(owner: ":1.1", afterCurrentWord: true)
        #expect(h.log.ended.isEmpty)
        await h.scheduler.handle(.indexMark(message: message, name: "hark-1"))
        #expect(h.log.ended == [1: .cancelled])
        #expect(!h.log.all.contains(.range(id: 1, owner: ":1.1", start: 4, length: 3)), "word two was reported though it was cut")
    }

    @Test func pauseAndContinueResumeFromTheWord() async throws {
        let h = Harness()
        try await h.scheduler.enqueue(h.utterance(1, text: "one two three"))
        let message = await h.sent(1)
        await h.scheduler.handle(.begin(message: message))
        await h.scheduler.handle(.indexMark(message: message, name: "hark-0"))
        await h.scheduler.handle(.indexMark(message: message, name: "hark-1"))
        await h.scheduler.pause(owner: ":1.1", afterCurrentWord: false)
        #expect(h.log.all.last == .paused(id: 1, owner: ":1.1"))
        #expect(h.backend.cancelled == [message])
        await h.scheduler.resume(owner: ":1.1")
        let resumed = await h.sent(2)
        #expect(h.backend.requests[1].request.markup.hasPrefix(#"<speak> <mark name="hark-1"/>two"#))
        await h.scheduler.handle(.begin(message: resumed))
        #expect(h.log.all.contains(.resumed(id: 1, owner: ":1.1")))
        await h.scheduler.handle(.indexMark(message: resumed, name: "hark-1"))
        await h.scheduler.handle(.indexMark(message: resumed, name: "hark-2"))
        await h.scheduler.handle(.end(message: resumed))
        #expect(h.log.ended == [1: .completed])
        #expect(h.log.all.filter { if case .started = $0 { true } else { false } }.count == 1)
    }

    @Test func pausedClientDoesNotHoldUpOthers() async throws {
        let h = Harness()
        try await h.scheduler.enqueue(h.utterance(1, owner: ":1.1"))
        _ = await h.sent(1)
        await h.scheduler.pause(owner: ":1.1", afterCurrentWord: false)
        try await h.scheduler.enqueue(h.utterance(2, owner: ":1.2"))
        _ = await h.sent(2)
        #expect(h.backend.requests[1].request.markup.contains("one"))
        #expect(h.log.ended.isEmpty)
    }

    @Test func assertiveInterruptsHarksOwnSpeech() async throws {
        let h = Harness()
        try await h.scheduler.enqueue(h.utterance(1, owner: ":1.1"))
        try await h.scheduler.enqueue(h.utterance(2, owner: ":1.1"))
        let first = await h.sent(1)
        await h.scheduler.handle(.begin(message: first))
        try await h.scheduler.enqueue(h.utterance(3, owner: ":1.2", text: "alert", interrupts: true))
        #expect(h.log.ended == [1: .interrupted])
        _ = await h.sent(2)
        #expect(h.backend.requests[1].request.markup.contains("alert"), "the announcement did not go first")
        #expect(h.backend.requests[1].request.priority == .important)
    }

    @Test func serverCancelMeansInterrupted() async throws {
        let h = Harness()
        try await h.scheduler.enqueue(h.utterance(1))
        let message = await h.sent(1)
        await h.scheduler.handle(.begin(message: message))
        await h.scheduler.handle(.cancel(message: message))
        #expect(h.log.ended == [1: .interrupted])
        #expect(await !h.scheduler.isSpeaking)
    }

    @Test func refusedByTheServerMeansFailed() async throws {
        let h = Harness()
        h.backend.state.withLock { $0.failNext = true }
        try await h.scheduler.enqueue(h.utterance(1))
        try await h.scheduler.enqueue(h.utterance(2))
        await eventually("1 failed") { h.log.ended[1] == .failed }
        _ = await h.sent(1)
    }

    @Test func aVanishedOwnersSpeechGoesSilently() async throws {
        let h = Harness()
        try await h.scheduler.enqueue(h.utterance(1, owner: ":1.1"))
        try await h.scheduler.enqueue(h.utterance(2, owner: ":1.1"))
        let message = await h.sent(1)
        await h.scheduler.ownerVanished(":1.1")
        #expect(h.backend.cancelled == [message])
        #expect(h.log.ended.isEmpty)
        #expect(await h.scheduler.queuedCount == 0)
    }

    @Test func detachedSpeechOutlivesItsOwnerAndCanBeStopped() async throws {
        let h = Harness()
        try await h.scheduler.enqueue(h.utterance(1, owner: ":1.1", detached: true))
        try await h.scheduler.enqueue(h.utterance(2, owner: ":1.1", detached: true))
        let message = await h.sent(1)
        await h.scheduler.ownerVanished(":1.1")
        #expect(h.backend.cancelled.isEmpty)
        await h.play(message, words: 3)
        _ = await h.sent(2)
        #expect(await h.scheduler.stopDetached(afterCurrentWord: false) == 1)
        #expect(h.log.ended == [1: .completed, 2: .cancelled])
    }

    @Test func speakingFollowsTheAudio() async throws {
        let h = Harness()
        try await h.scheduler.enqueue(h.utterance(1, text: "x"))
        let message = await h.sent(1)
        #expect(await !h.scheduler.isSpeaking)
        await h.scheduler.handle(.begin(message: message))
        #expect(await h.scheduler.isSpeaking)
        await h.scheduler.handle(.end(message: message))
        #expect(await !h.scheduler.isSpeaking)
        #expect(h.log.all.filter { if case .speakingChanged = $0 { true } else { false } } == [.speakingChanged(true), .speakingChanged(false)])
    }

    @Test func postDelayHoldsTheEndAndTheNext() async throws {
        let h = Harness()
        try await h.scheduler.enqueue(h.utterance(1, text: "x", postDelay: 0.2))
        try await h.scheduler.enqueue(h.utterance(2, text: "y"))
        await h.play(await h.sent(1), words: 1)
        #expect(h.log.ended.isEmpty)
        #expect(h.backend.requests.count == 1)
        await eventually("ended after the delay") { h.log.ended[1] == .completed }
        _ = await h.sent(2)
    }

    @Test func aServerThatWentAwayFailsTheUtteranceInsteadOfHanging() async throws {
        let h = Harness(stallCheck: .milliseconds(50))
        try await h.scheduler.enqueue(h.utterance(1))
        try await h.scheduler.enqueue(h.utterance(2))
        let message = await h.sent(1)
        await h.scheduler.handle(.begin(message: message))
        h.backend.state.withLock { $0.alive = false }
        await eventually("1 failed") { h.log.ended[1] == .failed }
        // The next one is tried (a real link reconnects).
        _ = await h.sent(2)
    }

    @Test func aSlowButLiveServerIsLeftAlone() async throws {
        let h = Harness(stallCheck: .milliseconds(20))
        try await h.scheduler.enqueue(h.utterance(1))
        let message = await h.sent(1)
        try await Task.sleep(for: .milliseconds(150))
        #expect(h.log.ended.isEmpty)
        await h.play(message, words: 3)
        #expect(h.log.ended == [1: .completed])
    }

    @Test func queueLimitPerOwner() async throws {
        let h = Harness(limit: 2)
        try await h.scheduler.enqueue(h.utterance(1))
        try await h.scheduler.enqueue(h.utterance(2))
        await #expect(throws: HarkError.self) { try await h.scheduler.enqueue(h.utterance(3)) }
        try await h.scheduler.enqueue(h.utterance(4, owner: ":1.9"))
    }

    @Test func shutdownEndsEveryUtteranceOnce() async throws {
        let h = Harness()
        for id in UInt64(1)...3 { try await h.scheduler.enqueue(h.utterance(id, owner: ":1.\(id)")) }
        _ = await h.sent(1)
        await h.scheduler.shutdown()
        #expect(h.log.ended == [1: .interrupted, 2: .interrupted, 3: .interrupted])
        await #expect(throws: HarkError.self) { try await h.scheduler.enqueue(h.utterance(9)) }
    }
}
