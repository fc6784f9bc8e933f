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
        [audio]
        level=-10
        """)
        #expect(defaults == SpeechDefaults())
        #expect(warnings.count == 5)
        #expect(warnings.contains { $0.contains("rate=11") })
        #expect(warnings.contains { $0.contains("volume=loud") })
        #expect(warnings.contains { $0.contains("colour") })
        #expect(warnings.contains { $0.contains("[audio]") })
    }

    @Test func emptyOrGarbageIsDefaults() {
        #expect(Configuration.parse("").defaults == SpeechDefaults())
        #expect(Configuration.parse("\u{0}\u{1}[[[").defaults == SpeechDefaults())
    }
}
