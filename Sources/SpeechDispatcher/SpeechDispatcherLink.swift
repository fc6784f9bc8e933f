import HarkCore
import Synchronization

/// The speech server, connected on demand: when Speech Dispatcher is not there (or went away)
/// the next request connects again (libspeechd may autospawn the server). Events of every
/// connection it makes arrive on one stream.
public final class SpeechDispatcherLink: SpeechBackend, Sendable {
    private let state = Mutex<SpeechDispatcherClient?>(nil)
    private let continuation: AsyncStream<BackendEvent>.Continuation
    public let events: AsyncStream<BackendEvent>
    private let clientName: String

    public init(clientName: String = "hark") {
        self.clientName = clientName
        (events, continuation) = AsyncStream<BackendEvent>.makeStream(bufferingPolicy: .unbounded)
    }

    /// The connected client, connecting if there is none.
    public func client() throws -> SpeechDispatcherClient {
        try state.withLock { client in
            if let client { return client }
            let fresh = try SpeechDispatcherClient(clientName: clientName)
            let continuation = self.continuation
            Task {
                for await event in fresh.events { continuation.yield(event) }
            }
            client = fresh
            return fresh
        }
    }

    /// Connects now, for an early error message; returns the error if it fails.
    public func connect() -> Error? {
        do {
            _ = try client()
            return nil
        } catch {
            return error
        }
    }

    public var defaultModule: String? { state.withLock { $0?.defaultModule } }

    public func speak(_ request: SynthesisRequest) async throws -> Int {
        let client = try client()
        do {
            return try await client.speak(request)
        } catch {
            // The server may have gone: the next request connects afresh.
            state.withLock { current in
                if current === client { current = nil }
            }
            throw error
        }
    }

    public func cancel(message: Int) {
        state.withLock { $0 }?.cancel(message: message)
    }

    public func isAlive() async -> Bool {
        guard let client = state.withLock({ $0 }) else { return false }
        if await client.isAlive() { return true }
        // Gone: the next request connects afresh.
        state.withLock { current in
            if current === client { current = nil }
        }
        return false
    }

    public func listVoices() async throws -> [Voice] {
        // A connection of its own: listing takes seconds and must not hold up speech.
        let lister = try SpeechDispatcherClient(clientName: clientName + "-voices")
        return await lister.listVoices()
    }
}
