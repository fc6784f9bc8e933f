import DBus
import Foundation

/// The CLI's side of the bus: one connection to the session bus and calls to org.hark.Hark1,
/// with failures turned into one clear line for the user.
struct HarkClient {
    static let busName = "org.hark.Hark1"
    static let path = "/org/hark/Hark1"
    static let speech = "org.hark.Hark1.Speech"

    let connection: Connection

    static func connect() throws -> HarkClient {
        do {
            return HarkClient(connection: try Connection.session(label: "hark.cli"))
        } catch let error as DBusError {
            if error.name == "org.freedesktop.DBus.Error.NoServer", ProcessInfo.processInfo.environment["DBUS_SESSION_BUS_ADDRESS"] == nil {
                throw CLIError("no session bus: DBUS_SESSION_BUS_ADDRESS is not set (run hark inside a desktop session, or paste the line `make run` prints)")
            }
            throw CLIError("cannot reach the session bus: \(error.message)")
        }
    }

    func call(_ member: String, _ arguments: [DBusValue] = [], interface: String = speech, timeout: Duration = .seconds(30)) async throws -> [DBusValue] {
        do {
            return try await connection.call(destination: Self.busName, path: Self.path, interface: interface, member: member, arguments, timeout: timeout)
        } catch let error as DBusError {
            throw CLIError(describe(error))
        }
    }

    func property(_ name: String, interface: String = speech) async throws -> DBusValue {
        let reply = try await call("Get", [.string(interface), .string(name)], interface: "org.freedesktop.DBus.Properties")
        return reply.first?.unwrapped ?? .string("")
    }

    private func describe(_ error: DBusError) -> String {
        switch error.name {
        case "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.Spawn.ServiceNotFound":
            "Hark is not running on this session bus and cannot be started by D-Bus activation (is it installed? `make run` starts it)"
        case "org.freedesktop.DBus.Error.NoReply", "org.freedesktop.DBus.Error.Timeout":
            "Hark did not answer in time (\(error.message))"
        case let name where name.hasPrefix("org.freedesktop.DBus.Error.Spawn"):
            "Hark could not be started: \(error.message)"
        default:
            error.message
        }
    }
}

/// An error the CLI reports as one line on standard error.
struct CLIError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Waits for the signals of one utterance. Signals can arrive before the call that created the
/// utterance returns its id, so everything is kept until the id is known.
final class UtteranceWatcher: @unchecked Sendable {  // state guarded by `lock`
    enum Event { case started, range(start: Int, length: Int), ended(reason: UInt32) }

    private let lock = NSLock()
    private var events: [UInt64: [Event]] = [:]
    private var waiting: (id: UInt64, continuation: AsyncStream<Event>.Continuation)?

    init(connection: Connection) {
        connection.onSignal { [weak self] message in
            guard let self, message.interface == HarkClient.speech, let member = message.member else { return }
            let body = message.body
            guard let id = body.first?.uint64Value else { return }
            let event: Event
            switch member {
            case "UtteranceStarted": event = .started
            case "UtteranceRange":
                guard body.count == 3, let start = body[1].uint32Value, let length = body[2].uint32Value else { return }
                event = .range(start: Int(start), length: Int(length))
            case "UtteranceEnded":
                guard body.count == 2, let reason = body[1].uint32Value else { return }
                event = .ended(reason: reason)
            default: return
            }
            self.deliver(id, event)
        }
    }

    private func deliver(_ id: UInt64, _ event: Event) {
        lock.lock()
        defer { lock.unlock() }
        if let waiting, waiting.id == id {
            waiting.continuation.yield(event)
            if case .ended = event { waiting.continuation.finish() }
        } else {
            events[id, default: []].append(event)
        }
    }

    /// The utterance's events from the start, ending with `.ended`.
    func events(of id: UInt64) -> AsyncStream<Event> {
        let (stream, continuation) = AsyncStream<Event>.makeStream()
        lock.lock()
        defer { lock.unlock() }
        var ended = false
        for event in events.removeValue(forKey: id) ?? [] {
            continuation.yield(event)
            if case .ended = event { ended = true }
        }
        if ended { continuation.finish() } else { waiting = (id, continuation) }
        return stream
    }
}
