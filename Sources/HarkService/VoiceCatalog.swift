import HarkCore

/// The voices Speech Dispatcher offers, listed once (it takes seconds with espeak-ng) on first
/// need, then served from memory until refreshed.
actor VoiceCatalog {
    typealias Lister = @Sendable () async throws -> [Voice]

    private let list: Lister
    private var voices: [Voice]?
    private var loading: Task<[Voice], Error>?
    private var byID: [String: Voice] = [:]
    private var byName: [String: [Voice]] = [:]
    private var preferredModule: String?

    init(preferredModule: String?, list: @escaping Lister) {
        self.preferredModule = preferredModule
        self.list = list
    }

    func all() async throws(HarkError) -> [Voice] {
        if let voices { return voices }
        return try await load()
    }

    /// Lists the voices again.
    func refresh() async throws(HarkError) -> [Voice] {
        voices = nil
        loading = nil
        return try await load()
    }

    /// A voice by id (`module:name`) or by name (case-insensitive; the default module's first).
    func resolve(_ idOrName: String) async throws(HarkError) -> Voice {
        _ = try await all()
        if let voice = byID[idOrName] { return voice }
        if let matches = byName[idOrName.lowercased()], !matches.isEmpty {
            return matches.first { $0.module == preferredModule } ?? matches[0]
        }
        throw .notFound("no voice '\(printable(idOrName))'; `hark voices` or ListVoices lists the voices there are")
    }

    private func load() async throws(HarkError) -> [Voice] {
        let task = loading ?? Task { try await list() }
        loading = task
        do {
            let result = try await task.value
            if voices == nil {
                voices = result
                byID = Dictionary(result.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
                byName = Dictionary(grouping: result, by: { $0.name.lowercased() })
            }
            return voices ?? result
        } catch {
            loading = nil
            throw HarkError(.unavailable, "cannot list voices: \(error)")
        }
    }
}
