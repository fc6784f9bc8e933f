/// An error a client caused or must know about. Each kind becomes one
/// `org.hark.Hark1.Error.*` reply; the message names the bad value.
public struct HarkError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable, CaseIterable {
        case invalidArgument = "InvalidArgument"
        case notFound = "NotFound"
        case limitExceeded = "LimitExceeded"
        case unavailable = "Unavailable"
        case permissionDenied = "PermissionDenied"
        case failed = "Failed"
    }

    public var kind: Kind
    public var message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }

    public static func invalid(_ message: String) -> HarkError { HarkError(.invalidArgument, message) }
    public static func notFound(_ message: String) -> HarkError { HarkError(.notFound, message) }
}
