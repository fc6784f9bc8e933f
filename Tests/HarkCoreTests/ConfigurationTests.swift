import HarkCore
import Testing

@Suite struct ConfigurationTests {
    @Test func readsTheSpeechSection() {
        let (defaults, warnings) = Configuration.parse("""
        # Hark
        [speech]
        rate=1.5
        pitch = 0.8   # a bit lower
        volume=0.9
        language=en-GB
        duck=true
        """)
        #expect(warnings.isEmpty)
        #expect(defaults.rate == 1.5)
        #expect(defaults.pitch == 0.8)
        #expect(defaults.volume == 0.9)
        #expect(defaults.language == "en-GB")
        #expect(defaults.duckSpeak)
    }

    @Test func badValuesAreNamedAndSkipped() {
        let (defaults, warnings) = Configuration.parse("""
        [speech]
        rate=11
        volume=loud
        language=not a tag
        colour=red
        [video]
        level=-10
        """)
        #expect(defaults == SpeechDefaults())
        #expect(warnings.count == 5)
        #expect(warnings.contains { $0.contains("rate=11") })
        #expect(warnings.contains { $0.contains("volume=loud") })
        #expect(warnings.contains { $0.contains("colour") })
        #expect(warnings.contains { $0.contains("[video]") })
    }

    @Test func emptyOrGarbageIsDefaults() {
        #expect(Configuration.parse("").defaults == SpeechDefaults())
        #expect(Configuration.parse("\u{0}\u{1}[[[").defaults == SpeechDefaults())
    }
}

@Suite struct AudioConfigurationTests {
    @Test func audioSection() {
        let (_, audio, warnings) = Configuration.parseAll("[audio]\nmode=off\nlevel=-20\nmax-hold=30\n")
        #expect(warnings.isEmpty)
        #expect(audio.mode == .off)
        #expect(audio.level == -20)
        #expect(audio.maximumHold == 30)
        let bad = Configuration.parseAll("[audio]\nmode=loud\nlevel=6\n")
        #expect(bad.audio == AudioSettings())
        #expect(bad.warnings.count == 2)
    }

    @Test func updatingKeepsTheRestOfTheFile() {
        let text = "# mine\n[speech]\nrate=1.5\n\n[audio]\nmode=duck # comment\n"
        #expect(Configuration.updating(text, section: "audio", key: "mode", value: "off") == "# mine\n[speech]\nrate=1.5\n\n[audio]\nmode=off\n")
        #expect(Configuration.updating(text, section: "audio", key: "level", value: "-20") == "# mine\n[speech]\nrate=1.5\n\n[audio]\nmode=duck # comment\nlevel=-20\n")
        #expect(Configuration.updating("", section: "audio", key: "level", value: "-20") == "[audio]\nlevel=-20\n")
        #expect(Configuration.updating("[speech]\nrate=2\n", section: "audio", key: "mode", value: "off") == "[speech]\nrate=2\n\n[audio]\nmode=off\n")
    }
}

@Suite struct DuckingPolicyTests {
    @Test func sparesSpeechAndTheScreenReader() {
        func facts(_ app: String, _ binary: String, writable: Bool = true) -> StreamFacts {
            StreamFacts(applicationName: app, binary: binary, mediaName: "", volumeWritable: writable)
        }
        #expect(DuckingPolicy.shouldDuck(facts("Firefox", "firefox")))
        #expect(DuckingPolicy.shouldDuck(facts("paplay", "paplay")))
        #expect(!DuckingPolicy.shouldDuck(facts("speech-dispatcher-espeak-ng", "speech-dispatcher")))
        #expect(!DuckingPolicy.shouldDuck(facts("orca", "python3")))
        #expect(!DuckingPolicy.shouldDuck(facts("hark", "harkd")))
        #expect(!DuckingPolicy.shouldDuck(facts("Music", "rhythmbox", writable: false)))
    }

    @Test func journalRestoresOnlyWhatIsStillAsHarkLeftIt() {
        let journal = DuckingJournal(entries: [
            .init(index: 1, applicationName: "a", original: [65536, 65536], lowered: [20000, 20000]),
            .init(index: 2, applicationName: "b", original: [65536], lowered: [20000]),
            .init(index: 3, applicationName: "c", original: [65536], lowered: [20000]),
        ])
        let back = DuckingJournal.decode(journal.encoded())
        #expect(back == journal)
        // 2 was moved by the user, 3 is gone.
        let restore = journal.restorations(current: [1: [20000, 20000], 2: [30000]])
        #expect(restore.map(\.index) == [1])
        #expect(restore.first?.volumes == [65536, 65536])
    }
}
