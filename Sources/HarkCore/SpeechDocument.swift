/// The text of one utterance, prepared for Speech Dispatcher: validated, split into words,
/// and rendered as SSML with an index mark before every word, so that Speech Dispatcher's
/// index-mark events tell which word is about to sound.
///
/// Offsets are Unicode scalar offsets into the text exactly as the client sent it (for SSML,
/// into the markup), as `UtteranceRange` promises.
public struct SpeechDocument: Sendable, Equatable {
    /// Texts longer than this many Unicode scalars are refused (InvalidArgument).
    public static let maximumLength = 50_000
    /// Deeper element nesting than this is refused.
    public static let maximumDepth = 64
    /// Index marks that Hark inserts are named with this prefix and the word's number.
    public static let markPrefix = "hark-"

    public struct Word: Sendable, Equatable {
        public var start: Int
        public var length: Int
    }

    enum Piece: Sendable, Equatable {
        /// Markup always sent: container tags and the whitespace between words.
        case always(String)
        /// A word (or a tag such as `say-as` spoken as one unit), preceded by its mark.
        case word(Int, String)
        /// A tag without words (`break`, a client's `mark`) that sits before word `next`.
        case leaf(next: Int, String)
    }

    public let words: [Word]
    let pieces: [Piece]

    /// SSML for Speech Dispatcher, starting at word `first` (0 for the whole text; a later
    /// word to resume after a pause). Container elements are kept so prosody, voice and
    /// language changes still apply to the words that follow.
    public func markup(fromWord first: Int = 0) -> String {
        var out = ""
        for piece in pieces {
            switch piece {
            case .always(let text):
                out += text
            case .word(let index, let text) where index >= first:
                out += "<mark name=\"\(Self.markPrefix)\(index)\"/>" + text
            case .leaf(let next, let text) where next >= first:
                out += text
            default:
                break
            }
        }
        return out
    }

    /// The word number carried by an index mark Hark inserted, nil for any other mark.
    public static func wordIndex(ofMark name: String) -> Int? {
        guard name.hasPrefix(markPrefix) else { return nil }
        return Int(name.dropFirst(markPrefix.count))
    }
}

// MARK: - Plain text

extension SpeechDocument {
    /// A plain-text utterance. Characters XML cannot carry (control characters) become spaces.
    public static func plainText(_ text: String) throws(HarkError) -> SpeechDocument {
        let scalars = Array(text.unicodeScalars)
        try checkLength(scalars.count)
        var words: [Word] = []
        var pieces: [Piece] = [.always("<speak>")]
        var index = 0
        while index < scalars.count {
            let start = index
            let isSpace = isWhitespaceOrControl(scalars[index])
            while index < scalars.count, isWhitespaceOrControl(scalars[index]) == isSpace { index += 1 }
            if isSpace {
                pieces.append(.always(" "))
            } else {
                let run = String(String.UnicodeScalarView(scalars[start..<index]))
                pieces.append(.word(words.count, escapeText(run)))
                words.append(Word(start: start, length: index - start))
            }
        }
        pieces.append(.always("</speak>"))
        guard !words.isEmpty else {
            throw .invalid(text.isEmpty ? "the text is empty: there is nothing to speak"
                                        : "the text has only spaces or control characters: there is nothing to speak")
        }
        return SpeechDocument(words: words, pieces: pieces)
    }

    static func checkLength(_ count: Int) throws(HarkError) {
        guard count <= maximumLength else {
            throw .invalid("the text is \(count) characters long; the limit is \(maximumLength)")
        }
    }

    static func isWhitespaceOrControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.properties.isWhitespace || !isXMLCharacter(scalar) || scalar.properties.generalCategory == .control
    }

    static func isXMLCharacter(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x9, 0xA, 0xD: true
        case 0x20...0xD7FF, 0xE000...0xFFFD, 0x10000...0x10FFFF: true
        default: false
        }
    }

    static func escapeText(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}

// MARK: - SSML

extension SpeechDocument {
    /// Elements whose text is spoken word by word, with a mark before each word.
    static let containerElements: Set<String> = [
        "speak", "p", "s", "paragraph", "sentence", "prosody", "emphasis", "voice", "lang",
    ]

