import DBus
import HarkCore

extension HarkError {
    /// The D-Bus error reply: `org.hark.Hark1.Error.<Kind>`.
    var dbusError: DBusError {
        DBusError(name: "org.hark.Hark1.Error.\(kind.rawValue)", message: message)
    }
}

extension OptionValue {
    init(_ value: DBusValue) {
        switch value.unwrapped {
        case .string(let s): self = .string(s)
        case .boolean(let b): self = .bool(b)
        case .double(let d): self = .double(d)
        case .byte, .int16, .uint16, .int32, .uint32, .int64, .uint64:
            if let i = value.unwrapped.integerValue { self = .integer(i) } else { self = .other(typeName: value.unwrapped.typeDescription) }
        default: self = .other(typeName: value.unwrapped.typeDescription)
        }
    }
}

/// Runs a handler body, turning Hark errors into their D-Bus replies.
func replying<T>(_ body: () async throws(HarkError) -> T) async throws -> T {
    do {
        return try await body()
    } catch {
        throw error.dbusError
    }
}

/// The `a{sv}` options argument as Hark's option values, or an InvalidArgument.
func options(_ value: DBusValue) throws(HarkError) -> [String: OptionValue] {
    guard let dictionary = value.vardictValue else { throw .invalid("options must be a dictionary a{sv}") }
    return dictionary.mapValues(OptionValue.init)
}
