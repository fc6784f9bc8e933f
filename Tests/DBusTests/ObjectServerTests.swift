import DBus
import Foundation
import Synchronization
import Testing

/// A value behind a lock, shareable between tasks.
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<R: Sendable>(_ body: (inout Value) -> R) -> R { mutex.withLock { body(&$0) } }
}

/// A real dbus-daemon of the tests' own, on a private socket: one for the whole test process,
/// killed when it exits. Its output goes nowhere, so a daemon left behind can never hold the
/// test runner's pipes open.
final class PrivateBus: Sendable {
    let address: String

    static let shared: PrivateBus = {
        do {
            return try PrivateBus()
        } catch {
            fatalError("cannot start dbus-daemon: \(error)")
        }
    }()

    private init() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        process.arguments = ["--session", "--nofork", "--print-address=1", "--address=unix:tmpdir=/tmp"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            guard !chunk.isEmpty else { break }
            line += chunk
        }
        address = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        PrivateBus.pid.withLock { $0 = process.processIdentifier }
        // SIGKILL: a child of Foundation's Process starts with SIGTERM blocked.
        atexit { PrivateBus.pid.withLock { if $0 > 0 { kill($0, SIGKILL) } } }
    }

    private static let pid = Mutex<Int32>(0)
}

let thingXML = """
<node>
  <interface name="org.example.Thing">
    <method name="Echo"><arg name="value" type="v" direction="in"/><arg name="same" type="v" direction="out"/></method>
    <method name="Add"><arg name="a" type="i" direction="in"/><arg name="b" type="i" direction="in"/><arg name="sum" type="i" direction="out"/></method>
    <method name="Fail"/>
    <method name="Ping2"><arg name="to" type="s" direction="in"/></method>
    <method name="Slow"><arg name="seconds" type="d" direction="in"/></method>
    <method name="Append"><arg name="item" type="s" direction="in"/><arg name="all" type="as" direction="out"/></method>
    <signal name="Pinged"><arg name="n" type="u"/></signal>
    <property name="Level" type="d" access="readwrite"/>
    <property name="Name" type="s" access="read"/>
  </interface>
</node>
"""

/// A small service on a private bus, exported by ObjectServer.
final class ThingService: Sendable {
    let bus: PrivateBus
    let connection: Connection
    let server: ObjectServer
    let level = Locked(0.5)
    let items = Locked<[String]>([])
    /// Each test's service has a name of its own on the shared bus.
    let name = "org.example.Thing.T\(UInt32.random(in: 0...UInt32.max))"

    init() async throws {
        bus = PrivateBus.shared
        connection = try Connection(address: bus.address)
        server = ObjectServer(connection: connection)
        var thing = ExportedInterface(try InterfaceDescription.parse(thingXML)[0])
        let level = level, items = items, server = server
        thing.methods["Echo"] = { call in [call.arguments[0]] }
        thing.methods["Add"] = { call in
            [.int32((call.arguments[0].integerValue.map(Int32.init) ?? 0) &+ (call.arguments[1].integerValue.map(Int32.init) ?? 0))]
        }
        thing.methods["Fail"] = { _ in throw DBusError(name: "org.example.Error.Nope", message: "no, because 42") }
        thing.methods["Ping2"] = { call in
            server.emitSignal(path: "/org/example/Thing", interface: "org.example.Thing", name: "Pinged", [.uint32(1)],
                              to: call.arguments[0].stringValue)
            return []
        }
        thing.methods["Slow"] = { call in
            try await Task.sleep(for: .seconds(call.arguments[0].doubleValue ?? 0))
            return []
        }
        thing.concurrentMethods = ["Slow"]
        thing.methods["Append"] = { call in
            // Yield in the middle: calls of one sender must still run one after the other.
            let item = call.arguments[0].stringValue ?? ""
            try await Task.sleep(for: .milliseconds(Int.random(in: 0...3)))
            return [.stringArray(items.withLock { $0.append(item); return $0 })]
        }
        thing.getters["Level"] = { .double(level.withLock { $0 }) }
        thing.getters["Name"] = { .string("thing") }
        thing.setters["Level"] = { value, _ in
            guard let new = value.doubleValue, (0...1).contains(new) else {
                throw DBusError(name: "org.example.Error.InvalidArgument", message: "Level \(value) is not 0 to 1")
            }
            level.withLock { $0 = new }
            server.emitPropertiesChanged(path: "/org/example/Thing", interface: "org.example.Thing", changed: ["Level": .double(new)])
        }
        #expect(thing.mismatches.isEmpty)
        server.export(path: "/org/example/Thing", interfaces: [thing])
        #expect(try await connection.requestName(name) == .primaryOwner)
    }

