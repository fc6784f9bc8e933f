import CPulse
import Foundation

/// What the sound server says about itself.
public struct SoundServerInfo: Sendable, Equatable {
    public var name: String
    public var version: String
    public var defaultSink: String
    public var defaultSource: String

    /// PipeWire's PulseAudio server names itself "PulseAudio (on PipeWire x.y.z)".
    public var isPipeWire: Bool { name.contains("PipeWire") }
}

public enum SoundServer {
    /// Connects, asks for the server info, and disconnects. nil when no server answers
    /// within `timeout`.
    public static func info(timeout: Duration = .seconds(2)) -> SoundServerInfo? {
        guard let mainloop = pa_mainloop_new() else { return nil }
        defer { pa_mainloop_free(mainloop) }
        guard let context = pa_context_new(pa_mainloop_get_api(mainloop), "hark") else { return nil }
        defer { pa_context_unref(context) }
        guard pa_context_connect(context, nil, PA_CONTEXT_NOFLAGS, nil) >= 0 else { return nil }
        defer { pa_context_disconnect(context) }

        let box = InfoBox()
        let deadline = ContinuousClock.now + timeout
        var requested = false
        while ContinuousClock.now < deadline, box.info == nil {
            switch pa_context_get_state(context) {
            case PA_CONTEXT_READY where !requested:
                requested = true
                pa_operation_unref(pa_context_get_server_info(context, { _, info, data in
                    guard let info, let data else { return }
                    Unmanaged<InfoBox>.fromOpaque(data).takeUnretainedValue().info = SoundServerInfo(
                        name: info.pointee.server_name.map { String(cString: $0) } ?? "",
                        version: info.pointee.server_version.map { String(cString: $0) } ?? "",
                        defaultSink: info.pointee.default_sink_name.map { String(cString: $0) } ?? "",
                        defaultSource: info.pointee.default_source_name.map { String(cString: $0) } ?? "")
                }, Unmanaged.passUnretained(box).toOpaque()))
            case PA_CONTEXT_FAILED, PA_CONTEXT_TERMINATED:
                return nil
            default:
                break
            }
            // Wait at most 100 ms per round so the deadline is kept.
            pa_mainloop_prepare(mainloop, 100_000)
            pa_mainloop_poll(mainloop)
            pa_mainloop_dispatch(mainloop)
        }
        return box.info
    }

    private final class InfoBox { var info: SoundServerInfo? }
}
