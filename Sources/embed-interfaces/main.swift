// Build tool: turns the introspection XML files in dbus/ into Swift string constants, so
// that harkd serves (and dispatches by) exactly the XML that documents the API.
// Usage: embed-interfaces OUTPUT.swift INPUT.xml...
import Foundation

let arguments = CommandLine.arguments.dropFirst()
guard let output = arguments.first else {
    FileHandle.standardError.write(Data("usage: embed-interfaces OUTPUT.swift INPUT.xml...\n".utf8))
    exit(2)
}
var swift = "// Generated from dbus/*.xml by embed-interfaces. Do not edit.\n"
swift += "enum EmbeddedInterfaceXML {\n    static let files: [String: String] = [\n"
for path in arguments.dropFirst().sorted() {
    let name = URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent
    let xml = try String(contentsOfFile: path, encoding: .utf8)
    swift += "        \"\(name)\": #####\"\"\"\n\(xml)\n\"\"\"#####,\n"
}
swift += "    ]\n}\n"
try swift.write(toFile: output, atomically: true, encoding: .utf8)
