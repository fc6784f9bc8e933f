import CDBus
import Dispatch
import Foundation

/// A connection to a message bus, driven by Dispatch sources on one serial queue: no thread
/// blocks in libdbus and nothing polls. Every libdbus call on the connection happens on
/// `queue`; that serial queue is what makes this class safe to share (`@unchecked Sendable`).
public final class Connection: @unchecked Sendable {
    let raw: OpaquePointer
    public let queue: DispatchQueue
    /// This connection's unique bus name (":1.42").
    public let uniqueName: String

    /// Called on `queue` for every method call addressed to this connection, in arrival order.
    /// It must reply (through `send`) exactly once unless the caller asked for no reply.
    var methodCallHandler: (@Sendable (Message) -> Void)?
    /// Called on `queue` for every signal that matched a rule added with `addMatch`.
    private var signalHandlers: [UUID: @Sendable (Message) -> Void] = [:]
    private var disconnectHandlers: [@Sendable () -> Void] = []
    private var watches: [WatchBox] = []

    private static let threadsInitialized: Bool = {
        dbus_threads_init_default() != 0
    }()

    /// Connects to the session bus named by `DBUS_SESSION_BUS_ADDRESS`.
    public static func session(label: String = "hark-dbus") throws -> Connection {
        guard let address = ProcessInfo.processInfo.environment["DBUS_SESSION_BUS_ADDRESS"], !address.isEmpty else {
            throw DBusError(name: "org.freedesktop.DBus.Error.NoServer",
                            message: "no session bus: DBUS_SESSION_BUS_ADDRESS is not set")
        }
        return try Connection(address: address, label: label)
    }

    /// Connects and registers with the bus at `address`.
    public init(address: String, label: String = "hark-dbus") throws {
        _ = Self.threadsInitialized
        let error = DBusErrorStorage()
        guard let raw = dbus_connection_open_private(address, &error.raw) else {
            throw error.take(or: "cannot connect to the bus at \(address)")
        }
        guard dbus_bus_register(raw, &error.raw) != 0 else {
            dbus_connection_close(raw)
            dbus_connection_unref(raw)
            throw error.take(or: "cannot register with the bus at \(address)")
        }
        self.raw = raw
        self.queue = DispatchQueue(label: label)
        self.uniqueName = dbus_bus_get_unique_name(raw).map { String(cString: $0) } ?? ""
        dbus_connection_set_exit_on_disconnect(raw, 0)
        queue.sync { self.attachToQueue() }
    }

    deinit {
        // Detach every hook first: libdbus must not call back into an object being destroyed.
        dbus_connection_set_dispatch_status_function(raw, nil, nil, nil)
        dbus_connection_set_watch_functions(raw, nil, nil, nil, nil, nil)
        dbus_connection_set_timeout_functions(raw, nil, nil, nil, nil, nil)
        dbus_connection_close(raw)
        dbus_connection_unref(raw)
    }

    /// Closes the connection. Messages already queued are flushed first.
    public func close() {
        queue.sync {
            dbus_connection_flush(raw)
            for watch in watches { watch.cancel() }
            watches.removeAll()
            dbus_connection_close(raw)
        }
    }

    // MARK: Sending

    /// Queues a message for sending.
    public func send(_ message: Message) {
        queue.async {
            _ = dbus_connection_send(self.raw, message.raw, nil)
        }
    }

    /// Sends everything queued, waiting until it is written.
    public func flush() {
        queue.sync { dbus_connection_flush(raw) }
    }

