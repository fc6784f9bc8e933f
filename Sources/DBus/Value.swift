/// A D-Bus value with its type: what travels in a message body.
///
/// Containers carry the signature of their elements so that empty arrays and
/// dictionaries still marshal with the right type.
public indirect enum DBusValue: Sendable, Hashable {
    case byte(UInt8)
    case boolean(Bool)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case double(Double)
    case string(String)
    case objectPath(String)
    case signature(String)
    /// A file descriptor. A received one belongs to the receiver, who must close it;
    /// a sent one is duplicated by libdbus and stays the sender's.
    case unixFD(Int32)
    case array(elementSignature: String, [DBusValue])
    case dictionary(keySignature: String, valueSignature: String, [DictionaryEntry])
    case structure([DBusValue])
    case variant(DBusValue)

    public struct DictionaryEntry: Sendable, Hashable {
        public var key: DBusValue
        public var value: DBusValue
        public init(_ key: DBusValue, _ value: DBusValue) {
            self.key = key
            self.value = value
        }
    }

    /// The D-Bus type signature of this value.
    public var signature: String {
        switch self {
        case .byte: "y"
        case .boolean: "b"
        case .int16: "n"
        case .uint16: "q"
        case .int32: "i"
        case .uint32: "u"
        case .int64: "x"
        case .uint64: "t"
        case .double: "d"
        case .string: "s"
        case .objectPath: "o"
        case .signature: "g"
        case .unixFD: "h"
        case .array(let element, _): "a" + element
        case .dictionary(let key, let value, _): "a{" + key + value + "}"
        case .structure(let fields): "(" + fields.map(\.signature).joined() + ")"
        case .variant: "v"
        }
    }

    /// A short human name of the type, for error messages ("double (d)").
    public var typeDescription: String { Self.describe(signature: signature) }

    public static func describe(signature: String) -> String {
        let name: String
        switch signature.first {
        case "y": name = "byte"
        case "b": name = "boolean"
        case "n", "i", "x": name = "integer"
        case "q", "u", "t": name = "unsigned integer"
        case "d": name = "double"
        case "s": name = "string"
        case "o": name = "object path"
        case "g": name = "signature"
        case "h": name = "file descriptor"
        case "a": name = signature.hasPrefix("a{") ? "dictionary" : "array"
        case "(": name = "struct"
        case "v": name = "variant"
        default: name = "value"
        }
        return "\(name) (\(signature))"
    }
}

// MARK: - Building values

extension DBusValue {
    /// `a{sv}` from a Swift dictionary, keys sorted for a stable wire order.
    public static func vardict(_ entries: [String: DBusValue]) -> DBusValue {
        .dictionary(
            keySignature: "s", valueSignature: "v",
            entries.sorted { $0.key < $1.key }.map { DictionaryEntry(.string($0.key), .variant($0.value)) }
        )
    }

    /// `as` from strings.
    public static func stringArray(_ strings: [String]) -> DBusValue {
        .array(elementSignature: "s", strings.map(DBusValue.string))
    }
}

// MARK: - Reading values

extension DBusValue {
    public var stringValue: String? {
        switch self {
        case .string(let s), .objectPath(let s), .signature(let s): s
        case .variant(let inner): inner.stringValue
        default: nil
        }
    }

    public var boolValue: Bool? {
        switch self {
        case .boolean(let b): b
        case .variant(let inner): inner.boolValue
        default: nil
        }
    }

    public var doubleValue: Double? {
        switch self {
        case .double(let d): d
        case .variant(let inner): inner.doubleValue
        default: nil
        }
    }

    /// Any integer type, widened; nil for other types or values out of range.
    public var integerValue: Int64? {
        switch self {
        case .byte(let v): Int64(v)
        case .int16(let v): Int64(v)
        case .uint16(let v): Int64(v)
        case .int32(let v): Int64(v)
        case .uint32(let v): Int64(v)
        case .int64(let v): v
        case .uint64(let v): Int64(exactly: v)
        case .variant(let inner): inner.integerValue
        default: nil
        }
    }

    public var uint32Value: UInt32? {
        if case .uint32(let v) = self { return v }
        if case .variant(let inner) = self { return inner.uint32Value }
        return nil
    }

    public var uint64Value: UInt64? {
        if case .uint64(let v) = self { return v }
        if case .variant(let inner) = self { return inner.uint64Value }
        return nil
    }

    /// The elements of an array (not of a dictionary).
    public var arrayValue: [DBusValue]? {
        switch self {
        case .array(_, let items): items
        case .variant(let inner): inner.arrayValue
        default: nil
        }
    }

    /// The entries of an `a{sv}`, variants unwrapped; nil if this is not one.
    public var vardictValue: [String: DBusValue]? {
        switch self {
        case .dictionary("s", "v", let entries):
            var result: [String: DBusValue] = [:]
            for entry in entries {
                guard case .string(let key) = entry.key, case .variant(let value) = entry.value else { return nil }
                result[key] = value
            }
            return result
        case .variant(let inner): return inner.vardictValue
        default: return nil
        }
    }

    /// The variant's content, or self.
    public var unwrapped: DBusValue {
        if case .variant(let inner) = self { return inner.unwrapped }
        return self
    }
}

// MARK: - Signatures

/// Splits a signature into its complete types ("sa{sv}(ii)" → ["s", "a{sv}", "(ii)"]);
/// nil if it is not a valid signature.
public func splitSignature(_ signature: String) -> [String]? {
    var types: [String] = []
    var rest = Substring(signature)
    while !rest.isEmpty {
        guard let one = firstCompleteType(rest) else { return nil }
        types.append(String(one))
        rest = rest.dropFirst(one.count)
    }
    return types
}

private func firstCompleteType(_ s: Substring) -> Substring? {
    guard let c = s.first else { return nil }
    switch c {
    case "y", "b", "n", "q", "i", "u", "x", "t", "d", "s", "o", "g", "h", "v":
        return s.prefix(1)
    case "a":
        let rest = s.dropFirst()
        if rest.first == "{" {
            let inner = rest.dropFirst()
            guard let key = firstCompleteType(inner), key.count == 1, key != "v" else { return nil }
            guard let value = firstCompleteType(inner.dropFirst(key.count)) else { return nil }
            let afterValue = inner.dropFirst(key.count + value.count)
            guard afterValue.first == "}" else { return nil }
            return s.prefix(3 + key.count + value.count)
        }
        guard let element = firstCompleteType(rest) else { return nil }
        return s.prefix(1 + element.count)
    case "(":
        var rest = s.dropFirst()
        var length = 1
        var fields = 0
        while let next = rest.first, next != ")" {
            guard let field = firstCompleteType(rest) else { return nil }
            length += field.count
            rest = rest.dropFirst(field.count)
            fields += 1
        }
        guard rest.first == ")", fields > 0 else { return nil }
        return s.prefix(length + 1)
    default:
        return nil
    }
}
