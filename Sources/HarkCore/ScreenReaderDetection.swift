/// A process as the detector sees it.
public struct ProcessInfoEntry: Sendable, Equatable {
    public var pid: Int32
    /// The kernel's name for it (`/proc/PID/comm`): "orca" for Orca's launcher script.
    public var name: String
    public var uid: UInt32
    public var arguments: [String]

    public init(pid: Int32, name: String, uid: UInt32, arguments: [String]) {
        self.pid = pid
        self.name = name
        self.uid = uid
        self.arguments = arguments
    }
}

/// Which screen reader runs for this user, and where its settings live.
public enum ScreenReaderKind: Sendable, Equatable {
    /// Orca; `settingsDirectory` is the `-u`/`--user-prefs` folder given on its command line.
    case orca(settingsDirectory: String?)
    case fenrir

    public var name: String {
        switch self {
        case .orca: "orca"
        case .fenrir: "fenrir"
        }
    }
}

public enum ScreenReaderDetector {
    /// The screen reader among `processes` that belongs to `uid` (Orca itself checks
    /// `pgrep -u $UID -x orca`). Orca wins when both run.
    public static func detect(processes: [ProcessInfoEntry], uid: UInt32) -> ScreenReaderKind? {
        let mine = processes.filter { $0.uid == uid }
        if let orca = mine.first(where: { $0.name == "orca" }) {
            return .orca(settingsDirectory: userPrefsDirectory(orca.arguments))
        }
        if mine.contains(where: { $0.name == "fenrir" || $0.name == "fenrir-daemon" }) { return .fenrir }
        return nil
    }

    /// `orca -u DIR`, `--user-prefs DIR`, `--user-prefs=DIR`.
    static func userPrefsDirectory(_ arguments: [String]) -> String? {
        var iterator = arguments.makeIterator()
        while let argument = iterator.next() {
            if argument == "-u" || argument == "--user-prefs" { return iterator.next() }
            if argument.hasPrefix("--user-prefs=") { return String(argument.dropFirst("--user-prefs=".count)) }
        }
        return nil
    }
}
