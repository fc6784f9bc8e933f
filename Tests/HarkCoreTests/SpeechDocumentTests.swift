import HarkCore
import Testing

/// The text of `word` in `text`, by the Unicode scalar offsets UtteranceRange reports.
func slice(_ text: String, _ word: SpeechDocument.Word) -> String {
    let scalars = Array(text.unicodeScalars)
    return String(String.UnicodeScalarView(scalars[word.start..<(word.start + word.length)]))
}

@Suite struct PlainTextTests {
    @Test func wordsMapBackToTheCallersText() throws {
        let text = "  Hello, wörld! 👋🏽 naïve\tcafé\n"
        let document = try SpeechDocument.plainText(text)
        #expect(document.words.map { slice(text, $0) } == ["Hello,", "wörld!", "👋🏽", "naïve", "café"])
    }

    @Test func offsetsAreUnicodeScalars() throws {
        // "e" + combining acute is two scalars; the flag is two regional indicators.
        let text = "e\u{301}t\u{E9} 🇩🇪 x"
        let document = try SpeechDocument.plainText(text)
        #expect(document.words.map(\.start) == [0, 5, 8])
        #expect(document.words.map(\.length) == [4, 2, 1])
    }

    @Test func markupHasAMarkBeforeEveryWordAndEscapesMarkup() throws {
        let document = try SpeechDocument.plainText("a <b> & c")
        #expect(document.markup() == #"<speak><mark name="hark-0"/>a <mark name="hark-1"/>&lt;b&gt; <mark name="hark-2"/>&amp; <mark name="hark-3"/>c</speak>"#)
    }

    @Test func resumingStartsAtTheWord() throws {
        let document = try SpeechDocument.plainText("one two three")
        #expect(document.markup(fromWord: 2) == #"<speak>  <mark name="hark-2"/>three</speak>"#)
    }

    @Test func marksMapToWords() {
        #expect(SpeechDocument.wordIndex(ofMark: "hark-12") == 12)
        #expect(SpeechDocument.wordIndex(ofMark: "chapter-1") == nil)
    }

    @Test(arguments: ["", "   ", "\n\t", "\u{1}\u{2}\u{7}"])
    func nothingToSpeakIsRefused(text: String) {
        #expect(throws: HarkError.self) { try SpeechDocument.plainText(text) }
    }

    @Test func controlCharactersBecomeSpaces() throws {
        let document = try SpeechDocument.plainText("a\u{1}b")
        #expect(document.words.count == 2)
        #expect(!document.markup().unicodeScalars.contains("\u{1}"))
    }

    @Test func hugeTextsAreRefusedWithTheLimit() {
        let text = String(repeating: "a ", count: SpeechDocument.maximumLength)
        #expect(throws: HarkError.self) { try SpeechDocument.plainText(text) }
        do { _ = try SpeechDocument.plainText(text) } catch {
            #expect(error.message.contains("\(SpeechDocument.maximumLength)"))
        }
    }
}

@Suite struct SSMLTests {
    func error(_ text: String) -> String? {
        do {
            _ = try SpeechDocument.ssml(text)
            return nil
        } catch {
            return error.message
        }
    }

    @Test func wordsInsideContainersGetMarksAndOffsetsIntoTheMarkup() throws {
        let text = #"<speak>Hello <prosody rate="slow">big &amp; bold</prosody> world</speak>"#
        let document = try SpeechDocument.ssml(text)
        #expect(document.words.map { slice(text, $0) } == ["Hello", "big", "&amp;", "bold", "world"])
        #expect(document.markup().contains(#"<prosody rate="slow"><mark name="hark-1"/>big"#))
    }

    @Test func sayAsIsOneUnit() throws {
        let text = #"<speak>Call <say-as interpret-as="telephone">555 1234</say-as> now</speak>"#
        let document = try SpeechDocument.ssml(text)
        #expect(document.words.map { slice(text, $0) } == ["Call", #"<say-as interpret-as="telephone">555 1234</say-as>"#, "now"])
    }

    @Test func resumingKeepsTheEnclosingElements() throws {
        let document = try SpeechDocument.ssml(#"<speak>a <break time="1s"/><prosody pitch="high">b c</prosody></speak>"#)
        let resumed = document.markup(fromWord: 2)
        #expect(resumed == #"<speak> <prosody pitch="high"> <mark name="hark-2"/>c</prosody></speak>"#)
    }

    @Test func xmlDeclarationAndCommentsAreFine() throws {
        let document = try SpeechDocument.ssml("<?xml version=\"1.0\"?>\n<!-- hi --><speak>ok<!-- x --></speak>\n")
        #expect(document.words.count == 1)
    }

    @Test func dtdsAreRefusedNeverRead() {
        #expect(error(#"<!DOCTYPE speak SYSTEM "file:///etc/passwd"><speak>x</speak>"#)?.contains("DTD") == true)
        let bomb = #"<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">]><speak>&lol2;</speak>"#
        #expect(error(bomb)?.contains("DTD") == true)
    }

    @Test func unknownEntitiesAreRefused() {
        #expect(error("<speak>&xxe;</speak>")?.contains("&xxe;") == true)
        #expect(error("<speak>a & b</speak>") != nil)
        #expect(error("<speak>&#0;</speak>") != nil)
        #expect(error("<speak>&#x1F600; &#65;</speak>") == nil)
    }

    @Test(arguments: [
        "<speak>unclosed",
        "<speak><p>a</speak>",
        "<speak>a</speak><speak>b</speak>",
        "<voice>a</voice>",
        "hello",
        "<speak a=1>x</speak>",
        "<speak a='1' a='2'>x</speak>",
        "<speak><say-as>a</p></say-as></speak>",
        "<speak></speak>",
        "<speak><break/></speak>",
    ])
    func malformedIsRefused(text: String) {
        #expect(error(text) != nil, "accepted: \(text)")
    }

    @Test func errorsSayWhere() {
        #expect(error("<speak><p>a</speak>")?.contains("character") == true)
    }

    @Test func deepNestingIsRefused() {
        let deep = "<speak>" + String(repeating: "<p>", count: 100) + "x" + String(repeating: "</p>", count: 100) + "</speak>"
        #expect(error(deep)?.contains("deeper") == true)
    }
}
