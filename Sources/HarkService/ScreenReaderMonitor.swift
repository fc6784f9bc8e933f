import DBus
import Dispatch
import Foundation
import HarkCore
import Logging

/// Follows the screen reader of this user: which one runs (a look at /proc every 2 s — there is
/// no event for a process starting without privileges), and its speech settings, re-read
/// when its settings file changes (inotify, no polling).
actor ScreenReaderMonitor {
    typealias Listener = @Sendable (ScreenReaderSpeech?) -> Void

    private let logger: Logger
    private let environment: [String: String]
    private let listener: Listener
    private var kind: ScreenReaderKind?
    private(set) var current: ScreenReaderSpeech?
    private var watcher: DirectoryWatcher?
    private var dconfWatcher: DirectoryWatcher?
    private var watchedFile: String?
    private var lastWarning: String?
    private var scanning: Task<Void, Never>?
    /// Orca 51+ on the bus: its settings are read live from there.
    private var orcaService = false
    private var legacyOrcaService = false
    private let bus: Connection?

    static let orcaServiceName = "org.gnome.Orca1.Service"
    static let legacyOrcaServiceName = "org.gnome.Orca.Service"

    static let scanInterval: Duration = .seconds(2)

    init(logger: Logger, bus: Connection? = nil, environment: [String: String] = ProcessInfo.processInfo.environment,
         listener: @escaping Listener) {
        self.logger = logger
        self.bus = bus
        self.environment = environment
        self.listener = listener
    }

    func start() {
        guard scanning == nil else { return }
        rescan()
        scanning = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: Self.scanInterval)
                await self?.rescan()
            }
        }
    }

    func stop() {
        scanning?.cancel()
        scanning = nil
        watcher = nil
    }

    /// An Orca D-Bus service appeared or left (from NameOwnerChanged).
    func busNameChanged(_ name: String, owned: Bool) async {
        switch name {
        case Self.orcaServiceName: orcaService = owned
        case Self.legacyOrcaServiceName: legacyOrcaService = owned
        default: return
        }
        rescan()
        if orcaService { await refreshLive() }
    }

    /// Checks once which Orca services own their names (at start; later NameOwnerChanged tells).
    func checkBusNames() async {
        guard let bus else { return }
        for name in [Self.orcaServiceName, Self.legacyOrcaServiceName] {
            let owned = (try? await bus.call(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                             interface: "org.freedesktop.DBus", member: "NameHasOwner", [.string(name)]))?.first?.boolValue ?? false
            if owned { await busNameChanged(name, owned: true) }
        }
    }

    /// The settings to speak with now. With Orca 51+ on the bus they are asked for right
    /// then, so a rate changed with Orca's keys a moment ago is used.
    func currentForUtterance() async -> ScreenReaderSpeech? {
        if orcaService { await refreshLive() }
        return current
    }

    /// Reads Orca 51's SpeechManager properties (bounded wait; the last values if it does not answer).
    func refreshLive() async {
        guard let bus, orcaService else { return }
        do {
            let reply = try await bus.call(
                destination: Self.orcaServiceName, path: "/org/gnome/Orca1/Service/SpeechManager",
                interface: "org.freedesktop.DBus.Properties", member: "GetAll", [.string("org.gnome.Orca1.SpeechManager")],
                timeout: .milliseconds(500))
            let properties = reply.first?.vardictValue ?? [:]
            func number(_ key: String) -> Double? {
                properties[key].flatMap { $0.doubleValue ?? $0.integerValue.map(Double.init) }
            }
            let live = OrcaLiveSettings(
                rate: number("Rate"), pitch: number("Pitch"), volume: number("Volume"),
                synthesizer: properties["CurrentSynthesizer"]?.stringValue, voice: properties["CurrentVoice"]?.stringValue)
            update(live.speech)
            lastWarning = nil
        } catch {
            warnOnce("Orca's speech settings could not be read over D-Bus (\(error)); keeping the last ones")
        }
    }

    private func update(_ speech: ScreenReaderSpeech?) {
        guard speech != current else { return }
        current = speech
        logger.debug("screen reader settings: \(String(describing: speech))")
        listener(speech)
    }

    /// Looks for the screen reader now; reloads its settings if it changed.
    func rescan() {
        var found = ScreenReaderDetector.detect(processes: ProcessTable.screenReaderCandidates(), uid: getuid())
        if found == nil, orcaService || legacyOrcaService { found = .orca(settingsDirectory: nil) }
        guard found != kind else {
            watchDconf()  // dconf's folder may not have existed when Orca was found
            return
        }
        kind = found
        if let found {
            logger.info("screen reader running: \(found.name)")
        } else if current != nil {
            logger.info("no screen reader running")
        }
        watch(settingsFile(for: found))
        reload()
    }

    /// Where the settings of `kind` live.
    func settingsFile(for kind: ScreenReaderKind?) -> String? {
        switch kind {
        case .orca(let directory):
            let base = directory ?? environment["XDG_DATA_HOME"].map { $0 + "/orca" }
                ?? (environment["HOME"] ?? NSHomeDirectory()) + "/.local/share/orca"
            return base + "/user-settings.conf"
        case .fenrir:
            return environment["HARK_FENRIR_SETTINGS"] ?? "/etc/fenrirscreenreader/settings/settings.conf"
        case nil:
            return nil
        }
    }

    /// Orca 50's settings: `dconf dump /org/gnome/orca/`. dconf rather than gsettings because
    /// it reads the user's database without Orca's schemas installed (Hark may run where Orca
    /// 50's schemas are not), and it prints exactly what the user changed. nil: no dconf.
    static func dconfDump() -> String? {
        let tool = "/usr/bin/dconf"
        guard FileManager.default.isExecutableFile(atPath: tool) else { return nil }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = ["dump", "/org/gnome/orca/"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        do { try process.run() } catch { return nil }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        return String(data: data, encoding: .utf8)
    }

    /// dconf's database of this user, replaced by dconf-service on every write.
    private var dconfDatabase: (directory: String, name: String) {
        let config = environment["XDG_CONFIG_HOME"] ?? (environment["HOME"] ?? NSHomeDirectory()) + "/.config"
        return (config + "/dconf", "user")
    }

    private func watchDconf() {
        guard dconfWatcher == nil, case .orca = kind else { return }
        let database = dconfDatabase
        dconfWatcher = DirectoryWatcher(directory: database.directory, name: database.name) { [weak self] in
            Task { await self?.reload() }
        }
        if dconfWatcher != nil { reload() }  // it may have appeared since the last look
    }

    private func watch(_ file: String?) {
        watchedFile = file
        watcher = nil
        dconfWatcher = nil
        watchDconf()
        guard let file else { return }
        let directory = (file as NSString).deletingLastPathComponent
        let name = (file as NSString).lastPathComponent
        watcher = DirectoryWatcher(directory: directory, name: name) { [weak self] in
            Task { await self?.reload() }
        }
        if watcher == nil {
            logger.debug("cannot watch \(directory) (yet); settings are read when the screen reader is next found")
        }
    }

    /// Reads the settings of the current screen reader. A file that cannot be read or parsed
    /// keeps the last good settings (or the screen reader's defaults) with one warning.
    func reload() {
        guard !orcaService else { return }  // Orca 51+: live over D-Bus instead
        let previous = current
        switch kind {
        case nil:
            current = nil
        case .fenrir:
            if let file = watchedFile, let text = try? String(contentsOfFile: file, encoding: .utf8) {
                current = FenrirSettings.parse(text)
            } else {
                warnOnce("cannot read Fenrir's settings at \(watchedFile ?? "?"); using Speech Dispatcher's defaults")
                current = previous?.name == "fenrir" ? previous : FenrirSettings.parse("")
            }
        case .orca:
            if let dump = Self.dconfDump(), dump.contains("[") {
                // Orca 50 (it migrates its JSON into dconf on first start, so dconf wins).
                current = OrcaSettings.parseDconfDump(dump).speech(arithmetic: .upTo50)
                lastWarning = nil
            } else if let file = watchedFile, FileManager.default.fileExists(atPath: file) {
                do {
                    let data = try Data(contentsOf: URL(fileURLWithPath: file))
                    current = try OrcaSettings.parseJSON(data).speech(arithmetic: .upTo50)
                    lastWarning = nil
                } catch {
                    warnOnce("Orca's settings at \(file) cannot be used (\(error)); keeping the last good settings")
                    current = previous?.name == "orca" ? previous : Self.orcaDefaults
                }
            } else {
                // Orca without a settings file speaks with its defaults.
                current = Self.orcaDefaults
            }
        }
        if current != previous {
            logger.debug("screen reader settings: \(String(describing: current))")
            listener(current)
        }
    }

    static let orcaDefaults = OrcaSettings(defaultVoice: OrcaVoice(), systemVoice: OrcaVoice(), module: nil).speech(arithmetic: .upTo50)

    private func warnOnce(_ message: String) {
        guard message != lastWarning else { return }
        lastWarning = message
        logger.warning("\(message)")
    }
}