    func client() throws -> Connection { try Connection(address: bus.address) }
}

extension Connection {
    func callThing(_ destination: String, _ member: String, _ body: [DBusValue] = [], interface: String? = "org.example.Thing", path: String = "/org/example/Thing") async throws -> [DBusValue] {
        let message = try Message.methodCall(destination: destination, path: path, interface: interface, member: member, body: body)
        return try await call(message, timeout: .seconds(10)).body
    }
}

func dbusError(_ body: () async throws -> Void) async -> DBusError? {
    do {
        try await body()
        return nil
    } catch let error as DBusError {
        return error
    } catch {
        return DBusError(name: "unexpected", message: "\(error)")
    }
}

@Suite(.timeLimit(.minutes(1))) struct ObjectServerTests {
    @Test func callsAreDispatchedAndReplied() async throws {
        let thing = try await ThingService()
        let client = try thing.client()
        #expect(try await client.callThing(thing.name, "Add", [.int32(2), .int32(40)]) == [.int32(42)])
        let nested = DBusValue.vardict(["fd-less": .array(elementSignature: "(sdtt)", [.structure([.string("x"), .double(1), .uint64(2), .uint64(3)])])])
        #expect(try await client.callThing(thing.name, "Echo", [.variant(nested)]) == [.variant(nested)])
        // A call without an interface field finds the method too.
        #expect(try await client.callThing(thing.name, "Add", [.int32(1), .int32(1)], interface: nil) == [.int32(2)])
    }

    @Test func errorsComeBackAsErrorReplies() async throws {
        let thing = try await ThingService()
        let client = try thing.client()
        let error = await dbusError { _ = try await client.callThing(thing.name, "Fail") }
        #expect(error == DBusError(name: "org.example.Error.Nope", message: "no, because 42"))
    }

    @Test func unknownMembersAndPathsGetUnknownMethod() async throws {
        let thing = try await ThingService()
        let client = try thing.client()
        for (member, path, interface) in [("Nope", "/org/example/Thing", "org.example.Thing"),
                                          ("Add", "/org/example/Other", "org.example.Thing"),
                                          ("Add", "/org/example/Thing", "org.example.Else")] {
            let error = await dbusError { _ = try await client.callThing(thing.name, member, [.int32(1), .int32(1)], interface: interface, path: path) }
            #expect(error?.name == "org.freedesktop.DBus.Error.UnknownMethod", "\(member) at \(path) on \(interface)")
            #expect(error?.message.contains(member) == true)
        }
    }

    @Test func wrongSignatureGetsInvalidArgs() async throws {
        let thing = try await ThingService()
        let client = try thing.client()
        let error = await dbusError { _ = try await client.callThing(thing.name, "Add", [.string("2"), .int32(3)]) }
        #expect(error?.name == "org.freedesktop.DBus.Error.InvalidArgs")
        #expect(error?.message.contains("(ii)") == true)
    }

    @Test func everyCallGetsExactlyOneReplyUnderLoad() async throws {
        let thing = try await ThingService()
        let client = try thing.client()
        try await withThrowingTaskGroup(of: Bool.self) { group in
            for i in 0..<300 {
                group.addTask {
                    if i % 3 == 0 { return await dbusError { _ = try await client.callThing(thing.name, "Fail") } != nil }
                    if i % 3 == 1 { return await dbusError { _ = try await client.callThing(thing.name, "Nope") } != nil }
                    return try await client.callThing(thing.name, "Add", [.int32(Int32(i)), .int32(1)]) == [.int32(Int32(i + 1))]
                }
            }
            var answered = 0
            for try await ok in group {
                #expect(ok)
                answered += 1
            }
            #expect(answered == 300)
        }
    }

    @Test func oneSendersCallsRunInOrder() async throws {
        let thing = try await ThingService()
        let client = try thing.client()
        // Sent back to back without waiting for replies.
        let messages = try (0..<50).map { i in
            try Message.methodCall(destination: thing.name, path: "/org/example/Thing", interface: "org.example.Thing", member: "Append", body: [.string("\(i)")])
        }
        let last = try await withThrowingTaskGroup(of: [DBusValue].self) { group in
            for message in messages { group.addTask { try await client.call(message).body } }
            var longest: [String] = []
            for try await reply in group {
                let items = reply.first?.arrayValue?.compactMap(\.stringValue) ?? []
                if items.count > longest.count { longest = items }
            }
            return longest
        }
        #expect(last == (0..<50).map(String.init))
    }

    @Test func slowMethodsDoNotHoldUpTheCallersOtherCalls() async throws {
        let thing = try await ThingService()
        let client = try thing.client()
        let slow = Task { try await client.callThing(thing.name, "Slow", [.double(3)]) }
        // Answered while Slow still sleeps.
        #expect(try await client.callThing(thing.name, "Add", [.int32(1), .int32(2)]) == [.int32(3)])
        #expect(!slow.isCancelled)
        slow.cancel()
    }

    @Test func propertiesGetGetAllSet() async throws {
        let thing = try await ThingService()
        let client = try thing.client()
        let changed = Locked<[DBusValue]>([])
        try await client.addMatch("type='signal',interface='org.freedesktop.DBus.Properties',member='PropertiesChanged'") { message in
            changed.withLock { $0 = message.body }
        }
        #expect(try await client.callThing(thing.name, "Get", [.string("org.example.Thing"), .string("Level")], interface: "org.freedesktop.DBus.Properties") == [.variant(.double(0.5))])
        let all = try await client.callThing(thing.name, "GetAll", [.string("org.example.Thing")], interface: "org.freedesktop.DBus.Properties")
        #expect(all.first?.vardictValue == ["Level": .double(0.5), "Name": .string("thing")])
        _ = try await client.callThing(thing.name, "Set", [.string("org.example.Thing"), .string("Level"), .variant(.double(0.25))], interface: "org.freedesktop.DBus.Properties")
        #expect(thing.level.withLock { $0 } == 0.25)
        for _ in 0..<200 where changed.withLock({ $0.isEmpty }) { try await Task.sleep(for: .milliseconds(5)) }
        #expect(changed.withLock { $0 } == [.string("org.example.Thing"), .vardict(["Level": .double(0.25)]), .stringArray([])])

        let readOnly = await dbusError {
            _ = try await client.callThing(thing.name, "Set", [.string("org.example.Thing"), .string("Name"), .variant(.string("x"))], interface: "org.freedesktop.DBus.Properties")
        }
        #expect(readOnly?.name == "org.freedesktop.DBus.Error.PropertyReadOnly")
        let wrongType = await dbusError {
            _ = try await client.callThing(thing.name, "Set", [.string("org.example.Thing"), .string("Level"), .variant(.string("high"))], interface: "org.freedesktop.DBus.Properties")
        }
        #expect(wrongType?.name == "org.freedesktop.DBus.Error.InvalidArgs")
        let unknown = await dbusError {
            _ = try await client.callThing(thing.name, "Get", [.string("org.example.Thing"), .string("Colour")], interface: "org.freedesktop.DBus.Properties")
        }
        #expect(unknown?.name == "org.freedesktop.DBus.Error.UnknownProperty")
    }

    @Test func introspectionAndPeer() async throws {
        let thing = try await ThingService()
        let client = try thing.client()
        let xml = try await client.callThing(thing.name, "Introspect", interface: "org.freedesktop.DBus.Introspectable").first?.stringValue ?? ""
        #expect(xml.contains(#"<interface name="org.example.Thing">"#))
        #expect(xml.contains("org.freedesktop.DBus.Properties"))
        let parent = try await client.callThing(thing.name, "Introspect", interface: "org.freedesktop.DBus.Introspectable", path: "/org/example").first?.stringValue ?? ""
        #expect(parent.contains(#"<node name="Thing"/>"#))
        #expect(try await client.callThing(thing.name, "Ping", interface: "org.freedesktop.DBus.Peer") == [])
    }

    @Test func unicastSignalsReachOnlyTheirDestination() async throws {
        let thing = try await ThingService()
        let target = try thing.client()
        let bystander = try thing.client()
        let received = Locked<[String]>([])
        target.onSignal { message in if message.member == "Pinged" { received.withLock { $0.append("target") } } }
        // The bystander listens for every signal of the service: a broadcast would reach it.
        try await bystander.addMatch("type='signal',interface='org.example.Thing'") { message in
            if message.member == "Pinged" { received.withLock { $0.append("bystander") } }
        }
        _ = try await bystander.callThing(thing.name, "Ping2", [.string(target.uniqueName)])
        _ = try await target.callThing(thing.name, "Add", [.int32(0), .int32(0)])  // a round trip after the signal
        for _ in 0..<200 where received.withLock({ $0.isEmpty }) { try await Task.sleep(for: .milliseconds(5)) }
        try await Task.sleep(for: .milliseconds(50))
        #expect(received.withLock { $0 } == ["target"])
    }
}
