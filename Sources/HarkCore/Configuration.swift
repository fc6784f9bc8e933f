/// Hark's own defaults, for what a client does not set and no screen reader decides.
public struct SpeechDefaults: Sendable, Equatable {
    public var rate = 1.0
    public var pitch = 1.0
    public var volume = 1.0
    /// nil: Speech Dispatcher's default language.
    public var language: String?
    /// Whether `Speak` ducks other audio when the client does not say (Announce always does).
    public var duckSpeak = false

    public init() {}
}

/// Hark's audio settings: the Audio interface's DuckingMode and DuckingLevel, kept in the
/// configuration file's `[audio]` section.
public struct AudioSettings: Sendable, Equatable {
    public var mode: DuckingMode = .duck
    public var level: Double = DuckingPolicy.defaultLevel
    /// Other audio never stays lowered longer than this, even if an end event is lost.
    public var maximumHold: Double = 120

    public init() {}
}

/// Hark's configuration file, `$XDG_CONFIG_HOME/hark/hark.conf` (`~/.config/hark/hark.conf`):
///
///     [speech]
///     rate=1.0        # 0.25–4, a multiple of normal speed
///     pitch=1.0       # 0.5–2
///     volume=1.0      # 0–1
///     language=en-US  # BCP 47; empty: Speech Dispatcher's default
///     duck=false      # Speak ducks other audio unless the client says otherwise
///
///     [audio]
///     mode=duck       # off, duck or pause (DuckingMode)
///     level=-14       # dB, −60 to 0 (DuckingLevel)
///     max-hold=120    # seconds other audio may stay lowered at most
///
/// A bad value is skipped with a warning naming it; the rest of the file still applies.
public enum Configuration {
    public static func parse(_ text: String) -> (defaults: SpeechDefaults, warnings: [String]) {
        let (defaults, _, warnings) = parseAll(text)
        return (defaults, warnings)
    }

    public static func parseAll(_ text: String) -> (defaults: SpeechDefaults, audio: AudioSettings, warnings: [String]) {
        var defaults = SpeechDefaults()
        var audio = AudioSettings()
        var warnings: [String] = []
        let sections = KeyFile.parse(text)
        for (key, rawValue) in (sections["audio"] ?? [:]).sorted(by: { $0.key < $1.key }) {
            let value = rawValue.split(separator: "#", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
            switch key {
            case "mode":
                if let mode = DuckingMode(rawValue: value) { audio.mode = mode } else {
                    warnings.append("[audio] mode=\(rawValue) is not off, duck or pause; using duck")
                }
            case "level":
                if let level = Double(value), level.isFinite, DuckingPolicy.levelRange.contains(level) { audio.level = level } else {
                    warnings.append("[audio] level=\(rawValue) is not a number of dB from -60 to 0; using \(DuckingPolicy.defaultLevel)")
                }
            case "max-hold":
                if let hold = Double(value), hold.isFinite, hold >= 1 { audio.maximumHold = hold } else {
                    warnings.append("[audio] max-hold=\(rawValue) is not a number of seconds (at least 1); using 120")
                }
            default:
                warnings.append("[audio] \(key) is not a setting (mode, level, max-hold); ignored")
            }
        }
        for (section, keys) in sections where section != "speech" && section != "audio" {
            warnings.append("unknown section [\(section)] with \(keys.keys.sorted().joined(separator: ", ")) is ignored")
        }
        for (key, rawValue) in (sections["speech"] ?? [:]).sorted(by: { $0.key < $1.key }) {
            let value = rawValue.split(separator: "#", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
            func number(_ range: ClosedRange<Double>) -> Double? {
                guard let number = Double(value), number.isFinite, range.contains(number) else {
                    warnings.append("[speech] \(key)=\(rawValue) is not a number from \(range.lowerBound) to \(range.upperBound); using the default")
                    return nil
                }
                return number
            }
            switch key {
            case "rate": defaults.rate = number(SpeechUnits.rateRange) ?? defaults.rate
            case "pitch": defaults.pitch = number(SpeechUnits.pitchRange) ?? defaults.pitch
            case "volume": defaults.volume = number(SpeechUnits.volumeRange) ?? defaults.volume
            case "language":
                if value.isEmpty {
                    defaults.language = nil
                } else if LanguageTag.isValid(value) {
                    defaults.language = value
                } else {
                    warnings.append("[speech] language=\(rawValue) is not a BCP 47 tag such as en-US; using Speech Dispatcher's default")
                }
            case "duck":
                switch value.lowercased() {
                case "true", "yes", "1": defaults.duckSpeak = true
                case "false", "no", "0": defaults.duckSpeak = false
                default: warnings.append("[speech] duck=\(rawValue) is not true or false; using false")
                }
            default:
                warnings.append("[speech] \(key) is not a setting (rate, pitch, volume, language, duck); ignored")
            }
        }
        return (defaults, audio, warnings)
    }

    /// `text` with `key=value` set in `[section]`: the line replaced where it is, else added
    /// to the section (created at the end if missing). Everything else, comments included, stays.
    public static func updating(_ text: String, section: String, key: String, value: String) -> String {
        var lines = text.isEmpty ? [] : text.components(separatedBy: "\n")
        if lines.last == "" { lines.removeLast() }
        var current = ""
        var sectionEnd: Int?
        for (index, line) in lines.enumerated() {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("["), trimmed.hasSuffix("]") {
                current = String(trimmed.dropFirst().dropLast())
                continue
            }
            guard current == section else { continue }
            sectionEnd = index + 1
            if let equals = trimmed.firstIndex(of: "="), trimmed[..<equals].trimmingCharacters(in: .whitespaces) == key {
                lines[index] = "\(key)=\(value)"
                return lines.joined(separator: "\n") + "\n"
            }
        }
        if let sectionEnd {
            lines.insert("\(key)=\(value)", at: sectionEnd)
        } else if let header = lines.firstIndex(where: { $0.trimmingCharacters(in: .whitespaces) == "[\(section)]" }) {
            lines.insert("\(key)=\(value)", at: header + 1)
        } else {
            if let last = lines.last, !last.isEmpty { lines.append("") }
            lines.append("[\(section)]")
            lines.append("\(key)=\(value)")
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
