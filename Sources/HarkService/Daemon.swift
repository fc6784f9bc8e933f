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
    let link: SpeechDispatcherLink
    let logger: Logger

    public init(logger: Logger, defaults: SpeechDefaults = SpeechDefaults()) throws {
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
        let scheduler = SpeechScheduler(backend: link) { notice in publisher.publish(notice) }
        let monitor = ScreenReaderMonitor(logger: logger, bus: connection) { speech in publisher.publishScreenReader(speech) }
        speech = SpeechService(scheduler: scheduler, catalog: catalog, defaults: defaults, screenReader: monitor, logger: logger)
        let interface = SpeechInterface(service: speech, server: server)
        publisher.set(interface)
        let speechInterface = interface.exported()
        // The XML in dbus/ is the contract; serving something else is a programming error.
        precondition(speechInterface.mismatches.isEmpty, "dbus/ and the code disagree: \(speechInterface.mismatches)")
        server.export(path: Hark.objectPath, interfaces: [speechInterface])
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
        await speech.screenReader.start()
        await speech.screenReader.checkBusNames()
        guard try await connection.requestName(Hark.busName) == .primaryOwner else { throw StartError.nameTaken }
        logger.info("serving \(Hark.busName) on the session bus", metadata: ["unique-name": "\(connection.uniqueName)"])
    }

    /// Ends every utterance (its owner gets UtteranceEnded, interrupted) and sends what is queued.
    public func shutdown() async {
        await speech.scheduler.shutdown()
        connection.flush()
        logger.info("stopped")
    }
}

/// Hands scheduler notices to the interface in order. Set once before any notice can exist.
private final class Publisher: @unchecked Sendable {  // `interface` is written once, before use
    private var interface: SpeechInterface?
    func set(_ interface: SpeechInterface) { self.interface = interface }
    func publish(_ notice: SpeechNotice) { interface?.publish(notice) }
    func publishScreenReader(_ speech: ScreenReaderSpeech?) { interface?.publishScreenReader(speech) }
}
