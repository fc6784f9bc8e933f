import CPocketSphinxShim
import Foundation

/// An installed PocketSphinx model: acoustic model folder and pronunciation dictionary.
public struct AcousticModel: Sendable, Equatable {
    public var language: String
    public var acousticModelDirectory: String
    public var dictionaryPath: String

    /// Debian's `pocketsphinx-en-us`.
    public static let englishUS = AcousticModel(
        language: "en-US",
        acousticModelDirectory: "/usr/share/pocketsphinx/model/en-us/en-us",
        dictionaryPath: "/usr/share/pocketsphinx/model/en-us/cmudict-en-us.dict"
    )

    /// Whether the model's files are on this machine.
    public var isInstalled: Bool {
        let files = FileManager.default
        return files.fileExists(atPath: acousticModelDirectory + "/mdef")
            && files.fileExists(atPath: dictionaryPath)
    }

    /// The models installed here, by language.
    public static func installed() -> [AcousticModel] {
        [englishUS].filter(\.isInstalled)
    }
}

/// A loaded PocketSphinx decoder. Not thread-safe: one owner at a time.
public final class Decoder {
    let raw: OpaquePointer

    public init?(model: AcousticModel, sampleRate: Float = 16_000) {
        guard let decoder = hark_ps_decoder_create(model.acousticModelDirectory, model.dictionaryPath, sampleRate)
        else { return nil }
        raw = decoder
    }

    deinit { ps_free(raw) }
}
