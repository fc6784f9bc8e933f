import DBus
import Foundation
import PulseAudio
import Testing

/// A tone playing on the sandbox's speakers through paplay, as music would.
final class TonePlayer {
    let process = Process()
    static let file: String = {
        let path = FileManager.default.temporaryDirectory.appending(path: "hark-tone.wav").path
        if !FileManager.default.fileExists(atPath: path) {
            let sox = Process()
            sox.executableURL = URL(fileURLWithPath: "/usr/bin/sox")
            sox.arguments = ["-n", "-r", "16000", "-c", "2", path, "synth", "60", "sine", "440", "vol", "0.3"]
            try? sox.run()
            while !processGone(sox.processIdentifier) { usleep(10_000) }
        }
        return path
    }()

    init(name: String) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/paplay")
        process.arguments = ["-d", "speakers", "--client-name=\(name)", Self.file]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
    }

    func stop() { kill(process.processIdentifier, SIGKILL) }
}

extension Mixer {
    /// The stream of that client once its volume is set (pipewire-pulse shows a new stream
    /// at volume 0 for a moment).
    func stream(named name: String) async -> PlaybackStream? {
        guard let stream = await streams().first(where: { $0.applicationName == name }),
              stream.volumes.contains(where: { $0 > 0 }) else { return nil }
        return stream
    }
}

