/// The speech server as the scheduler sees it.
public protocol SpeechBackend: Sendable {
    /// Sends one request and returns the server's message id. Events for that message may be
    /// reported to `SpeechScheduler.handle(_:)` before this returns.
    func speak(_ request: SynthesisRequest) async throws -> Int
    /// Stops the message (speaking or waiting in the server). Takes effect in call order
    /// relative to `speak` requests made after it.
    func cancel(message: Int)
    /// Whether the server still answers. Asked only when a message has had no event for a while.
    func isAlive() async -> Bool
}

/// An event of the speech server about one message.
public enum BackendEvent: Sendable, Equatable {
    case begin(message: Int)
    case end(message: Int)
    case cancel(message: Int)
    case indexMark(message: Int, name: String)

    var message: Int {
        switch self {
        case .begin(let m), .end(let m), .cancel(let m), .indexMark(let m, _): m
        }
    }
}

/// Hark's speech queue: one queue per client, served round-robin so that no client's flood
/// delays another's announcement; assertive announcements (and `important`) go first and
/// interrupt Hark's current speech. Exactly one utterance is with the speech server at a time,
/// so Hark alone decides order, cancellation and pausing.
///
/// Every utterance accepted ends with exactly one `.ended` notice (unless its owner left the
/// bus, when nobody is there to hear it).
public actor SpeechScheduler {
    public let maximumQueuedPerOwner: Int
    private let backend: any SpeechBackend
    private let notify: @Sendable (SpeechNotice) -> Void
    private let focus: (any AudioFocus)?
    private var focusHeld = false

    private struct Entry {
        var utterance: Utterance
        var resumeWord = 0
        var started = false
        /// Paused mid-way: the next begin is a resume.
        var pausedMidway = false
    }

    private enum Phase { case preDelay, sending, sent, sounding, postDelay }
    private enum AfterWord { case pause, stop }

    private struct Current {
        let id: UInt64
        let generation: UInt64
        var message: Int?
        var phase: Phase
        var lastWord: Int?
        /// Stop or pause when the word after `word` begins.
        var afterWord: (action: AfterWord, word: Int)?
    }

    private var entries: [UInt64: Entry] = [:]
    private var queues: [String: [UInt64]] = [:]
    private var urgent: [UInt64] = []
    private var rotation: [String] = []
    private var lastServed: String?
    private var pausedOwners: Set<String> = []
    private var current: Current?
    private var generation: UInt64 = 0
    private var buffered: [Int: [BackendEvent]] = [:]
    private var speaking = false
    private var accepting = true

    /// After this long without an event for the message with the server, the server is asked
    /// whether it is still there; if not, the utterance fails instead of waiting forever.
    public let stallCheckInterval: Duration
    private var lastEvent = ContinuousClock.now
    private var watchdog: Task<Void, Never>?

    public init(backend: any SpeechBackend, focus: (any AudioFocus)? = nil, maximumQueuedPerOwner: Int = 1000,
                stallCheckInterval: Duration = .seconds(5), notify: @escaping @Sendable (SpeechNotice) -> Void) {
        self.backend = backend
        self.focus = focus
        self.maximumQueuedPerOwner = maximumQueuedPerOwner
        self.stallCheckInterval = stallCheckInterval
        self.notify = notify
    }

    // MARK: Requests

    /// Queues an utterance.
    public func enqueue(_ utterance: Utterance) throws(HarkError) {
        guard accepting else { throw HarkError(.unavailable, "Hark is shutting down") }
        let owned = queues[utterance.owner, default: []].count + urgent.filter { entries[$0]?.utterance.owner == utterance.owner }.count
        guard owned < maximumQueuedPerOwner else {
            throw HarkError(.limitExceeded, "you already have \(owned) utterances queued; the limit is \(maximumQueuedPerOwner)")
        }
        entries[utterance.id] = Entry(utterance: utterance)
        if utterance.interrupts {
            urgent.append(utterance.id)
            if let current, let entry = entries[current.id], !entry.utterance.interrupts {
                end(current.id, .interrupted)
            }
        } else {
            queues[utterance.owner, default: []].append(utterance.id)
            join(utterance.owner)
        }
        pump()
    }

    /// Cancels one of `owner`'s utterances; NotFound if it has no such utterance.
    public func cancel(_ id: UInt64, owner: String) throws(HarkError) {
        guard let entry = entries[id], entry.utterance.owner == owner else {
            throw .notFound("you have no queued or speaking utterance \(id)")
        }
        end(id, .cancelled)
        pump()
    }

    /// Stops all of `owner`'s speech: now, or after the word being spoken.
    public func stop(owner: String, afterCurrentWord: Bool) {
        pausedOwners.remove(owner)
        for id in ownedIDs(owner) where id != current?.id { end(id, .cancelled) }
        if let current, entries[current.id]?.utterance.owner == owner {
            if afterCurrentWord, current.phase == .sounding, let word = current.lastWord {
                self.current?.afterWord = (.stop, word)
            } else {
                end(current.id, .cancelled)
            }
        }
        pump()
    }

    /// Pauses `owner`'s speech: now (resuming from the word that was sounding) or after the
    /// current word (resuming from the next). Its queued utterances wait until it continues.
    public func pause(owner: String, afterCurrentWord: Bool) {
        let owns = !ownedIDs(owner).isEmpty
        guard owns else { return }
        pausedOwners.insert(owner)
        guard let current, entries[current.id]?.utterance.owner == owner else { return }
        if afterCurrentWord, current.phase == .sounding, let word = current.lastWord {
            self.current?.afterWord = (.pause, word)
        } else {
            pauseCurrent(resumeAt: current.lastWord ?? 0)
        }
        pump()
    }

    /// Lets `owner`'s speech go on from where it paused.
    public func resume(owner: String) {
        guard pausedOwners.remove(owner) != nil else { return }
        if let current, entries[current.id]?.utterance.owner == owner, current.afterWord?.action == .pause {
            self.current?.afterWord = nil
        }
        pump()
    }

    /// An owner left the bus: its speech is cancelled, silently, except detached utterances,
    /// which go on (in order) under `Utterance.detachedOwner`.
    public func ownerVanished(_ owner: String) {
        guard owner != Utterance.detachedOwner else { return }
        let wasPaused = pausedOwners.remove(owner) != nil
        for id in ownedIDs(owner) {
            guard var entry = entries[id] else { continue }
            if entry.utterance.detached {
                entry.utterance.owner = Utterance.detachedOwner
                entries[id] = entry
                if current?.id != id, !urgent.contains(id) {
                    queues[Utterance.detachedOwner, default: []].append(id)
                }
            } else {
                end(id, .cancelled, silently: true)
            }
        }
        if wasPaused, let current, entries[current.id]?.utterance.owner == Utterance.detachedOwner {
            // Nobody is left to continue it: a detached utterance does not stay paused.
            self.current?.afterWord = nil
        }
        queues[owner] = nil
        rotation.removeAll { $0 == owner }
        if queues[Utterance.detachedOwner] != nil { join(Utterance.detachedOwner) }
        pump()
    }

    /// Stops the detached utterances whose clients have left; returns how many there were.
    public func stopDetached(afterCurrentWord: Bool) -> Int {
        let count = ownedIDs(Utterance.detachedOwner).count
        stop(owner: Utterance.detachedOwner, afterCurrentWord: afterCurrentWord)
        return count
    }

    /// Ends every utterance (interrupted) and refuses new ones.
    public func shutdown() {
        accepting = false
        if let current { end(current.id, .interrupted) }
        for id in urgent { end(id, .interrupted) }
        for owner in rotation { for id in queues[owner] ?? [] { end(id, .interrupted) } }
    }

    public var isSpeaking: Bool { speaking }

    /// Whether `owner` has queued or speaking utterances.
    public func hasSpeech(owner: String) -> Bool { !ownedIDs(owner).isEmpty }

    public var queuedCount: Int { entries.count }

    // MARK: Server events

    public func handle(_ event: BackendEvent) {
        lastEvent = .now
        guard let current else { return }
        guard let message = current.message else {
            // The reply to `speak` has not come back yet: keep the event for when it does.
            buffered[event.message, default: []].append(event)
            if buffered.count > 16 { buffered.removeValue(forKey: buffered.keys.min()!) }
            return
        }
        guard event.message == message else { return }  // a message Hark already gave up on
        apply(event, to: current)
    }

    private func apply(_ event: BackendEvent, to current: Current) {
        guard var entry = entries[current.id] else { return }
        let owner = entry.utterance.owner
        switch event {
        case .begin:
            self.current?.phase = .sounding
            if !entry.started {
                entry.started = true
                notify(.started(id: current.id, owner: owner))
            } else if entry.pausedMidway {
                notify(.resumed(id: current.id, owner: owner))
            }
            entry.pausedMidway = false
            entries[current.id] = entry
            setSpeaking(true)
        case .indexMark(_, let name):
            guard let word = SpeechDocument.wordIndex(ofMark: name), word < entry.utterance.document.words.count else { return }
            if let after = current.afterWord, word > after.word {
                switch after.action {
                case .pause: pauseCurrent(resumeAt: word)
                case .stop: end(current.id, .cancelled)
                }
                pump()
                return
            }
            self.current?.lastWord = word
            let range = entry.utterance.document.words[word]
            notify(.range(id: current.id, owner: owner, start: range.start, length: range.length))
        case .end:
            setSpeaking(false)
            let postDelay = entry.utterance.postDelay
            if postDelay > 0 {
                self.current?.phase = .postDelay
                let generation = current.generation
                Task { [weak self] in
                    try? await Task.sleep(for: .seconds(postDelay))
                    await self?.postDelayElapsed(generation)
                }
            } else {
                end(current.id, .completed)
                pump()
            }
        case .cancel:
            // Hark did not ask for this (its own cancels drop the message first): other speech
            // with a higher priority, such as the screen reader's, took over.
            end(current.id, .interrupted)
            pump()
        }
    }

    private func postDelayElapsed(_ generation: UInt64) {
        guard let current, current.generation == generation else { return }
        end(current.id, .completed)
        pump()
    }

    // MARK: A server that went away

    /// While a message is with the server, checks now and then that events still come; a
    /// silent server is asked whether it is alive. Runs only while there is speech.
    private func watchServer() {
        guard watchdog == nil else { return }
        let interval = stallCheckInterval
        watchdog = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                guard let self, await self.checkServer() else { return }
            }
        }
    }

    /// Returns whether to keep watching.
    private func checkServer() async -> Bool {
        guard let current, current.message != nil, current.phase != .postDelay else {
            watchdog = nil
            return false
        }
        guard ContinuousClock.now - lastEvent >= stallCheckInterval else { return true }
        let generation = current.generation
        if await backend.isAlive() {
            lastEvent = .now
            return true
        }
        if let now = self.current, now.generation == generation {
            end(now.id, .failed)
            pump()
        }
        watchdog = nil
        return false
    }

    // MARK: Moving on

    private func ownedIDs(_ owner: String) -> [UInt64] {
        var ids = urgent.filter { entries[$0]?.utterance.owner == owner }
        ids += queues[owner] ?? []
        if let current, entries[current.id]?.utterance.owner == owner, !ids.contains(current.id) { ids.insert(current.id, at: 0) }
        return ids
    }

    /// Ends an utterance wherever it is, reports it, and stops its audio if it has any.
    private func end(_ id: UInt64, _ reason: EndReason, silently: Bool = false) {
        guard let entry = entries.removeValue(forKey: id) else { return }
        let owner = entry.utterance.owner
        urgent.removeAll { $0 == id }
        queues[owner]?.removeAll { $0 == id }
        if queues[owner]?.isEmpty == true {
            queues[owner] = nil
            rotation.removeAll { $0 == owner }
        }
        if let current, current.id == id {
            if let message = current.message, current.phase != .postDelay, reason != .completed {
                backend.cancel(message: message)
            }
            self.current = nil
            buffered.removeAll()
            if reason != .completed { setSpeaking(false) }
        }
        if !silently { notify(.ended(id: id, owner: owner, reason: reason)) }
    }

    private func pauseCurrent(resumeAt word: Int) {
        guard let current, var entry = entries[current.id] else { return }
        if let message = current.message, current.phase != .postDelay { backend.cancel(message: message) }
        self.current = nil
        buffered.removeAll()
        setSpeaking(false)
        entry.resumeWord = word
        if entry.started {
            entry.pausedMidway = true
            notify(.paused(id: current.id, owner: entry.utterance.owner))
        }
        entries[current.id] = entry
        pausedOwners.insert(entry.utterance.owner)
    }

    private func setSpeaking(_ value: Bool) {
        guard value != speaking else { return }
        speaking = value
        notify(.speakingChanged(value))
    }

    /// Starts the next utterance if nothing is with the server.
    private func pump() {
        guard current == nil else { return }
        guard accepting, let id = nextUtterance(), let entry = entries[id] else {
            releaseFocus()
            return
        }
        generation += 1
        let generation = generation
        let preDelay = entry.resumeWord == 0 && !entry.started ? entry.utterance.preDelay : 0
        current = Current(id: id, generation: generation, message: nil, phase: preDelay > 0 ? .preDelay : .sending)
        guard entry.utterance.duck, let focus else {
            releaseFocus()
            Task { [weak self] in
                if preDelay > 0 { try? await Task.sleep(for: .seconds(preDelay)) }
                await self?.send(generation)
            }
            return
        }
        // Other audio goes down during the pre-delay; the words wait for both.
        focusHeld = true
        let ducked = AsyncStream<Void>.makeStream()
        focus.acquire { ducked.continuation.finish() }
        Task { [weak self] in
            if preDelay > 0 { try? await Task.sleep(for: .seconds(preDelay)) }
            for await _ in ducked.stream {}
            await self?.send(generation)
        }
    }

    private func releaseFocus() {
        guard focusHeld, let focus else { return }
        focusHeld = false
        focus.release()
    }

    /// Adds an owner to the round: behind those waiting, ahead of the one served last.
    private func join(_ owner: String) {
        guard !rotation.contains(owner) else { return }
        if let last = rotation.last, last == lastServed {
            rotation.insert(owner, at: rotation.count - 1)
        } else {
            rotation.append(owner)
        }
    }

    private func nextUtterance() -> UInt64? {
        if let id = urgent.first { return id }
        for (index, owner) in rotation.enumerated() where !pausedOwners.contains(owner) {
            guard let id = queues[owner]?.first else { continue }
            rotation.remove(at: index)
            rotation.append(owner)
            lastServed = owner
            return id
        }
        return nil
    }

    private func send(_ generation: UInt64) async {
        guard let current, current.generation == generation, let entry = entries[current.id] else { return }
        self.current?.phase = .sending
        let request = SynthesisRequest(
            markup: entry.utterance.document.markup(fromWord: entry.resumeWord),
            voice: entry.utterance.voice, priority: entry.utterance.priority)
        let message: Int
        do {
            message = try await backend.speak(request)
        } catch {
            guard self.current?.generation == generation else { return }
            end(current.id, .failed)
            pump()
            return
        }
        guard self.current?.generation == generation else {
            // Ended or paused while it was being sent.
            backend.cancel(message: message)
            return
        }
        self.current?.message = message
        self.current?.phase = .sent
        lastEvent = .now
        watchServer()
        let early = buffered.removeValue(forKey: message) ?? []
        buffered.removeAll()
        for event in early {
            guard let now = self.current, now.generation == generation else { break }
            apply(event, to: now)
        }
    }
}
