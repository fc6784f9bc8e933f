import ArgumentParser
import DBus
import Foundation

@main
struct HarkCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hark",
        abstract: "Speak through Hark, the desktop speech bridge, from the command line.",
        discussion: """
            hark talks to the Hark service (org.hark.Hark1) on the session bus, which speaks \
            through Speech Dispatcher beside your screen reader. The service starts by itself \
            on first use.

            Examples:
              hark say "Hello"                         speak, return at once
              make && hark announce "Build finished"   tell me when the build is done
              dmesg | tail -n 3 | hark say -           speak standard input
              hark say --wait --rate 1.5 "Faster"      wait until it was spoken
              hark announce --assertive "Battery low"  interrupt other speech
              hark voices --language de                German voices
              hark stop                                silence what hark left speaking
              hark ducking --level -20                 lower other audio by 20 dB
            """,
        version: "0.1.0",
        subcommands: [Say.self, Announce.self, Stop.self, Voices.self, Status.self, Ducking.self]
    )
}

/// Exit statuses of `--wait`, shown in help.
enum WaitExit {
    static let explanation = """
        With --wait, hark exits when the speech ends: 0 when it was spoken to the end, 3 when it \
        was cancelled or interrupted (by the screen reader or an assertive announcement), 4 when \
        it failed (Speech Dispatcher could not speak it). Other errors exit 1. Ctrl-C while \
        waiting stops the speech too.
        """
    static func code(forReason reason: UInt32) -> Int32 {
        switch reason {
        case 0: 0
        case 1, 2: 3
        default: 4
        }
    }
}

struct VoiceOptions: ParsableArguments {
    @Option(help: ArgumentHelp("A voice id or name from `hark voices`.", valueName: "voice"))
    var voice: String?

    @Option(help: ArgumentHelp("A BCP 47 language tag, e.g. en-US.", valueName: "tag"))
    var language: String?

    @Option(help: ArgumentHelp("Speed as a multiple of normal, 0.25 to 4.", valueName: "multiple"))
    var rate: Double?

    @Option(help: ArgumentHelp("Pitch multiplier, 0.5 to 2.", valueName: "multiple"))
    var pitch: Double?

    @Option(help: ArgumentHelp("Volume, 0 to 1.", valueName: "level"))
    var volume: Double?

    @Flag(help: "The text is SSML (<speak>…</speak>).")
    var ssml = false

    @Option(help: ArgumentHelp("Speech Dispatcher priority: important, message, text, notification, progress.", valueName: "priority"))
    var priority: String?

    @Flag(name: .customLong("wait"), help: "Wait until the speech ends (see the exit statuses below).")
    var wait = false

    @Flag(help: "Print each word as it is spoken (implies --wait).")
    var words = false

    @Argument(help: ArgumentHelp("The text to speak, or - to read it from standard input.", valueName: "text"))
    var text: String

    func options(extra: [String: DBusValue]) -> [String: DBusValue] {
        var options = extra
        if let voice { options["voice"] = .string(voice) }
        if let language { options["language"] = .string(language) }
        if let rate { options["rate"] = .double(rate) }
        if let pitch { options["pitch"] = .double(pitch) }
        if let volume { options["volume"] = .double(volume) }
        if ssml { options["ssml"] = .boolean(true) }
        if let priority { options["priority"] = .string(priority) }
        // A caller that does not wait leaves the bus at once: its speech must outlive it.
        if !waits { options["detached"] = .boolean(true) }
        return options
    }

    var waits: Bool { wait || words }

    func resolvedText() throws -> String {
        guard text == "-" else { return text }
        let data = FileHandle.standardInput.readDataToEndOfFile()
        guard let string = String(data: data, encoding: .utf8) else { throw CLIError("standard input is not UTF-8 text") }
        return string.hasSuffix("\n") ? String(string.dropLast()) : string
    }
}

/// Sends Speak or Announce, then waits if asked.
func speak(method: String, text: String, options: [String: DBusValue], voice: VoiceOptions) async throws {
    let client = try HarkClient.connect()
    let watcher = voice.waits ? UtteranceWatcher(connection: client.connection) : nil
    let reply = try await client.call(method, [.string(text), .vardict(options)])
    guard let id = reply.first?.uint64Value else { throw CLIError("Hark sent an unexpected reply") }
    guard let watcher else {
        client.connection.flush()
        return
    }
    let scalars = Array(text.unicodeScalars)
    for await event in watcher.events(of: id) {
        switch event {
        case .range(let start, let length) where voice.words:
            let end = min(scalars.count, start + length)
            if start < end { print(String(String.UnicodeScalarView(scalars[start..<end]))) }
        case .ended(let reason):
            let code = WaitExit.code(forReason: reason)
            if code != 0 {
                let reasons = ["", "was cancelled", "was interrupted by other speech", "failed"]
                let why = reasons[Int(min(reason, 3))]
                FileHandle.standardError.write(Data("hark: the speech \(why)\n".utf8))
                throw ExitCode(code)
            }
            return
        default:
            break
        }
    }
}