extension Integration {
@Suite(.timeLimit(.minutes(2))) struct DuckingTests {
    init() throws { try Sandbox.require() }

    static let long = "This announcement is long enough for a person to notice that the music got quieter while it was spoken."

    func setAudio(_ client: TestClient, _ name: String, _ value: DBusValue) async -> DBusError? {
        await client.error("Set", [.string("org.hark.Hark1.Audio"), .string(name), .variant(value)], interface: "org.freedesktop.DBus.Properties")
    }

    @Test func musicIsLoweredWhileAnAnnouncementSpeaksAndComesBack() async throws {
        let client = try TestClient()
        let mixer = try Mixer(clientName: "hark-test")
        let tone = try TonePlayer(name: "tone-player")
        defer { tone.stop() }
        let before = try await waitFor("the tone to play") { await mixer.stream(named: "tone-player") }
        // Speech Dispatcher's stream, as it is before any ducking (it stays open once it has spoken).
        try await client.ended(try await client.speak("Warm up."))
        func speechStreams() async -> [UInt32: [UInt32]] {
            Dictionary(await mixer.streams().filter { $0.binary == "speech-dispatcher" || $0.applicationName.hasPrefix("speech-dispatcher") }
                .map { ($0.index, $0.volumes) }, uniquingKeysWith: { first, _ in first })
        }
        let speechBefore = await speechStreams()
        #expect(!speechBefore.isEmpty, "Speech Dispatcher's stream was not found")

        let id = try await client.speak(Self.long, method: "Announce")
        try await client.waitForSignal("UtteranceStarted", of: id)
        // When the words start the ramp is over: the tone sits at the ducking level (−14 dB by default).
        let lowered = try #require(await mixer.stream(named: "tone-player"))
        #expect(lowered.volumes == before.volumes.map { Mixer.attenuate($0, decibels: -14) })
        // Speech Dispatcher's own stream is never touched.
        let speechDuring = await speechStreams()
        for (index, volumes) in speechBefore where speechDuring[index] != nil {
            #expect(speechDuring[index] == volumes, "Speech Dispatcher's stream was changed: \(volumes) → \(speechDuring[index]!)")
        }
        #expect((try await client.call("Get", [.string("org.hark.Hark1.Audio"), .string("Ducked")], interface: "org.freedesktop.DBus.Properties")).first?.unwrapped == .boolean(true))

        // A second player that starts mid-announcement is lowered at once.
        let second = try TonePlayer(name: "second-player")
        defer { second.stop() }
        _ = try await waitFor("the second player to be lowered", timeout: .seconds(2)) { () -> Bool? in
            guard let stream = await mixer.stream(named: "second-player") else { return nil }
            return stream.volumes.allSatisfy { $0 < 65536 } ? true : nil
        }

        #expect(try await client.ended(id) == 0)
        // After the last word, the volume comes back (hold + ramp), exactly to where it was.
        _ = try await waitFor("the tone's volume to come back", timeout: .seconds(3)) {
            await mixer.stream(named: "tone-player")?.volumes == before.volumes ? true : nil
        }
    }

    @Test func aVolumeTheUserChangesMidDuckIsKept() async throws {
        let client = try TestClient()
        let mixer = try Mixer(clientName: "hark-test")
        let tone = try TonePlayer(name: "user-tone")
        defer { tone.stop() }
        let stream = try await waitFor("the tone") { await mixer.stream(named: "user-tone") }
        let id = try await client.speak(Self.long, method: "Announce")
        try await client.waitForSignal("UtteranceStarted", of: id)
        let chosen = stream.volumes.map { _ in UInt32(30000) }
        #expect(await mixer.setVolumes(stream.index, chosen))
        #expect(try await client.ended(id) == 0)
        try await Task.sleep(for: .seconds(1))
        #expect(await mixer.stream(named: "user-tone")?.volumes == chosen)
    }

    @Test func levelAndModeAreValidatedAppliedAndSaved() async throws {
        let client = try TestClient()
        let mixer = try Mixer(clientName: "hark-test")
        let tone = try TonePlayer(name: "level-tone")
        defer { tone.stop() }
        let before = try await waitFor("the tone") { await mixer.stream(named: "level-tone") }

        let bad = await setAudio(client, "DuckingLevel", .double(5))
        #expect(bad?.name == "org.hark.Hark1.Error.InvalidArgument")
        #expect(bad?.message.contains("5") == true)
        let badMode = await setAudio(client, "DuckingMode", .string("mute"))
        #expect(badMode?.message.contains("mute") == true)

        #expect(await setAudio(client, "DuckingLevel", .double(-30)) == nil)
        let id = try await client.speak("Quieter still.", method: "Announce")
        try await client.waitForSignal("UtteranceStarted", of: id)
        #expect(await mixer.stream(named: "level-tone")?.volumes == before.volumes.map { Mixer.attenuate($0, decibels: -30) })
        try await client.ended(id)

        #expect(await setAudio(client, "DuckingMode", .string("off")) == nil)
        _ = try await waitFor("the volume back") { await mixer.stream(named: "level-tone")?.volumes == before.volumes ? true : nil }
        let plain = try await client.speak("Not ducked.", method: "Announce")
        try await client.waitForSignal("UtteranceStarted", of: plain)
        #expect(await mixer.stream(named: "level-tone")?.volumes == before.volumes)
        try await client.ended(plain)

        // Both were saved in the configuration file.
        let config = try String(contentsOfFile: Sandbox.environment["XDG_CONFIG_HOME"]! + "/hark/hark.conf", encoding: .utf8)
        #expect(config.contains("level=-30"))
        #expect(config.contains("mode=off"))
        #expect(await setAudio(client, "DuckingMode", .string("duck")) == nil)
        #expect(await setAudio(client, "DuckingLevel", .double(-14)) == nil)
        try? FileManager.default.removeItem(atPath: Sandbox.environment["XDG_CONFIG_HOME"]! + "/hark/hark.conf")
    }

    @Test func aHarkdKilledWhileDuckedIsRepairedAtTheNextStart() async throws {
        let client = try TestClient()
        let mixer = try Mixer(clientName: "hark-test")
        let tone = try TonePlayer(name: "crash-tone")
        defer { tone.stop() }
        let before = try await waitFor("the tone") { await mixer.stream(named: "crash-tone") }
        let id = try await client.speak(Self.long, method: "Announce")
        try await client.waitForSignal("UtteranceStarted", of: id)
        let pid = try #require(try await harkdPID(client))
        kill(pid, SIGKILL)
        _ = try await waitFor("harkd to be gone") { try await harkdPID(client) == nil ? true : nil }
        // Left lowered by the crash...
        #expect(await mixer.stream(named: "crash-tone")?.volumes != before.volumes)
        // ...until harkd starts again (D-Bus activation by the next call).
        _ = try await client.call("Get", [.string("org.hark.Hark1.Speech"), .string("Version")], interface: "org.freedesktop.DBus.Properties")
        _ = try await waitFor("the tone's volume restored", timeout: .seconds(5)) {
            await mixer.stream(named: "crash-tone")?.volumes == before.volumes ? true : nil
        }
    }
}
}

/// A media player on the sandbox bus, as MPRIS describes one: PlaybackStatus, Pause, Play.
final class FakePlayer: Sendable {
    static let xml = """
    <node><interface name="org.mpris.MediaPlayer2.Player">
      <method name="Pause"/><method name="Play"/>
      <property name="PlaybackStatus" type="s" access="read"/>
    </interface></node>
    """
    let connection: Connection
    let server: ObjectServer
    let status: Locked<String>
    /// (method, when) in call order.
    let calls = Locked<[(String, ContinuousClock.Instant)]>([])

