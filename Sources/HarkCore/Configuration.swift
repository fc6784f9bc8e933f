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

/// Hark's configuration file, `$XDG_CONFIG_HOME/hark/hark.conf` (`~/.config/hark/hark.conf`):
///
///     [speech]
///     rate=1.0        # 0.25–4, a multiple of normal speed
///     pitch=1.0       # 0.5–2
///     volume=1.0      # 0–1
///     language=en-US  # BCP 47; empty: Speech Dispatcher's default
///     duck=false      # Speak ducks other audio unless the client says otherwise
///
/// A bad value is skipped with a warning naming it; the rest of the file still applies.
public enum Configuration {
    public static func parse(_ text: String) -> (defaults: SpeechDefaults, warnings: [String]) {
        var defaults = SpeechDefaults()
        var warnings: [String] = []
        let sections = KeyFile.parse(text)
        for (section, keys) in sections where section != "speech" {
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
        return (defaults, warnings)
    }
}
