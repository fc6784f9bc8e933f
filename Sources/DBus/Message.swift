import CDBus

/// An error reply: a D-Bus error name and a human-readable message.
public struct DBusError: Error, Sendable, Equatable, CustomStringConvertible {
    public var name: String
    public var message: String

    public init(name: String, message: String) {
        self.name = name
        self.message = message
    }

    public var description: String { "\(name): \(message)" }

    public static func unknownMethod(_ message: String) -> DBusError {
        DBusError(name: "org.freedesktop.DBus.Error.UnknownMethod", message: message)
    }
    public static func invalidArgs(_ message: String) -> DBusError {
        DBusError(name: "org.freedesktop.DBus.Error.InvalidArgs", message: message)
    }
    public static func unknownProperty(_ message: String) -> DBusError {
        DBusError(name: "org.freedesktop.DBus.Error.UnknownProperty", message: message)
    }
    public static func propertyReadOnly(_ message: String) -> DBusError {
        DBusError(name: "org.freedesktop.DBus.Error.PropertyReadOnly", message: message)
    }
}

/// One D-Bus message. Immutable once built; libdbus reference-counts it atomically, so it
/// may cross threads (libdbus is initialised for threads before any message exists).
public final class Message: @unchecked Sendable {
    public enum Kind: Sendable, Equatable {
        case methodCall, methodReturn, error, signal, invalid
    }

    let raw: OpaquePointer

    /// Takes over one reference to `raw`.
    init(taking raw: OpaquePointer) { self.raw = raw }

    /// Adds a reference to `raw`.
    init(retaining raw: OpaquePointer) {
        self.raw = dbus_message_ref(raw)
    }

    deinit { dbus_message_unref(raw) }

    public static func methodCall(
        destination: String?, path: String, interface: String?, member: String, body: [DBusValue] = []
    ) throws -> Message {
        guard isValidObjectPath(path) else { throw DBusError.invalidArgs("'\(path)' is not a valid object path") }
        guard let raw = dbus_message_new_method_call(destination, path, interface, member) else {
            throw DBusError.invalidArgs("cannot build a call to \(member)")
        }
        let message = Message(taking: raw)
        try message.append(body)
        return message
    }

    public static func signal(path: String, interface: String, member: String, body: [DBusValue] = [], destination: String? = nil) throws -> Message {
        guard let raw = dbus_message_new_signal(path, interface, member) else {
            throw DBusError.invalidArgs("cannot build signal \(interface).\(member)")
        }
        let message = Message(taking: raw)
        if let destination { dbus_message_set_destination(raw, destination) }
        try message.append(body)
        return message
    }

    /// A method return for this call.
    public func makeReturn(_ body: [DBusValue] = []) throws -> Message {
        guard let raw = dbus_message_new_method_return(raw) else { throw DBusError.invalidArgs("out of memory") }
        let reply = Message(taking: raw)
        try reply.append(body)
        return reply
    }

    /// An error reply for this call.
    public func makeError(_ error: DBusError) -> Message {
        // Error messages must be valid UTF-8 and error names valid; libdbus checks the name.
        let name = dbus_validate_error_name(error.name, nil) != 0 ? error.name : "org.freedesktop.DBus.Error.Failed"
        return Message(taking: dbus_message_new_error(raw, name, error.message)!)
    }

    // MARK: Header fields

    public var kind: Kind {
        switch dbus_message_get_type(raw) {
        case DBUS_MESSAGE_TYPE_METHOD_CALL: .methodCall
        case DBUS_MESSAGE_TYPE_METHOD_RETURN: .methodReturn
        case DBUS_MESSAGE_TYPE_ERROR: .error
        case DBUS_MESSAGE_TYPE_SIGNAL: .signal
        default: .invalid
        }
    }

    public var path: String? { dbus_message_get_path(raw).map { String(cString: $0) } }
    public var interface: String? { dbus_message_get_interface(raw).map { String(cString: $0) } }
    public var member: String? { dbus_message_get_member(raw).map { String(cString: $0) } }
    public var sender: String? { dbus_message_get_sender(raw).map { String(cString: $0) } }
    public var destination: String? { dbus_message_get_destination(raw).map { String(cString: $0) } }
    public var errorName: String? { dbus_message_get_error_name(raw).map { String(cString: $0) } }
    public var bodySignature: String { dbus_message_get_signature(raw).map { String(cString: $0) } ?? "" }
    public var serial: UInt32 { dbus_message_get_serial(raw) }
    public var noReplyExpected: Bool { dbus_message_get_no_reply(raw) != 0 }

