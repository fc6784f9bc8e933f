import Foundation

/// An incoming method call, decoded.
public struct MethodCall: Sendable {
    public let message: Message
    /// The caller's unique bus name.
    public let sender: String
    public let arguments: [DBusValue]
}

public typealias MethodHandler = @Sendable (MethodCall) async throws -> [DBusValue]
public typealias PropertyGetter = @Sendable () async -> DBusValue
public typealias PropertySetter = @Sendable (_ value: DBusValue, _ sender: String) async throws -> Void

/// One interface on one object: its contract (from introspection XML) and its implementation.
public struct ExportedInterface: Sendable {
    public let description: InterfaceDescription
    public var methods: [String: MethodHandler] = [:]
    /// Methods that may take long (reading a file, waiting for a device): they run beside the
    /// caller's other calls instead of holding them up.
    public var concurrentMethods: Set<String> = []
    public var getters: [String: PropertyGetter] = [:]
    public var setters: [String: PropertySetter] = [:]

    public init(_ description: InterfaceDescription) {
        self.description = description
    }

    /// Members the XML declares that have no implementation here, and the reverse.
    public var mismatches: [String] {
        var problems: [String] = []
        for name in description.methods.keys where methods[name] == nil {
            problems.append("method \(description.name).\(name) is declared but not implemented")
        }
        for name in methods.keys where description.methods[name] == nil {
            problems.append("method \(description.name).\(name) is implemented but not declared")
        }
        for (name, property) in description.properties {
            if property.readable, getters[name] == nil {
                problems.append("property \(description.name).\(name) is readable but has no getter")
            }
            if property.writable, setters[name] == nil {
                problems.append("property \(description.name).\(name) is writable but has no setter")
            }
        }
        for name in getters.keys where description.properties[name] == nil {
            problems.append("property \(description.name).\(name) is implemented but not declared")
        }
        return problems.sorted()
    }
}

/// Serves exported objects on a connection: method dispatch checked against the interface
/// descriptions, org.freedesktop.DBus.Properties, org.freedesktop.DBus.Introspectable, and
/// exactly one reply to every call. (org.freedesktop.DBus.Peer is answered by libdbus itself.)
public final class ObjectServer: @unchecked Sendable {  // mutable state only on connection.queue
    public let connection: Connection
    private var objects: [String: [String: ExportedInterface]] = [:]
    /// The last call in flight per sender: a sender's calls run in the order they arrived.
    private var lastCall: [String: (id: UInt64, task: Task<Void, Never>)] = [:]
    private var nextCallID: UInt64 = 0

    public init(connection: Connection) {
        self.connection = connection
        connection.queue.sync {
            connection.methodCallHandler = { [unowned self] message in self.receive(message) }
        }
    }

    /// Exports interfaces at `path`. Call before requesting a bus name.
    public func export(path: String, interfaces: [ExportedInterface]) {
        connection.queue.sync {
            var map = objects[path] ?? [:]
            for interface in interfaces { map[interface.description.name] = interface }
            objects[path] = map
        }
    }

    // MARK: Signals

    /// Emits a signal; with `destination` it goes to that connection only (unicast).
    public func emitSignal(path: String, interface: String, name: String, _ arguments: [DBusValue], to destination: String? = nil) {
        do {
            connection.send(try Message.signal(path: path, interface: interface, member: name, body: arguments, destination: destination))
        } catch {
            assertionFailure("cannot build signal \(interface).\(name): \(error)")
        }
    }

    public func emitPropertiesChanged(path: String, interface: String, changed: [String: DBusValue], invalidated: [String] = []) {
        emitSignal(path: path, interface: "org.freedesktop.DBus.Properties", name: "PropertiesChanged",
                   [.string(interface), .vardict(changed), .stringArray(invalidated)])
    }

    // MARK: Dispatch

    private func receive(_ message: Message) {
        let sender = message.sender ?? ""
        let concurrent = isConcurrent(message)
        nextCallID += 1
        let id = nextCallID
        let previous = concurrent ? nil : lastCall[sender]?.task
        let task = Task {
            await previous?.value
            await self.process(message, sender: sender)
            if !concurrent {
                self.connection.queue.async {
                    if self.lastCall[sender]?.id == id { self.lastCall[sender] = nil }
                }
            }
        }
        if !concurrent { lastCall[sender] = (id, task) }
    }

    private func isConcurrent(_ message: Message) -> Bool {
        guard let path = message.path, let member = message.member, let interfaces = objects[path] else { return false }
        if let name = message.interface { return interfaces[name]?.concurrentMethods.contains(member) ?? false }
        return interfaces.values.contains { $0.concurrentMethods.contains(member) }
    }

    private func process(_ message: Message, sender: String) async {
        let reply: Message
        do {
            let body = try await route(message, sender: sender)
            reply = try message.makeReturn(body)
        } catch let error as DBusError {
            reply = message.makeError(error)
        } catch {
            reply = message.makeError(DBusError(name: "org.freedesktop.DBus.Error.Failed", message: "\(error)"))
        }
        if !message.noReplyExpected { connection.send(reply) }
    }

    private func lookup(_ path: String) -> [String: ExportedInterface]? {
        connection.queue.sync { objects[path] }
    }

