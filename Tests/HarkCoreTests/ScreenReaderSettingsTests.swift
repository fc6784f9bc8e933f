import Foundation
import HarkCore
import Testing

/// Real-shaped settings files, as Orca 43 (Debian 12) and Fenrir write them.
enum Fixtures {
    /// A first run: Orca wrote its defaults, placeholder voice names, no module chosen.
    static let orcaFirstRun = """
    {
        "general": {
            "enableSpeech": true,
            "speechServerFactory": "orca.speechdispatcherfactory",
            "speechServerInfo": null,
            "voices": {
                "default": {"established": false},
                "uppercase": {"average-pitch": 7.0},
                "hyperlink": {"established": false},
                "system": {"established": false}
            },
            "startingProfile": ["Default", "default"],
            "activeProfile": ["Default", "default"]
        },
        "profiles": {
            "default": {
                "profile": ["Default", "default"]
            }
        },
        "keybindings": {},
        "pronunciations": {}
    }
    """

    /// The user sped Orca up and chose a voice in the default profile; the profile's voices
    /// replace general's whole voices dictionary.
    static let orcaProfileOverridesVoices = """
    {
        "general": {
            "speechServerInfo": ["Default Synthesizer", "default"],
            "voices": {
                "default": {"rate": 30, "average-pitch": 3.0, "gain": 4.0,
                            "family": {"name": "espeak-ng default voice", "lang": "en", "dialect": "", "gender": null, "variant": null}},
                "system": {"rate": 10}
            },
            "startingProfile": ["Default", "default"]
        },
        "profiles": {
            "default": {
                "profile": ["Default", "default"],
                "speechServerInfo": ["espeak-ng", "espeak-ng"],
                "voices": {
                    "default": {"established": true, "rate": 75, "average-pitch": 5.5, "gain": 8.0,
                                "family": {"name": "English (Great Britain)", "lang": "en", "dialect": "gb", "gender": null, "variant": "none"}},
                    "uppercase": {"average-pitch": 7.0}
                }
            }
        }
    }
    """

    /// A second profile is the starting one and has its own system voice (older `locale` key).
    static let orcaSecondProfileWithSystemVoice = """
    {
        "general": {
            "voices": {"default": {"rate": 50}},
            "startingProfile": ["Spanish", "spanish"]
        },
        "profiles": {
            "default": {"profile": ["Default", "default"]},
            "spanish": {
                "profile": ["Spanish", "spanish"],
                "speechServerInfo": ["espeak-ng", "espeak-ng"],
                "voices": {
                    "default": {"rate": 62.5, "average-pitch": 4.0, "gain": 9.5,
                                "family": {"name": "Spanish (Spain)", "locale": "es", "dialect": null}},
                    "system": {"rate": 90, "gain": 6.0,
                               "family": {"name": "Spanish (Latin America)", "locale": "es", "dialect": "419"}}
                }
            }
        }
    }
    """

    /// Half-written by an editor that crashed.
    static let orcaMalformed = #"{"general": {"voices": {"default": {"rate": 70, "#

    /// `dconf dump /org/gnome/orca/` from Orca 50.
    static let orcaDconf = """
    [default/speech]
    synthesizer='espeak-ng'
    speech-server='espeak-ng'

    [default/voices/default]
    established=true
    family-lang='en'
    family-dialect='us'
    family-name='English (America)'
    pitch=6.0
    rate=64
    volume=7.5

    [default/voices/system]
    established=true
    rate=80
    """

    /// /etc/fenrirscreenreader/settings/settings.conf (excerpt).
    static let fenrir = """
    [sound]
    enabled=True
    volume=0.7

    [speech]
    # Turn speech on or off:
    enabled=True
    driver=speechdDriver
    # The rate selects how fast Fenrir will speak. Options range from 0, slowest, to 1.0, fastest.
    rate=0.75
    pitch=0.5
    capitalPitch=0.9
    volume=1.0
    module=espeak-ng
    voice=en-us
    language=en
    autoReadIncoming=True
    """
}

@Suite struct OrcaArithmeticTests {
    @Test func upToOrca50TruncatesTowardZero() {
        let a = OrcaArithmetic.upTo50
        #expect(a.rate(50) == 2)
        #expect(a.rate(100) == 100)   // clamped to 99
        #expect(a.rate(0) == -98)
        #expect(a.rate(62.5) == 27)
        #expect(a.pitch(5) == 10)
        #expect(a.pitch(5.5) == 20)
        #expect(a.pitch(4.48) == 0)   // 20·4.48 − 90 = −0.4: Python's int() gives 0, not −1
        #expect(a.volume(10) == 100)
        #expect(a.volume(9.5) == 100)
        #expect(a.volume(4) == 25)
    }

    @Test func fromOrca51() {
        let a = OrcaArithmetic.from51
        #expect(a.rate(50) == 0)
        #expect(a.rate(100) == 100)
        #expect(a.pitch(5) == 0)
        #expect(a.pitch(10) == 100)
        #expect(a.volume(10) == 100)
        #expect(a.volume(7.5) == 50)
        #expect(a.volume(2.49) == -50)  // 20·2.49 − 100 = −50.2: toward zero, not −51
    }
}