    /// Calls a method and waits for its reply. Error replies are thrown as `DBusError`.
    public func call(_ message: Message, timeout: Duration = .seconds(25)) async throws -> Message {
        let milliseconds = Int32(clamping: timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        let reply: Message = try await withCheckedThrowingContinuation { continuation in
            queue.async {
                var pending: OpaquePointer?
                guard dbus_connection_send_with_reply(self.raw, message.raw, &pending, milliseconds) != 0, let pending else {
                    continuation.resume(throwing: DBusError(name: "org.freedesktop.DBus.Error.Disconnected",
                                                            message: "the bus connection is closed"))
                    return
                }
                let box = Unmanaged.passRetained(ReplyBox(continuation)).toOpaque()
                dbus_pending_call_set_notify(pending, { pending, userData in
                    let box = Unmanaged<ReplyBox>.fromOpaque(userData!).takeUnretainedValue()
                    if let raw = dbus_pending_call_steal_reply(pending) {
                        box.resume(Message(taking: raw))
                    }
                }, box, { userData in
                    Unmanaged<ReplyBox>.fromOpaque(userData!).release()
                })
                // The reply may already be there (set_notify then never fires for it).
                if dbus_pending_call_get_completed(pending) != 0, let raw = dbus_pending_call_steal_reply(pending) {
                    Unmanaged<ReplyBox>.fromOpaque(box).takeUnretainedValue().resume(Message(taking: raw))
                }
                dbus_pending_call_unref(pending)
            }
        }
        if let error = reply.asError { throw error }
        return reply
    }

    /// Convenience: call and decode the body.
    public func call(
        destination: String, path: String, interface: String, member: String, _ body: [DBusValue] = [],
        timeout: Duration = .seconds(25)
    ) async throws -> [DBusValue] {
        let message = try Message.methodCall(destination: destination, path: path, interface: interface, member: member, body: body)
        return try await call(message, timeout: timeout).body
    }

    // MARK: Bus names and matching

    public enum NameRequestResult: Sendable { case primaryOwner, inQueue, exists, alreadyOwner }

    /// Asks the bus for a well-known name, without queueing behind another owner.
    public func requestName(_ name: String) async throws -> NameRequestResult {
        let reply = try await call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "RequestName", [.string(name), .uint32(4 /* DBUS_NAME_FLAG_DO_NOT_QUEUE */)])
        switch reply.first?.uint32Value {
        case 1: return .primaryOwner
        case 2: return .inQueue
        case 3: return .exists
        default: return .alreadyOwner
        }
    }

    /// Adds a match rule and a handler for the signals it lets through. Returns a token for removal.
    @discardableResult
    public func addMatch(_ rule: String, handler: @escaping @Sendable (Message) -> Void) async throws -> UUID {
        let token = UUID()
        queue.sync { signalHandlers[token] = handler }
        _ = try await call(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                           interface: "org.freedesktop.DBus", member: "AddMatch", [.string(rule)])
        return token
    }

    /// Adds a handler for signals addressed to this connection (unicast signals need no match
    /// rule). Returns a token for removal.
    @discardableResult
    public func onSignal(_ handler: @escaping @Sendable (Message) -> Void) -> UUID {
        let token = UUID()
        queue.sync { signalHandlers[token] = handler }
        return token
    }

    public func removeSignalHandler(_ token: UUID) {
        queue.async { self.signalHandlers[token] = nil }
    }

    /// Runs `handler` on the connection's queue when the bus connection is lost.
    public func onDisconnect(_ handler: @escaping @Sendable () -> Void) {
        queue.async { self.disconnectHandlers.append(handler) }
    }

    public var isConnected: Bool { queue.sync { dbus_connection_get_is_connected(raw) != 0 } }

    // MARK: The loop