/// /proc, read just enough to find screen readers.
enum ProcessTable {
    static func screenReaderCandidates() -> [ProcessInfoEntry] {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
        var result: [ProcessInfoEntry] = []
        for entry in entries {
            guard let pid = Int32(entry),
                  let comm = try? String(contentsOfFile: "/proc/\(entry)/comm", encoding: .utf8)
            else { continue }
            let name = comm.trimmingCharacters(in: .whitespacesAndNewlines)
            guard name == "orca" || name.hasPrefix("fenrir") else { continue }
            result.append(ProcessInfoEntry(pid: pid, name: name, uid: uid(of: entry), arguments: arguments(of: entry)))
        }
        return result
    }

    private static func uid(of pid: String) -> UInt32 {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return .max }
        for line in status.split(separator: "\n") where line.hasPrefix("Uid:") {
            return line.split(whereSeparator: \.isWhitespace).dropFirst().first.flatMap { UInt32($0) } ?? .max
        }
        return .max
    }

    private static func arguments(of pid: String) -> [String] {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return [] }
        return data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
    }
}

/// Calls `changed` when a file named `name` in `directory` is written and closed, or moved
/// or created there (editors and Orca replace files by renaming). inotify, through Dispatch.
final class DirectoryWatcher: @unchecked Sendable {  // immutable after init; the source serialises events
    private let fd: Int32
    private let source: DispatchSourceRead

    init?(directory: String, name: String, changed: @escaping @Sendable () -> Void) {
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { return nil }
        let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE)
        guard inotify_add_watch(fd, directory, mask) >= 0 else {
            close(fd)
            return nil
        }
        self.fd = fd
        source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: DispatchQueue(label: "hark.watch"))
        source.setEventHandler {
            var buffer = [UInt8](repeating: 0, count: 4096)
            var relevant = false
            while true {
                let count = read(fd, &buffer, buffer.count)
                guard count > 0 else { break }
                var offset = 0
                while offset + MemoryLayout<inotify_event>.size <= count {
                    let length = buffer.withUnsafeBytes { Int($0.load(fromByteOffset: offset + 12, as: UInt32.self)) }
                    let nameStart = offset + MemoryLayout<inotify_event>.size
                    let nameBytes = buffer[nameStart..<min(count, nameStart + length)].prefix { $0 != 0 }
                    if String(decoding: nameBytes, as: UTF8.self) == name { relevant = true }
                    offset = nameStart + length
                }
            }
            if relevant { changed() }
        }
        source.setCancelHandler { close(fd) }
        source.resume()
    }

    deinit { source.cancel() }
}
