import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif

/// What an introspection XML file says an interface has: the contract that dispatch checks
/// every incoming call against, and the text that `Introspect` serves.
public struct InterfaceDescription: Sendable, Equatable {
    public struct Method: Sendable, Equatable {
        public var name: String
        public var inSignature: String
        public var outSignature: String
        public var inArgumentNames: [String]
    }
    public struct Signal: Sendable, Equatable {
        public var name: String
        public var signature: String
    }
    public struct Property: Sendable, Equatable {
        public enum Access: String, Sendable { case read, write, readwrite }
        public var name: String
        public var type: String
        public var access: Access
        public var readable: Bool { access != .write }
        public var writable: Bool { access != .read }
    }

    public var name: String
    public var methods: [String: Method] = [:]
    public var signals: [String: Signal] = [:]
    public var properties: [String: Property] = [:]
    /// The `<interface>` element as written in the file, comments included.
    public var xml: String

    /// Parses every `<interface>` of an introspection document.
    public static func parse(_ document: String) throws -> [InterfaceDescription] {
        let collector = Collector()
        let parser = XMLParser(data: Data(document.utf8))
        parser.shouldResolveExternalEntities = false
        parser.delegate = collector
        guard parser.parse() else {
            throw DBusError.invalidArgs("invalid introspection XML: \(parser.parserError.map { "\($0)" } ?? "parse error")")
        }
        // Keep each interface's original text (with its doc comments) for Introspect.
        var interfaces = collector.interfaces
        var searchFrom = document.startIndex
        for index in interfaces.indices {
            guard let start = document.range(of: "<interface", range: searchFrom..<document.endIndex),
                  let end = document.range(of: "</interface>", range: start.upperBound..<document.endIndex)
            else { break }
            // Include the comment block that documents the interface, if it sits right before it.
            var from = start.lowerBound
            let before = document[searchFrom..<start.lowerBound]
            if let commentEnd = before.range(of: "-->", options: .backwards),
               before[commentEnd.upperBound...].allSatisfy(\.isWhitespace),
               let commentStart = before.range(of: "<!--", options: .backwards) {
                from = commentStart.lowerBound
            }
            interfaces[index].xml = "  " + String(document[from..<end.upperBound])
            searchFrom = end.upperBound
        }
        return interfaces
    }

    private final class Collector: NSObject, XMLParserDelegate {
        var interfaces: [InterfaceDescription] = []
        private var member: (kind: String, name: String)?
        private var inArgs: [(String, String)] = []
        private var outArgs: [String] = []

        func parser(_ parser: XMLParser, didStartElement element: String, namespaceURI: String?,
                    qualifiedName: String?, attributes: [String: String] = [:]) {
            switch element {
            case "interface":
                interfaces.append(InterfaceDescription(name: attributes["name"] ?? "", xml: ""))
            case "method", "signal":
                member = (element, attributes["name"] ?? "")
                inArgs = []
                outArgs = []
            case "arg":
                let type = attributes["type"] ?? ""
                if member?.kind == "signal" || attributes["direction"] != "out" {
                    inArgs.append((attributes["name"] ?? "", type))
                } else {
                    outArgs.append(type)
                }
            case "property":
                guard !interfaces.isEmpty, let name = attributes["name"] else { return }
                interfaces[interfaces.count - 1].properties[name] = Property(
                    name: name, type: attributes["type"] ?? "",
                    access: Property.Access(rawValue: attributes["access"] ?? "read") ?? .read)
            default:
                break
            }
        }

        func parser(_ parser: XMLParser, didEndElement element: String, namespaceURI: String?, qualifiedName: String?) {
            guard element == "method" || element == "signal", let member, !interfaces.isEmpty else { return }
            let last = interfaces.count - 1
            if member.kind == "method" {
                interfaces[last].methods[member.name] = Method(
                    name: member.name, inSignature: inArgs.map(\.1).joined(),
                    outSignature: outArgs.joined(), inArgumentNames: inArgs.map(\.0))
            } else {
                interfaces[last].signals[member.name] = Signal(name: member.name, signature: inArgs.map(\.1).joined())
            }
            self.member = nil
        }
    }
}