    private func route(_ message: Message, sender: String) async throws -> [DBusValue] {
        let path = message.path ?? "/"
        let member = message.member ?? ""
        let interfaceName = message.interface
        let signature = message.bodySignature

        if interfaceName == "org.freedesktop.DBus.Introspectable" || (interfaceName == nil && member == "Introspect") {
            guard member == "Introspect", signature.isEmpty else { throw unknown(interfaceName, member, signature, path) }
            guard let xml = introspect(path) else { throw unknown(interfaceName, member, signature, path) }
            return [.string(xml)]
        }
        guard let interfaces = lookup(path) else {
            throw DBusError.unknownMethod("no object at path \(path) (method \(interfaceName.map { $0 + "." } ?? "")\(member) with signature \"\(signature)\")")
        }
        if interfaceName == "org.freedesktop.DBus.Properties" {
            return try await properties(member: member, message: message, sender: sender, interfaces: interfaces)
        }
        let candidates = interfaceName.map { name in interfaces[name].map { [$0] } ?? [] } ?? Array(interfaces.values)
        guard let interface = candidates.first(where: { $0.description.methods[member] != nil }),
              let method = interface.description.methods[member], let handler = interface.methods[member]
        else { throw unknown(interfaceName, member, signature, path) }
        guard signature == method.inSignature else {
            throw DBusError.invalidArgs("\(interface.description.name).\(member) takes (\(method.inSignature)), not (\(signature))")
        }
        let result = try await handler(MethodCall(message: message, sender: sender, arguments: message.body))
        let resultSignature = result.map(\.signature).joined()
        guard resultSignature == method.outSignature else {
            throw DBusError(name: "org.freedesktop.DBus.Error.Failed",
                            message: "internal error: \(member) produced (\(resultSignature)), declared (\(method.outSignature))")
        }
        return result
    }

    private func unknown(_ interface: String?, _ member: String, _ signature: String, _ path: String) -> DBusError {
        .unknownMethod("no method \(interface.map { $0 + "." } ?? "")\(member) with signature \"\(signature)\" at \(path)")
    }

    private func properties(member: String, message: Message, sender: String, interfaces: [String: ExportedInterface]) async throws -> [DBusValue] {
        let arguments = message.body
        func interface(_ value: DBusValue?) throws -> ExportedInterface {
            let name = value?.stringValue ?? ""
            guard let interface = interfaces[name] else {
                throw DBusError(name: "org.freedesktop.DBus.Error.UnknownInterface", message: "no interface '\(name)' at \(message.path ?? "/")")
            }
            return interface
        }
        switch (member, message.bodySignature) {
        case ("Get", "ss"):
            let target = try interface(arguments[0])
            let name = arguments[1].stringValue ?? ""
            guard let property = target.description.properties[name], property.readable, let getter = target.getters[name] else {
                throw DBusError.unknownProperty("no readable property '\(name)' on \(target.description.name)")
            }
            return [.variant(await getter())]
        case ("GetAll", "s"):
            let target = try interface(arguments[0])
            var values: [String: DBusValue] = [:]
            for (name, getter) in target.getters { values[name] = await getter() }
            return [.vardict(values)]
        case ("Set", "ssv"):
            let target = try interface(arguments[0])
            let name = arguments[1].stringValue ?? ""
            guard let property = target.description.properties[name] else {
                throw DBusError.unknownProperty("no property '\(name)' on \(target.description.name)")
            }
            guard property.writable, let setter = target.setters[name] else {
                throw DBusError.propertyReadOnly("property '\(name)' of \(target.description.name) is read-only")
            }
            let value = arguments[2].unwrapped
            guard value.signature == property.type else {
                throw DBusError.invalidArgs("property '\(name)' is of type \(DBusValue.describe(signature: property.type)), not \(value.typeDescription)")
            }
            try await setter(value, sender)
            return []
        default:
            throw unknown("org.freedesktop.DBus.Properties", member, message.bodySignature, message.path ?? "/")
        }
    }

    // MARK: Introspection

    private static let standardInterfaces = """
      <interface name="org.freedesktop.DBus.Peer">
        <method name="Ping"/>
        <method name="GetMachineId"><arg type="s" name="machine_uuid" direction="out"/></method>
      </interface>
      <interface name="org.freedesktop.DBus.Introspectable">
        <method name="Introspect"><arg name="xml_data" type="s" direction="out"/></method>
      </interface>
      <interface name="org.freedesktop.DBus.Properties">
        <method name="Get">
          <arg name="interface_name" type="s" direction="in"/>
          <arg name="property_name" type="s" direction="in"/>
          <arg name="value" type="v" direction="out"/>
        </method>
        <method name="GetAll">
          <arg name="interface_name" type="s" direction="in"/>
          <arg name="properties" type="a{sv}" direction="out"/>
        </method>
        <method name="Set">
          <arg name="interface_name" type="s" direction="in"/>
          <arg name="property_name" type="s" direction="in"/>
          <arg name="value" type="v" direction="in"/>
        </method>
        <signal name="PropertiesChanged">
          <arg type="s" name="interface_name"/>
          <arg type="a{sv}" name="changed_properties"/>
          <arg type="as" name="invalidated_properties"/>
        </signal>
      </interface>
    """

    /// The introspection document for `path`, or nil when nothing lives at or below it.
    func introspect(_ path: String) -> String? {
        let (interfaces, children) = connection.queue.sync { () -> ([ExportedInterface]?, Set<String>) in
            let prefix = path == "/" ? "/" : path + "/"
            var children = Set<String>()
            for objectPath in objects.keys where objectPath.hasPrefix(prefix) {
                if let child = objectPath.dropFirst(prefix.count).split(separator: "/").first { children.insert(String(child)) }
            }
            return (objects[path].map { Array($0.values) }, children)
        }
        guard interfaces != nil || !children.isEmpty else { return nil }
        var xml = """
        <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
        <node>

        """
        xml += Self.standardInterfaces + "\n"
        for interface in (interfaces ?? []).sorted(by: { $0.description.name < $1.description.name }) {
            xml += interface.description.xml + "\n"
        }
        for child in children.sorted() { xml += "  <node name=\"\(child)\"/>\n" }
        xml += "</node>\n"
        return xml
    }
}
