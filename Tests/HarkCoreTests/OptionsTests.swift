import HarkCore
import Testing

@Suite struct UnitMappingTests {
    @Test func rateFollowsFiftyLog2() {
        #expect(SpeechUnits.speechDispatcherRate(1) == 0)
        #expect(SpeechUnits.speechDispatcherRate(0.25) == -100)
        #expect(SpeechUnits.speechDispatcherRate(4) == 100)
        #expect(SpeechUnits.speechDispatcherRate(2) == 50)
        #expect(SpeechUnits.speechDispatcherRate(1.5) == 29)  // 50·log2 1.5 = 29.25
    }

    @Test func pitchFollowsHundredLog2() {
        #expect(SpeechUnits.speechDispatcherPitch(1) == 0)
        #expect(SpeechUnits.speechDispatcherPitch(0.5) == -100)
        #expect(SpeechUnits.speechDispatcherPitch(2) == 100)
        #expect(SpeechUnits.speechDispatcherPitch(1.2) == 26)  // 100·log2 1.2 = 26.3
    }

    @Test func volumeIsLinear() {
        #expect(SpeechUnits.speechDispatcherVolume(0) == -100)
        #expect(SpeechUnits.speechDispatcherVolume(0.5) == 0)
        #expect(SpeechUnits.speechDispatcherVolume(1) == 100)
        #expect(SpeechUnits.speechDispatcherVolume(0.8) == 60)
    }
}

@Suite struct OptionValidationTests {
    func message(_ options: [String: OptionValue], kind: UtteranceKind = .speak) -> String? {
        do {
            _ = try UtteranceOptions.parse(options, kind: kind)
            return nil
        } catch {
            #expect(error.kind == .invalidArgument)
            return error.message
        }
    }

    @Test func acceptsEveryDocumentedOption() throws {
        let options = try UtteranceOptions.parse([
            "voice": .string("espeak-ng:English (America)"), "language": .string("en-US"), "rate": .double(1.5),
            "pitch": .double(0.8), "volume": .double(0.5), "ssml": .bool(true), "priority": .string("message"),
            "politeness": .string("assertive"), "prefer-screen-reader": .bool(false), "pre-delay": .double(0.2),
            "post-delay": .double(1), "duck": .bool(true), "detached": .bool(true),
        ], kind: .announce)
        #expect(options.rate == 1.5)
        #expect(options.politeness == .assertive)
        #expect(options.preDelay == 0.2)
        #expect(options.detached)
    }

    @Test func unknownKeyIsNamed() {
        #expect(message(["colour": .string("red")])?.contains("'colour'") == true)
    }

    @Test func wrongTypeNamesKeyAndTypes() {
        let text = message(["rate": .string("fast")])
        #expect(text?.contains("'rate'") == true)
        #expect(text?.contains("double") == true)
        #expect(text?.contains("string") == true)
    }

    @Test func integersAreAcceptedForNumbers() throws {
        #expect(try UtteranceOptions.parse(["rate": .integer(2)], kind: .speak).rate == 2)
    }

    @Test(arguments: [
        ("rate", 0.2), ("rate", 4.5), ("pitch", 0.4), ("pitch", 2.1), ("volume", -0.1), ("volume", 1.01),
        ("pre-delay", -1), ("post-delay", 11), ("rate", .nan), ("volume", .infinity),
    ])
    func outOfRangeIsNamed(key: String, value: Double) {
        let text = message([key: .double(value)])
        #expect(text?.contains("'\(key)'") == true, "\(key)=\(value) accepted")
    }

    @Test func enumsListTheirValues() {
        #expect(message(["priority": .string("urgent")])?.contains("'urgent'") == true)
        #expect(message(["politeness": .string("rude")], kind: .announce)?.contains("polite, assertive") == true)
    }

    @Test func politenessIsForAnnounceOnly() {
        #expect(message(["politeness": .string("polite")])?.contains("Announce only") == true)
    }

    @Test func namesWithLineBreaksAreRefused() {
        // A CR/LF in a voice name would inject SSIP commands.
        #expect(message(["voice": .string("x\r\nSET SELF RATE 100")]) != nil)
        #expect(message(["language": .string("en\nQUIT")]) != nil)
        #expect(message(["language": .string("not a tag")])?.contains("BCP 47") == true)
    }

    @Test func prioritiesFollowKindAndPoliteness() throws {
        #expect(UtteranceOptions().effectivePriority(kind: .speak) == .text)
        #expect(UtteranceOptions().effectivePriority(kind: .announce) == .message)
        let assertive = try UtteranceOptions.parse(["politeness": .string("assertive")], kind: .announce)
        #expect(assertive.effectivePriority(kind: .announce) == .important)
        #expect(assertive.interrupts(kind: .announce))
        #expect(!UtteranceOptions().interrupts(kind: .announce))
        let important = try UtteranceOptions.parse(["priority": .string("important")], kind: .speak)
        #expect(important.interrupts(kind: .speak))
    }

    @Test func languageTags() {
        #expect(LanguageTag.isValid("en"))
        #expect(LanguageTag.isValid("en-US"))
        #expect(LanguageTag.isValid("zh-Hant-TW"))
        #expect(!LanguageTag.isValid(""))
        #expect(!LanguageTag.isValid("e"))
        #expect(!LanguageTag.isValid("en--US"))
        #expect(!LanguageTag.isValid("en US"))
        #expect(LanguageTag.normalized("en-us") == "en-US")
        #expect(LanguageTag.normalized("pt_br") == "pt-BR")
        #expect(LanguageTag.normalized("zh-hant-tw") == "zh-Hant-TW")
    }
}