    init(name: String, status initial: String) async throws {
        connection = try Connection.session(label: "fake-player")
        server = ObjectServer(connection: connection)
        let status = Locked(initial), calls = calls
        self.status = status
        var player = ExportedInterface(try InterfaceDescription.parse(Self.xml)[0])
        player.methods["Pause"] = { _ in
            calls.withLock { $0.append(("Pause", .now)) }
            status.withLock { $0 = "Paused" }
            return []
        }
        player.methods["Play"] = { _ in
            calls.withLock { $0.append(("Play", .now)) }
            status.withLock { $0 = "Playing" }
            return []
        }
        player.getters["PlaybackStatus"] = { .string(status.value) }
        server.export(path: "/org/mpris/MediaPlayer2", interfaces: [player])
        #expect(try await connection.requestName("org.mpris.MediaPlayer2.\(name)") == .primaryOwner)
    }

    var methods: [String] { calls.value.map(\.0) }
}

extension Integration.DuckingTests {
    @Test func pauseModePausesPlayingPlayersAndResumesExactlyThose() async throws {
        let client = try TestClient()
        let playing = try await FakePlayer(name: "music", status: "Playing")
        let idle = try await FakePlayer(name: "podcast", status: "Paused")
        #expect(await setAudio(client, "DuckingMode", .string("pause")) == nil)
        defer { try? FileManager.default.removeItem(atPath: Sandbox.environment["XDG_CONFIG_HOME"]! + "/hark/hark.conf") }

        let clock = ContinuousClock()
        let id = try await client.speak("Your download is complete.", method: "Announce")
        try await client.waitForSignal("UtteranceStarted", of: id)
        let started = clock.now
        #expect(playing.methods == ["Pause"], "paused before the words")
        #expect(playing.calls.value.first.map { $0.1 < started } == true)
        try await client.ended(id)
        let ended = clock.now
        _ = try await waitFor("the player to resume", timeout: .seconds(3)) { playing.methods == ["Pause", "Play"] ? true : nil }
        #expect(playing.calls.value.last.map { $0.1 > ended } == true, "resumed after the words")
        #expect(idle.methods.isEmpty, "a player that was not playing was touched")

        // A player the user stopped meanwhile is not started again.
        let again = try await client.speak("Another announcement, a little longer than the first one.", method: "Announce")
        try await client.waitForSignal("UtteranceStarted", of: again)
        playing.status.withLock { $0 = "Stopped" }
        try await client.ended(again)
        try await Task.sleep(for: .seconds(1))
        #expect(playing.methods == ["Pause", "Play", "Pause"])

        #expect(await setAudio(client, "DuckingMode", .string("duck")) == nil)
        playing.connection.close()
        idle.connection.close()
    }
}

extension Integration.DuckingTests {
    /// Even if the end of the speech were never reported, other audio comes back after the
    /// maximum hold.
    @Test func nothingStaysLoweredLongerThanTheMaximumHold() async throws {
        let client = try TestClient()
        let folder = Sandbox.environment["XDG_CONFIG_HOME"]! + "/hark"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try "[audio]\nmax-hold=2\n".write(toFile: folder + "/hark.conf", atomically: true, encoding: .utf8)
        try await restartHarkd(client)
        defer { try? FileManager.default.removeItem(atPath: folder + "/hark.conf") }
        let mixer = try Mixer(clientName: "hark-test")
        let tone = try TonePlayer(name: "hold-tone")
        defer { tone.stop() }
        let before = try await waitFor("the tone") { await mixer.stream(named: "hold-tone") }
        let id = try await client.speak(String(repeating: "A long announcement that goes on and on. ", count: 5), method: "Announce")
        try await client.waitForSignal("UtteranceStarted", of: id)
        #expect(await mixer.stream(named: "hold-tone")?.volumes != before.volumes)
        // Back while the announcement is still speaking, 2 s after it began.
        _ = try await waitFor("the maximum hold to end the duck", timeout: .seconds(4)) {
            await mixer.stream(named: "hold-tone")?.volumes == before.volumes ? true : nil
        }
        #expect((try await client.property("Speaking")).boolValue == true)
        _ = try await client.call("Cancel", [.uint64(id)])
        // The next harkd reads the configuration without max-hold again.
        try FileManager.default.removeItem(atPath: folder + "/hark.conf")
        try await restartHarkd(client)
    }
}
