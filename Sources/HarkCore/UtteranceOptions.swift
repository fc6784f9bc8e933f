import Foundation

/// An option value as a client sent it, free of D-Bus types. `typeName` is what error messages
/// call a value of the wrong type ("string (s)").
public enum OptionValue: Sendable, Equatable {
    case string(String)
    case bool(Bool)
    case double(Double)
    case integer(Int64)
    case other(typeName: String)

    var typeName: String {
        switch self {
        case .string: "string (s)"
        case .bool: "boolean (b)"
        case .double: "double (d)"
        case .integer: "integer"
        case .other(let name): name
        }
    }
}

/// Speech Dispatcher's message priorities (shared by every client of the server).
public enum SpeechPriority: String, Sendable, CaseIterable {
    case important, message, text, notification, progress
}

public enum Politeness: String, Sendable, CaseIterable {
    /// Queue behind current speech, the screen reader's included.
    case polite
    /// Interrupt.
    case assertive
}

/// What kind of request made an utterance.
public enum UtteranceKind: Sendable {
    case speak, announce
}

/// The validated options of `Speak` or `Announce`. Every field is optional: nil means the
/// default applies (which for some depends on the screen reader and the configuration).
public struct UtteranceOptions: Sendable, Equatable {
    public var voice: String?
    public var language: String?
    public var rate: Double?
    public var pitch: Double?
    public var volume: Double?
    public var ssml = false
    public var priority: SpeechPriority?
    public var politeness: Politeness?
    public var preferScreenReader: Bool?
    public var preDelay: Double = 0
    public var postDelay: Double = 0
    public var duck: Bool?
    /// Keep speaking after the caller leaves the bus (what a one-shot command wants).
    public var detached = false

    public init() {}

    public static let delayRange: ClosedRange<Double> = 0...10
    static let keys = ["voice", "language", "rate", "pitch", "volume", "ssml", "priority", "politeness",
                       "prefer-screen-reader", "pre-delay", "post-delay", "duck", "detached"]

