import DBus
import HarkCore

/// org.hark.Hark1.Speech on the bus: decodes calls, hands them to `SpeechService`, and turns
/// the scheduler's notices into unicast signals and PropertiesChanged.
struct SpeechInterface {
    let service: SpeechService
    let server: ObjectServer

    func exported() -> ExportedInterface {
        var interface = ExportedInterface(Hark.interface(Hark.speechInterface))
        let service = service
        interface.methods["Speak"] = { call in
            try await replying { () throws(HarkError) in
                let id = try await service.speak(text: call.arguments[0].stringValue ?? "", options: try options(call.arguments[1]), kind: .speak, owner: call.sender)
                return [.uint64(id)]
            }
        }
        interface.methods["Announce"] = { call in
            try await replying { () throws(HarkError) in
                let id = try await service.speak(text: call.arguments[0].stringValue ?? "", options: try options(call.arguments[1]), kind: .announce, owner: call.sender)
                return [.uint64(id)]
            }
        }
        interface.methods["Cancel"] = { call in
            try await replying { () throws(HarkError) in
                try await service.scheduler.cancel(call.arguments[0].uint64Value ?? 0, owner: call.sender)
                return []
            }
        }
        interface.methods["StopSpeaking"] = { call in
            try await replying { () throws(HarkError) in
                let afterWord = try boundary(call.arguments[0])
                await service.scheduler.stop(owner: call.sender, afterCurrentWord: afterWord)
                return []
            }
        }
        interface.methods["PauseSpeaking"] = { call in
            try await replying { () throws(HarkError) in
                let afterWord = try boundary(call.arguments[0])
                await service.scheduler.pause(owner: call.sender, afterCurrentWord: afterWord)
                return []
            }
        }
        interface.methods["ContinueSpeaking"] = { call in
            await service.scheduler.resume(owner: call.sender)
            return []
        }
        interface.methods["StopDetached"] = { call in
            try await replying { () throws(HarkError) in
                let afterWord = try boundary(call.arguments[0])
                return [.uint32(UInt32(await service.scheduler.stopDetached(afterCurrentWord: afterWord)))]
            }
        }
        interface.methods["ListVoices"] = { _ in
            try await replying { () throws(HarkError) in
                [.array(elementSignature: "(ssssa{sv})", try await service.voices().map(\.dbusValue))]
            }
        }
        interface.methods["RefreshVoices"] = { _ in
            try await replying { () throws(HarkError) in
                [.uint32(UInt32(clamping: try await service.refreshVoices().count))]
            }
        }
        // Listing voices the first time takes seconds: do not hold up the caller's other calls.
        interface.concurrentMethods = ["ListVoices", "RefreshVoices"]

        interface.getters["Speaking"] = { .boolean(await service.scheduler.isSpeaking) }
        let monitor = service.screenReader
        interface.getters["ScreenReader"] = { .string(await monitor.current?.name ?? "") }
        interface.getters["ScreenReaderSettings"] = { Self.settingsValue(await monitor.current) }
        interface.getters["Version"] = { .string(Hark.version) }
        return interface
    }

    /// `ScreenReaderSettings`: the default voice's values in Hark's units, and under `system`
    /// those of the voice announcements use.
    static func settingsValue(_ speech: ScreenReaderSpeech?) -> DBusValue {
        guard let speech else { return .vardict([:]) }
        var values = speech.defaultVoice.harkUnits.mapValues(\.dbusValue)
        values["system"] = .vardict(speech.systemVoice.harkUnits.mapValues(\.dbusValue))
        return .vardict(values)
    }

    func publishScreenReader(_ speech: ScreenReaderSpeech?) {
        server.emitPropertiesChanged(path: Hark.objectPath, interface: Hark.speechInterface, changed: [
            "ScreenReader": .string(speech?.name ?? ""), "ScreenReaderSettings": Self.settingsValue(speech),
        ])
    }

    /// Turns a scheduler notice into what the bus sees.
    func publish(_ notice: SpeechNotice) {
        func signal(_ name: String, _ arguments: [DBusValue], to owner: String) {
            guard owner != Utterance.detachedOwner else { return }  // its client has left
            server.emitSignal(path: Hark.objectPath, interface: Hark.speechInterface, name: name, arguments, to: owner)
        }
        switch notice {
        case .started(let id, let owner): signal("UtteranceStarted", [.uint64(id)], to: owner)
        case .range(let id, let owner, let start, let length):
            signal("UtteranceRange", [.uint64(id), .uint32(UInt32(start)), .uint32(UInt32(length))], to: owner)
        case .paused(let id, let owner): signal("UtterancePaused", [.uint64(id)], to: owner)
        case .resumed(let id, let owner): signal("UtteranceResumed", [.uint64(id)], to: owner)
        case .ended(let id, let owner, let reason): signal("UtteranceEnded", [.uint64(id), .uint32(reason.rawValue)], to: owner)
        case .speakingChanged(let speaking):
            server.emitPropertiesChanged(path: Hark.objectPath, interface: Hark.speechInterface, changed: ["Speaking": .boolean(speaking)])
        }
    }
}

private func boundary(_ value: DBusValue) throws(HarkError) -> Bool {
    switch value.uint32Value {
    case 0: return false
    case 1: return true
    default: throw .invalid("boundary \(value.uint32Value.map(String.init) ?? "?") is not 0 (immediate) or 1 (after the current word)")
    }
}

extension SettingValue {
    var dbusValue: DBusValue {
        switch self {
        case .string(let s): .string(s)
        case .double(let d): .double(d)
        }
    }
}

extension Voice {
    var dbusValue: DBusValue {
        var extra: [String: DBusValue] = [:]
        if !variant.isEmpty { extra["variant"] = .string(variant) }
        return .structure([.string(id), .string(name), .string(language), .string(module), .vardict(extra)])
    }
}
