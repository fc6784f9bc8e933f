import Foundation

/// Hark's units (multiples, 0–1) to Speech Dispatcher's −100…100 scale, exactly as API.md writes them.
public enum SpeechUnits {
    public static let rateRange: ClosedRange<Double> = 0.25...4
    public static let pitchRange: ClosedRange<Double> = 0.5...2
    public static let volumeRange: ClosedRange<Double> = 0...1

    /// round(50·log2 rate): 0.25 → −100, 1 → 0, 4 → 100.
    public static func speechDispatcherRate(_ rate: Double) -> Int {
        clampSSIP((50 * log2(rate)).rounded())
    }

    /// round(100·log2 pitch): 0.5 → −100, 1 → 0, 2 → 100.
    public static func speechDispatcherPitch(_ pitch: Double) -> Int {
        clampSSIP((100 * log2(pitch)).rounded())
    }

    /// round(200·volume − 100): 0 → −100, 0.5 → 0, 1 → 100.
    public static func speechDispatcherVolume(_ volume: Double) -> Int {
        clampSSIP((200 * volume - 100).rounded())
    }

    /// The inverse mappings, for showing Speech Dispatcher values in Hark's units.
    public static func rate(fromSpeechDispatcher value: Int) -> Double { pow(2, Double(value) / 50) }
    public static func pitch(fromSpeechDispatcher value: Int) -> Double { pow(2, Double(value) / 100) }
    public static func volume(fromSpeechDispatcher value: Int) -> Double { (Double(value) + 100) / 200 }

    private static func clampSSIP(_ value: Double) -> Int {
        Int(min(100, max(-100, value)))
    }
}
