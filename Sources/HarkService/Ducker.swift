import DBus
import Foundation
import HarkCore
import Logging
import PulseAudio

/// Lowers other playback streams while Hark speaks, and always gives the volume back: a journal
/// of what it lowered (in $XDG_RUNTIME_DIR/hark) is written before anything is lowered and read
/// at the next start; a volume the user changed meanwhile is kept; a maximum hold ends any duck.
///
/// Requests come from the scheduler in order (`acquire`, `release`) and from the sound server
/// (new streams); one task handles them one at a time.
actor Ducker: AudioFocus {
    enum Command: Sendable {
        case acquire(@Sendable () -> Void)
        case release
        case unduckAfterHold(UInt64)
        case maximumHoldReached(UInt64)
        case mixer(MixerEvent)
    }

    struct Lowered: Equatable {
        var applicationName: String
        var original: [UInt32]
        var lowered: [UInt32]
    }

    nonisolated let commands: AsyncStream<Command>.Continuation
    private let logger: Logger
    private let journalPath: String
    private let onDuckedChanged: @Sendable (Bool) -> Void
    private(set) var settings: AudioSettings
    private var mixer: Mixer?
    private var lowered: [UInt32: Lowered] = [:]
    /// Pause mode: the media players Hark paused (MPRIS bus names).
    private var paused: [String] = []
    private let bus: Connection?
    private var wanted = false
    private var generation: UInt64 = 0

    /// Ramp: this many steps, this far apart (about 150 ms: no click, over before the words).
    static let rampSteps = 6
    static let rampStepInterval: Duration = .milliseconds(25)
    /// How long the volume stays down after the last utterance that ducks.
    static let hold: Duration = .milliseconds(400)

    init(settings: AudioSettings, logger: Logger, bus: Connection? = nil, environment: [String: String] = ProcessInfo.processInfo.environment,
         onDuckedChanged: @escaping @Sendable (Bool) -> Void) {
        self.settings = settings
        self.bus = bus
        self.logger = logger
        self.onDuckedChanged = onDuckedChanged
        let runtime = environment["XDG_RUNTIME_DIR"] ?? "/tmp/hark-\(getuid())"
        journalPath = runtime + "/hark/ducked.json"
        let (stream, continuation) = AsyncStream<Command>.makeStream()
        commands = continuation
        Task { [weak self] in
            for await command in stream {
                await self?.handle(command)
            }
        }
    }

    // MARK: AudioFocus (called by the scheduler, in order)

    nonisolated func acquire(_ ready: @escaping @Sendable () -> Void) { commands.yield(.acquire(ready)) }
    nonisolated func release() { commands.yield(.release) }

    var isDucked: Bool { !lowered.isEmpty || !paused.isEmpty }

    func setMode(_ mode: DuckingMode) async {
        let previous = settings.mode
        settings.mode = mode
        if previous != mode { await unduck() }
    }

    func setLevel(_ level: Double) async {
        settings.level = level
        guard !lowered.isEmpty else { return }
        // Already ducked: move to the new level at once.
        for (index, entry) in lowered {
            let volumes = DuckingPolicy.rampStep(entry.original, level: level, fraction: 1, attenuate: Mixer.attenuate)
            lowered[index]?.lowered = volumes
            _ = await mixer?.setVolumes(index, volumes)
        }
        writeJournal()
    }

    // MARK: Commands

    private func handle(_ command: Command) async {
        switch command {
        case .acquire(let ready):
            generation += 1
            wanted = true
            switch settings.mode {
            case .duck: await duckAll()
            case .pause: await pausePlayers()
            case .off: break
            }
            let generation = generation
            let hold = settings.maximumHold
            Task { [commands] in
                try? await Task.sleep(for: .seconds(hold))
                commands.yield(.maximumHoldReached(generation))
            }
            ready()
        case .release:
            wanted = false
            generation += 1
            let generation = generation
            Task { [commands] in
                try? await Task.sleep(for: Self.hold)
                commands.yield(.unduckAfterHold(generation))
            }
        case .unduckAfterHold(let generation):
            guard generation == self.generation, !wanted else { return }
            await unduck()
        case .maximumHoldReached(let generation):
            guard generation == self.generation, isDucked else { return }
            logger.warning("other audio was lowered for \(Int(settings.maximumHold)) s (the maximum hold): bringing it back")
            await unduck()
        case .mixer(let event):
            await handleMixerEvent(event)
        }
    }

    private func handleMixerEvent(_ event: MixerEvent) async {
        switch event {
        case .streamAdded(let index):
            // A player that starts while Hark speaks is lowered at once.
            guard wanted, settings.mode == .duck, lowered[index] == nil, let mixer else { return }
            guard let stream = await settledStream(index, mixer: mixer), Self.shouldDuck(stream) else { return }
            let volumes = DuckingPolicy.rampStep(stream.volumes, level: settings.level, fraction: 1, attenuate: Mixer.attenuate)
            lowered[index] = Lowered(applicationName: stream.applicationName, original: stream.volumes, lowered: volumes)
            writeJournal()
            await mixer.setVolumes(index, volumes)
            publishDucked()
        case .streamRemoved(let index):
            guard lowered.removeValue(forKey: index) != nil else { return }
            writeJournal()
            publishDucked()
        case .streamChanged:
            break
        case .disconnected:
            logger.warning("the sound server went away; ducking reconnects on next use")
            mixer = nil
            lowered.removeAll()
            publishDucked()
        }
    }

    // MARK: Ducking

    private func connectedMixer() -> Mixer? {
        if let mixer { return mixer }
        do {
            let mixer = try Mixer(clientName: "hark")
            self.mixer = mixer
            let commands = commands
            Task { for await event in mixer.events { commands.yield(.mixer(event)) } }
            return mixer
        } catch {
            logger.warning("cannot duck: \(error)")
            return nil
        }
    }

    /// A stream that just appeared: pipewire-pulse reports its volume as 0 for a moment, and a
    /// 0 taken for the original would silence it for good when the volume is given back.
    private func settledStream(_ index: UInt32, mixer: Mixer) async -> PlaybackStream? {
        for attempt in 0..<20 {
            guard let stream = await mixer.streams().first(where: { $0.index == index }) else { return nil }
            if stream.volumes.contains(where: { $0 > 0 }) || attempt == 19 { return stream }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return nil
    }

    static func shouldDuck(_ stream: PlaybackStream) -> Bool {
        DuckingPolicy.shouldDuck(StreamFacts(applicationName: stream.applicationName, binary: stream.binary,
                                             mediaName: stream.mediaName, volumeWritable: stream.volumeWritable))
    }

    private func duckAll() async {
        guard let mixer = connectedMixer() else { return }
        var targets: [PlaybackStream] = []
        for stream in await mixer.streams() where Self.shouldDuck(stream) && lowered[stream.index] == nil {
            if stream.volumes.allSatisfy({ $0 == 0 }), let settled = await settledStream(stream.index, mixer: mixer) {
                targets.append(settled)
            } else {
                targets.append(stream)
            }
        }
        guard !targets.isEmpty else { return }
        let level = settings.level
        for stream in targets {
            let final = DuckingPolicy.rampStep(stream.volumes, level: level, fraction: 1, attenuate: Mixer.attenuate)
            lowered[stream.index] = Lowered(applicationName: stream.applicationName, original: stream.volumes, lowered: final)
        }
        // Written before the first volume changes: a crash from here on is repaired at next start.
        writeJournal()
        for step in 1...Self.rampSteps {
            let fraction = Double(step) / Double(Self.rampSteps)
            for stream in targets {
                await mixer.setVolumes(stream.index, DuckingPolicy.rampStep(stream.volumes, level: level, fraction: fraction, attenuate: Mixer.attenuate))
            }
            if step < Self.rampSteps { try? await Task.sleep(for: Self.rampStepInterval) }
        }
        publishDucked()
        logger.debug("ducked \(targets.count) stream(s) by \(level) dB")
    }

    private func unduck() async {
        await resumePlayers()
        guard !lowered.isEmpty else { return }
        guard let mixer else {
            lowered.removeAll()
            publishDucked()
            return
        }
        // Only streams still where Hark left them: a volume the user changed stays.
        let now = Dictionary(await mixer.streams().map { ($0.index, $0.volumes) }, uniquingKeysWith: { first, _ in first })
        let back = lowered.filter { now[$0.key] == $0.value.lowered }
        let level = settings.level
        for step in 1...Self.rampSteps {
            let fraction = 1 - Double(step) / Double(Self.rampSteps)
            for (index, entry) in back {
                let volumes = step == Self.rampSteps ? entry.original
                    : DuckingPolicy.rampStep(entry.original, level: level, fraction: fraction, attenuate: Mixer.attenuate)
                await mixer.setVolumes(index, volumes)
            }
            if step < Self.rampSteps { try? await Task.sleep(for: Self.rampStepInterval) }
        }
        lowered.removeAll()
        writeJournal()
        publishDucked()
        logger.debug("gave the volume back to \(back.count) stream(s)")
    }

    // MARK: Pause mode (MPRIS)

    private static let mprisPath = "/org/mpris/MediaPlayer2"
    private static let mprisPlayer = "org.mpris.MediaPlayer2.Player"

    private func playbackStatus(_ player: String) async -> String? {
        guard let bus else { return nil }
        let reply = try? await bus.call(destination: player, path: Self.mprisPath, interface: "org.freedesktop.DBus.Properties",
                                        member: "Get", [.string(Self.mprisPlayer), .string("PlaybackStatus")], timeout: .milliseconds(500))
        return reply?.first?.stringValue
    }

    private func player(_ player: String, _ method: String) async -> Bool {
        guard let bus else { return false }
        return (try? await bus.call(destination: player, path: Self.mprisPath, interface: Self.mprisPlayer, member: method,
                                    timeout: .milliseconds(500))) != nil
    }

    /// Pauses the media players that are playing, remembering exactly those.
    private func pausePlayers() async {
        guard let bus, paused.isEmpty else { return }
        let names = (try? await bus.call(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                         interface: "org.freedesktop.DBus", member: "ListNames"))?.first?.arrayValue?.compactMap(\.stringValue) ?? []
        for name in names where name.hasPrefix("org.mpris.MediaPlayer2.") {
            guard await playbackStatus(name) == "Playing" else { continue }
            paused.append(name)
            writeJournal()  // before pausing: a crash from here on is repaired at next start
            if await !player(name, "Pause") { paused.removeAll { $0 == name } }
        }
        writeJournal()
        publishDucked()
        if !paused.isEmpty { logger.debug("paused \(paused.joined(separator: ", "))") }
    }

    /// Resumes the players Hark paused, if they are still paused (the user may have stopped
    /// or started them meanwhile: then they are left alone).
    private func resumePlayers(_ players: [String]? = nil) async {
        let players = players ?? paused
        guard !players.isEmpty else { return }
        for name in players where await playbackStatus(name) == "Paused" {
            _ = await player(name, "Play")
        }
        paused.removeAll()
        writeJournal()
        publishDucked()
    }

    private var lastPublished = false
    private func publishDucked() {
        let ducked = isDucked
        guard ducked != lastPublished else { return }
        lastPublished = ducked
        onDuckedChanged(ducked)
    }

    // MARK: Journal

    private func writeJournal() {
        let url = URL(fileURLWithPath: journalPath)
        if lowered.isEmpty, paused.isEmpty {
            try? FileManager.default.removeItem(at: url)
            return
        }
        let journal = DuckingJournal(entries: lowered.sorted { $0.key < $1.key }.map {
            .init(index: $0.key, applicationName: $0.value.applicationName, original: $0.value.original, lowered: $0.value.lowered)
        }, pausedPlayers: paused)
        do {
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
            try journal.encoded().write(to: url, options: .atomic)
        } catch {
            logger.error("cannot write the ducking journal \(journalPath): \(error)")
        }
    }

    /// Gives back what a previous harkd left lowered (it crashed, or was killed). Returns how
    /// many streams were restored.
    @discardableResult
    func restoreFromJournal() async -> Int {
        guard let data = FileManager.default.contents(atPath: journalPath) else { return 0 }
        defer { try? FileManager.default.removeItem(atPath: journalPath) }
        guard let journal = DuckingJournal.decode(data) else {
            logger.warning("the ducking journal \(journalPath) is unreadable; removed")
            return 0
        }
        await resumePlayers(journal.pausedPlayers)
        guard !journal.entries.isEmpty, let mixer = connectedMixer() else { return journal.pausedPlayers.count }
        let now = Dictionary(await mixer.streams().map { ($0.index, $0.volumes) }, uniquingKeysWith: { first, _ in first })
        let restorations = journal.restorations(current: now)
        for (index, volumes) in restorations { await mixer.setVolumes(index, volumes) }
        logger.info("restored the volume of \(restorations.count) stream(s) a previous harkd left lowered")
        return restorations.count + journal.pausedPlayers.count
    }
}
