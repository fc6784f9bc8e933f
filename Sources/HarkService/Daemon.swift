import DBus
import Foundation
import HarkCore
import Logging
import SpeechDispatcher

/// harkd: everything wired together on the session bus.
public final class Daemon: Sendable {
    public enum StartError: Error, CustomStringConvertible {
        case nameTaken
        public var description: String {
            switch self {
            case .nameTaken: "another program already owns \(Hark.busName) on this session bus (is harkd already running?)"
            }
        }
    }

    let connection: Connection
    let server: ObjectServer
    let speech: SpeechService
    let ducker: Ducker
    let link: SpeechDispatcherLink
    let logger: Logger

    public init(logger: Logger, configuration: ConfigurationFile = ConfigurationFile()) throws {
        let (defaults, audioSettings) = configuration.load(logger: logger)
        self.logger = logger
        connection = try Connection.session(label: "hark.bus")
        server = ObjectServer(connection: connection)
        let link = SpeechDispatcherLink()
        self.link = link
        if let error = link.connect() {
            logger.error("\(error); speech will fail until it can be reached")
        }
        let server = server
        let catalog = VoiceCatalog(preferredModule: link.defaultModule) { try await link.listVoices() }
        let publisher = Publisher()
        let ducker = Ducker(settings: audioSettings, logger: logger, bus: connection) { ducked in publisher.publishDucked(ducked) }
        self.ducker = ducker
        let scheduler = SpeechScheduler(backend: link, focus: ducker) { notice in publisher.publish(notice) }
        let monitor = ScreenReaderMonitor(logger: logger, bus: connection) { speech in publisher.publishScreenReader(speech) }
        speech = SpeechService(scheduler: scheduler, catalog: catalog, defaults: defaults, screenReader: monitor, logger: logger)
        let interface = SpeechInterface(service: speech, server: server)
        let audio = AudioInterface(ducker: ducker, server: server, configuration: configuration, logger: logger)
        publisher.set(interface, audio)
        let exported = [interface.exported(), audio.exported()]
        // The XML in dbus/ is the contract; serving something else is a programming error.
        for served in exported {
            precondition(served.mismatches.isEmpty, "dbus/ and the code disagree: \(served.mismatches)")
        }
        server.export(path: Hark.objectPath, interfaces: exported)
    }

    /// Starts serving: events, owner tracking, then the bus name (last, so that a caller that
    /// activated harkd finds everything ready).
    public func start() async throws {
        let scheduler = speech.scheduler
        let events = link.events
        Task { for await event in events { await scheduler.handle(event) } }

        let speech = speech
        try await connection.addMatch(
            "type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',member='NameOwnerChanged'"
        ) { message in
            let body = message.body
            guard body.count == 3, let name = body[0].stringValue, let newOwner = body[2].stringValue else { return }
            if name.hasPrefix(":") {
                if newOwner.isEmpty { Task { await speech.ownerVanished(name) } }
            } else if name == ScreenReaderMonitor.orcaServiceName || name == ScreenReaderMonitor.legacyOrcaServiceName {
                Task { await speech.screenReader.busNameChanged(name, owned: !newOwner.isEmpty) }
            }
        }
        // Orca 51+ announces changes of its live settings (including ones made with its keys).
        let monitor = speech.screenReader
        try await connection.addMatch(
            "type='signal',interface='org.freedesktop.DBus.Properties',member='PropertiesChanged',path='/org/gnome/Orca1/Service/SpeechManager'"
        ) { message in
            guard message.path == "/org/gnome/Orca1/Service/SpeechManager", message.member == "PropertiesChanged" else { return }
            Task { await monitor.refreshLive() }
        }
        connection.onDisconnect { [logger] in
            logger.critical("lost the session bus; exiting")
            exit(1)
        }
        // What a harkd that crashed left lowered comes back first.
        await ducker.restoreFromJournal()
        await speech.screenReader.start()
        await speech.screenReader.checkBusNames()
        guard try await connection.requestName(Hark.busName) == .primaryOwner else { throw StartError.nameTaken }
        logger.info("serving \(Hark.busName) on the session bus", metadata: ["unique-name": "\(connection.uniqueName)"])
    }

    /// Gives back what a previous harkd left lowered, for `harkd --restore-audio`.
    public static func restoreAudio(logger: Logger) async -> Int {
        let ducker = Ducker(settings: AudioSettings(), logger: logger, bus: try? Connection.session(label: "hark.restore")) { _ in }
        return await ducker.restoreFromJournal()
    }

    /// Ends every utterance (its owner gets UtteranceEnded, interrupted) and sends what is queued.
    public func shutdown() async {
        await speech.scheduler.shutdown()
        ducker.release()
        try? await Task.sleep(for: Ducker.hold + .milliseconds(300))
        connection.flush()
        logger.info("stopped")
    }
}

/// Hands scheduler notices to the interface in order. Set once before any notice can exist.
private final class Publisher: @unchecked Sendable {  // `interface` is written once, before use
    private var interface: SpeechInterface?
    private var audio: AudioInterface?
    func set(_ interface: SpeechInterface, _ audio: AudioInterface) {
        self.interface = interface
        self.audio = audio
    }
    func publishDucked(_ ducked: Bool) { audio?.publishDucked(ducked) }
    func publish(_ notice: SpeechNotice) { interface?.publish(notice) }
    func publishScreenReader(_ speech: ScreenReaderSpeech?) { interface?.publishScreenReader(speech) }
}