    /// An SSML utterance: well-formed XML with a `speak` root. DTDs, entity declarations and
    /// entity references other than XML's five and numeric ones are refused, never resolved.
    public static func ssml(_ text: String) throws(HarkError) -> SpeechDocument {
        var parser = SSMLParser(scalars: Array(text.unicodeScalars))
        try checkLength(parser.scalars.count)
        return try parser.parse()
    }
}

private struct SSMLParser {
    let scalars: [Unicode.Scalar]
    var position = 0
    var words: [SpeechDocument.Word] = []
    var pieces: [SpeechDocument.Piece] = []
    var stack: [String] = []

    init(scalars: [Unicode.Scalar]) { self.scalars = scalars }

    func fail(_ what: String, at offset: Int? = nil) -> HarkError {
        .invalid("invalid SSML at character \(offset ?? position): \(what)")
    }

    func text(_ range: Range<Int>) -> String {
        String(String.UnicodeScalarView(scalars[range]))
    }

    func starts(with literal: String, at offset: Int? = nil) -> Bool {
        var index = offset ?? position
        for scalar in literal.unicodeScalars {
            guard index < scalars.count, scalars[index] == scalar else { return false }
            index += 1
        }
        return true
    }

    mutating func parse() throws(HarkError) -> SpeechDocument {
        // Prolog: whitespace, an XML declaration, comments.
        try skipMisc()
        guard position < scalars.count, scalars[position] == "<" else {
            throw fail(scalars.isEmpty ? "the text is empty" : "SSML must start with a <speak> element")
        }
        let rootStart = position
        let root = try parseTag()
        guard case .open(let name, let selfClosing) = root, name == "speak" else {
            throw fail("the root element must be <speak>", at: rootStart)
        }
        pieces.append(.always(text(rootStart..<position)))
        if !selfClosing {
            stack.append(name)
            try parseContent()
        }
        try skipMisc()
        guard position == scalars.count else { throw fail("text after the closing </speak>") }
        guard !words.isEmpty else { throw .invalid("the SSML has no text to speak") }
        return SpeechDocument(words: words, pieces: pieces)
    }

    /// Whitespace, comments and processing instructions outside the root.
    mutating func skipMisc() throws(HarkError) {
        while position < scalars.count {
            if scalars[position].properties.isWhitespace {
                position += 1
            } else if starts(with: "<!--") {
                try skipComment()
            } else if starts(with: "<?") {
                try skipProcessingInstruction()
            } else if starts(with: "<!") {
                throw fail("DTDs and entity declarations are not allowed in SSML")
            } else {
                return
            }
        }
    }

    mutating func skipComment() throws(HarkError) {
        let start = position
        position += 4
        while position < scalars.count, !starts(with: "-->") { position += 1 }
        guard position < scalars.count else { throw fail("unterminated comment", at: start) }
        position += 3
    }

    mutating func skipProcessingInstruction() throws(HarkError) {
        let start = position
        while position < scalars.count, !starts(with: "?>") { position += 1 }
        guard position < scalars.count else { throw fail("unterminated processing instruction", at: start) }
        position += 2
    }

    enum Tag { case open(String, selfClosing: Bool), close(String) }

    /// Parses `<name attr="v"...>`, `<name/>` or `</name>` at `position`.
    mutating func parseTag() throws(HarkError) -> Tag {
        let start = position
        position += 1  // <
        let closing = position < scalars.count && scalars[position] == "/"
        if closing { position += 1 }
        let name = try parseName()
        if closing {
            skipSpaces()
            guard position < scalars.count, scalars[position] == ">" else { throw fail("malformed closing tag </\(name)", at: start) }
            position += 1
            return .close(name)
        }
        var seen = Set<String>()
        while true {
            let hadSpace = skipSpaces()
            guard position < scalars.count else { throw fail("unterminated tag <\(name)", at: start) }
            if scalars[position] == ">" {
                position += 1
                return .open(name, selfClosing: false)
            }
            if starts(with: "/>") {
                position += 2
                return .open(name, selfClosing: true)
            }
            guard hadSpace else { throw fail("malformed tag <\(name)", at: start) }
            let attribute = try parseName()
            guard seen.insert(attribute).inserted else { throw fail("attribute \(attribute) appears twice in <\(name)>") }
            skipSpaces()
            guard position < scalars.count, scalars[position] == "=" else { throw fail("attribute \(attribute) of <\(name)> has no value") }
            position += 1
            skipSpaces()
            guard position < scalars.count, scalars[position] == "\"" || scalars[position] == "'" else {
                throw fail("the value of attribute \(attribute) must be quoted")
            }
            let quote = scalars[position]
            position += 1
            while position < scalars.count, scalars[position] != quote {
                if scalars[position] == "<" { throw fail("'<' inside the value of attribute \(attribute)") }
                if scalars[position] == "&" { _ = try parseReference() } else {
                    try checkCharacter(scalars[position])
                    position += 1
                }
            }
            guard position < scalars.count else { throw fail("unterminated value of attribute \(attribute)") }
            position += 1
        }
    }

