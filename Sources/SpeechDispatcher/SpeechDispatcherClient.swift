import CSpeechd
import Foundation
import HarkCore
import Synchronization

/// Hark's connection to Speech Dispatcher (libspeechd in threaded mode).
///
/// One serial owner: every `spd_*` call runs on `queue`, never inside libspeechd's callbacks
/// (which run on libspeechd's own thread and would deadlock). Events are handed to `events`.
public final class SpeechDispatcherClient: SpeechBackend, @unchecked Sendable {  // `connection` only used on `queue`
    public enum ConnectError: Error, CustomStringConvertible {
        case cannotConnect(String)
        public var description: String {
            switch self { case .cannotConnect(let why): "cannot connect to Speech Dispatcher: \(why)" }
        }
    }

    private let queue = DispatchQueue(label: "hark.speechd")
    private let connection: UnsafeMutablePointer<SPDConnection>
    private let clientID: Int
    /// Server events, in the order libspeechd reported them.
    public let events: AsyncStream<BackendEvent>
    /// What the server uses when a client sets nothing.
    public let defaultModule: String?
    public let defaultLanguage: String?
    /// What was last set on the connection, so unchanged settings are not sent again.
    private var applied: VoiceSettings?
    private var appliedPriority: SpeechPriority?

    /// Connects, as client `hark`, to the server named by `SPEECHD_ADDRESS` or the default one.
    public init(clientName: String = "hark") throws {
        // A dead server socket must come back as an error, not kill harkd.
        signal(SIGPIPE, SIG_IGN)
        var error: UnsafeMutablePointer<CChar>?
        guard let connection = spd_open2(clientName, "main", nil, SPD_MODE_THREADED, nil, 1, &error) else {
            let why = error.map { String(cString: $0) } ?? "unknown error"
            free(error)
            throw ConnectError.cannotConnect(why)
        }
        self.connection = connection
        let (stream, continuation) = AsyncStream<BackendEvent>.makeStream(bufferingPolicy: .unbounded)
        events = stream
        clientID = Int(spd_get_client_id(connection))
        EventRouter.shared.register(clientID: clientID, continuation)

        connection.pointee.callback_begin = { message, client, _ in EventRouter.shared.route(client, .begin(message: Int(message))) }
        connection.pointee.callback_end = { message, client, _ in EventRouter.shared.route(client, .end(message: Int(message))) }
        connection.pointee.callback_cancel = { message, client, _ in EventRouter.shared.route(client, .cancel(message: Int(message))) }
        connection.pointee.callback_im = { message, client, _, mark in
            EventRouter.shared.route(client, .indexMark(message: Int(message), name: mark.map { String(cString: $0) } ?? ""))
        }
        // One kind at a time: spd_set_notification_on(SPD_ALL) is what 0.11 does for any kind anyway,
        // and Hark wants exactly these four.
        for kind in ["begin", "end", "cancel", "index_marks"] {
            spd_execute_command(connection, "SET SELF NOTIFICATION \(kind) on")
        }
        spd_set_data_mode(connection, SPD_DATA_SSML)
        defaultModule = spd_get_output_module(connection).map { pointer in
            defer { free(pointer) }
            return String(cString: pointer)
        }
        defaultLanguage = spd_get_language(connection).map { pointer in
            defer { free(pointer) }
            return String(cString: pointer)
        }
    }

    deinit {
        // No getter here: libspeechd's getters crash once the server has gone.
        EventRouter.shared.unregister(clientID: clientID)
        spd_close(connection)
    }

    // MARK: SpeechBackend