    private func attachToQueue() {
        let me = Unmanaged.passUnretained(self).toOpaque()
        dbus_connection_set_watch_functions(raw, { watch, data in
            Unmanaged<Connection>.fromOpaque(data!).takeUnretainedValue().addWatch(watch!)
        }, { watch, data in
            Unmanaged<Connection>.fromOpaque(data!).takeUnretainedValue().removeWatch(watch!)
        }, { watch, _ in
            WatchBox.from(watch!)?.update()
        }, me, nil)
        dbus_connection_set_timeout_functions(raw, { timeout, data in
            Unmanaged<Connection>.fromOpaque(data!).takeUnretainedValue().addTimeout(timeout!)
        }, { timeout, _ in
            TimeoutBox.from(timeout!)?.cancel()
        }, { timeout, _ in
            TimeoutBox.from(timeout!)?.update()
        }, me, nil)
        // May only schedule: libdbus holds the connection lock when it calls this. The block
        // holds the connection weakly: it may run after the last user let go.
        let weakSelf = Unmanaged.passRetained(WeakConnection(self)).toOpaque()
        dbus_connection_set_dispatch_status_function(raw, { _, status, data in
            guard status == DBUS_DISPATCH_DATA_REMAINS else { return }
            let box = Unmanaged<WeakConnection>.fromOpaque(data!).takeUnretainedValue()
            box.queue.async { box.connection?.dispatchAll() }
        }, weakSelf, { data in
            Unmanaged<WeakConnection>.fromOpaque(data!).release()
        })
        dbus_connection_add_filter(raw, { _, message, data in
            Unmanaged<Connection>.fromOpaque(data!).takeUnretainedValue().filter(message!)
        }, me, nil)
        dispatchAll()
    }

    private func dispatchAll() {
        while dbus_connection_dispatch(raw) == DBUS_DISPATCH_DATA_REMAINS {}
    }

    private func filter(_ raw: OpaquePointer) -> DBusHandlerResult {
        let message = Message(retaining: raw)
        switch message.kind {
        case .methodCall:
            guard let handler = methodCallHandler else { return DBUS_HANDLER_RESULT_NOT_YET_HANDLED }
            handler(message)
            return DBUS_HANDLER_RESULT_HANDLED
        case .signal:
            if message.interface == "org.freedesktop.DBus.Local", message.member == "Disconnected" {
                for handler in disconnectHandlers { handler() }
                return DBUS_HANDLER_RESULT_HANDLED
            }
            for handler in signalHandlers.values { handler(message) }
            return DBUS_HANDLER_RESULT_NOT_YET_HANDLED
        default:
            return DBUS_HANDLER_RESULT_NOT_YET_HANDLED
        }
    }

    private func addWatch(_ watch: OpaquePointer) -> dbus_bool_t {
        let box = WatchBox(watch: watch, queue: queue) { [weak self] in self?.dispatchAll() }
        watches.append(box)
        return 1
    }

    private func removeWatch(_ watch: OpaquePointer) {
        guard let box = WatchBox.from(watch) else { return }
        box.cancel()
        watches.removeAll { $0 === box }
    }

    private func addTimeout(_ timeout: OpaquePointer) -> dbus_bool_t {
        _ = TimeoutBox(timeout: timeout, queue: queue)
        return 1
    }
}

// MARK: - Plumbing

/// Runs a libdbus watch's fd through Dispatch read/write sources. Lives on the connection queue.
private final class WatchBox {
    let watch: OpaquePointer
    let queue: DispatchQueue
    let afterHandle: () -> Void
    private var read: DispatchSourceRead?
    private var write: DispatchSourceWrite?
    private var readActive = false
    private var writeActive = false

    init(watch: OpaquePointer, queue: DispatchQueue, afterHandle: @escaping () -> Void) {
        self.watch = watch
        self.queue = queue
        self.afterHandle = afterHandle
        let fd = dbus_watch_get_unix_fd(watch)
        let flags = dbus_watch_get_flags(watch)
        if flags & DBUS_WATCH_READABLE.rawValue != 0 {
            let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
            source.setEventHandler { [unowned self] in self.handle(DBUS_WATCH_READABLE.rawValue) }
            read = source
        }
        if flags & DBUS_WATCH_WRITABLE.rawValue != 0 {
            let source = DispatchSource.makeWriteSource(fileDescriptor: fd, queue: queue)
            source.setEventHandler { [unowned self] in self.handle(DBUS_WATCH_WRITABLE.rawValue) }
            write = source
        }
        dbus_watch_set_data(watch, Unmanaged.passRetained(self).toOpaque(), { data in
            Unmanaged<WatchBox>.fromOpaque(data!).release()
        })
        update()
    }