    /// Validates a client's options. Any unknown key, wrong type, or value out of range is an
    /// InvalidArgument that names it.
    public static func parse(_ options: [String: OptionValue], kind: UtteranceKind) throws(HarkError) -> UtteranceOptions {
        var result = UtteranceOptions()
        for key in options.keys.sorted() {
            let value = options[key]!
            switch key {
            case "voice":
                let voice = try string(value, key)
                try checkName(voice, key)
                result.voice = voice
            case "language":
                let language = try string(value, key)
                guard LanguageTag.isValid(language) else {
                    throw .invalid("option 'language': '\(printable(language))' is not a BCP 47 language tag such as en-US")
                }
                result.language = language
            case "rate": result.rate = try number(value, key, in: SpeechUnits.rateRange, meaning: "a multiple of normal speed")
            case "pitch": result.pitch = try number(value, key, in: SpeechUnits.pitchRange, meaning: "a pitch multiplier")
            case "volume": result.volume = try number(value, key, in: SpeechUnits.volumeRange, meaning: "1 is full volume")
            case "ssml": result.ssml = try bool(value, key)
            case "priority":
                let name = try string(value, key)
                guard let priority = SpeechPriority(rawValue: name) else {
                    throw .invalid("option 'priority': '\(printable(name))' is not one of \(SpeechPriority.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                result.priority = priority
            case "politeness":
                guard kind == .announce else {
                    throw .invalid("option 'politeness' belongs to Announce only; Speak queues in order (use 'priority' to interrupt)")
                }
                let name = try string(value, key)
                guard let politeness = Politeness(rawValue: name) else {
                    throw .invalid("option 'politeness': '\(printable(name))' is not one of polite, assertive")
                }
                result.politeness = politeness
            case "prefer-screen-reader": result.preferScreenReader = try bool(value, key)
            case "pre-delay": result.preDelay = try number(value, key, in: delayRange, meaning: "seconds")
            case "post-delay": result.postDelay = try number(value, key, in: delayRange, meaning: "seconds")
            case "duck": result.duck = try bool(value, key)
            case "detached": result.detached = try bool(value, key)
            default:
                throw .invalid("unknown option '\(printable(key))'; the options are \(keys.joined(separator: ", "))")
            }
        }
        return result
    }

    /// The Speech Dispatcher priority this utterance is sent with.
    public func effectivePriority(kind: UtteranceKind) -> SpeechPriority {
        if let priority { return priority }
        switch kind {
        case .speak: return .text
        case .announce: return politeness == .assertive ? .important : .message
        }
    }

    /// Whether the utterance goes ahead of everything Hark has queued, interrupting Hark's
    /// own current speech (an assertive announcement, or `important`).
    public func interrupts(kind: UtteranceKind) -> Bool {
        effectivePriority(kind: kind) == .important || (kind == .announce && politeness == .assertive)
    }

    // MARK: Checks

    private static func string(_ value: OptionValue, _ key: String) throws(HarkError) -> String {
        guard case .string(let s) = value else { throw wrongType(key, "a string (s)", value) }
        return s
    }

    private static func bool(_ value: OptionValue, _ key: String) throws(HarkError) -> Bool {
        guard case .bool(let b) = value else { throw wrongType(key, "a boolean (b)", value) }
        return b
    }

    /// Doubles, and integers for convenience (`gdbus` writes `<2>` as an int32).
    private static func number(_ value: OptionValue, _ key: String, in range: ClosedRange<Double>, meaning: String) throws(HarkError) -> Double {
        let number: Double
        switch value {
        case .double(let d): number = d
        case .integer(let i): number = Double(i)
        default: throw wrongType(key, "a double (d)", value)
        }
        guard number.isFinite, range.contains(number) else {
            throw .invalid("option '\(key)': \(number) is out of range; it must be \(format(range.lowerBound)) to \(format(range.upperBound)) (\(meaning))")
        }
        return number
    }

    private static func wrongType(_ key: String, _ expected: String, _ value: OptionValue) -> HarkError {
        .invalid("option '\(key)' must be \(expected), not a \(value.typeName)")
    }

    /// Names sent to Speech Dispatcher verbatim: a line break there would inject SSIP commands.
    private static func checkName(_ name: String, _ key: String) throws(HarkError) {
        guard !name.isEmpty else { throw .invalid("option '\(key)' is empty") }
        guard name.unicodeScalars.count <= 200 else { throw .invalid("option '\(key)' is longer than 200 characters") }
        guard !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw .invalid("option '\(key)': '\(printable(name))' contains control characters")
        }
    }

    static func format(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }
}

/// Shows a client's string safely in an error message: control characters escaped, long cut.
public func printable(_ text: String, limit: Int = 80) -> String {
    var out = ""
    for scalar in text.unicodeScalars.prefix(limit) {
        if scalar.properties.generalCategory == .control {
            out += "\\u{\(String(scalar.value, radix: 16))}"
        } else {
            out.unicodeScalars.append(scalar)
        }
    }
    return text.unicodeScalars.count > limit ? out + "…" : out
}

/// BCP 47 language tags, checked for shape (language, script, region, variants), not registry.
public enum LanguageTag {
    public static func isValid(_ tag: String) -> Bool {
        let parts = tag.split(separator: "-", omittingEmptySubsequences: false)
        guard let language = parts.first, (2...8).contains(language.count), language.allSatisfy(\.isASCIILetter) else { return false }
        return parts.dropFirst().allSatisfy { part in
            (1...8).contains(part.count) && part.allSatisfy { $0.isASCIILetter || $0.isASCIIDigit }
        }
    }

    /// `en_us` / `EN-us` → `en-US`: language lower case, a two-letter region upper case.
    public static func normalized(_ tag: String) -> String {
        let parts = tag.replacingOccurrences(of: "_", with: "-").split(separator: "-")
        return parts.enumerated().map { index, part in
            if index == 0 { return part.lowercased() }
            if part.count == 2, part.allSatisfy(\.isASCIILetter) { return part.uppercased() }
            if part.count == 4, part.allSatisfy(\.isASCIILetter) { return part.prefix(1).uppercased() + part.dropFirst().lowercased() }
            return part.lowercased()
        }.joined(separator: "-")
    }
}

extension Character {
    var isASCIILetter: Bool { isASCII && isLetter }
    var isASCIIDigit: Bool { isASCII && isNumber }
}