func fail(_ error: Error) -> Never {
    if let exit = error as? ExitCode { Foundation.exit(exit.rawValue) }
    FileHandle.standardError.write(Data("hark: \(error)\n".utf8))
    Foundation.exit(1)
}

struct Say: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Queue speech in Hark's voice settings (Speak).",
        discussion: """
            Examples:
              hark say "Hello"
              hark say --voice "espeak-ng:English (America)" --rate 1.25 "Hello"
              hark say --ssml '<speak>Hello <break time="300ms"/> world</speak>'
              git log --oneline -1 | hark say -

            """ + WaitExit.explanation
    )

    @OptionGroup var voice: VoiceOptions

    @Flag(name: .customLong("screen-reader"), help: "Use the running screen reader's voice, rate, pitch and volume.")
    var screenReader = false

    func run() async throws {
        do {
            var extra: [String: DBusValue] = [:]
            if screenReader { extra["prefer-screen-reader"] = .boolean(true) }
            try await speak(method: "Speak", text: try voice.resolvedText(), options: voice.options(extra: extra), voice: voice)
        } catch { fail(error) }
    }
}

struct Announce: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Make an announcement that sounds like the screen reader's own messages (Announce).",
        discussion: """
            Announcements use the running screen reader's settings and duck other audio. \
            By default they wait their turn behind current speech; --assertive interrupts it.

            Examples:
              make && hark announce "Build finished" || hark announce --assertive "Build failed"
              hark announce --wait "Backup complete"

            """ + WaitExit.explanation
    )

    @OptionGroup var voice: VoiceOptions

    @Flag(help: "Interrupt current speech instead of queueing behind it.")
    var assertive = false

    func run() async throws {
        do {
            var extra: [String: DBusValue] = [:]
            if assertive { extra["politeness"] = .string("assertive") }
            try await speak(method: "Announce", text: try voice.resolvedText(), options: voice.options(extra: extra), voice: voice)
        } catch { fail(error) }
    }
}

struct Stop: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Stop the speech that hark commands left behind.",
        discussion: """
            `hark say` and `hark announce` without --wait hand their speech to Hark and exit; \
            this stops all of it. Speech of programs still running is theirs to stop and is \
            not touched.

            Examples:
              hark stop
              hark stop --after-word     finish the current word first
            """
    )

    @Flag(help: "Finish the word being spoken first.")
    var afterWord = false

    func run() async throws {
        do {
            let client = try HarkClient.connect()
            let reply = try await client.call("StopDetached", [.uint32(afterWord ? 1 : 0)])
            let count = reply.first?.uint32Value ?? 0
            print(count == 0 ? "Nothing to stop." : "Stopped \(count) utterance\(count == 1 ? "" : "s").")
        } catch { fail(error) }
    }
}