    static func from(_ watch: OpaquePointer) -> WatchBox? {
        dbus_watch_get_data(watch).map { Unmanaged<WatchBox>.fromOpaque($0).takeUnretainedValue() }
    }

    func update() {
        let enabled = dbus_watch_get_enabled(watch) != 0
        if let read, enabled != readActive {
            enabled ? read.resume() : read.suspend()
            readActive = enabled
        }
        if let write, enabled != writeActive {
            enabled ? write.resume() : write.suspend()
            writeActive = enabled
        }
    }

    func handle(_ flag: UInt32) {
        guard dbus_watch_get_enabled(watch) != 0 else { return }
        _ = dbus_watch_handle(watch, flag)
        afterHandle()
    }

    func cancel() {
        // A suspended source must be resumed before it can be cancelled and released.
        if let read {
            read.cancel()
            if !readActive { read.resume() }
        }
        if let write {
            write.cancel()
            if !writeActive { write.resume() }
        }
        readActive = true
        writeActive = true
        read = nil
        write = nil
    }
}

/// A libdbus timeout as a Dispatch timer on the connection queue.
private final class TimeoutBox {
    let timeout: OpaquePointer
    let queue: DispatchQueue
    private var timer: DispatchSourceTimer?

    init(timeout: OpaquePointer, queue: DispatchQueue) {
        self.timeout = timeout
        self.queue = queue
        dbus_timeout_set_data(timeout, Unmanaged.passRetained(self).toOpaque(), { data in
            Unmanaged<TimeoutBox>.fromOpaque(data!).release()
        })
        update()
    }

    static func from(_ timeout: OpaquePointer) -> TimeoutBox? {
        dbus_timeout_get_data(timeout).map { Unmanaged<TimeoutBox>.fromOpaque($0).takeUnretainedValue() }
    }

    func update() {
        cancel()
        guard dbus_timeout_get_enabled(timeout) != 0 else { return }
        let interval = max(1, Int(dbus_timeout_get_interval(timeout)))
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + .milliseconds(interval), repeating: .milliseconds(interval))
        timer.setEventHandler { [unowned self] in _ = dbus_timeout_handle(self.timeout) }
        timer.resume()
        self.timer = timer
    }

    func cancel() {
        timer?.cancel()
        timer = nil
    }
}

/// Weak references are loaded atomically; `queue` is immutable.
private final class WeakConnection: @unchecked Sendable {
    weak var connection: Connection?
    let queue: DispatchQueue
    init(_ connection: Connection) {
        self.connection = connection
        queue = connection.queue
    }
}

/// Delivers one reply to a waiting caller, once.
private final class ReplyBox: @unchecked Sendable {  // only touched on the connection queue
    private var continuation: CheckedContinuation<Message, Error>?
    init(_ continuation: CheckedContinuation<Message, Error>) { self.continuation = continuation }
    func resume(_ message: Message) {
        continuation?.resume(returning: message)
        continuation = nil
    }
}

/// A `DBusError` struct from libdbus, freed after use.
final class DBusErrorStorage {
    var raw = CDBus.DBusError()
    init() { dbus_error_init(&raw) }
    deinit { dbus_error_free(&raw) }

    func take(or fallback: String) -> DBus.DBusError {
        guard dbus_error_is_set(&raw) != 0 else { return DBus.DBusError(name: "org.freedesktop.DBus.Error.Failed", message: fallback) }
        let name = raw.name.map { String(cString: $0) } ?? "org.freedesktop.DBus.Error.Failed"
        let message = raw.message.map { String(cString: $0) } ?? fallback
        return DBus.DBusError(name: name, message: message)
    }
}
