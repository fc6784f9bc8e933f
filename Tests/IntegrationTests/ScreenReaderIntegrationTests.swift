import DBus
import Foundation
import Testing

/// What Speech Dispatcher was told for the latest message: for each `SET SELF` setting, the
/// last value the connection that sent the latest SPEAK had set before it.
func settingsOfLastMessage() -> [String: String] {
    let lines = Sandbox.protocolLog.split(whereSeparator: \.isNewline).compactMap { line -> (String, String)? in
        // "[date] speechd:     19:DATA:|SET SELF RATE 52"
        guard let data = line.range(of: ":DATA:|") else { return nil }
        let prefix = line[..<data.lowerBound]
        let fd = String(prefix.split(separator: " ").last ?? "")
        // The logged line keeps SSIP's CR.
        return (fd, line[data.upperBound...].trimmingCharacters(in: .whitespacesAndNewlines))
    }
    guard let speakIndex = lines.lastIndex(where: { $0.1.uppercased() == "SPEAK" }) else { return [:] }
    let fd = lines[speakIndex].0
    var settings: [String: String] = [:]
    for (sender, command) in lines[..<speakIndex] where sender == fd && command.hasPrefix("SET SELF ") {
        let parts = command.dropFirst("SET SELF ".count).split(separator: " ", maxSplits: 1)
        if parts.count == 2 { settings[String(parts[0])] = String(parts[1]) }
    }
    return settings
}

/// A process named `orca` (the kernel's name is the script's), as Orca's launcher appears.
final class FakeScreenReader {
    let process = Process()
    let directory: URL

