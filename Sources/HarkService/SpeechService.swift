import Foundation
import HarkCore
import Logging

/// The Speech interface's decisions: turning a request into an utterance (validation, voice,
/// units, priority), ids, ownership, and the owners that left the bus.
actor SpeechService {
    let scheduler: SpeechScheduler
    private let catalog: VoiceCatalog
    private let defaults: SpeechDefaults
    let screenReader: ScreenReaderMonitor
    private let logger: Logger
    /// Ids start from the clock (microseconds), so that a restarted harkd never hands out an
    /// id a client may still hold from the previous one.
    private var nextID = UInt64(max(1, Date().timeIntervalSince1970 * 1_000_000))
    /// Unique names that left the bus. Never reused by the bus, so a call still in flight from
    /// one of them must not leave speech behind.
    private var vanished: Set<String> = []
    private var vanishedOrder: [String] = []

    init(scheduler: SpeechScheduler, catalog: VoiceCatalog, defaults: SpeechDefaults, screenReader: ScreenReaderMonitor, logger: Logger) {
        self.scheduler = scheduler
        self.screenReader = screenReader
        self.catalog = catalog
        self.defaults = defaults
        self.logger = logger
    }

    func speak(text: String, options rawOptions: [String: OptionValue], kind: UtteranceKind, owner: String) async throws(HarkError) -> UInt64 {
        let options = try UtteranceOptions.parse(rawOptions, kind: kind)
        let document = options.ssml ? try SpeechDocument.ssml(text) : try SpeechDocument.plainText(text)

        var voice = VoiceSettings()
        if let name = options.voice {
            let found = try await catalog.resolve(name)
            voice.module = found.module
            voice.voiceName = found.name
        }
        voice.language = options.language ?? (options.voice == nil ? defaults.language : nil)
        voice.rate = SpeechUnits.speechDispatcherRate(options.rate ?? defaults.rate)
        voice.pitch = SpeechUnits.speechDispatcherPitch(options.pitch ?? defaults.pitch)
        voice.volume = SpeechUnits.speechDispatcherVolume(options.volume ?? defaults.volume)

        // prefersAssistiveTechnologySettings: the running screen reader's voice wins, whole —
        // what it leaves unset is left to the server's defaults, as the screen reader does.
        if options.preferScreenReader ?? (kind == .announce), let reader = await screenReader.currentForUtterance() {
            // Announcements sound like the screen reader's own messages: its system voice.
            let borrowed = kind == .announce ? reader.systemVoice : reader.defaultVoice
            voice = VoiceSettings(module: borrowed.module, voiceName: borrowed.voiceName, language: borrowed.language,
                                  rate: borrowed.rate ?? 0, pitch: borrowed.pitch ?? 0, volume: borrowed.volume ?? 100)
        }

        guard !vanished.contains(owner) else { throw HarkError(.failed, "the caller has left the bus") }
        let id = nextID
        nextID += 1
        let utterance = Utterance(
            id: id, owner: owner, kind: kind, document: document, voice: voice,
            priority: options.effectivePriority(kind: kind), interrupts: options.interrupts(kind: kind),
            preDelay: options.preDelay, postDelay: options.postDelay,
            duck: options.duck ?? (kind == .announce ? true : defaults.duckSpeak),
            detached: options.detached)
        try await scheduler.enqueue(utterance)
        logger.debug("queued utterance", metadata: ["id": "\(id)", "owner": "\(owner)", "words": "\(document.words.count)"])
        return id
    }

    func ownerVanished(_ owner: String) async {
        guard vanished.insert(owner).inserted else { return }
        vanishedOrder.append(owner)
        if vanishedOrder.count > 4096 { vanished.remove(vanishedOrder.removeFirst()) }
        if await scheduler.hasSpeech(owner: owner) {
            logger.info("client left the bus: its speech is cancelled", metadata: ["owner": "\(owner)"])
        }
        await scheduler.ownerVanished(owner)
    }

    func voices() async throws(HarkError) -> [Voice] { try await catalog.all() }
    func refreshVoices() async throws(HarkError) -> [Voice] { try await catalog.refresh() }
}
