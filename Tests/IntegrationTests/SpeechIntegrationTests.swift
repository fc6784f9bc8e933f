import DBus
import Foundation
import Testing

/// The integration tests: the real harkd, activated on the sandbox's session bus, speaking
/// through the real Speech Dispatcher into PulseAudio's `speakers` sink. One at a time, all
/// suites included: they listen to one sink.
@Suite(.serialized) enum Integration {}

extension Integration {
@Suite(.timeLimit(.minutes(2))) struct SpeechTests {
    init() throws { try Sandbox.require() }

    static let sentence = "Hark speaks this sentence through Speech Dispatcher for the integration test."

    @Test func speechIsHeardOnTheSpeakersWithStartedRangesEndedInOrder() async throws {
        let client = try TestClient()
        let recorder = try SpeakerRecorder()
        try await Task.sleep(for: .milliseconds(300))
        let id = try await client.speak(Self.sentence)
        #expect(try await client.ended(id) == 0)
        let samples = try await recorder.stop()

        // Sound came out while it spoke, and there was quiet before it.
        let before = SpeakerRecorder.rms(samples.prefix(SpeakerRecorder.sampleRate / 5))
        let loudest = SpeakerRecorder.peakRMS(samples)
        #expect(loudest > 500, "no speech on the speakers (peak RMS \(loudest))")
        #expect(before < 50, "the speakers were not quiet before speaking (RMS \(before))")

        // Started, one Range per word in order, Ended — and the ranges are the sentence's words.
        let events = client.events(of: id)
        #expect(events.first?.member == "UtteranceStarted")
        #expect(events.last?.member == "UtteranceEnded")
        let scalars = Array(Self.sentence.unicodeScalars)
        let words = events.filter { $0.member == "UtteranceRange" }.map { event -> String in
            let start = Int(event.body[1].uint32Value ?? 0), length = Int(event.body[2].uint32Value ?? 0)
            return String(String.UnicodeScalarView(scalars[start..<(start + length)]))
        }
        #expect(words == Self.sentence.split(separator: " ").map(String.init))
        #expect(events.filter { $0.member == "UtteranceEnded" }.count == 1)
    }

    @Test func signalsGoToTheOwnerOnly() async throws {
        let owner = try TestClient()
        let bystander = try TestClient()
        let overheard = Locked(0)
        // A bystander subscribed to every Hark signal would get broadcast signals; unicast ones never.
        try await bystander.connection.addMatch("type='signal',sender='org.hark.Hark1',interface='org.hark.Hark1.Speech'") { message in
            if message.interface == "org.hark.Hark1.Speech" { overheard.withLock { $0 += 1 } }
        }
        let id = try await owner.speak("Only for my owner.")
        try await owner.ended(id)
        _ = try await bystander.property("Speaking")  // a round trip: anything sent to it has arrived
        #expect(overheard.value == 0)
        #expect(bystander.signals.value.isEmpty)
        #expect(owner.events(of: id).contains { $0.member == "UtteranceStarted" })
    }

    @Test func badInputsGetInvalidArgumentNamingTheValue() async throws {
        let client = try TestClient()
        let cases: [(String, [String: DBusValue], String)] = [
            ("Hello", ["colour": .string("red")], "colour"),
            ("Hello", ["rate": .double(9)], "rate"),
            ("Hello", ["rate": .string("fast")], "rate"),
            ("Hello", ["volume": .double(.nan)], "volume"),
            ("Hello", ["priority": .string("urgent")], "urgent"),
            ("Hello", ["politeness": .string("assertive")], "politeness"),
            ("Hello", ["language": .string("en\r\nQUIT")], "language"),
            ("", [:], "empty"),
            ("<speak>x", ["ssml": .boolean(true)], "not closed"),
            (#"<!DOCTYPE speak [<!ENTITY x SYSTEM "file:///etc/passwd">]><speak>&x;</speak>"#, ["ssml": .boolean(true)], "DTD"),
        ]
        for (text, options, named) in cases {
            let error = await client.error("Speak", [.string(text), .vardict(options)])
            #expect(error?.name == "org.hark.Hark1.Error.InvalidArgument", "\(text) \(options)")
            #expect(error?.message.contains(named) == true, "message '\(error?.message ?? "")' does not name \(named)")
        }
        let boundary = await client.error("StopSpeaking", [.uint32(7)])
        #expect(boundary?.name == "org.hark.Hark1.Error.InvalidArgument")
        #expect(boundary?.message.contains("7") == true)
        let unknownVoice = await client.error("Speak", [.string("Hi"), .vardict(["voice": .string("No Such Voice")])])
        #expect(unknownVoice?.name == "org.hark.Hark1.Error.NotFound")
        #expect(unknownVoice?.message.contains("No Such Voice") == true)
        // Nothing of that was sent to Speech Dispatcher.
        #expect(!Sandbox.protocolLog.contains("QUIT"))
    }

    @Test func anotherClientCannotCancel() async throws {
        let owner = try TestClient()
        let other = try TestClient()
        let id = try await owner.speak("You cannot cancel me.")
        let error = await other.error("Cancel", [.uint64(id)])
        #expect(error?.name == "org.hark.Hark1.Error.NotFound")
        #expect(try await owner.ended(id) == 0)
        // And the owner can.
        let second = try await owner.speak("This one I cancel myself because it is long enough to still be speaking.")
        try await owner.waitForSignal("UtteranceStarted", of: second)
        _ = try await owner.call("Cancel", [.uint64(second)])
        #expect(try await owner.ended(second) == 1)
        let again = await owner.error("Cancel", [.uint64(second)])
        #expect(again?.name == "org.hark.Hark1.Error.NotFound")
    }

    @Test func aClientLeavingTheBusSilencesItsSpeech() async throws {
        let watcher = try TestClient()
        var leaver: TestClient? = try TestClient()
        let id = try await leaver!.speak(String(repeating: "This long text keeps talking for a good while. ", count: 6))
        try await leaver!.waitForSignal("UtteranceStarted", of: id)
        let recorder = try SpeakerRecorder()
        try await Task.sleep(for: .milliseconds(500))
        leaver!.connection.close()
        leaver = nil
        // Hark notices and stops the speech.
        _ = try await waitFor("speech to stop") {
            (try await watcher.property("Speaking")).boolValue == false ? true : nil
        }
        try await Task.sleep(for: .milliseconds(700))
        let samples = try await recorder.stop()
        let during = SpeakerRecorder.peakRMS(Array(samples.prefix(SpeakerRecorder.sampleRate / 2)))
        let after = SpeakerRecorder.peakRMS(Array(samples.suffix(SpeakerRecorder.sampleRate / 2)))
        #expect(during > 500, "it was not speaking before the client left (\(during))")
        #expect(after < 50, "still speaking after its client left (\(after))")
    }

    @Test func stopSpeakingEndsEverythingQueued() async throws {
        let client = try TestClient()
        let first = try await client.speak("First of three utterances, long enough to be stopped in the middle of it.")
        let second = try await client.speak("Second.")
        let third = try await client.speak("Third.")
        try await client.waitForSignal("UtteranceStarted", of: first)
        _ = try await client.call("StopSpeaking", [.uint32(0)])
        for id in [first, second, third] { #expect(try await client.ended(id) == 1) }
        #expect(!client.events(of: second).contains { $0.member == "UtteranceStarted" })
    }

    @Test func pauseAndContinueResumeFromTheWord() async throws {
        let client = try TestClient()
        let text = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen"
        let id = try await client.speak(text)
        _ = try await waitFor("a few words") {
            client.events(of: id).filter { $0.member == "UtteranceRange" }.count >= 3 ? true : nil
        }
        _ = try await client.call("PauseSpeaking", [.uint32(0)])
        try await client.waitForSignal("UtterancePaused", of: id)
        let rangesAtPause = client.events(of: id).filter { $0.member == "UtteranceRange" }
        let pausedAt = rangesAtPause.last!.body[1].uint32Value!
        // Silence while paused.
        #expect((try await client.property("Speaking")).boolValue == false)
        // What was already on its way to the speakers drains first.
        try await Task.sleep(for: .milliseconds(300))
        let recorder = try SpeakerRecorder()
        try await Task.sleep(for: .milliseconds(600))
        let quiet = SpeakerRecorder.peakRMS(try await recorder.stop())
        #expect(quiet < 50, "sound while paused (\(quiet))")

        _ = try await client.call("ContinueSpeaking")
        #expect(try await client.ended(id) == 0)
        let events = client.events(of: id)
        #expect(events.contains { $0.member == "UtteranceResumed" })
        #expect(events.filter { $0.member == "UtteranceStarted" }.count == 1)
        // The first word after resuming is the one that was sounding when it paused.
        let afterResume = events.drop { $0.member != "UtteranceResumed" }.first { $0.member == "UtteranceRange" }
        #expect(afterResume?.body[1].uint32Value == pausedAt)
        #expect(events.last?.member == "UtteranceEnded")
    }

    @Test func assertiveAnnouncementInterrupts() async throws {
        let app = try TestClient()
        let announcer = try TestClient()
        let long = try await app.speak("A long utterance that an urgent announcement will cut off before it ends, surely.")
        try await app.waitForSignal("UtteranceStarted", of: long)
        let alert = try await announcer.speak("Battery low", ["politeness": .string("assertive")], method: "Announce")
        #expect(try await app.ended(long) == 2)
        #expect(try await announcer.ended(alert) == 0)
        #expect(Sandbox.protocolLog.contains("SET SELF PRIORITY IMPORTANT"))
    }

    @Test func preAndPostDelaysAreQuietTimeAroundTheAudio() async throws {
        let client = try TestClient()
        let clock = ContinuousClock()
        let sent = clock.now
        let id = try await client.speak("Delayed.", ["pre-delay": .double(1), "post-delay": .double(1)])
        try await client.waitForSignal("UtteranceStarted", of: id)
        let startedAfter = clock.now - sent
        // Nothing was sent to Speech Dispatcher before the pre-delay was over.
        #expect(startedAfter >= .milliseconds(950), "started after \(startedAfter)")
        try await client.ended(id)
        let endedAfter = clock.now - sent
        // The end is reported a second after the audio, and the next utterance waits for it.
        #expect(endedAfter - startedAfter >= .milliseconds(950), "ended \(endedAfter - startedAfter) after it started")
    }

    @Test func unitsReachSpeechDispatcherAsDocumented() async throws {
        let client = try TestClient()
        let id = try await client.speak("Units.", ["rate": .double(2), "pitch": .double(0.5), "volume": .double(0.75)])
        #expect(try await client.ended(id) == 0)
        let log = Sandbox.protocolLog
        #expect(log.contains("SET SELF RATE 50"))
        #expect(log.contains("SET SELF PITCH -100"))
        #expect(log.contains("SET SELF VOLUME 50"))
    }

    @Test func voicesAreListedAndUsable() async throws {
        let client = try TestClient()
        let reply = try await client.call("ListVoices")
        let voices = reply.first?.arrayValue ?? []
        #expect(voices.count > 10)
        let ids = voices.compactMap { voice -> (String, String)? in
            guard case .structure(let fields) = voice, fields.count == 5 else { return nil }
            return (fields[0].stringValue ?? "", fields[2].stringValue ?? "")
        }
        let english = try #require(ids.first { $0.1.hasPrefix("en") })
        #expect(english.0.hasPrefix("espeak-ng:"))
        let id = try await client.speak("Another voice.", ["voice": .string(english.0)])
        #expect(try await client.ended(id) == 0)
        let count = try await client.call("RefreshVoices").first?.uint32Value ?? 0
        #expect(Int(count) == voices.count)
    }

    @Test func ssmlIsSpokenWithRangesIntoTheMarkup() async throws {
        let client = try TestClient()
        let text = #"<speak>Hello <emphasis>bright</emphasis> world</speak>"#
        let id = try await client.speak(text, ["ssml": .boolean(true)])
        #expect(try await client.ended(id) == 0)
        let scalars = Array(text.unicodeScalars)
        let words = client.events(of: id).filter { $0.member == "UtteranceRange" }.map { event -> String in
            let start = Int(event.body[1].uint32Value!), length = Int(event.body[2].uint32Value!)
            return String(String.UnicodeScalarView(scalars[start..<(start + length)]))
        }
        #expect(words == ["Hello", "bright", "world"])
    }

    @Test func introspectionServesTheXMLAndUnknownMembersFail() async throws {
        let client = try TestClient()
        let xml = try await client.call("Introspect", interface: "org.freedesktop.DBus.Introspectable").first?.stringValue ?? ""
        #expect(xml.contains(#"<interface name="org.hark.Hark1.Speech">"#))
        #expect(xml.contains("AVSpeechSynthesizer"))  // the doc comments are served too
        let unknown = await client.error("Shout", [])
        #expect(unknown?.name == "org.freedesktop.DBus.Error.UnknownMethod")
        let properties = try await client.call("GetAll", [.string("org.hark.Hark1.Speech")], interface: "org.freedesktop.DBus.Properties")
        let dict = properties.first?.vardictValue ?? [:]
        #expect(Set(dict.keys) == ["Speaking", "ScreenReader", "ScreenReaderSettings", "Version"])
    }
    /// The XML in dbus/ is the contract: every member it declares is served with exactly that
    /// signature, and the served introspection is that XML.
    @Test func theServiceAgreesWithTheInterfaceXML() async throws {
        let client = try TestClient()
        let file = Sandbox.repository.appending(path: "dbus/org.hark.Hark1.Speech.xml")
        let declared = try #require(try InterfaceDescription.parse(String(contentsOf: file, encoding: .utf8)).first)
        func sample(_ signature: String) -> DBusValue {
            switch signature {
            case "s": .string("")
            case "t": .uint64(0)
            case "u": .uint32(7)
            case "a{sv}": .vardict([:])
            default: .string("")
            }
        }
        for method in declared.methods.values {
            let arguments = (splitSignature(method.inSignature) ?? []).map(sample)
            let error = await client.error(method.name, arguments)
            #expect(error?.name != "org.freedesktop.DBus.Error.UnknownMethod", "\(method.name) is declared but not served")
            #expect(error?.name != "org.freedesktop.DBus.Error.InvalidArgs", "\(method.name) is served with another signature: \(error?.message ?? "")")
        }
        let all = try await client.call("GetAll", [.string(declared.name)], interface: "org.freedesktop.DBus.Properties")
        let properties = all.first?.vardictValue ?? [:]
        #expect(Set(properties.keys) == Set(declared.properties.keys))
        for (name, property) in declared.properties {
            #expect(properties[name]?.signature == property.type, "property \(name)")
        }
        let served = try await client.call("Introspect", interface: "org.freedesktop.DBus.Introspectable").first?.stringValue ?? ""
        let servedSpeech = try #require(try InterfaceDescription.parse(served).first { $0.name == declared.name })
        #expect(servedSpeech.methods == declared.methods)
        #expect(servedSpeech.signals == declared.signals)
        #expect(servedSpeech.properties == declared.properties)
    }
}
}
