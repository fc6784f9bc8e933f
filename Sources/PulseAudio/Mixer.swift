import CPulse
import Foundation

/// A playback stream (sink input) as the mixer sees it.
public struct PlaybackStream: Sendable, Equatable {
    public var index: UInt32
    public var applicationName: String
    public var binary: String
    public var mediaName: String
    public var role: String
    /// Per-channel volumes (PA_VOLUME_NORM = 65536 is 100 %).
    public var volumes: [UInt32]
    public var volumeWritable: Bool

    public init(index: UInt32, applicationName: String, binary: String, mediaName: String, role: String,
                volumes: [UInt32], volumeWritable: Bool) {
        self.index = index
        self.applicationName = applicationName
        self.binary = binary
        self.mediaName = mediaName
        self.role = role
        self.volumes = volumes
        self.volumeWritable = volumeWritable
    }
}

public enum MixerEvent: Sendable, Equatable {
    case streamAdded(UInt32)
    case streamChanged(UInt32)
    case streamRemoved(UInt32)
    /// The sound server went away; the mixer must be created again.
    case disconnected
}

public struct MixerError: Error, CustomStringConvertible {
    public var description: String
}

/// The sound server's playback streams, through libpulse's threaded main loop (PulseAudio and
/// pipewire-pulse alike). Callbacks run on libpulse's thread and only hand results over; the
/// main loop lock is taken only outside them.
public final class Mixer: @unchecked Sendable {  // libpulse objects are used under the main loop lock
    private let mainloop: OpaquePointer
    private let context: OpaquePointer
    public let events: AsyncStream<MixerEvent>
    private let eventSink: EventSink

    public init(clientName: String = "hark") throws {
        guard let mainloop = pa_threaded_mainloop_new() else { throw MixerError(description: "cannot create libpulse's main loop") }
        self.mainloop = mainloop
        let properties = pa_proplist_new()
        pa_proplist_sets(properties, PA_PROP_APPLICATION_NAME, clientName)
        pa_proplist_sets(properties, PA_PROP_APPLICATION_ID, "org.hark.Hark1")
        guard let context = pa_context_new_with_proplist(pa_threaded_mainloop_get_api(mainloop), clientName, properties) else {
            pa_proplist_free(properties)
            pa_threaded_mainloop_free(mainloop)
            throw MixerError(description: "cannot create a libpulse context")
        }
        pa_proplist_free(properties)
        self.context = context
        let (stream, continuation) = AsyncStream<MixerEvent>.makeStream(bufferingPolicy: .bufferingNewest(256))
        events = stream
        eventSink = EventSink(continuation: continuation, mainloop: mainloop)

        let sink = Unmanaged.passUnretained(eventSink).toOpaque()
        pa_context_set_state_callback(context, { context, data in
            let sink = Unmanaged<EventSink>.fromOpaque(data!).takeUnretainedValue()
            switch pa_context_get_state(context) {
            case PA_CONTEXT_FAILED, PA_CONTEXT_TERMINATED: sink.continuation.yield(.disconnected)
            default: break
            }
            pa_threaded_mainloop_signal(sink.mainloop, 0)
        }, sink)
        pa_context_set_subscribe_callback(context, { _, type, index, data in
            let sink = Unmanaged<EventSink>.fromOpaque(data!).takeUnretainedValue()
            guard type.rawValue & PA_SUBSCRIPTION_EVENT_FACILITY_MASK.rawValue == PA_SUBSCRIPTION_EVENT_SINK_INPUT.rawValue else { return }
            switch type.rawValue & PA_SUBSCRIPTION_EVENT_TYPE_MASK.rawValue {
            case PA_SUBSCRIPTION_EVENT_NEW.rawValue: sink.continuation.yield(.streamAdded(index))
            case PA_SUBSCRIPTION_EVENT_REMOVE.rawValue: sink.continuation.yield(.streamRemoved(index))
            default: sink.continuation.yield(.streamChanged(index))
            }
        }, sink)

        pa_threaded_mainloop_lock(mainloop)
        defer { pa_threaded_mainloop_unlock(mainloop) }
        guard pa_threaded_mainloop_start(mainloop) >= 0, pa_context_connect(context, nil, PA_CONTEXT_NOAUTOSPAWN, nil) >= 0 else {
            throw MixerError(description: "cannot connect to the sound server: \(String(cString: pa_strerror(pa_context_errno(context))))")
        }
        // Waiting here is allowed: this is not a libpulse callback.
        while true {
            let state = pa_context_get_state(context)
            if state == PA_CONTEXT_READY { break }
            if state == PA_CONTEXT_FAILED || state == PA_CONTEXT_TERMINATED {
                throw MixerError(description: "cannot connect to the sound server: \(String(cString: pa_strerror(pa_context_errno(context))))")
            }
            pa_threaded_mainloop_wait(mainloop)
        }
        pa_operation_unref(pa_context_subscribe(context, PA_SUBSCRIPTION_MASK_SINK_INPUT, nil, nil))
    }

