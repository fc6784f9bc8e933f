import DBus
import Foundation
import HarkCore
import Logging

/// Hark's configuration file, `$XDG_CONFIG_HOME/hark/hark.conf`.
public struct ConfigurationFile: Sendable {
    public let path: String

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        let directory = environment["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory() + "/.config"
        path = directory + "/hark/hark.conf"
    }

    /// The settings, with a warning logged for every bad value (a missing file is all defaults).
    public func load(logger: Logger) -> (defaults: SpeechDefaults, audio: AudioSettings) {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return (SpeechDefaults(), AudioSettings()) }
        let (defaults, audio, warnings) = Configuration.parseAll(text)
        for warning in warnings { logger.warning("\(path): \(warning)") }
        logger.info("configuration read from \(path)")
        return (defaults, audio)
    }

    /// Writes one setting, keeping the rest of the file as the user wrote it.
    func set(section: String, key: String, value: String) throws {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Configuration.updating(text, section: section, key: key, value: value).write(toFile: path, atomically: true, encoding: .utf8)
    }
}

/// org.hark.Hark1.Audio: DuckingMode and DuckingLevel (writable, validated, saved in the
/// configuration file), Ducked.
struct AudioInterface {
    let ducker: Ducker
    let server: ObjectServer
    let configuration: ConfigurationFile
    let logger: Logger

    func exported() -> ExportedInterface {
        var interface = ExportedInterface(Hark.interface(Hark.audioInterface))
        let ducker = ducker, server = server, configuration = configuration, logger = logger
        @Sendable func changed(_ name: String, _ value: DBusValue) {
            server.emitPropertiesChanged(path: Hark.objectPath, interface: Hark.audioInterface, changed: [name: value])
        }
        @Sendable func save(_ key: String, _ value: String) {
            do {
                try configuration.set(section: "audio", key: key, value: value)
            } catch {
                logger.error("cannot save \(key) in \(configuration.path): \(error)")
            }
        }
        interface.getters["DuckingMode"] = { .string(await ducker.settings.mode.rawValue) }
        interface.getters["DuckingLevel"] = { .double(await ducker.settings.level) }
        interface.getters["Ducked"] = { .boolean(await ducker.isDucked) }
        interface.setters["DuckingMode"] = { value, _ in
            let name = value.stringValue ?? ""
            guard let mode = DuckingMode(rawValue: name) else {
                throw HarkError.invalid("DuckingMode '\(printable(name))' is not one of off, duck, pause").dbusError
            }
            await ducker.setMode(mode)
            save("mode", mode.rawValue)
            changed("DuckingMode", .string(mode.rawValue))
        }
        interface.setters["DuckingLevel"] = { value, _ in
            let level = value.doubleValue ?? .nan
            guard level.isFinite, DuckingPolicy.levelRange.contains(level) else {
                throw HarkError.invalid("DuckingLevel \(level) dB is out of range; it must be -60 to 0").dbusError
            }
            await ducker.setLevel(level)
            save("level", String(level))
            changed("DuckingLevel", .double(level))
        }
        return interface
    }

    func publishDucked(_ ducked: Bool) {
        server.emitPropertiesChanged(path: Hark.objectPath, interface: Hark.audioInterface, changed: ["Ducked": .boolean(ducked)])
    }
}
