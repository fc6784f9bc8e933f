import DBus

/// Hark's bus name, object path and interface names (API.md).
public enum Hark {
    public static let busName = "org.hark.Hark1"
    public static let objectPath = "/org/hark/Hark1"
    public static let speechInterface = "org.hark.Hark1.Speech"
    public static let audioInterface = "org.hark.Hark1.Audio"
    public static let voiceControlInterface = "org.hark.Hark1.VoiceControl"
    public static let version = "0.1.0"

    /// The interface descriptions, parsed from the XML in `dbus/` that the build embeds.
    public static let interfaces: [String: InterfaceDescription] = {
        var result: [String: InterfaceDescription] = [:]
        for (file, xml) in EmbeddedInterfaceXML.files {
            do {
                for interface in try InterfaceDescription.parse(xml) { result[interface.name] = interface }
            } catch {
                fatalError("dbus/\(file).xml does not parse: \(error)")
            }
        }
        return result
    }()

    public static func interface(_ name: String) -> InterfaceDescription {
        guard let description = interfaces[name] else { fatalError("dbus/ has no XML for \(name)") }
        return description
    }
}
