/// A synthesis voice as Speech Dispatcher offers it.
public struct Voice: Sendable, Equatable, Hashable {
    /// `module:name`, unique across output modules.
    public var id: String { module + ":" + name }
    public var name: String
    /// BCP 47.
    public var language: String
    public var module: String
    public var variant: String

    public init(name: String, language: String, module: String, variant: String) {
        self.name = name
        self.language = language
        self.module = module
        self.variant = variant
    }
}

/// The voice parameters one utterance is spoken with, in Speech Dispatcher's units.
public struct VoiceSettings: Sendable, Equatable, Hashable {
    /// nil: the server's default module.
    public var module: String?
    /// nil: the module's default voice for the language.
    public var voiceName: String?
    /// nil: the server's default language.
    public var language: String?
    public var rate: Int = 0
    public var pitch: Int = 0
    public var volume: Int = 100

    public init(module: String? = nil, voiceName: String? = nil, language: String? = nil, rate: Int = 0, pitch: Int = 0, volume: Int = 100) {
        self.module = module
        self.voiceName = voiceName
        self.language = language
        self.rate = rate
        self.pitch = pitch
        self.volume = volume
    }
}

/// What Hark sends to the speech server for one (part of an) utterance.
public struct SynthesisRequest: Sendable, Equatable {
    public var markup: String
    public var voice: VoiceSettings
    public var priority: SpeechPriority
}

/// One queued piece of speech and everything decided about it when it was accepted.
public struct Utterance: Sendable {
    public let id: UInt64
    /// The unique bus name of the client that created it; `Utterance.detachedOwner` once a
    /// detached utterance's client has left.
    public internal(set) var owner: String
    public let kind: UtteranceKind
    public let document: SpeechDocument
    public let voice: VoiceSettings
    public let priority: SpeechPriority
    /// Goes ahead of everything queued and interrupts Hark's current speech.
    public let interrupts: Bool
    public let preDelay: Double
    public let postDelay: Double
    public let duck: Bool
    /// Outlives its owner's connection.
    public let detached: Bool

    /// The owner of detached utterances whose client has left the bus. No signals go to it.
    public static let detachedOwner = ""

    public init(id: UInt64, owner: String, kind: UtteranceKind, document: SpeechDocument, voice: VoiceSettings,
                priority: SpeechPriority, interrupts: Bool, preDelay: Double = 0, postDelay: Double = 0, duck: Bool = false,
                detached: Bool = false) {
        self.detached = detached
        self.id = id
        self.owner = owner
        self.kind = kind
        self.document = document
        self.voice = voice
        self.priority = priority
        self.interrupts = interrupts
        self.preDelay = preDelay
        self.postDelay = postDelay
        self.duck = duck
    }
}

/// Why an utterance ended; the `reason` of `UtteranceEnded`.
public enum EndReason: UInt32, Sendable {
    case completed = 0
    /// By its owner (Cancel, StopSpeaking).
    case cancelled = 1
    /// By other speech (an assertive announcement, the screen reader) or by Hark shutting down.
    case interrupted = 2
    case failed = 3
}

/// What the scheduler reports, in order, for the service to turn into signals.
public enum SpeechNotice: Sendable, Equatable {
    case started(id: UInt64, owner: String)
    case range(id: UInt64, owner: String, start: Int, length: Int)
    case paused(id: UInt64, owner: String)
    case resumed(id: UInt64, owner: String)
    case ended(id: UInt64, owner: String, reason: EndReason)
    case speakingChanged(Bool)
}
