import ArgumentParser
import Foundation
import HarkCore
import HarkService
import Logging
import ServiceLifecycle

@main
struct Harkd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "harkd",
        abstract: "Hark's speech service on the session D-Bus (org.hark.Hark1).",
        discussion: """
            harkd is normally started by D-Bus activation on the first call to org.hark.Hark1 \
            (under systemd as the user unit hark.service); you rarely run it yourself. It speaks \
            through Speech Dispatcher (SPEECHD_ADDRESS selects the server) and logs to standard \
            error (the journal, under systemd).

            Examples:
              harkd                      serve on the session bus of this login
              harkd --log-level debug    also log every utterance queued
              make run                   build and run it, in a private sandbox when there is no desktop
            """,
        version: Hark.version
    )

    @Option(help: ArgumentHelp("How much to log: trace, debug, info, notice, warning, error, critical.", valueName: "level"))
    var logLevel: String = ProcessInfo.processInfo.environment["HARK_LOG_LEVEL"] ?? "info"

    @Flag(help: "Give back the volume of streams a harkd that crashed left lowered, then exit (for systemd's ExecStopPost=).")
    var restoreAudio = false

    func validate() throws {
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("'\(logLevel)' is not a log level: use trace, debug, info, notice, warning, error or critical")
        }
    }

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "harkd")
        if restoreAudio {
            let count = await Daemon.restoreAudio(logger: logger)
            print("restored \(count) stream(s)")
            return
        }
        let daemon: Daemon
        do {
            daemon = try Daemon(logger: logger)
            try await daemon.start()
        } catch {
            logger.critical("cannot start: \(error)")
            throw ExitCode.failure
        }
        let group = ServiceGroup(
            services: [DaemonService(daemon: daemon)],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger
        )
        try await group.run()
    }
}

/// Keeps harkd alive until SIGTERM/SIGINT, then ends every utterance before exiting.
struct DaemonService: Service {
    let daemon: Daemon
    func run() async throws {
        try? await gracefulShutdown()
        await daemon.shutdown()
    }
}
