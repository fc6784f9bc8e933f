import Foundation
import PackagePlugin

/// Embeds the interface XML of `dbus/` in the target that uses this plugin.
@main
struct EmbedInterfaces: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let dbusDirectory = context.package.directoryURL.appending(path: "dbus")
        let inputs = try FileManager.default
            .contentsOfDirectory(at: dbusDirectory, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "xml" }
            .sorted { $0.path < $1.path }
        let output = context.pluginWorkDirectoryURL.appending(path: "EmbeddedInterfaceXML.swift")
        return [
            .buildCommand(
                displayName: "Embedding D-Bus interface XML",
                executable: try context.tool(named: "embed-interfaces").url,
                arguments: [output.path] + inputs.map(\.path),
                inputFiles: inputs,
                outputFiles: [output]
            )
        ]
    }
}