    /// The body, decoded. Received file descriptors are duplicated by libdbus for each read:
    /// whoever reads `body` owns (and must close) the fds in it.
    public var body: [DBusValue] {
        var iter = DBusMessageIter()
        guard dbus_message_iter_init(raw, &iter) != 0 else { return [] }
        var values: [DBusValue] = []
        repeat {
            values.append(readValue(&iter))
        } while dbus_message_iter_next(&iter) != 0
        return values
    }

    /// For an error message: the error, with its first string argument as the message.
    public var asError: DBusError? {
        guard kind == .error, let name = errorName else { return nil }
        let text = body.first?.stringValue ?? ""
        return DBusError(name: name, message: text)
    }

    // MARK: Marshalling

    func append(_ values: [DBusValue]) throws {
        var iter = DBusMessageIter()
        dbus_message_iter_init_append(raw, &iter)
        for value in values {
            try appendValue(value, to: &iter)
        }
    }
}

// MARK: - Writing

private func typeCode(_ signature: String) -> Int32 {
    Int32(signature.utf8.first ?? 0)
}

private func appendBasic<T>(_ iter: UnsafeMutablePointer<DBusMessageIter>, _ type: Character, _ value: T) throws {
    var copy = value
    let ok = withUnsafePointer(to: &copy) { dbus_message_iter_append_basic(iter, Int32(type.asciiValue!), $0) }
    guard ok != 0 else { throw DBusError.invalidArgs("cannot append a value of type \(type)") }
}

private func appendValue(_ value: DBusValue, to iter: UnsafeMutablePointer<DBusMessageIter>) throws {
    switch value {
    case .byte(let v): try appendBasic(iter, "y", v)
    case .boolean(let v): try appendBasic(iter, "b", dbus_bool_t(v ? 1 : 0))
    case .int16(let v): try appendBasic(iter, "n", v)
    case .uint16(let v): try appendBasic(iter, "q", v)
    case .int32(let v): try appendBasic(iter, "i", v)
    case .uint32(let v): try appendBasic(iter, "u", v)
    case .int64(let v): try appendBasic(iter, "x", v)
    case .uint64(let v): try appendBasic(iter, "t", v)
    case .double(let v): try appendBasic(iter, "d", v)
    case .unixFD(let v): try appendBasic(iter, "h", v)
    case .string(let s), .objectPath(let s), .signature(let s):
        let code: Character = value.signature == "s" ? "s" : value.signature == "o" ? "o" : "g"
        if code == "o", !isValidObjectPath(s) { throw DBusError.invalidArgs("'\(s)' is not a valid object path") }
        // libdbus aborts on invalid UTF-8 or embedded NUL; Swift strings are valid UTF-8, so only NUL remains.
        let clean = s.contains("\0") ? s.replacingOccurrences(of: "\0", with: "\u{FFFD}") : s
        try clean.withCString { cString in
            try appendBasic(iter, code, cString)
        }
    case .array(let element, let items):
        var sub = DBusMessageIter()
        guard dbus_message_iter_open_container(iter, typeCode("a"), element, &sub) != 0 else {
            throw DBusError.invalidArgs("cannot open an array of \(element)")
        }
        do {
            for item in items {
                guard item.signature == element else {
                    throw DBusError.invalidArgs("array of \(element) holds a \(item.signature)")
                }
                try appendValue(item, to: &sub)
            }
        } catch {
            dbus_message_iter_abandon_container(iter, &sub)
            throw error
        }
        dbus_message_iter_close_container(iter, &sub)
    case .dictionary(let keySignature, let valueSignature, let entries):
        var sub = DBusMessageIter()
        guard dbus_message_iter_open_container(iter, typeCode("a"), "{" + keySignature + valueSignature + "}", &sub) != 0 else {
            throw DBusError.invalidArgs("cannot open a dictionary")
        }
        do {
            for entry in entries {
                guard entry.key.signature == keySignature, entry.value.signature == valueSignature else {
                    throw DBusError.invalidArgs("dictionary a{\(keySignature)\(valueSignature)} holds an entry {\(entry.key.signature)\(entry.value.signature)}")
                }
                var entryIter = DBusMessageIter()
                dbus_message_iter_open_container(&sub, typeCode("e"), nil, &entryIter)
                try appendValue(entry.key, to: &entryIter)
                try appendValue(entry.value, to: &entryIter)
                dbus_message_iter_close_container(&sub, &entryIter)
            }
        } catch {
            dbus_message_iter_abandon_container(iter, &sub)
            throw error
        }
        dbus_message_iter_close_container(iter, &sub)
    case .structure(let fields):
        var sub = DBusMessageIter()
        dbus_message_iter_open_container(iter, typeCode("r"), nil, &sub)
        do {
            for field in fields { try appendValue(field, to: &sub) }
        } catch {
            dbus_message_iter_abandon_container(iter, &sub)
            throw error
        }
        dbus_message_iter_close_container(iter, &sub)
    case .variant(let inner):
        var sub = DBusMessageIter()
        dbus_message_iter_open_container(iter, typeCode("v"), inner.signature, &sub)
        do {
            try appendValue(inner, to: &sub)
        } catch {
            dbus_message_iter_abandon_container(iter, &sub)
            throw error
        }
        dbus_message_iter_close_container(iter, &sub)
    }
}

