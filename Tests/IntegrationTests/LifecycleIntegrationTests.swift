import DBus
import Foundation
import Testing

func busCall(_ client: TestClient, _ member: String, _ body: [DBusValue]) async throws -> [DBusValue] {
    try await client.connection.call(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                     interface: "org.freedesktop.DBus", member: member, body)
}

/// harkd's pid, nil when the name has no owner (also when it goes away while asking).
func harkdPID(_ client: TestClient) async throws -> Int32? {
    do {
        let reply = try await busCall(client, "GetConnectionUnixProcessID", [.string("org.hark.Hark1")])
        return reply.first?.uint32Value.map { Int32($0) }
    } catch let error as DBusError where error.name == "org.freedesktop.DBus.Error.NameHasNoOwner" {
        return nil
    }
}

extension Integration {
@Suite(.timeLimit(.minutes(2))) struct LifecycleTests {
    init() throws { try Sandbox.require() }

    @Test func shutdownEndsSpeechThenActivationStartsAFreshHarkd() async throws {
        let client = try TestClient()
        // Make sure one is running (activated by this call if not).
        let id = try await client.speak("Speech that a shutdown interrupts, long enough to still be going when it comes.")
        try await client.waitForSignal("UtteranceStarted", of: id)
        let first = try #require(try await harkdPID(client))

        kill(first, SIGTERM)
        // Its client hears the utterance end (interrupted), and the name goes away.
        #expect(try await client.ended(id, timeout: .seconds(10)) == 2)
        _ = try await waitFor("harkd to release the name") { try await harkdPID(client) == nil ? true : nil }

        // The next call starts harkd again through D-Bus activation.
        let next = try await client.speak("Activated again.")
        #expect(try await client.ended(next) == 0)
        let second = try #require(try await harkdPID(client))
        #expect(second != first)
    }

    @Test func harkSayWaitsAndReportsTheOutcome() async throws {
        let spoken = try await runHark(["say", "--wait", "Hello from the command line."])
        #expect(spoken.status == 0, "\(spoken.stderr)")

        let words = try await runHark(["say", "--words", "one two three"])
        #expect(words.status == 0)
        #expect(words.stdout == "one\ntwo\nthree\n")

        let piped = try await runHark(["announce", "--wait", "-"], stdin: "Build finished\n")
        #expect(piped.status == 0, "\(piped.stderr)")

        let bad = try await runHark(["say", "--rate", "9", "x"])
        #expect(bad.status == 1)
        #expect(bad.stderr.contains("rate"))
        #expect(bad.stderr.split(separator: "\n").count == 1, "not one line: \(bad.stderr)")
    }

    @Test func harkSayWithoutWaitKeepsSpeakingAfterItExitsAndHarkStopEndsIt() async throws {
        let client = try TestClient()
        let result = try await runHark(["say", String(repeating: "Detached speech goes on after hark exits. ", count: 4)])
        #expect(result.status == 0)
        _ = try await waitFor("detached speech to sound") { (try await client.property("Speaking")).boolValue == true ? true : nil }
        let stop = try await runHark(["stop"])
        #expect(stop.stdout.contains("Stopped 1 utterance"))
        _ = try await waitFor("silence") { (try await client.property("Speaking")).boolValue == false ? true : nil }
    }

    @Test func harkWithoutABusSaysSoInOneLine() async throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Sandbox.hark)
        process.arguments = ["say", "hello"]
        var environment = ProcessInfo.processInfo.environment
        environment["DBUS_SESSION_BUS_ADDRESS"] = nil
        process.environment = environment
        let err = Pipe()
        process.standardError = err
        process.standardOutput = Pipe()
        try process.run()
        let message = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        _ = try await waitFor("hark to exit") { process.isRunning ? nil : true }
        #expect(process.terminationStatus == 1)
        #expect(message.contains("no session bus"))
        #expect(message.split(separator: "\n").count == 1)
    }

    @Test func harkVoicesAndStatus() async throws {
        let voices = try await runHark(["voices", "--language", "en-GB"])
        #expect(voices.status == 0)
        #expect(voices.stdout.contains("English (Great Britain)"))
        #expect(!voices.stdout.contains("\tde"))
        let status = try await runHark(["status", "--json"])
        #expect(status.status == 0)
        let json = try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any]
        #expect(json?["speaking"] as? Bool != nil)
        #expect((json?["ducking"] as? [String: Any])?["mode"] as? String == "duck")

        let off = try await runHark(["ducking", "off", "--level", "-20"])
        #expect(off.status == 0, "\(off.stderr)")
        #expect(off.stdout.contains("off, -20 dB"))
        let bad = try await runHark(["ducking", "--level", "7"])
        #expect(bad.status == 1)
        #expect(bad.stderr.contains("7"))
        let back = try await runHark(["ducking", "duck", "--level", "-14"])
        #expect(back.stdout.contains("duck, -14 dB"))
        try? FileManager.default.removeItem(atPath: Sandbox.environment["XDG_CONFIG_HOME"]! + "/hark/hark.conf")
    }
}
}

/// Stops harkd (gracefully) so that the next call activates one that reads its configuration again.
func restartHarkd(_ client: TestClient) async throws {
    if let pid = try await harkdPID(client) {
        kill(pid, SIGTERM)
        _ = try await waitFor("harkd to exit", timeout: .seconds(10)) { try await harkdPID(client) == nil ? true : nil }
    }
}

extension Integration.LifecycleTests {
    @Test func harksOwnDefaultsComeFromItsConfigurationFile() async throws {
        let client = try TestClient()
        let folder = Sandbox.environment["XDG_CONFIG_HOME"]! + "/hark"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try "[speech]\nrate=2\nvolume=0.75\npitch=banana\n".write(toFile: folder + "/hark.conf", atomically: true, encoding: .utf8)
        try await restartHarkd(client)
        defer { try? FileManager.default.removeItem(atPath: folder + "/hark.conf") }

        var id = try await client.speak("Configured.")
        #expect(try await client.ended(id) == 0)
        var sent = settingsOfLastMessage()
        #expect(sent["RATE"] == "50")
        #expect(sent["VOLUME"] == "50")
        #expect(sent["PITCH"] == "0")  // the bad value fell back to the default
        // An explicit option still wins over the configuration.
        id = try await client.speak("Explicit.", ["rate": .double(1)])
        #expect(try await client.ended(id) == 0)
        sent = settingsOfLastMessage()
        #expect(sent["RATE"] == "0")

        try FileManager.default.removeItem(atPath: folder + "/hark.conf")
        try await restartHarkd(client)
    }
}