    @discardableResult
    mutating func skipSpaces() -> Bool {
        let start = position
        while position < scalars.count, [" ", "\t", "\n", "\r"].contains(scalars[position]) { position += 1 }
        return position > start
    }

    mutating func parseName() throws(HarkError) -> String {
        let start = position
        while position < scalars.count {
            let c = scalars[position]
            let ok = c.properties.isAlphabetic || c == "_" || c == ":" || (position > start && (c == "-" || c == "." || c.properties.numericType != nil))
            guard ok else { break }
            position += 1
        }
        guard position > start else { throw fail("expected an element or attribute name") }
        return text(start..<position)
    }

    func checkCharacter(_ scalar: Unicode.Scalar) throws(HarkError) {
        guard SpeechDocument.isXMLCharacter(scalar) else {
            throw fail("control character U+\(String(scalar.value, radix: 16, uppercase: true)) is not allowed in XML")
        }
    }

    /// Parses `&name;` or `&#N;` at `position` and returns the character it stands for.
    mutating func parseReference() throws(HarkError) -> Unicode.Scalar {
        let start = position
        position += 1
        while position < scalars.count, scalars[position] != ";", position - start < 12 { position += 1 }
        guard position < scalars.count, scalars[position] == ";" else { throw fail("'&' must start an entity reference such as &amp;", at: start) }
        let name = text((start + 1)..<position)
        position += 1
        switch name {
        case "lt": return "<"
        case "gt": return ">"
        case "amp": return "&"
        case "quot": return "\""
        case "apos": return "'"
        default:
            var value: UInt32?
            if name.hasPrefix("#x") || name.hasPrefix("#X") { value = UInt32(name.dropFirst(2), radix: 16) }
            else if name.hasPrefix("#") { value = UInt32(name.dropFirst(), radix: 10) }
            else { throw fail("entity &\(name); is not allowed (only XML's own entities and numeric references; DTDs are never read)", at: start) }
            guard let value, let scalar = Unicode.Scalar(value), SpeechDocument.isXMLCharacter(scalar) else {
                throw fail("&\(name); is not a valid character reference", at: start)
            }
            return scalar
        }
    }

    /// Element content up to the end tag of the element on top of the stack.
    mutating func parseContent() throws(HarkError) {
        while position < scalars.count {
            if starts(with: "<!--") {
                try skipComment()
            } else if starts(with: "<![CDATA[") {
                try parseCDATA()
            } else if starts(with: "<?") {
                try skipProcessingInstruction()
            } else if starts(with: "<!") {
                throw fail("DTDs and entity declarations are not allowed in SSML")
            } else if scalars[position] == "<" {
                let start = position
                switch try parseTag() {
                case .close(let name):
                    guard name == stack.last else {
                        throw fail("</\(name)> closes <\(stack.last ?? "")>", at: start)
                    }
                    stack.removeLast()
                    pieces.append(.always(text(start..<position)))
                    if stack.isEmpty { return }
                case .open(let name, let selfClosing):
                    if selfClosing {
                        pieces.append(.leaf(next: words.count, text(start..<position)))
                    } else if SpeechDocument.containerElements.contains(name) {
                        stack.append(name)
                        guard stack.count <= SpeechDocument.maximumDepth else { throw fail("elements nested deeper than \(SpeechDocument.maximumDepth)") }
                        pieces.append(.always(text(start..<position)))
                    } else {
                        try parseAtomicElement(name, start: start)
                    }
                }
            } else {
                try parseText()
            }
        }
        throw fail("<\(stack.last ?? "speak")> is not closed")
    }