    init(name: String = "orca", arguments: [String] = []) throws {
        directory = FileManager.default.temporaryDirectory.appending(path: "hark-fake-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let script = directory.appending(path: name)
        try "#!/bin/sh\nwhile :; do sleep 1; done\n".write(to: script, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: script.path)
        process.executableURL = script
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
    }

    func stop() {
        // Its `sleep` child goes with the shell's process group.
        kill(-process.processIdentifier, SIGKILL)
        kill(process.processIdentifier, SIGKILL)
        try? FileManager.default.removeItem(at: directory)
    }
}

/// Orca's settings file where harkd (and Orca) look for it: $XDG_DATA_HOME/orca.
func writeOrcaSettings(_ json: String, directory: String? = nil) throws {
    let folder = directory ?? (Sandbox.environment["XDG_DATA_HOME"]! + "/orca")
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    // As Orca saves: a new file renamed over the old one.
    let temporary = folder + "/.user-settings.conf.tmp"
    try json.write(toFile: temporary, atomically: false, encoding: .utf8)
    _ = rename(temporary, folder + "/user-settings.conf")
}

extension Integration {
@Suite(.timeLimit(.minutes(2))) struct ScreenReaderTests {
    init() throws { try Sandbox.require() }

    func announce(_ client: TestClient, _ options: [String: DBusValue] = [:], method: String = "Announce") async throws -> [String: String] {
        let id = try await client.speak("Check.", options, method: method)
        #expect(try await client.ended(id) == 0)
        return settingsOfLastMessage()
    }

    @Test func orcasFirstRunFileGivesOrcasDefaults() async throws {
        let client = try TestClient()
        try writeOrcaSettings(ScreenReaderFixtures.firstRun)
        let orca = try FakeScreenReader()
        defer {
            orca.stop()
            try? FileManager.default.removeItem(atPath: Sandbox.environment["XDG_DATA_HOME"]! + "/orca/user-settings.conf")
        }
        _ = try await waitFor("harkd to see Orca", timeout: .seconds(5)) {
            (try await client.property("ScreenReader")).stringValue == "orca" ? true : nil
        }
        let sent = try await announce(client, ["voice": .string("espeak-ng:English (Great Britain)")])
        // Orca 43's defaults (rate 50, pitch 5, gain 10) as it sends them; no module or voice of its own.
        #expect(sent["RATE"] == "2")
        #expect(sent["PITCH"] == "10")
        #expect(sent["VOLUME"] == "100")
        #expect(sent["VOICE_TYPE"] == "MALE1", "the placeholder voice must not be sent as a voice name")
        _ = try await waitFor("harkd to see Orca gone", timeout: .seconds(5)) {
            orca.stop()
            return (try await client.property("ScreenReader")).stringValue == "" ? true : nil
        }
    }

    @Test func orcasSettingsAreUsedLiveAndSurviveAMalformedFile() async throws {
        let client = try TestClient()
        let announced = Locked<[String]>([])
        try await client.connection.addMatch("type='signal',sender='org.hark.Hark1',interface='org.freedesktop.DBus.Properties'") { message in
            guard message.member == "PropertiesChanged", let changed = message.body.dropFirst().first?.vardictValue,
                  let reader = changed["ScreenReader"]?.stringValue else { return }
            announced.withLock { $0.append(reader) }
        }
        try writeOrcaSettings(ScreenReaderFixtures.profileOverridesVoices)
        let orca = try FakeScreenReader()
        defer { orca.stop() }
        _ = try await waitFor("harkd to see Orca", timeout: .seconds(5)) {
            (try await client.property("ScreenReader")).stringValue == "orca" ? true : nil
        }
        // Clients hear about it: PropertiesChanged with the new ScreenReader.
        _ = try await waitFor("PropertiesChanged ScreenReader=orca", timeout: .seconds(2)) {
            announced.value.contains("orca") ? true : nil
        }

        // An announcement sounds like Orca: the numbers Orca 43 sends for this file.
        var sent = try await announce(client, ["rate": .double(4)])
        #expect(sent["RATE"] == "52")
        #expect(sent["PITCH"] == "20")
        #expect(sent["VOLUME"] == "85")
        #expect(sent["LANGUAGE"] == "en-gb")
        #expect(sent["OUTPUT_MODULE"] == "espeak-ng")
        #expect(sent["SYNTHESIS_VOICE"] == "English (Great Britain)")

        // Speak keeps its own settings unless it asks for the screen reader's.
        sent = try await announce(client, ["rate": .double(2)], method: "Speak")
        #expect(sent["RATE"] == "50")
        sent = try await announce(client, ["rate": .double(2), "prefer-screen-reader": .boolean(true)], method: "Speak")
        #expect(sent["RATE"] == "52")

        // The property shows it in Hark's units.
        let settings = try await client.property("ScreenReaderSettings").vardictValue ?? [:]
        #expect(settings["voice"]?.stringValue == "English (Great Britain)")
        #expect(abs((settings["rate"]?.doubleValue ?? 0) - pow(2, 52.0 / 50)) < 1e-9)

        // The user saves slower settings: the next announcement uses them, within 2 s.
        try writeOrcaSettings(ScreenReaderFixtures.profileOverridesVoices.replacingOccurrences(of: #""rate": 75"#, with: #""rate": 30"#))
        _ = try await waitFor("the new settings", timeout: .seconds(2)) {
            let rate = try await client.property("ScreenReaderSettings").vardictValue?["rate"]?.doubleValue ?? 0
            return abs(rate - pow(2, -38.0 / 50)) < 1e-9 ? true : nil
        }
        #expect(try await announce(client)["RATE"] == "-38")

        // A half-written file changes nothing and silences nothing.
        try writeOrcaSettings(#"{"general": {"voices": "#)
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await announce(client)["RATE"] == "-38")

        // Orca quits: explicit options and Hark's defaults apply again.
        orca.stop()
        _ = try await waitFor("harkd to see Orca gone", timeout: .seconds(5)) {
            (try await client.property("ScreenReader")).stringValue == "" ? true : nil
        }
        sent = try await announce(client, ["rate": .double(2)])
        #expect(sent["RATE"] == "50")
        try? FileManager.default.removeItem(atPath: Sandbox.environment["XDG_DATA_HOME"]! + "/orca/user-settings.conf")
    }

    @Test func orcasSystemVoiceForAnnouncementsAndItsUserPrefsFolder() async throws {
        let client = try TestClient()
        let folder = FileManager.default.temporaryDirectory.appending(path: "hark-orca-\(UUID().uuidString)").path
        try writeOrcaSettings(ScreenReaderFixtures.secondProfileWithSystemVoice, directory: folder)
        let orca = try FakeScreenReader(arguments: ["-u", folder])
        defer {
            orca.stop()
            try? FileManager.default.removeItem(atPath: folder)
        }
        _ = try await waitFor("harkd to read Orca's -u folder", timeout: .seconds(5)) {
            (try await client.property("ScreenReaderSettings")).vardictValue?["language"]?.stringValue == "es" ? true : nil
        }
        let announced = try await announce(client)
        #expect(announced["RATE"] == "82")
        #expect(announced["VOLUME"] == "55")
        #expect(announced["PITCH"] == "-10")
        #expect(announced["LANGUAGE"] == "es-419")
        #expect(announced["SYNTHESIS_VOICE"] == "Spanish (Latin America)")
        let spoken = try await announce(client, ["prefer-screen-reader": .boolean(true)], method: "Speak")
        #expect(spoken["RATE"] == "27")
        #expect(spoken["SYNTHESIS_VOICE"] == "Spanish (Spain)")
    }

    @Test func fenrirsSettings() async throws {
        let client = try TestClient()
        let settings = try #require(Sandbox.environment["HARK_FENRIR_SETTINGS"])
        try FileManager.default.createDirectory(atPath: (settings as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try "[speech]\nenabled=True\nrate=0.75\npitch=0.5\nvolume=1.0\nmodule=espeak-ng\nlanguage=en\n".write(toFile: settings, atomically: true, encoding: .utf8)
        let fenrir = try FakeScreenReader(name: "fenrir")
        defer { fenrir.stop() }
        _ = try await waitFor("harkd to see Fenrir", timeout: .seconds(5)) {
            (try await client.property("ScreenReader")).stringValue == "fenrir" ? true : nil
        }
        let sent = try await announce(client)
        // int(−100 + 200·v): rate 0.75, pitch 0.5, volume 1.
        #expect(sent["RATE"] == "50")
        #expect(sent["PITCH"] == "0")
        #expect(sent["VOLUME"] == "100")
    }
}
}

enum ScreenReaderFixtures {
    /// What Orca 43 writes on its first run: defaults, placeholder names, no module.
    static let firstRun = """
    {"general": {"speechServerInfo": null,
                 "voices": {"default": {"established": false, "family": {"name": "espeak-ng default voice", "lang": "", "dialect": ""}},
                            "system": {"established": false}, "uppercase": {"average-pitch": 7.0}, "hyperlink": {"established": false}},
                 "startingProfile": ["Default", "default"], "activeProfile": ["Default", "default"]},
     "profiles": {"default": {"profile": ["Default", "default"]}}, "keybindings": {}, "pronunciations": {}}
    """

    static let profileOverridesVoices = """
    {"general": {"speechServerInfo": ["Default Synthesizer", "default"],
                 "voices": {"default": {"rate": 30, "average-pitch": 3.0, "gain": 4.0}, "system": {"rate": 10}},
                 "startingProfile": ["Default", "default"]},
     "profiles": {"default": {"profile": ["Default", "default"], "speechServerInfo": ["espeak-ng", "espeak-ng"],
                  "voices": {"default": {"established": true, "rate": 75, "average-pitch": 5.5, "gain": 8.0,
                             "family": {"name": "English (Great Britain)", "lang": "en", "dialect": "gb"}}}}}}
    """

    static let secondProfileWithSystemVoice = """
    {"general": {"voices": {"default": {"rate": 50}}, "startingProfile": ["Spanish", "spanish"]},
     "profiles": {"default": {"profile": ["Default", "default"]},
                  "spanish": {"profile": ["Spanish", "spanish"], "speechServerInfo": ["espeak-ng", "espeak-ng"],
                              "voices": {"default": {"rate": 62.5, "average-pitch": 4.0, "gain": 9.5,
                                                     "family": {"name": "Spanish (Spain)", "locale": "es"}},
                                         "system": {"rate": 90, "gain": 6.0,
                                                    "family": {"name": "Spanish (Latin America)", "locale": "es", "dialect": "419"}}}}}}
    """
}

/// A stand-in for Orca 51 on the sandbox bus: org.gnome.Orca1.Service with the SpeechManager
/// properties Orca publishes, changeable as Orca's keyboard shortcuts change them.
final class FakeOrca51: Sendable {
    static let xml = """
    <node><interface name="org.gnome.Orca1.SpeechManager">
      <property name="Rate" type="u" access="readwrite"/>
      <property name="Pitch" type="d" access="readwrite"/>
      <property name="Volume" type="d" access="readwrite"/>
      <property name="CurrentSynthesizer" type="s" access="readwrite"/>
      <property name="CurrentVoice" type="s" access="readwrite"/>
    </interface></node>
    """
    let connection: Connection
    let server: ObjectServer
    let values: Locked<[String: DBusValue]>

    init(rate: UInt32, pitch: Double, volume: Double, synthesizer: String, voice: String) async throws {
        connection = try Connection.session(label: "fake-orca")
        server = ObjectServer(connection: connection)
        let values = Locked<[String: DBusValue]>([
            "Rate": .uint32(rate), "Pitch": .double(pitch), "Volume": .double(volume),
            "CurrentSynthesizer": .string(synthesizer), "CurrentVoice": .string(voice),
        ])
        self.values = values
        var manager = ExportedInterface(try InterfaceDescription.parse(Self.xml)[0])
        for name in ["Rate", "Pitch", "Volume", "CurrentSynthesizer", "CurrentVoice"] {
            manager.getters[name] = { values.value[name]! }
            manager.setters[name] = { value, _ in values.withLock { $0[name] = value } }
        }
        server.export(path: "/org/gnome/Orca1/Service/SpeechManager", interfaces: [manager])
        #expect(try await connection.requestName("org.gnome.Orca1.Service") == .primaryOwner)
    }

    /// As if the user pressed Orca's "increase rate" key: a live change, never saved.
    func set(_ name: String, _ value: DBusValue) {
        values.withLock { $0[name] = value }
        server.emitPropertiesChanged(path: "/org/gnome/Orca1/Service/SpeechManager", interface: "org.gnome.Orca1.SpeechManager", changed: [name: value])
    }

    func quit() { connection.close() }
}

extension Integration.ScreenReaderTests {
    @Test func orca51LiveSettingsOverDBus() async throws {
        let client = try TestClient()
        let orca = try await FakeOrca51(rate: 80, pitch: 6, volume: 7.5, synthesizer: "espeak-ng", voice: "English (America)")
        _ = try await waitFor("harkd to see Orca 51", timeout: .seconds(5)) {
            (try await client.property("ScreenReader")).stringValue == "orca" ? true : nil
        }
        // Orca 51's arithmetic: rate int(2·80 − 100) = 60, pitch int(20·6 − 100) = 20, volume int(20·7.5 − 100) = 50.
        var sent = try await announce(client)
        #expect(sent["RATE"] == "60")
        #expect(sent["PITCH"] == "20")
        #expect(sent["VOLUME"] == "50")
        #expect(sent["OUTPUT_MODULE"] == "espeak-ng")
        #expect(sent["SYNTHESIS_VOICE"] == "English (America)")

        // A change made with Orca's keys applies to the very next announcement.
        orca.set("Rate", .uint32(20))
        sent = try await announce(client)
        #expect(sent["RATE"] == "-60")
        _ = try await waitFor("ScreenReaderSettings to follow", timeout: .seconds(2)) {
            let rate = try await client.property("ScreenReaderSettings").vardictValue?["rate"]?.doubleValue ?? 0
            return abs(rate - pow(2, -60.0 / 50)) < 1e-9 ? true : nil
        }

        orca.quit()
        _ = try await waitFor("harkd to see Orca 51 gone", timeout: .seconds(5)) {
            (try await client.property("ScreenReader")).stringValue == "" ? true : nil
        }
    }
}

/// Runs `dconf` in the sandbox (its writer is activated on the sandbox bus).
@discardableResult
func dconf(_ arguments: [String], input: String? = nil) throws -> Int32 {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/dconf")
    process.arguments = arguments
    let stdin = Pipe()
    process.standardInput = stdin
    process.standardOutput = FileHandle.nullDevice
    try process.run()
    if let input { stdin.fileHandleForWriting.write(Data(input.utf8)) }
    try stdin.fileHandleForWriting.close()
    // Foundation's own view of the exit lags /proc; terminationStatus traps until it has it.
    for _ in 0..<1000 where process.isRunning { usleep(10_000) }
    return process.isRunning ? -1 : process.terminationStatus
}

extension Integration.ScreenReaderTests {
    @Test func orca50SettingsInDconfLive() async throws {
        let client = try TestClient()
        try dconf(["load", "/org/gnome/orca/"], input: """
        [default/speech]
        synthesizer='espeak-ng'

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

        """)
        let orca = try FakeScreenReader()
        defer {
            orca.stop()
            _ = try? dconf(["reset", "-f", "/org/gnome/orca/"])
        }
        _ = try await waitFor("harkd to read Orca's dconf settings", timeout: .seconds(5)) {
            (try await client.property("ScreenReaderSettings")).vardictValue?["language"]?.stringValue == "en-us" ? true : nil
        }
        // Orca 50's arithmetic: system rate 80 → 62; pitch 6 → 30; volume 7.5 → 77 (77.5 truncated).
        var sent = try await announce(client)
        #expect(sent["RATE"] == "62")
        #expect(sent["PITCH"] == "30")
        #expect(sent["VOLUME"] == "77")
        #expect(sent["LANGUAGE"] == "en-us")
        #expect(sent["SYNTHESIS_VOICE"] == "English (America)")
        sent = try await announce(client, ["prefer-screen-reader": .boolean(true)], method: "Speak")
        #expect(sent["RATE"] == "30")

        // The user changes it in Orca's preferences (dconf): used within 2 s.
        try dconf(["write", "/org/gnome/orca/default/voices/system/rate", "30"])
        _ = try await waitFor("the dconf change", timeout: .seconds(2)) {
            let rate = try await client.property("ScreenReaderSettings").vardictValue?["system"]?.vardictValue?["rate"]?.doubleValue ?? 0
            return abs(rate - pow(2, -38.0 / 50)) < 1e-9 ? true : nil
        }
        #expect(try await announce(client)["RATE"] == "-38")
    }
}
