// swift-tools-version:6.0
import PackageDescription

// Hark: a desktop accessibility speech bridge. The layers, from the bus inward:
//   harkd / hark            executables (daemon, CLI)
//   HarkService             the D-Bus interfaces wired to the core and the adapters
//   DBus, SpeechDispatcher, PulseAudio, Recognition
//                           thin adapters, the only code that touches the C libraries
//   HarkCore                the domain: options, validation, SSML, the speech queue (no C)
//   C* targets              system libraries (+ a C shim where Swift cannot call)
let package = Package(
    name: "Hark",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "harkd", targets: ["harkd"]),
        .executable(name: "hark", targets: ["hark"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
    ],
    targets: [
        // C libraries, through pkg-config.
        .systemLibrary(name: "CDBus", pkgConfig: "dbus-1", providers: [.apt(["libdbus-1-dev"])]),
        .systemLibrary(name: "CSpeechd", pkgConfig: "speech-dispatcher", providers: [.apt(["libspeechd-dev"])]),
        .systemLibrary(name: "CPulse", pkgConfig: "libpulse", providers: [.apt(["libpulse-dev"])]),
        .systemLibrary(name: "CPocketSphinx", pkgConfig: "pocketsphinx", providers: [.apt(["libpocketsphinx-dev", "pocketsphinx-en-us"])]),
        // PocketSphinx's configuration entry point is variadic: a few lines of C call it for Swift.
        .target(name: "CPocketSphinxShim", dependencies: ["CPocketSphinx"]),

        // The domain, free of C and of D-Bus types.
        .target(name: "HarkCore"),

        // Adapters.
        .target(name: "DBus", dependencies: ["CDBus"]),
        .target(name: "SpeechDispatcher", dependencies: ["CSpeechd", "HarkCore"]),
        .target(name: "PulseAudio", dependencies: ["CPulse"]),
        .target(name: "Recognition", dependencies: ["CPocketSphinxShim"]),

        // The service: D-Bus interfaces over the core and the adapters.
        .executableTarget(name: "embed-interfaces", path: "Sources/embed-interfaces"),
        .plugin(name: "EmbedInterfaces", capability: .buildTool(), dependencies: ["embed-interfaces"]),
        .target(
            name: "HarkService",
            dependencies: [
                "HarkCore", "DBus", "SpeechDispatcher", "PulseAudio", "Recognition",
                .product(name: "Logging", package: "swift-log"),
            ],
            plugins: ["EmbedInterfaces"]
        ),

        .executableTarget(
            name: "harkd",
            dependencies: [
                "HarkService", "HarkCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "hark",
            dependencies: [
                "DBus", "HarkCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),

        // `make bench`: Hark measured against its baselines in the same run.
        .executableTarget(
            name: "hark-bench",
            dependencies: ["DBus", "SpeechDispatcher"],
            path: "Sources/hark-bench"
        ),

        .testTarget(name: "HarkCoreTests", dependencies: ["HarkCore"]),
        .testTarget(name: "DBusTests", dependencies: ["DBus"]),
        .testTarget(name: "IntegrationTests", dependencies: ["DBus", "HarkService", "PulseAudio"]),
    ],
    swiftLanguageModes: [.v6]
)
