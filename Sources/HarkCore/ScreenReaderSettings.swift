import Foundation

/// What a screen reader sends Speech Dispatcher for one of its voices, in Speech Dispatcher's
/// own units (−100…100), computed exactly as the screen reader computes them. nil: the screen
/// reader sends nothing for it, so the server's default applies.
public struct ScreenReaderVoice: Sendable, Equatable {
    public var rate: Int?
    public var pitch: Int?
    public var volume: Int?
    public var module: String?
    public var language: String?
    public var voiceName: String?

    public init(rate: Int? = nil, pitch: Int? = nil, volume: Int? = nil, module: String? = nil, language: String? = nil, voiceName: String? = nil) {
        self.rate = rate
        self.pitch = pitch
        self.volume = volume
        self.module = module
        self.language = language
        self.voiceName = voiceName
    }

    /// The `ScreenReaderSettings` property: rate, pitch and volume in Hark's units (API.md),
    /// voice, language and module as the screen reader names them.
    public var harkUnits: [String: SettingValue] {
        var values: [String: SettingValue] = [:]
        if let rate { values["rate"] = .double(SpeechUnits.rate(fromSpeechDispatcher: rate)) }
        if let pitch { values["pitch"] = .double(SpeechUnits.pitch(fromSpeechDispatcher: pitch)) }
        if let volume { values["volume"] = .double(SpeechUnits.volume(fromSpeechDispatcher: volume)) }
        if let voiceName { values["voice"] = .string(voiceName) }
        if let language { values["language"] = .string(language) }
        if let module { values["module"] = .string(module) }
        return values
    }
}

public enum SettingValue: Sendable, Equatable {
    case string(String)
    case double(Double)
}

/// The running screen reader and the voices Hark borrows from it.
public struct ScreenReaderSpeech: Sendable, Equatable {
    /// `orca`, `fenrir`.
    public var name: String
    /// What it speaks text with (for `Speak` with prefer-screen-reader).
    public var defaultVoice: ScreenReaderVoice
    /// What it speaks its own messages with (for `Announce`): Orca's system voice laid over
    /// its default voice.
    public var systemVoice: ScreenReaderVoice

    public init(name: String, defaultVoice: ScreenReaderVoice, systemVoice: ScreenReaderVoice) {
        self.name = name
        self.defaultVoice = defaultVoice
        self.systemVoice = systemVoice
    }
}

// MARK: - Orca

/// Orca's arithmetic from its voice settings to Speech Dispatcher's values. It changed in
/// Orca 51; both truncate toward zero (Python's `int()`).
public enum OrcaArithmetic: Sendable {
    /// Orca up to 50: rate int(2·clamp(r,0,99) − 98), pitch int(20·clamp(p,0,9) − 90),
    /// volume int(15·clamp(g,0,9) − 35).
    case upTo50
    /// Orca 51 and later: rate int(2·clamp(r,0,100) − 100), pitch int(20·clamp(p,0,10) − 100),
    /// volume int(20·clamp(g,0,10) − 100).
    case from51

    public func rate(_ value: Double) -> Int {
        switch self {
        case .upTo50: Int(2 * clamp(value, 0, 99) - 98)
        case .from51: Int(2 * clamp(value, 0, 100) - 100)
        }
    }

    public func pitch(_ value: Double) -> Int {
        switch self {
        case .upTo50: Int(20 * clamp(value, 0, 9) - 90)
        case .from51: Int(20 * clamp(value, 0, 10) - 100)
        }
    }

    public func volume(_ value: Double) -> Int {
        switch self {
        case .upTo50: Int(15 * clamp(value, 0, 9) - 35)
        case .from51: Int(20 * clamp(value, 0, 10) - 100)
        }
    }

    private func clamp(_ value: Double, _ low: Double, _ high: Double) -> Double {
        value.isFinite ? min(high, max(low, value)) : low
    }
}

/// One Orca voice (an ACSS dictionary) as found in its settings, before mapping.
public struct OrcaVoice: Sendable, Equatable {
    public var rate: Double?
    public var averagePitch: Double?
    public var gain: Double?
    public var familyName: String?
    public var familyLanguage: String?
    public var familyDialect: String?

    public init(rate: Double? = nil, averagePitch: Double? = nil, gain: Double? = nil,
                familyName: String? = nil, familyLanguage: String? = nil, familyDialect: String? = nil) {
        self.rate = rate
        self.averagePitch = averagePitch
        self.gain = gain
        self.familyName = familyName
        self.familyLanguage = familyLanguage
        self.familyDialect = familyDialect
    }