struct Voices: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the voices Speech Dispatcher offers.",
        discussion: """
            The first listing after Hark starts can take a few seconds.

            Examples:
              hark voices --language en-GB
              hark voices --json | jq '.[0]'
              hark say --voice "$(hark voices --language fr | head -n 1 | cut -f 1)" "Bonjour"
            """
    )

    @Option(help: ArgumentHelp("Only voices of this language (en matches en-US, en-GB…).", valueName: "tag"))
    var language: String?

    @Flag(help: "Print JSON: a list of {id, name, language, module, variant}.")
    var json = false

    func run() async throws {
        do {
            let client = try HarkClient.connect()
            let reply = try await client.call("ListVoices", timeout: .seconds(60))
            var voices: [[String: String]] = []
            for entry in reply.first?.arrayValue ?? [] {
                guard case .structure(let fields) = entry, fields.count == 5 else { continue }
                var voice = ["id": fields[0].stringValue ?? "", "name": fields[1].stringValue ?? "",
                             "language": fields[2].stringValue ?? "", "module": fields[3].stringValue ?? ""]
                voice["variant"] = fields[4].vardictValue?["variant"]?.stringValue ?? ""
                voices.append(voice)
            }
            if let language {
                let wanted = language.lowercased().replacingOccurrences(of: "_", with: "-")
                voices = voices.filter { voice in
                    let tag = voice["language"]!.lowercased()
                    return tag == wanted || tag.hasPrefix(wanted + "-")
                }
            }
            if json {
                let data = try JSONSerialization.data(withJSONObject: voices, options: [.prettyPrinted, .sortedKeys])
                print(String(decoding: data, as: UTF8.self))
            } else {
                for voice in voices { print("\(voice["id"]!)\t\(voice["language"]!)") }
                if voices.isEmpty { FileHandle.standardError.write(Data("hark: no voices\(language.map { " for language \($0)" } ?? "")\n".utf8)) }
            }
        } catch { fail(error) }
    }
}

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show what Hark is doing now.",
        discussion: """
            Examples:
              hark status
              hark status --json
            """
    )

    @Flag(help: "Print JSON.")
    var json = false

    func run() async throws {
        do {
            let client = try HarkClient.connect()
            let all = try await client.call("GetAll", [.string(HarkClient.speech)], interface: "org.freedesktop.DBus.Properties")
            let properties = all.first?.vardictValue ?? [:]
            let audio = try await client.call("GetAll", [.string("org.hark.Hark1.Audio")], interface: "org.freedesktop.DBus.Properties").first?.vardictValue ?? [:]
            let duckingMode = audio["DuckingMode"]?.stringValue ?? "?"
            let duckingLevel = audio["DuckingLevel"]?.doubleValue ?? .nan
            let ducked = audio["Ducked"]?.boolValue ?? false
            let speaking = properties["Speaking"]?.boolValue ?? false
            let screenReader = properties["ScreenReader"]?.stringValue ?? ""
            let version = properties["Version"]?.stringValue ?? "?"
            let settings = properties["ScreenReaderSettings"]?.vardictValue ?? [:]
            func plain(_ values: [String: DBusValue]) -> [String: Any] {
                values.compactMapValues { value -> Any? in
                    if let d = value.doubleValue { return (d * 1000).rounded() / 1000 }
                    if let s = value.stringValue { return s }
                    if let nested = value.vardictValue { return plain(nested) }
                    return nil
                }
            }
            if json {
                let object: [String: Any] = ["version": version, "speaking": speaking, "screenReader": screenReader,
                                             "screenReaderSettings": plain(settings),
                                             "ducking": ["mode": duckingMode, "level": duckingLevel, "ducked": ducked]]
                let data = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])
                print(String(decoding: data, as: UTF8.self))
            } else {
                print("Hark \(version)")
                print("Speaking:      \(speaking ? "yes" : "no")")
                print("Ducking:       \(duckingMode), \(String(format: "%g", duckingLevel)) dB\(ducked ? ", other audio lowered now" : "")")
                print("Screen reader: \(screenReader.isEmpty ? "none running" : screenReader)")
                func describe(_ values: [String: DBusValue]) -> String {
                    var parts: [String] = []
                    for key in ["rate", "pitch", "volume"] {
                        if let value = values[key]?.doubleValue { parts.append("\(key) \(String(format: "%.2f", value))") }
                    }
                    for key in ["voice", "language", "module"] {
                        if let value = values[key]?.stringValue { parts.append("\(key) \(value)") }
                    }
                    return parts.isEmpty ? "Speech Dispatcher's defaults" : parts.joined(separator: ", ")
                }
                if !screenReader.isEmpty {
                    print("  its voice:         \(describe(settings))")
                    print("  for announcements: \(describe(settings["system"]?.vardictValue ?? [:]))")
                }
            }
        } catch { fail(error) }
    }
}

struct Ducking: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show or change what Hark does to other audio while it speaks.",
        discussion: """
            duck lowers other playing streams (music, videos) by the level while Hark speaks and \
            brings them back after; pause pauses the media players that are playing (MPRIS) and \
            resumes exactly those after; off leaves them alone. Announcements duck by default; Speak \
            when the client asks (or hark.conf says so). Speech Dispatcher's and the screen \
            reader's own audio are never lowered. The choice is saved in hark.conf.

            Examples:
              hark ducking                  show the mode, the level and whether audio is lowered now
              hark ducking off
              hark ducking pause            pause the music player instead of lowering it
              hark ducking duck --level -20
              hark ducking --level -10
            """
    )

    @Argument(help: ArgumentHelp("off, duck or pause.", valueName: "mode"))
    var mode: String?

    @Option(parsing: .unconditional, help: ArgumentHelp("How much to lower other audio, in dB from -60 to 0.", valueName: "dB"))
    var level: Double?

    func run() async throws {
        do {
            let client = try HarkClient.connect()
            let audio = "org.hark.Hark1.Audio"
            func set(_ name: String, _ value: DBusValue) async throws {
                _ = try await client.call("Set", [.string(audio), .string(name), .variant(value)], interface: "org.freedesktop.DBus.Properties")
            }
            if let mode { try await set("DuckingMode", .string(mode)) }
            if let level { try await set("DuckingLevel", .double(level)) }
            let all = try await client.call("GetAll", [.string(audio)], interface: "org.freedesktop.DBus.Properties")
            let properties = all.first?.vardictValue ?? [:]
            let current = properties["DuckingMode"]?.stringValue ?? "?"
            let dB = properties["DuckingLevel"]?.doubleValue ?? .nan
            let ducked = properties["Ducked"]?.boolValue ?? false
            print("Ducking: \(current), \(String(format: "%g", dB)) dB\(ducked ? " (other audio is lowered now)" : "")")
        } catch { fail(error) }
    }
}
