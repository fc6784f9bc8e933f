@testable import DBus
import Foundation
import Testing

@Suite struct MarshallingTests {
    /// Writes values into a real libdbus message and reads them back.
    func roundTrip(_ values: [DBusValue]) throws -> [DBusValue] {
        let message = try Message.methodCall(destination: "org.example", path: "/x", interface: "org.example.I", member: "M", body: values)
        return message.body
    }

    @Test func basicTypes() throws {
        let values: [DBusValue] = [
            .byte(7), .boolean(true), .boolean(false), .int16(-3), .uint16(65535), .int32(-70000), .uint32(4_000_000_000),
            .int64(-1 << 40), .uint64(.max), .double(-0.125), .string("héllo 👋"), .objectPath("/org/hark/Hark1"), .signature("a{sv}"),
        ]
        #expect(try roundTrip(values) == values)
    }

    @Test func containers() throws {
        let values: [DBusValue] = [
            .vardict(["rate": .double(1.5), "ssml": .boolean(true), "voice": .string("x"), "nested": .vardict(["a": .uint32(1)])]),
            .array(elementSignature: "(ssssa{sv})", [
                .structure([.string("id"), .string("name"), .string("en-US"), .string("espeak-ng"), .vardict([:])]),
            ]),
            .array(elementSignature: "s", []),
            .dictionary(keySignature: "s", valueSignature: "v", []),
            .stringArray(["next", "back"]),
            .array(elementSignature: "(sdtt)", [.structure([.string("next"), .double(0.9), .uint64(120), .uint64(480)])]),
            .variant(.variant(.int32(1))),
        ]
        let back = try roundTrip(values)
        #expect(back == values)
        #expect(back.map(\.signature).joined() == "a{sv}a(ssssa{sv})asa{sv}asa(sdtt)v")
    }

    @Test func fileDescriptorsAreDuplicated() throws {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]); close(fds[1]) }
        let back = try roundTrip([.unixFD(fds[0])])
        guard case .unixFD(let received) = back.first else {
            Issue.record("no fd came back: \(back)")
            return
        }
        #expect(received != fds[0] && received >= 0)
        // The duplicate reads what is written to the original pipe.
        #expect(write(fds[1], "ok", 2) == 2)
        var buffer = [UInt8](repeating: 0, count: 2)
        #expect(read(received, &buffer, 2) == 2)
        #expect(buffer == Array("ok".utf8))
        close(received)
    }

    @Test func mistypedContainersAreRefused() {
        #expect(throws: DBusError.self) {
            try roundTrip([.array(elementSignature: "s", [.uint32(1)])])
        }
        #expect(throws: DBusError.self) {
            try roundTrip([.objectPath("not/a/path")])
        }
    }

    @Test func embeddedNULDoesNotAbort() throws {
        let back = try roundTrip([.string("a\0b")])
        #expect(back.first?.stringValue?.contains("\0") == false)
    }

    @Test func signaturesSplitIntoCompleteTypes() {
        #expect(splitSignature("sa{sv}") == ["s", "a{sv}"])
        #expect(splitSignature("ha(sdtt)as") == ["h", "a(sdtt)", "as"])
        #expect(splitSignature("(ii") == nil)
        #expect(splitSignature("a{vs}") == nil)
        #expect(splitSignature("") == [])
    }

    @Test func objectPaths() {
        #expect(isValidObjectPath("/"))
        #expect(isValidObjectPath("/org/hark/Hark1"))
        #expect(!isValidObjectPath("/org/"))
        #expect(!isValidObjectPath("org"))
        #expect(!isValidObjectPath("/org//hark"))
        #expect(!isValidObjectPath("/org/h-ark"))
    }

    @Test func vardictReading() {
        let dict = DBusValue.vardict(["rate": .double(2)])
        #expect(dict.vardictValue?["rate"] == .double(2))
        #expect(DBusValue.string("x").vardictValue == nil)
        #expect(DBusValue.variant(.int32(5)).integerValue == 5)
    }
}

@Suite struct InterfaceDescriptionTests {
    @Test func parsesMethodsSignalsAndProperties() throws {
        let xml = """
        <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
        <node>
          <!-- The interface. -->
          <interface name="org.example.Thing">
            <method name="Do">
              <arg name="text" type="s" direction="in"/>
              <arg name="options" type="a{sv}" direction="in"/>
              <arg name="id" type="t" direction="out"/>
            </method>
            <signal name="Done"><arg name="id" type="t"/><arg name="reason" type="u"/></signal>
            <property name="Level" type="d" access="readwrite"/>
            <property name="Busy" type="b" access="read"/>
          </interface>
        </node>
        """
        let interfaces = try InterfaceDescription.parse(xml)
        #expect(interfaces.count == 1)
        let thing = interfaces[0]
        #expect(thing.name == "org.example.Thing")
        #expect(thing.methods["Do"] == .init(name: "Do", inSignature: "sa{sv}", outSignature: "t", inArgumentNames: ["text", "options"]))
        #expect(thing.signals["Done"]?.signature == "tu")
        #expect(thing.properties["Level"]?.writable == true)
        #expect(thing.properties["Busy"]?.writable == false)
        #expect(thing.xml.contains("<!-- The interface. -->"))
        #expect(thing.xml.hasSuffix("</interface>"))
    }
}