    /// `over` laid on this voice: every setting `over` has replaces this one's (how Orca
    /// applies its system voice over its default voice).
    public func overlaid(with over: OrcaVoice) -> OrcaVoice {
        var result = self
        if let value = over.rate { result.rate = value }
        if let value = over.averagePitch { result.averagePitch = value }
        if let value = over.gain { result.gain = value }
        if over.familyName != nil || over.familyLanguage != nil {
            result.familyName = over.familyName
            result.familyLanguage = over.familyLanguage
            result.familyDialect = over.familyDialect
        }
        return result
    }

    /// What Orca sends Speech Dispatcher for this voice with output module `module`
    /// (nil or "default": Orca leaves the server's default module).
    public func speechDispatcherVoice(module: String?, arithmetic: OrcaArithmetic) -> ScreenReaderVoice {
        var voice = ScreenReaderVoice()
        // Orca fills in its defaults (50, 5, 10) for what a voice does not set.
        voice.rate = arithmetic.rate(rate ?? 50)
        voice.pitch = arithmetic.pitch(averagePitch ?? 5)
        voice.volume = arithmetic.volume(gain ?? 10)
        if let module, !module.isEmpty, module != "default" { voice.module = module }
        if let language = familyLanguage, !language.isEmpty {
            voice.language = (familyDialect?.isEmpty ?? true) ? language : language + "-" + familyDialect!
        }
        if let name = familyName, OrcaVoice.isRealVoiceName(name) { voice.voiceName = name }
        return voice
    }

    /// Orca writes placeholders such as "espeak-ng default voice" where no voice was chosen.
    public static func isRealVoiceName(_ name: String) -> Bool {
        let trimmed = name.trimmingCharacters(in: .whitespaces)
        return !trimmed.isEmpty && !trimmed.lowercased().hasSuffix("default voice") && trimmed.lowercased() != "default"
    }
}

/// Orca's settings as Hark needs them: the default and system voices and the module.
public struct OrcaSettings: Sendable, Equatable {
    public var defaultVoice: OrcaVoice
    public var systemVoice: OrcaVoice
    public var module: String?

    public init(defaultVoice: OrcaVoice, systemVoice: OrcaVoice, module: String?) {
        self.defaultVoice = defaultVoice
        self.systemVoice = systemVoice
        self.module = module
    }

    public func speech(arithmetic: OrcaArithmetic) -> ScreenReaderSpeech {
        ScreenReaderSpeech(
            name: "orca",
            defaultVoice: defaultVoice.speechDispatcherVoice(module: module, arithmetic: arithmetic),
            systemVoice: defaultVoice.overlaid(with: systemVoice).speechDispatcherVoice(module: module, arithmetic: arithmetic))
    }

    /// Orca ≤ 49's `user-settings.conf` (JSON): `general`, with every top-level key of
    /// `profiles[startingProfile[1]]` replacing the same key.
    public static func parseJSON(_ data: Data) throws(HarkError) -> OrcaSettings {
        let root: [String: Any]
        do {
            guard let object = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
                throw HarkError.invalid("Orca's settings are not a JSON object")
            }
            root = object
        } catch let error as HarkError {
            throw error
        } catch {
            throw .invalid("Orca's settings are not valid JSON: \(error.localizedDescription)")
        }
        var effective = root["general"] as? [String: Any] ?? [:]
        let startingProfile = (effective["startingProfile"] as? [Any])?.dropFirst().first as? String
            ?? ((root["general"] as? [String: Any])?["activeProfile"] as? [Any])?.dropFirst().first as? String
            ?? "default"
        if let profiles = root["profiles"] as? [String: Any], let profile = profiles[startingProfile] as? [String: Any] {
            for (key, value) in profile { effective[key] = value }
        }
        let voices = effective["voices"] as? [String: Any] ?? [:]
        var module: String?
        if let server = effective["speechServerInfo"] as? [Any], server.count >= 2, let name = server[1] as? String {
            module = name
        }
        return OrcaSettings(defaultVoice: voice(voices["default"]), systemVoice: voice(voices["system"]), module: module)
    }

    static func voice(_ any: Any?) -> OrcaVoice {
        guard let acss = any as? [String: Any] else { return OrcaVoice() }
        var voice = OrcaVoice()
        voice.rate = number(acss["rate"])
        voice.averagePitch = number(acss["average-pitch"])
        voice.gain = number(acss["gain"])
        if let family = acss["family"] as? [String: Any] {
            voice.familyName = family["name"] as? String
            voice.familyLanguage = (family["lang"] as? String) ?? (family["locale"] as? String)
            voice.familyDialect = family["dialect"] as? String
        }
        return voice
    }

    static func number(_ any: Any?) -> Double? {
        if any is Bool { return nil }
        switch any {
        case let number as NSNumber: return number.doubleValue
        case let string as String: return Double(string)
        default: return nil
        }
    }

    /// Orca 50's dconf settings, as `dconf dump /org/gnome/orca/` prints them: voices under
    /// `[<profile>/voices/<type>]` with `rate` (i, 0–100), `pitch` (d, 0–10), `volume` (d, 0–10),
    /// `family-name`, `family-lang`, `family-dialect`; the module in `[<profile>/speech]`
    /// `synthesizer` (or `speech-server`). dconf prints only keys that differ from the schema's
    /// defaults, which are Orca's defaults (50, 5, 10) that the mapping fills in.
    public static func parseDconfDump(_ text: String, profile: String = "default") -> OrcaSettings {
        let sections = KeyFile.parse(text)
        func voice(_ type: String) -> OrcaVoice {
            guard let keys = sections["\(profile)/voices/\(type)"] else { return OrcaVoice() }
            return OrcaVoice(
                rate: keys["rate"].flatMap(GVariantText.number), averagePitch: keys["pitch"].flatMap(GVariantText.number),
                gain: keys["volume"].flatMap(GVariantText.number), familyName: keys["family-name"].flatMap(GVariantText.string),
                familyLanguage: keys["family-lang"].flatMap(GVariantText.string), familyDialect: keys["family-dialect"].flatMap(GVariantText.string))
        }
        let speech = sections["\(profile)/speech"] ?? [:]
        let module = [speech["synthesizer"], speech["speech-server"]].compactMap { $0.flatMap(GVariantText.string) }.first { !$0.isEmpty }
        return OrcaSettings(defaultVoice: voice("default"), systemVoice: voice("system"), module: module)
    }
}

