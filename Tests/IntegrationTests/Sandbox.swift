import DBus
import Foundation
import Synchronization
import Testing

/// The sandbox that `make test` runs the tests in (scripts/sandbox): a private session bus
/// that D-Bus-activates the harkd just built, PulseAudio with null sinks, Speech Dispatcher.
enum Sandbox {
    static let environment = ProcessInfo.processInfo.environment
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let hark = repository.appending(path: ".build/debug/hark").path

    /// Fails the test with directions when not run inside the sandbox.
    static func require() throws {
        guard environment["HARK_SANDBOX"] == "1", environment["DBUS_SESSION_BUS_ADDRESS"] != nil else {
            Issue.record("integration tests need the sandbox: run them with `make test` (or scripts/sandbox swift test)")
            throw CancellationError()
        }
    }

    static var protocolLog: String {
        (try? String(contentsOfFile: environment["HARK_SPEECHD_PROTOCOL_LOG"] ?? "", encoding: .utf8)) ?? ""
    }
}

/// A value behind a lock, shareable between tasks.
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<R: Sendable>(_ body: (inout Value) -> R) -> R { mutex.withLock { body(&$0) } }
    var value: Value { withLock { $0 } }
}

/// One Hark signal as a client received it.
struct Received: Sendable, Equatable, CustomStringConvertible {
    var member: String
    var body: [DBusValue]
    var id: UInt64? { body.first?.uint64Value }
    var description: String { "\(member)\(body)" }
}

/// A client of Hark on the sandbox bus, recording every signal addressed to it.
final class TestClient: Sendable {
    let connection: Connection
    let signals = Locked<[Received]>([])

    init() throws {
        connection = try Connection.session(label: "test-client")
        let signals = signals
        connection.onSignal { message in
            guard message.interface == "org.hark.Hark1.Speech", let member = message.member else { return }
            signals.withLock { $0.append(Received(member: member, body: message.body)) }
        }
    }

    var name: String { connection.uniqueName }

    func call(_ member: String, _ body: [DBusValue] = [], interface: String = "org.hark.Hark1.Speech") async throws -> [DBusValue] {
        try await connection.call(destination: "org.hark.Hark1", path: "/org/hark/Hark1", interface: interface, member: member, body, timeout: .seconds(60))
    }

    func speak(_ text: String, _ options: [String: DBusValue] = [:], method: String = "Speak") async throws -> UInt64 {
        let reply = try await call(method, [.string(text), .vardict(options)])
        return try #require(reply.first?.uint64Value)
    }

    /// The error a call gets, or nil when it succeeds.
    func error(_ member: String, _ body: [DBusValue], interface: String = "org.hark.Hark1.Speech") async -> DBusError? {
        do {
            _ = try await call(member, body, interface: interface)
            return nil
        } catch let error as DBusError {
            return error
        } catch {
            return DBusError(name: "unexpected", message: "\(error)")
        }
    }

    func property(_ name: String) async throws -> DBusValue {
        try await call("Get", [.string("org.hark.Hark1.Speech"), .string(name)], interface: "org.freedesktop.DBus.Properties").first?.unwrapped ?? .string("")
    }

    func events(of id: UInt64) -> [Received] { signals.value.filter { $0.id == id } }

    /// Waits (at most `timeout`) for the utterance's UtteranceEnded and returns its reason.
    @discardableResult
    func ended(_ id: UInt64, timeout: Duration = .seconds(30)) async throws -> UInt32 {
        try await waitFor("UtteranceEnded of \(id)", timeout: timeout) {
            self.events(of: id).first { $0.member == "UtteranceEnded" }?.body[1].uint32Value
        }
    }

    func waitForSignal(_ member: String, of id: UInt64, timeout: Duration = .seconds(30)) async throws {
        _ = try await waitFor("\(member) of \(id)", timeout: timeout) {
            self.events(of: id).contains { $0.member == member } ? true : nil
        }
    }
}

struct TimedOut: Error, CustomStringConvertible {
    var description: String
}

/// Polls `probe` until it gives a value; a bounded wait for something asynchronous, not a timing assertion.
func waitFor<T>(_ what: String, timeout: Duration = .seconds(30), _ probe: () async throws -> T?) async throws -> T {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if let value = try await probe() { return value }
        try await Task.sleep(for: .milliseconds(10))
    }
    throw TimedOut(description: "timed out waiting for \(what)")
}

/// Records the `speakers` sink's monitor: what a person would hear.
final class SpeakerRecorder {
    static let sampleRate = 16_000
    let file: String
    let process: Process
    let started = ContinuousClock.now

    init() throws {
        file = FileManager.default.temporaryDirectory.appending(path: "hark-rec-\(UUID().uuidString).raw").path
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "exec parec -d speakers.monitor --raw --format=s16le --rate=\(Self.sampleRate) --channels=1 --latency-msec=20 > '\(file)'"]
        try process.run()
    }

    /// Stops recording and returns the samples.
    func stop() async throws -> [Int16] {
        kill(process.processIdentifier, SIGKILL)
        _ = try await waitFor("parec to stop", timeout: .seconds(5)) { processGone(self.process.processIdentifier) ? true : nil }
        defer { try? FileManager.default.removeItem(atPath: file) }
        let data = try Data(contentsOf: URL(fileURLWithPath: file))
        return data.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
    }

    /// Root-mean-square amplitude (0–32768) of a stretch of samples.
    static func rms(_ samples: ArraySlice<Int16>) -> Double {
        guard !samples.isEmpty else { return 0 }
        let sum = samples.reduce(0.0) { $0 + Double($1) * Double($1) }
        return (sum / Double(samples.count)).squareRoot()
    }

    /// The loudest 100 ms window's RMS: speech shows up even if it is short.
    static func peakRMS(_ samples: [Int16]) -> Double {
        let window = sampleRate / 10
        guard samples.count >= window else { return rms(samples[...]) }
        return stride(from: 0, to: samples.count - window, by: window / 2).map { rms(samples[$0..<($0 + window)]) }.max() ?? 0
    }
}

/// Runs the `hark` CLI and returns its exit status and output.
func runHark(_ arguments: [String], stdin: String? = nil) async throws -> (status: Int32, stdout: String, stderr: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: Sandbox.hark)
    process.arguments = arguments
    let out = Pipe(), err = Pipe(), input = Pipe()
    process.standardOutput = out
    process.standardError = err
    process.standardInput = input
    try process.run()
    if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
    try input.fileHandleForWriting.close()
    let stdoutTask = Task.detached { out.fileHandleForReading.readDataToEndOfFile() }
    let stderrTask = Task.detached { err.fileHandleForReading.readDataToEndOfFile() }
    let stdout = await stdoutTask.value, stderr = await stderrTask.value
    _ = try await waitFor("hark to exit", timeout: .seconds(60)) { process.isRunning ? nil : true }
    return (process.terminationStatus, String(decoding: stdout, as: UTF8.self), String(decoding: stderr, as: UTF8.self))
}

/// Whether a child process has exited (reaped or a zombie): Foundation's `isRunning` can lag.
func processGone(_ pid: Int32) -> Bool {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return true }
    guard let close = stat.lastIndex(of: ")") else { return true }
    return stat[stat.index(close, offsetBy: 2)...].hasPrefix("Z")
}
