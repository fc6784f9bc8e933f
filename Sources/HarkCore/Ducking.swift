import Foundation

/// What Hark does to other audio while it speaks.
public enum DuckingMode: String, Sendable, CaseIterable, Codable {
    case off
    /// Lower other streams by the ducking level.
    case duck
    /// Pause playing media players (MPRIS), resume them after.
    case pause
}

/// Other audio, lowered or paused while an utterance sounds. The scheduler asks for it before
/// sending an utterance that ducks, and gives it back when nothing that ducks is left. Both
/// calls return at once and take effect in the order they were made.
public protocol AudioFocus: Sendable {
    /// Lower (or pause) other audio; `ready` runs when that is done (the ramp is over).
    func acquire(_ ready: @escaping @Sendable () -> Void)
    /// Nothing that ducks is sounding or next: bring the audio back after a short hold, so
    /// that back-to-back utterances do not make the music pump.
    func release()
}

/// A playback stream, as far as ducking cares.
public struct StreamFacts: Sendable, Equatable {
    public var applicationName: String
    public var binary: String
    public var mediaName: String
    public var volumeWritable: Bool

    public init(applicationName: String, binary: String, mediaName: String, volumeWritable: Bool) {
        self.applicationName = applicationName
        self.binary = binary
        self.mediaName = mediaName
        self.volumeWritable = volumeWritable
    }
}

public enum DuckingPolicy {
    public static let levelRange: ClosedRange<Double> = -60...0
    public static let defaultLevel = -14.0

    /// Whether Hark lowers this stream: not Hark's own, not Speech Dispatcher's (the speech
    /// itself), not the screen reader's, and only if its volume can be set.
    public static func shouldDuck(_ stream: StreamFacts) -> Bool {
        guard stream.volumeWritable else { return false }
        let names = [stream.applicationName, stream.binary, stream.mediaName].map { $0.lowercased() }
        let spared = ["harkd", "hark", "speech-dispatcher", "sd_espeak-ng", "orca", "fenrir"]
        for name in names where !name.isEmpty {
            if spared.contains(name) || name.hasPrefix("speech-dispatcher") || name.hasPrefix("sd_") { return false }
        }
        return true
    }

    /// The volumes of one ramp step from `original`: `fraction` 0 is the original, 1 the level.
    public static func rampStep(_ original: [UInt32], level: Double, fraction: Double, attenuate: (UInt32, Double) -> UInt32) -> [UInt32] {
        original.map { attenuate($0, level * min(1, max(0, fraction))) }
    }
}

/// What Hark lowered and from what, written before it lowers anything, so that a harkd that
/// crashed can give the volume back at its next start (or `harkd --restore-audio`).
public struct DuckingJournal: Codable, Sendable, Equatable {
    public struct Entry: Codable, Sendable, Equatable {
        public var index: UInt32
        public var applicationName: String
        public var original: [UInt32]
        /// What Hark set: restored only if the stream is still at it (the user may have moved it).
        public var lowered: [UInt32]

        public init(index: UInt32, applicationName: String, original: [UInt32], lowered: [UInt32]) {
            self.index = index
            self.applicationName = applicationName
            self.original = original
            self.lowered = lowered
        }
    }

    public var entries: [Entry]
    /// Media players Hark paused (their bus names), to be resumed.
    public var pausedPlayers: [String]

    public init(entries: [Entry] = [], pausedPlayers: [String] = []) {
        self.entries = entries
        self.pausedPlayers = pausedPlayers
    }

    enum CodingKeys: String, CodingKey { case entries, pausedPlayers }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        entries = try container.decodeIfPresent([Entry].self, forKey: .entries) ?? []
        pausedPlayers = try container.decodeIfPresent([String].self, forKey: .pausedPlayers) ?? []
    }

    public func encoded() -> Data {
        (try? JSONEncoder().encode(self)) ?? Data("{\"entries\":[]}".utf8)
    }

    public static func decode(_ data: Data) -> DuckingJournal? {
        try? JSONDecoder().decode(DuckingJournal.self, from: data)
    }

    /// Which streams to give back, and to what: those still at the volume Hark set.
    public func restorations(current: [UInt32: [UInt32]]) -> [(index: UInt32, volumes: [UInt32])] {
        entries.compactMap { entry in
            guard let now = current[entry.index], now == entry.lowered else { return nil }
            return (entry.index, entry.original)
        }
    }
}