// MARK: - Fenrir

public enum FenrirSettings {
    /// Fenrir's `settings.conf`: `[speech]` `rate`, `pitch`, `volume` (0–1, sent as
    /// int(−100 + 200·v)), `module`, `voice`, `language`. Fenrir speaks everything with one voice.
    public static func parse(_ text: String) -> ScreenReaderSpeech {
        let speech = KeyFile.parse(text)["speech"] ?? [:]
        func scaled(_ key: String) -> Int? {
            guard let value = speech[key].flatMap({ Double($0) }), value.isFinite else { return nil }
            return Int(-100 + 200 * min(1, max(0, value)))
        }
        func name(_ key: String) -> String? {
            guard let value = speech[key]?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
            return value
        }
        let voice = ScreenReaderVoice(rate: scaled("rate"), pitch: scaled("pitch"), volume: scaled("volume"),
                                      module: name("module"), language: name("language"), voiceName: name("voice"))
        return ScreenReaderSpeech(name: "fenrir", defaultVoice: voice, systemVoice: voice)
    }
}

// MARK: - Small text formats

/// INI / GKeyFile text: `[section]` then `key=value` lines; `#` and `;` start comments.
public enum KeyFile {
    public static func parse(_ text: String) -> [String: [String: String]] {
        var sections: [String: [String: String]] = [:]
        var current = ""
        for rawLine in text.split(whereSeparator: \.isNewline) {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("["), line.hasSuffix("]") {
                current = String(line.dropFirst().dropLast())
                continue
            }
            guard let equals = line.firstIndex(of: "=") else { continue }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces)
            let value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            sections[current, default: [:]][key] = value
        }
        return sections
    }
}

/// The few GVariant text forms dconf dump prints for Orca's keys.
enum GVariantText {
    static func string(_ text: String) -> String? {
        guard text.count >= 2, let first = text.first, first == "'" || first == "\"", text.last == first else { return nil }
        return String(text.dropFirst().dropLast()).replacingOccurrences(of: "\\'", with: "'")
    }

    static func number(_ text: String) -> Double? {
        var value = text
        for prefix in ["int32 ", "uint32 ", "int64 ", "double "] where value.hasPrefix(prefix) { value.removeFirst(prefix.count) }
        return Double(value)
    }
}

/// Orca 51's live speech settings: the properties of `org.gnome.Orca1.SpeechManager` —
/// `Rate` (0–100), `Pitch` and `Volume` (0–10), `CurrentSynthesizer`, `CurrentVoice` —
/// which include changes made with Orca's keys that are never saved. They describe the voice
/// Orca speaks with now, so announcements and text both use it.
public struct OrcaLiveSettings: Sendable, Equatable {
    public var rate: Double?
    public var pitch: Double?
    public var volume: Double?
    public var synthesizer: String?
    public var voice: String?

    public init(rate: Double? = nil, pitch: Double? = nil, volume: Double? = nil, synthesizer: String? = nil, voice: String? = nil) {
        self.rate = rate
        self.pitch = pitch
        self.volume = volume
        self.synthesizer = synthesizer
        self.voice = voice
    }

    public var speech: ScreenReaderSpeech {
        let voice = OrcaVoice(rate: rate, averagePitch: pitch, gain: volume, familyName: self.voice)
            .speechDispatcherVoice(module: synthesizer, arithmetic: .from51)
        return ScreenReaderSpeech(name: "orca", defaultVoice: voice, systemVoice: voice)
    }
}