// MARK: - Reading

private func readBasic<T>(_ iter: UnsafeMutablePointer<DBusMessageIter>, _ zero: T) -> T {
    var value = zero
    withUnsafeMutablePointer(to: &value) { dbus_message_iter_get_basic(iter, $0) }
    return value
}

private func iterSignature(_ iter: UnsafeMutablePointer<DBusMessageIter>) -> String {
    guard let cString = dbus_message_iter_get_signature(iter) else { return "" }
    defer { dbus_free(cString) }
    return String(cString: cString)
}

private func readValue(_ iter: UnsafeMutablePointer<DBusMessageIter>) -> DBusValue {
    let type = dbus_message_iter_get_arg_type(iter)
    switch UInt8(truncatingIfNeeded: type) {
    case UInt8(ascii: "y"): return .byte(readBasic(iter, UInt8(0)))
    case UInt8(ascii: "b"): return .boolean(readBasic(iter, dbus_bool_t(0)) != 0)
    case UInt8(ascii: "n"): return .int16(readBasic(iter, Int16(0)))
    case UInt8(ascii: "q"): return .uint16(readBasic(iter, UInt16(0)))
    case UInt8(ascii: "i"): return .int32(readBasic(iter, Int32(0)))
    case UInt8(ascii: "u"): return .uint32(readBasic(iter, UInt32(0)))
    case UInt8(ascii: "x"): return .int64(readBasic(iter, Int64(0)))
    case UInt8(ascii: "t"): return .uint64(readBasic(iter, UInt64(0)))
    case UInt8(ascii: "d"): return .double(readBasic(iter, Double(0)))
    case UInt8(ascii: "h"): return .unixFD(readBasic(iter, Int32(-1)))
    case UInt8(ascii: "s"), UInt8(ascii: "o"), UInt8(ascii: "g"):
        let pointer = readBasic(iter, UnsafePointer<CChar>?.none)
        let string = pointer.map { String(cString: $0) } ?? ""
        switch UInt8(truncatingIfNeeded: type) {
        case UInt8(ascii: "s"): return .string(string)
        case UInt8(ascii: "o"): return .objectPath(string)
        default: return .signature(string)
        }
    case UInt8(ascii: "a"):
        let full = iterSignature(iter)
        let element = String(full.dropFirst())
        var sub = DBusMessageIter()
        dbus_message_iter_recurse(iter, &sub)
        if element.hasPrefix("{") {
            let inner = String(element.dropFirst().dropLast())
            let parts = splitSignature(inner) ?? ["s", "v"]
            var entries: [DBusValue.DictionaryEntry] = []
            while dbus_message_iter_get_arg_type(&sub) == typeCode("e") {
                var entryIter = DBusMessageIter()
                dbus_message_iter_recurse(&sub, &entryIter)
                let key = readValue(&entryIter)
                dbus_message_iter_next(&entryIter)
                let value = readValue(&entryIter)
                entries.append(.init(key, value))
                dbus_message_iter_next(&sub)
            }
            return .dictionary(keySignature: parts[0], valueSignature: parts.count > 1 ? parts[1] : "v", entries)
        }
        var items: [DBusValue] = []
        while dbus_message_iter_get_arg_type(&sub) != 0 {
            items.append(readValue(&sub))
            dbus_message_iter_next(&sub)
        }
        return .array(elementSignature: element, items)
    case UInt8(ascii: "r"), UInt8(ascii: "("):
        var sub = DBusMessageIter()
        dbus_message_iter_recurse(iter, &sub)
        var fields: [DBusValue] = []
        while dbus_message_iter_get_arg_type(&sub) != 0 {
            fields.append(readValue(&sub))
            dbus_message_iter_next(&sub)
        }
        return .structure(fields)
    case UInt8(ascii: "v"):
        var sub = DBusMessageIter()
        dbus_message_iter_recurse(iter, &sub)
        return .variant(readValue(&sub))
    default:
        return .structure([])
    }
}

/// Whether `path` is a valid D-Bus object path.
public func isValidObjectPath(_ path: String) -> Bool {
    if path == "/" { return true }
    guard path.hasPrefix("/"), !path.hasSuffix("/") else { return false }
    return path.dropFirst().split(separator: "/", omittingEmptySubsequences: false).allSatisfy { element in
        !element.isEmpty && element.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x5F
        }
    }
}