    deinit {
        pa_threaded_mainloop_lock(mainloop)
        pa_context_disconnect(context)
        pa_context_unref(context)
        pa_threaded_mainloop_unlock(mainloop)
        pa_threaded_mainloop_stop(mainloop)
        pa_threaded_mainloop_free(mainloop)
        eventSink.continuation.finish()
    }

    /// The sound server's name, e.g. "pulseaudio" or "PulseAudio (on PipeWire 0.3.65)".
    public var serverName: String {
        pa_threaded_mainloop_lock(mainloop)
        defer { pa_threaded_mainloop_unlock(mainloop) }
        return pa_context_get_server(context).map { String(cString: $0) } ?? ""
    }

    /// Every playback stream now.
    public func streams() async -> [PlaybackStream] {
        await withCheckedContinuation { continuation in
            let box = Unmanaged.passRetained(StreamListBox(continuation)).toOpaque()
            pa_threaded_mainloop_lock(mainloop)
            let operation = pa_context_get_sink_input_info_list(context, { _, info, eol, data in
                let box = Unmanaged<StreamListBox>.fromOpaque(data!)
                if eol != 0 || info == nil {
                    box.takeRetainedValue().finish()
                } else {
                    box.takeUnretainedValue().streams.append(PlaybackStream(info!.pointee))
                }
            }, box)
            if let operation {
                pa_operation_unref(operation)
            } else {
                Unmanaged<StreamListBox>.fromOpaque(box).takeRetainedValue().finish()
            }
            pa_threaded_mainloop_unlock(mainloop)
        }
    }

    /// Sets a stream's per-channel volumes; false if the server refused (the stream is gone).
    @discardableResult
    public func setVolumes(_ index: UInt32, _ volumes: [UInt32]) async -> Bool {
        guard !volumes.isEmpty, volumes.count <= Int(PA_CHANNELS_MAX) else { return false }
        return await withCheckedContinuation { continuation in
            var cvolume = pa_cvolume()
            cvolume.channels = UInt8(volumes.count)
            withUnsafeMutableBytes(of: &cvolume.values) { raw in
                let values = raw.bindMemory(to: UInt32.self)
                for (channel, volume) in volumes.enumerated() { values[channel] = volume }
            }
            let box = Unmanaged.passRetained(SuccessBox(continuation)).toOpaque()
            pa_threaded_mainloop_lock(mainloop)
            let operation = pa_context_set_sink_input_volume(context, index, &cvolume, { _, success, data in
                Unmanaged<SuccessBox>.fromOpaque(data!).takeRetainedValue().finish(success != 0)
            }, box)
            if let operation {
                pa_operation_unref(operation)
            } else {
                Unmanaged<SuccessBox>.fromOpaque(box).takeRetainedValue().finish(false)
            }
            pa_threaded_mainloop_unlock(mainloop)
        }
    }

    /// `volume` attenuated by `decibels` (≤ 0), on libpulse's cubic volume scale.
    public static func attenuate(_ volume: UInt32, decibels: Double) -> UInt32 {
        pa_sw_volume_multiply(volume, pa_sw_volume_from_dB(decibels))
    }

    private final class EventSink: @unchecked Sendable {  // immutable; the continuation is thread-safe
        let continuation: AsyncStream<MixerEvent>.Continuation
        let mainloop: OpaquePointer
        init(continuation: AsyncStream<MixerEvent>.Continuation, mainloop: OpaquePointer) {
            self.continuation = continuation
            self.mainloop = mainloop
        }
    }

    private final class StreamListBox {
        var streams: [PlaybackStream] = []
        let continuation: CheckedContinuation<[PlaybackStream], Never>
        init(_ continuation: CheckedContinuation<[PlaybackStream], Never>) { self.continuation = continuation }
        func finish() { continuation.resume(returning: streams) }
    }

    private final class SuccessBox {
        let continuation: CheckedContinuation<Bool, Never>
        init(_ continuation: CheckedContinuation<Bool, Never>) { self.continuation = continuation }
        func finish(_ success: Bool) { continuation.resume(returning: success) }
    }
}

extension PlaybackStream {
    init(_ info: pa_sink_input_info) {
        func property(_ key: String) -> String {
            info.proplist.flatMap { pa_proplist_gets($0, key) }.map { String(cString: $0) } ?? ""
        }
        var volume = info.volume
        let count = Int(volume.channels)
        let volumes = withUnsafeBytes(of: &volume.values) { Array($0.bindMemory(to: UInt32.self).prefix(count)) }
        self.init(index: info.index, applicationName: property(PA_PROP_APPLICATION_NAME),
                  binary: property(PA_PROP_APPLICATION_PROCESS_BINARY), mediaName: property(PA_PROP_MEDIA_NAME),
                  role: property(PA_PROP_MEDIA_ROLE), volumes: volumes,
                  volumeWritable: info.has_volume != 0 && info.volume_writable != 0)
    }
}