    /// Text up to the next `<`, split into words.
    mutating func parseText() throws(HarkError) {
        var wordStart: Int?
        func endWord(_ parser: inout SSMLParser, at end: Int) {
            guard let start = wordStart else { return }
            parser.pieces.append(.word(parser.words.count, parser.text(start..<end)))
            parser.words.append(.init(start: start, length: end - start))
            wordStart = nil
        }
        var spaceStart: Int?
        while position < scalars.count, scalars[position] != "<" {
            let start = position
            let character: Unicode.Scalar
            if scalars[position] == "&" {
                character = try parseReference()
            } else {
                character = scalars[position]
                try checkCharacter(character)
                if character == ">" && starts(with: "]]>") { throw fail("']]>' is not allowed in text") }
                position += 1
            }
            if character.properties.isWhitespace {
                endWord(&self, at: start)
                if spaceStart == nil { spaceStart = start }
            } else {
                if let space = spaceStart {
                    pieces.append(.always(text(space..<start)))
                    spaceStart = nil
                }
                if wordStart == nil { wordStart = start }
            }
        }
        endWord(&self, at: position)
        if let space = spaceStart { pieces.append(.always(text(space..<position))) }
    }

    /// `<![CDATA[...]]>`: literal text, re-sent escaped.
    mutating func parseCDATA() throws(HarkError) {
        let start = position
        position += 9
        let contentStart = position
        while position < scalars.count, !starts(with: "]]>") {
            try checkCharacter(scalars[position])
            position += 1
        }
        guard position < scalars.count else { throw fail("unterminated CDATA section", at: start) }
        let content = contentStart..<position
        position += 3
        var index = content.lowerBound
        while index < content.upperBound {
            let runStart = index
            let isSpace = scalars[index].properties.isWhitespace
            while index < content.upperBound, scalars[index].properties.isWhitespace == isSpace { index += 1 }
            let run = SpeechDocument.escapeText(text(runStart..<index))
            if isSpace {
                pieces.append(.always(run))
            } else {
                pieces.append(.word(words.count, run))
                words.append(.init(start: runStart, length: index - runStart))
            }
        }
    }

    /// An element such as `say-as`, `sub` or `phoneme`, whose content must stay whole: it is
    /// spoken as one unit, with one mark before it, and its range covers the whole element.
    mutating func parseAtomicElement(_ name: String, start: Int) throws(HarkError) {
        var depth = 1
        var hasText = false
        while depth > 0 {
            guard position < scalars.count else { throw fail("<\(name)> is not closed", at: start) }
            if starts(with: "<!--") {
                try skipComment()
            } else if starts(with: "<![CDATA[") {
                throw fail("CDATA inside <\(name)> is not supported")
            } else if starts(with: "<!") || starts(with: "<?") {
                throw fail("DTDs and entity declarations are not allowed in SSML")
            } else if scalars[position] == "<" {
                switch try parseTag() {
                case .open(_, let selfClosing):
                    if !selfClosing { depth += 1 }
                    guard depth <= SpeechDocument.maximumDepth else { throw fail("elements nested deeper than \(SpeechDocument.maximumDepth)") }
                case .close:
                    depth -= 1
                }
            } else {
                let character: Unicode.Scalar
                if scalars[position] == "&" { character = try parseReference() } else {
                    character = scalars[position]
                    try checkCharacter(character)
                    position += 1
                }
                if !character.properties.isWhitespace { hasText = true }
            }
        }
        // Nesting was counted, not matched by name: check it properly on the captured text.
        try checkBalanced(start..<position)
        let raw = text(start..<position)
        if hasText {
            pieces.append(.word(words.count, raw))
            words.append(.init(start: start, length: position - start))
        } else {
            pieces.append(.leaf(next: words.count, raw))
        }
    }

    func checkBalanced(_ range: Range<Int>) throws(HarkError) {
        var copy = SSMLParser(scalars: Array(scalars[range]))
        var names: [String] = []
        while copy.position < copy.scalars.count {
            if copy.starts(with: "<!--") { try copy.skipComment(); continue }
            guard copy.scalars[copy.position] == "<" else { copy.position += 1; continue }
            let at = copy.position
            switch try copy.parseTag() {
            case .open(let name, let selfClosing): if !selfClosing { names.append(name) }
            case .close(let name):
                guard names.last == name else { throw fail("</\(name)> closes <\(names.last ?? "")>", at: range.lowerBound + at) }
                names.removeLast()
            }
        }
    }
}