    public func speak(_ request: SynthesisRequest) async throws -> Int {
        try await withCheckedThrowingContinuation { continuation in
            queue.async {
                do {
                    continuation.resume(returning: try self.sayNow(request))
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }

    public func cancel(message: Int) {
        queue.async { _ = spd_cancel(self.connection) }
    }

    /// Asks the server something harmless; false when it does not answer within `timeout`
    /// (then this connection's queue may stay blocked: the caller must drop the client).
    public func isAlive() async -> Bool { await isAlive(timeout: .seconds(2)) }

    public func isAlive(timeout: Duration) async -> Bool {
        let answer = AsyncStream<Bool>.makeStream()
        queue.async {
            answer.continuation.yield(spd_execute_command(self.connection, "SET SELF NOTIFICATION end on") == 0)
        }
        let timer = Task {
            try? await Task.sleep(for: timeout)
            answer.continuation.yield(false)
        }
        defer { timer.cancel() }
        for await alive in answer.stream { return alive }
        return false
    }

    private func sayNow(_ request: SynthesisRequest) throws -> Int {
        try apply(request.voice)
        guard !request.markup.isEmpty else { throw SpeechError("refusing to send empty text") }
        let id = spd_say(connection, request.priority.spd, request.markup)
        guard id >= 0 else {
            applied = nil
            throw SpeechError("Speech Dispatcher refused the message")
        }
        return Int(id)
    }

    private func apply(_ settings: VoiceSettings) throws {
        let previous = applied
        applied = nil  // unknown until every call below succeeded
        func check(_ result: Int32, _ what: String) throws {
            guard result == 0 else { throw SpeechError("Speech Dispatcher refused \(what)") }
        }
        let module = settings.module ?? defaultModule
        if let module, module != (previous?.module ?? defaultModule) || previous == nil {
            try check(spd_set_output_module(connection, module), "output module \(module)")
        }
        let language = settings.language ?? defaultLanguage
        let moduleChanged = previous == nil || (previous?.module ?? defaultModule) != module
        if let language, moduleChanged || language != (previous?.language ?? defaultLanguage) || previous?.voiceName != settings.voiceName {
            try check(spd_set_language(connection, language), "language \(language)")
        }
        if let voice = settings.voiceName {
            if moduleChanged || voice != previous?.voiceName {
                try check(spd_set_synthesis_voice(connection, voice), "voice \(voice)")
            }
        } else if previous == nil || previous?.voiceName != nil || moduleChanged {
            // Back to the module's default voice for the language.
            try check(spd_set_voice_type(connection, SPD_MALE1), "the default voice")
        }
        if previous?.rate != settings.rate { try check(spd_set_voice_rate(connection, Int32(settings.rate)), "rate \(settings.rate)") }
        if previous?.pitch != settings.pitch { try check(spd_set_voice_pitch(connection, Int32(settings.pitch)), "pitch \(settings.pitch)") }
        if previous?.volume != settings.volume { try check(spd_set_volume(connection, Int32(settings.volume)), "volume \(settings.volume)") }
        applied = settings
    }

    // MARK: Voices

    /// Every voice of every output module. Slow (seconds with espeak-ng): call once and cache.
    public func listVoices() async -> [Voice] {
        await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: self.listVoicesNow()) }
        }
    }

    private func listVoicesNow() -> [Voice] {
        var modules: [String] = []
        if let list = spd_list_modules(connection) {
            var index = 0
            while let name = list[index] {
                modules.append(String(cString: name))
                index += 1
            }
            free_spd_modules(list)
        }
        var voices: [Voice] = []
        for module in modules {
            guard spd_set_output_module(connection, module) == 0, let list = spd_list_synthesis_voices(connection) else { continue }
            var index = 0
            while let voice = list[index] {
                // Copy every field: free_spd_voices frees only the names.
                let name = voice.pointee.name.map { String(cString: $0) } ?? ""
                let language = voice.pointee.language.map { String(cString: $0) } ?? ""
                let variant = voice.pointee.variant.map { String(cString: $0) } ?? ""
                if !name.isEmpty {
                    voices.append(Voice(name: name, language: LanguageTag.normalized(language), module: module,
                                        variant: variant == "none" ? "" : variant))
                }
                index += 1
            }
            free_spd_voices(list)
        }
        applied = nil  // the module was changed
        return voices
    }
}

public struct SpeechError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

extension SpeechPriority {
    var spd: SPDPriority {
        switch self {
        case .important: SPD_IMPORTANT
        case .message: SPD_MESSAGE
        case .text: SPD_TEXT
        case .notification: SPD_NOTIFICATION
        case .progress: SPD_PROGRESS
        }
    }
}

/// libspeechd's callbacks are plain C function pointers without a context argument: this
/// routes them by client id to the stream of the connection they belong to.
final class EventRouter: Sendable {
    static let shared = EventRouter()
    private let streams = Mutex<[Int: AsyncStream<BackendEvent>.Continuation]>([:])

    func register(clientID: Int, _ continuation: AsyncStream<BackendEvent>.Continuation) {
        streams.withLock { $0[clientID] = continuation }
    }

    func unregister(clientID: Int) {
        streams.withLock { $0.removeValue(forKey: clientID)?.finish() }
    }

    func route(_ clientID: Int, _ event: BackendEvent) {
        // Runs on libspeechd's thread: hand over and return, never call spd_* here.
        let continuation = streams.withLock { streams in
            streams[clientID] ?? (streams.count == 1 ? streams.values.first : nil)
        }
        continuation?.yield(event)
    }
}

/// A bare libspeechd connection with no Hark logic in between: the baseline that benchmarks
/// hold Hark against. Single-threaded use only.
public final class BaselineSpeechConnection {
    private let connection: UnsafeMutablePointer<SPDConnection>

    public init() throws {
        signal(SIGPIPE, SIG_IGN)
        var error: UnsafeMutablePointer<CChar>?
        guard let connection = spd_open2("hark-bench", "baseline", nil, SPD_MODE_SINGLE, nil, 1, &error) else {
            defer { free(error) }
            throw SpeechError("cannot connect to Speech Dispatcher: \(error.map { String(cString: $0) } ?? "?")")
        }
        self.connection = connection
    }

    deinit { spd_close(connection) }

    /// `spd_say` at priority text; returns the message id (negative on failure).
    public func say(_ text: String) -> Int32 { spd_say(connection, SPD_TEXT, text) }

    public func cancel() { _ = spd_cancel(connection) }
}
