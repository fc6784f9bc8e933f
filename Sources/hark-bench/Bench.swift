// hark-bench: Hark's costs, each against its baseline measured in the same run (this machine
// is shared and noisy: only ratios within one run mean something). Runs inside scripts/sandbox
// (`make bench`). Prints a table and writes the figures as JSON.
//
//   hark-bench [--rounds N] [--idle-seconds S] [--json PATH]
import DBus
import Foundation
import SpeechDispatcher

struct Options {
    var rounds = 300
    var idleSeconds = 10.0
    var jsonPath = "bench-results.json"

    init(_ arguments: [String]) {
        var iterator = arguments.dropFirst().makeIterator()
        while let argument = iterator.next() {
            switch argument {
            case "--rounds": rounds = Int(iterator.next() ?? "") ?? rounds
            case "--idle-seconds": idleSeconds = Double(iterator.next() ?? "") ?? idleSeconds
            case "--json": jsonPath = iterator.next() ?? jsonPath
            default:
                FileHandle.standardError.write(Data("usage: hark-bench [--rounds N] [--idle-seconds S] [--json PATH]\n".utf8))
                exit(2)
            }
        }
    }
}

struct Summary: Encodable {
    var median: Double
    var p10: Double
    var p90: Double
    var count: Int

    init(_ samples: [Double]) {
        let sorted = samples.sorted()
        func at(_ q: Double) -> Double { sorted.isEmpty ? .nan : sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * q))] }
        median = at(0.5)
        p10 = at(0.1)
        p90 = at(0.9)
        count = samples.count
    }
}

struct Row: Encodable {
    var name: String
    var unit: String
    var hark: Summary
    var baselineName: String
    var baseline: Summary
    var ratio: Double
}

func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
}

func procStatus(_ pid: Int32, _ field: String) -> Double? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
    for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
        return Double(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
    }
    return nil
}