@Suite struct OrcaSettingsTests {
    func speech(_ json: String) throws -> ScreenReaderSpeech {
        try OrcaSettings.parseJSON(Data(json.utf8)).speech(arithmetic: .upTo50)
    }

    @Test func firstRunSendsOrcasDefaultsAndNoVoiceOrModule() throws {
        let orca = try speech(Fixtures.orcaFirstRun)
        #expect(orca.defaultVoice == ScreenReaderVoice(rate: 2, pitch: 10, volume: 100))
        #expect(orca.systemVoice == orca.defaultVoice)
    }

    @Test func theStartingProfileReplacesGeneralsVoices() throws {
        let orca = try speech(Fixtures.orcaProfileOverridesVoices)
        // rate 75 → 2·75 − 98 = 52; pitch 5.5 → 20; gain 8 → 15·8 − 35 = 85.
        #expect(orca.defaultVoice == ScreenReaderVoice(rate: 52, pitch: 20, volume: 85, module: "espeak-ng",
                                                       language: "en-gb", voiceName: "English (Great Britain)"))
        // The profile's voices have no system voice: general's (rate 10) is gone with the rest.
        #expect(orca.systemVoice == orca.defaultVoice)
    }

    @Test func aSecondProfileWithItsOwnSystemVoice() throws {
        let orca = try speech(Fixtures.orcaSecondProfileWithSystemVoice)
        #expect(orca.defaultVoice == ScreenReaderVoice(rate: 27, pitch: -10, volume: 100, module: "espeak-ng",
                                                       language: "es", voiceName: "Spanish (Spain)"))
        // System over default: rate 90 → 82, gain 6 → 55, pitch stays 4 → −10, its own family.
        #expect(orca.systemVoice == ScreenReaderVoice(rate: 82, pitch: -10, volume: 55, module: "espeak-ng",
                                                      language: "es-419", voiceName: "Spanish (Latin America)"))
    }

    @Test func defaultModuleAndPlaceholderNamesAreNotSent() throws {
        let json = Fixtures.orcaProfileOverridesVoices.replacingOccurrences(of: #"["espeak-ng", "espeak-ng"]"#, with: #"["Default Synthesizer", "default"]"#)
            .replacingOccurrences(of: "English (Great Britain)", with: "espeak-ng default voice")
        let orca = try speech(json)
        #expect(orca.defaultVoice.module == nil)
        #expect(orca.defaultVoice.voiceName == nil)
        #expect(orca.defaultVoice.language == "en-gb")
    }

    @Test func aMalformedFileIsAnErrorNotACrash() throws {
        #expect(throws: HarkError.self) { try OrcaSettings.parseJSON(Data(Fixtures.orcaMalformed.utf8)) }
        #expect(throws: HarkError.self) { try OrcaSettings.parseJSON(Data("[1, 2]".utf8)) }
        // Wrong types inside are ignored, not fatal.
        let odd = #"{"general": {"voices": {"default": {"rate": "fast", "family": 7}}, "startingProfile": 3}, "profiles": []}"#
        #expect(try speech(odd).defaultVoice == ScreenReaderVoice(rate: 2, pitch: 10, volume: 100))
    }

    @Test func orca50Dconf() {
        let orca = OrcaSettings.parseDconfDump(Fixtures.orcaDconf).speech(arithmetic: .upTo50)
        // rate 64 → 30; pitch 6 → 30; volume 7.5 → 77 (77.5 truncated).
        #expect(orca.defaultVoice == ScreenReaderVoice(rate: 30, pitch: 30, volume: 77, module: "espeak-ng",
                                                       language: "en-us", voiceName: "English (America)"))
        #expect(orca.systemVoice.rate == 62)
        #expect(orca.systemVoice.voiceName == "English (America)")
    }

    @Test func settingsInHarkUnits() {
        let values = ScreenReaderVoice(rate: 50, pitch: -100, volume: 0, module: "espeak-ng", language: "en", voiceName: "x").harkUnits
        #expect(values["rate"] == .double(2))
        #expect(values["pitch"] == .double(0.5))
        #expect(values["volume"] == .double(0.5))
        #expect(values["module"] == .string("espeak-ng"))
    }
}

@Suite struct FenrirSettingsTests {
    @Test func speechSectionMapsAsFenrirDoes() {
        let fenrir = FenrirSettings.parse(Fixtures.fenrir)
        // int(−100 + 200·v): 0.75 → 50, 0.5 → 0, 1.0 → 100.
        #expect(fenrir.defaultVoice == ScreenReaderVoice(rate: 50, pitch: 0, volume: 100, module: "espeak-ng", language: "en", voiceName: "en-us"))
        #expect(fenrir.systemVoice == fenrir.defaultVoice)
    }

    @Test func garbageIsSurvived() {
        let fenrir = FenrirSettings.parse("[speech]\nrate=quick\nvolume=nan\n[[[\n")
        #expect(fenrir.defaultVoice == ScreenReaderVoice())
    }
}