/// utime + stime of a process, in seconds.
func cpuSeconds(_ pid: Int32) -> Double? {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = stat.lastIndex(of: ")") else { return nil }
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

func openFDs(_ pid: Int32) -> Int {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
}

@main
struct Bench {
    static func main() async throws {
        let options = Options(CommandLine.arguments)
        guard ProcessInfo.processInfo.environment["DBUS_SESSION_BUS_ADDRESS"] != nil else {
            FileHandle.standardError.write(Data("hark-bench: no session bus; run it with `make bench` (inside scripts/sandbox)\n".utf8))
            exit(1)
        }
        let bus = try Connection.session(label: "bench")
        @Sendable func hark(_ member: String, _ body: [DBusValue] = []) async throws -> [DBusValue] {
            try await bus.call(destination: "org.hark.Hark1", path: "/org/hark/Hark1", interface: "org.hark.Hark1.Speech", member: member, body)
        }
        func busCall(_ member: String, _ body: [DBusValue]) async throws -> [DBusValue] {
            try await bus.call(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus", member: member, body)
        }

        // Start harkd (activation) and warm both paths up.
        _ = try await hark("StopSpeaking", [.uint32(0)])
        let direct = try BaselineSpeechConnection()
        let harkdPID = Int32(try await busCall("GetConnectionUnixProcessID", [.string("org.hark.Hark1")]).first?.uint32Value ?? 0)
        for _ in 0..<20 {
            _ = try await hark("Speak", [.string("warm up"), .vardict([:])])
            _ = direct.say("warm up")
        }
        _ = try await hark("StopSpeaking", [.uint32(0)])
        direct.cancel()

        // Speak round trip, call to reply, interleaved with the same request sent straight to
        // Speech Dispatcher through libspeechd (spd_say waits for the server's reply too).
        var harkTimes: [Double] = []
        var directTimes: [Double] = []
        let clock = ContinuousClock()
        for round in 0..<options.rounds {
            let text = "Benchmark utterance \(round)"
            let harkTime = try await clock.measure { _ = try await hark("Speak", [.string(text), .vardict([:])]) }
            let directTime = clock.measure { _ = direct.say(text) }
            harkTimes.append(milliseconds(harkTime))
            directTimes.append(milliseconds(directTime))
            if round % 50 == 49 {
                _ = try await hark("StopSpeaking", [.uint32(0)])
                direct.cancel()
            }
        }
        _ = try await hark("StopSpeaking", [.uint32(0)])
        direct.cancel()
        let speak = Row(name: "Speak round trip", unit: "ms", hark: Summary(harkTimes), baselineName: "spd_say (libspeechd)",
                        baseline: Summary(directTimes), ratio: Summary(harkTimes).median / Summary(directTimes).median)

        // Ducking: with a tone playing, the time from Announce to the duck being complete
        // (Ducked becomes true) and to the audio starting (UtteranceStarted, Speech
        // Dispatcher's BEGIN), against the same announcement without ducking; and from the
        // end of the last word (UtteranceEnded) to full volume again (Ducked false).
        let duckRows = try await measureDucking(bus: bus, hark: hark, clock: clock, rounds: max(5, options.rounds / 30))

        // Idle cost: nothing is asked of harkd for a while.
        try await Task.sleep(for: .seconds(1))
        let cpuBefore = cpuSeconds(harkdPID) ?? .nan
        let idleStart = clock.now
        try await Task.sleep(for: .seconds(options.idleSeconds))
        let idleElapsed = milliseconds(clock.now - idleStart) / 1000
        let cpuAfter = cpuSeconds(harkdPID) ?? .nan
        let idleCPUPercent = (cpuAfter - cpuBefore) / idleElapsed * 100
        let rssMB = (procStatus(harkdPID, "VmRSS") ?? .nan) / 1024
        let fds = openFDs(harkdPID)

        print("Hark benchmarks (\(options.rounds) rounds; medians, p10–p90 spread; ratio = Hark / baseline)")
        print("")
        func format(_ s: Summary) -> String { String(format: "%.3f (%.3f–%.3f)", s.median, s.p10, s.p90) }
        let header = ["measure", "Hark", "baseline", "baseline is", "ratio"]
        let rows = ([speak] + duckRows).map { row in
            [row.name + " [\(row.unit)]", format(row.hark), format(row.baseline), row.baselineName, String(format: "%.2f×", row.ratio)]
        }
        let widths = (0..<header.count).map { column in ([header] + rows).map { $0[column].count }.max()! }
        for line in [header] + rows {
            print(line.enumerated().map { $1.padding(toLength: widths[$0], withPad: " ", startingAt: 0) }.joined(separator: "  "))
        }
        print("")
        print(String(format: "harkd idle: %.3f %% of one core over %.0f s, RSS %.1f MB, %d open fds", idleCPUPercent, idleElapsed, rssMB, fds))

        struct Report: Encodable {
            var rows: [Row]
            var idle: [String: Double]
        }
        let report = Report(rows: [speak] + duckRows, idle: ["cpuPercent": idleCPUPercent, "seconds": idleElapsed, "rssMB": rssMB, "openFDs": Double(fds)])
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        try encoder.encode(report).write(to: URL(fileURLWithPath: options.jsonPath))
        print("(written to \(options.jsonPath))")
    }
}

/// Times of Hark's signals, as this client receives them.
final class SignalClock: @unchecked Sendable {  // guarded by `lock`
    private let lock = NSLock()
    private var times: [String: ContinuousClock.Instant] = [:]

    func mark(_ key: String) {
        lock.lock()
        defer { lock.unlock() }
        if times[key] == nil { times[key] = .now }
    }

    func time(_ key: String) -> ContinuousClock.Instant? {
        lock.lock()
        defer { lock.unlock() }
        return times[key]
    }

    func reset() {
        lock.lock()
        defer { lock.unlock() }
        times.removeAll()
    }
}

func measureDucking(bus: Connection, hark: @Sendable (String, [DBusValue]) async throws -> [DBusValue], clock: ContinuousClock, rounds: Int) async throws -> [Row] {
    let signals = SignalClock()
    bus.onSignal { message in
        let body = message.body
        switch message.member {
        case "UtteranceStarted": signals.mark("started-\(body.first?.uint64Value ?? 0)")
        case "UtteranceEnded": signals.mark("ended-\(body.first?.uint64Value ?? 0)")
        case "PropertiesChanged":
            if let ducked = body.dropFirst().first?.vardictValue?["Ducked"]?.boolValue {
                signals.mark(ducked ? "ducked" : "unducked")
            }
        default: break
        }
    }
    try await bus.addMatch("type='signal',sender='org.hark.Hark1',interface='org.freedesktop.DBus.Properties'") { _ in }
    // A tone to duck.
    let tone = FileManager.default.temporaryDirectory.appending(path: "hark-bench-tone.wav").path
    let sox = Process()
    sox.executableURL = URL(fileURLWithPath: "/usr/bin/sox")
    sox.arguments = ["-n", "-r", "16000", "-c", "2", tone, "synth", "600", "sine", "440", "vol", "0.3"]
    try sox.run()
    sox.waitUntilExit()
    let player = Process()
    player.executableURL = URL(fileURLWithPath: "/usr/bin/paplay")
    player.arguments = ["-d", "speakers", tone]
    try player.run()
    defer { kill(player.processIdentifier, SIGKILL) }
    try await Task.sleep(for: .milliseconds(500))

    func wait(_ key: String) async throws -> ContinuousClock.Instant {
        for _ in 0..<3000 {
            if let time = signals.time(key) { return time }
            try await Task.sleep(for: .milliseconds(2))
        }
        throw MixerBenchError(description: "no \(key) within 6 s")
    }

    var toDucked: [Double] = [], toStartedDucking: [Double] = [], toStartedPlain: [Double] = [], toFullVolume: [Double] = []
    for _ in 0..<rounds {
        for duck in [true, false] {
            signals.reset()
            let sent = clock.now
            let reply = try await hark("Announce", [.string("Ducking benchmark."), .vardict(["duck": .boolean(duck)])])
            let id = reply.first?.uint64Value ?? 0
            let started = try await wait("started-\(id)")
            let ended = try await wait("ended-\(id)")
            if duck {
                toDucked.append(milliseconds(try await wait("ducked") - sent))
                toStartedDucking.append(milliseconds(started - sent))
                toFullVolume.append(milliseconds(try await wait("unducked") - ended))
            } else {
                toStartedPlain.append(milliseconds(started - sent))
            }
            try await Task.sleep(for: .milliseconds(800))
        }
    }
    let started = Summary(toStartedDucking), plain = Summary(toStartedPlain)
    return [
        Row(name: "Announce → audio starts, ducking on", unit: "ms", hark: started, baselineName: "same, duck=false",
            baseline: plain, ratio: started.median / plain.median),
        Row(name: "Announce → duck complete", unit: "ms", hark: Summary(toDucked), baselineName: "audio start, duck=false",
            baseline: plain, ratio: Summary(toDucked).median / plain.median),
        Row(name: "last word → full volume", unit: "ms", hark: Summary(toFullVolume), baselineName: "(hold 400 + ramp 150)",
            baseline: Summary([550]), ratio: Summary(toFullVolume).median / 550),
    ]
}

struct MixerBenchError: Error, CustomStringConvertible { var description: String }
