//! A pre-scan of a tenant document's YAML for how deep its flow collections (`[…]`, `{…}`)
//! nest, before the YAML reader sees it.
//!
//! The reader (libyaml, inside serde_yaml_ng) keeps one "simple key" slot per open flow
//! collection and walks all of them for every token it reads, so N nested collections take time
//! in N²: `a: [` repeated to the 256 KiB cap took 20 s in a debug build. Its own depth limit
//! (128) only applies once the whole document has been read into events, which is where that
//! time goes. Block nesting (indentation) opens no such slot.
//!
//! The scan follows libyaml's tokenizer far enough to tell a `[` or `{` that opens a flow
//! collection from one inside a quoted or plain scalar (`when: 'params.items[0] == "x"'`,
//! `reason: a [b] {c}`), a block scalar (`|`, `>`) or a comment; it keeps libyaml's block
//! indentation to know where a multi-line plain scalar or a block scalar ends. Inside a flow
//! collection every `[`, `{`, `]` and `}` outside quotes and comments is a token, as for
//! libyaml. Where a document is not valid YAML the scan may count differently, but libyaml then
//! stops at that error and reads nothing after it.

/// Where the scan stopped: 1-based, in characters, like the YAML reader's own errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Mark {
    pub(super) line: usize,
    pub(super) column: usize,
}

/// What the pre-scan found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Scan {
    /// Whether there is anything but whitespace, comments, directives and document markers.
    pub(super) content: bool,
    /// The `[` or `{` that opened one flow collection more than allowed, if any.
    pub(super) too_deep: Option<Mark>,
}

/// Scans `src` (without a byte order mark) for flow collections nested deeper than `max_depth`.
/// Linear in the length of `src`.
pub(super) fn scan(src: &str, max_depth: usize) -> Scan {
    let mut s = Scanner {
        s: src.as_bytes(),
        i: 0,
        line: 0,
        col: 0,
        depth: 0,
        indents: Vec::new(),
        key: None,
        key_allowed: true,
        content: false,
    };
    let too_deep = s.run(max_depth);
    Scan {
        content: s.content,
        too_deep,
    }
}

struct Scanner<'a> {
    s: &'a [u8],
    /// Byte offset of the next character.
    i: usize,
    /// 0-based line and column (in characters) of the next character.
    line: usize,
    col: usize,
    /// Open flow collections.
    depth: usize,
    /// libyaml's block indentation stack: the columns of the open block collections.
    indents: Vec<usize>,
    /// Line and column of the possible simple key of the block context (libyaml's slot of flow
    /// level 0): where a `key:` that follows would open a block mapping.
    key: Option<(usize, usize)>,
    /// Whether a simple key may start here (libyaml's `simple_key_allowed`).
    key_allowed: bool,
    content: bool,
}

impl Scanner<'_> {
    /// The input from the next character on.
    fn rest(&self) -> &[u8] {
        self.s.get(self.i..).unwrap_or_default()
    }

    fn at(&self, k: usize) -> Option<u8> {
        self.s.get(self.i + k).copied()
    }

    fn is(&self, k: usize, c: u8) -> bool {
        self.at(k) == Some(c)
    }

    /// Length in bytes of the line break at `i + k` (CR, LF, CR LF, NEL, LS, PS), if any.
    fn brk(&self, k: usize) -> Option<usize> {
        match self.rest().get(k..).unwrap_or_default() {
            [b'\r', b'\n', ..] => Some(2),
            [b'\r' | b'\n', ..] => Some(1),
            [0xC2, 0x85, ..] => Some(2),
            [0xE2, 0x80, 0xA8 | 0xA9, ..] => Some(3),
            _ => None,
        }
    }

    fn is_blank(&self, k: usize) -> bool {
        matches!(self.at(k), Some(b' ' | b'\t'))
    }

    /// Blank, line break or end of input (libyaml's `IS_BLANKZ`).
    fn is_blankz(&self, k: usize) -> bool {
        self.at(k).is_none() || self.is_blank(k) || self.brk(k).is_some()
    }

    fn eof(&self) -> bool {
        self.i >= self.s.len()
    }

    /// Moves past one character that is not a line break.
    fn bump(&mut self) {
        let width = match self.at(0) {
            Some(0xF0..) => 4,
            Some(0xE0..) => 3,
            Some(0xC0..) => 2,
            _ => 1,
        };
        self.i = (self.i + width).min(self.s.len());
        self.col += 1;
    }

    /// Moves past the line break here.
    fn newline(&mut self) {
        self.i += self.brk(0).unwrap_or(1);
        self.line += 1;
        self.col = 0;
    }

    /// Moves to the line break (or end of input) that ends this line.
    fn skip_to_line_end(&mut self) {
        while !self.eof() && self.brk(0).is_none() {
            self.bump();
        }
    }

    /// `---` or `...` at the start of a line, followed by a blank or line end.
    fn at_document_marker(&self) -> bool {
        self.col == 0
            && (self.rest().starts_with(b"---") || self.rest().starts_with(b"..."))
            && self.is_blankz(3)
    }

    /// The current block indentation (libyaml's `parser.indent`; -1 at the top).
    fn indent(&self) -> isize {
        self.indents.last().map_or(-1, |&c| c as isize)
    }

    /// A block collection starting at `col` (libyaml's `roll_indent`).
    fn roll(&mut self, col: usize) {
        if self.depth == 0 && self.indent() < col as isize {
            self.indents.push(col);
        }
    }

    /// Ends the block collections indented more than `col` (libyaml's `unroll_indent`).
    fn unroll(&mut self, col: usize) {
        while self.depth == 0 && self.indent() > col as isize {
            self.indents.pop();
        }
    }

    /// A node that may be a simple key starts here.
    fn save_key(&mut self) {
        if self.depth == 0 && self.key_allowed {
            self.key = Some((self.line, self.col));
        }
    }

    /// Returns the `[` or `{` that nested one level deeper than `max_depth`, if any.
    fn run(&mut self, max_depth: usize) -> Option<Mark> {
        loop {
            self.skip_to_next_token();
            // At the end of the input, nothing nested too deep.
            let c = self.at(0)?;
            self.unroll(self.col);
            if self.at_document_marker() {
                self.i += 3;
                self.col += 3;
                self.depth = 0;
                self.indents.clear();
                self.key = None;
                self.key_allowed = false;
                continue;
            }
            if self.col == 0 && c == b'%' {
                // A directive (`%YAML 1.2`).
                self.skip_to_line_end();
                self.key = None;
                self.key_allowed = false;
                continue;
            }
            self.content = true;
            match c {
                b'[' | b'{' => {
                    self.save_key();
                    self.depth += 1;
                    if self.depth > max_depth {
                        return Some(Mark {
                            line: self.line + 1,
                            column: self.col + 1,
                        });
                    }
                    self.key_allowed = true;
                    self.bump();
                }
                b']' | b'}' => {
                    self.depth = self.depth.saturating_sub(1);
                    self.key_allowed = false;
                    self.bump();
                }
                b',' => {
                    self.key_allowed = true;
                    self.bump();
                }
                b'-' if self.is_blankz(1) => {
                    self.roll(self.col);
                    self.key = None;
                    self.key_allowed = true;
                    self.bump();
                }
                b'?' if self.depth > 0 || self.is_blankz(1) => {
                    self.roll(self.col);
                    self.key = None;
                    self.key_allowed = self.depth == 0;
                    self.bump();
                }
                b':' if self.depth > 0 || self.is_blankz(1) => {
                    if self.depth == 0 {
                        match self.key.take() {
                            Some((line, col)) if line == self.line => {
                                self.roll(col);
                                self.key_allowed = false;
                            }
                            _ => {
                                self.roll(self.col);
                                self.key_allowed = true;
                            }
                        }
                    } else {
                        self.key_allowed = false;
                    }
                    self.bump();
                }
                b'*' | b'&' => {
                    // An alias or an anchor: its name is letters, digits, `_` and `-`.
                    self.save_key();
                    self.key_allowed = false;
                    self.bump();
                    while matches!(self.at(0), Some(b) if b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
                    {
                        self.bump();
                    }
                }
                b'!' => {
                    self.save_key();
                    self.key_allowed = false;
                    self.tag();
                }
                b'|' | b'>' if self.depth == 0 => {
                    self.key = None;
                    self.key_allowed = true;
                    self.block_scalar();
                }
                b'\'' | b'"' => {
                    self.save_key();
                    self.key_allowed = false;
                    self.quoted(c);
                }
                _ => {
                    self.save_key();
                    self.plain();
                }
            }
        }
    }

    /// Skips blanks, comments and line breaks (libyaml's `scan_to_next_token`).
    fn skip_to_next_token(&mut self) {
        loop {
            if self.col == 0 && self.rest().starts_with(b"\xEF\xBB\xBF") {
                // libyaml skips a byte order mark at the start of any line.
                self.bump();
            }
            while self.is_blank(0) {
                self.bump();
            }
            if self.is(0, b'#') {
                self.skip_to_line_end();
            }
            if self.brk(0).is_none() {
                return;
            }
            self.newline();
            if self.depth == 0 {
                self.key_allowed = true;
            }
        }
    }

    /// A tag: `!<verbatim>`, or a shorthand (`!!str`, `!local`) that ends at a blank or, in a
    /// flow collection, at `,` `[` `]` `{` `}`.
    fn tag(&mut self) {
        self.bump();
        if self.is(0, b'<') {
            while !self.eof() && !self.is(0, b'>') && self.brk(0).is_none() {
                self.bump();
            }
            if self.is(0, b'>') {
                self.bump();
            }
            return;
        }
        while !self.is_blankz(0) && !matches!(self.at(0), Some(b',' | b'[' | b']' | b'{' | b'}')) {
            self.bump();
        }
    }

    /// A single- or double-quoted scalar, which may span lines.
    fn quoted(&mut self, quote: u8) {
        self.bump();
        while !self.eof() {
            if self.brk(0).is_some() {
                self.newline();
                continue;
            }
            match self.at(0) {
                Some(b'\'') if quote == b'\'' && self.is(1, b'\'') => {
                    self.bump();
                    self.bump();
                }
                Some(b'\\') if quote == b'"' => {
                    self.bump();
                    if self.brk(0).is_some() {
                        self.newline();
                    } else if !self.eof() {
                        self.bump();
                    }
                }
                Some(c) if c == quote => {
                    self.bump();
                    return;
                }
                _ => self.bump(),
            }
        }
    }

    /// A plain scalar (libyaml's `scan_plain_scalar`): words separated by blanks, continued on
    /// the next lines while they are indented more than the block around it (any line, in a
    /// flow collection). It ends before `: `, before ` #`, and in a flow collection before
    /// `,` `[` `]` `{` `}`.
    fn plain(&mut self) {
        let floor = self.indent() + 1;
        let mut leading_blanks = false;
        loop {
            if self.at_document_marker() || self.is(0, b'#') {
                break;
            }
            while !self.is_blankz(0) {
                let c = self.at(0);
                let ends = match c {
                    Some(b':') => {
                        self.is_blankz(1)
                            || (self.depth > 0
                                && matches!(
                                    self.at(1),
                                    Some(b',' | b'?' | b'[' | b']' | b'{' | b'}')
                                ))
                    }
                    Some(b',' | b'[' | b']' | b'{' | b'}') => self.depth > 0,
                    _ => false,
                };
                if ends {
                    self.key_allowed = leading_blanks;
                    return;
                }
                self.bump();
            }
            if self.eof() {
                break;
            }
            while self.is_blank(0) || self.brk(0).is_some() {
                if self.brk(0).is_some() {
                    self.newline();
                    leading_blanks = true;
                } else {
                    self.bump();
                }
            }
            if self.depth == 0 && (self.col as isize) < floor {
                break;
            }
        }
        self.key_allowed = leading_blanks;
    }

    /// A literal (`|`) or folded (`>`) block scalar: its header line, then every line indented
    /// at least as much as its first non-empty one (libyaml's `scan_block_scalar`), empty lines
    /// included.
    fn block_scalar(&mut self) {
        self.bump();
        let mut increment = 0;
        for _ in 0..2 {
            match self.at(0) {
                Some(b'+' | b'-') => self.bump(),
                Some(d @ b'1'..=b'9') => {
                    increment = usize::from(d - b'0');
                    self.bump();
                }
                _ => {}
            }
        }
        // The rest of the header line: blanks and a comment (anything else is libyaml's error).
        self.skip_to_line_end();
        if self.eof() {
            return;
        }
        self.newline();
        let mut indent = if increment == 0 {
            0
        } else {
            usize::try_from(self.indent() + increment as isize).unwrap_or(increment)
        };
        self.block_breaks(&mut indent);
        while self.col == indent && !self.eof() {
            self.skip_to_line_end();
            if self.eof() {
                return;
            }
            self.newline();
            self.block_breaks(&mut indent);
        }
    }

    /// The indentation and empty lines before a block scalar's next line; sets `indent` from
    /// the first non-empty line when the header gave none (libyaml's
    /// `scan_block_scalar_breaks`).
    fn block_breaks(&mut self, indent: &mut usize) {
        let mut max_indent = 0;
        loop {
            while (*indent == 0 || self.col < *indent) && self.is(0, b' ') {
                self.bump();
            }
            max_indent = max_indent.max(self.col);
            if self.brk(0).is_none() {
                break;
            }
            self.newline();
        }
        if *indent == 0 {
            let floor = usize::try_from(self.indent() + 1).unwrap_or(0);
            *indent = max_indent.max(floor).max(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth_ok(src: &str, max: usize) -> bool {
        scan(src, max).too_deep.is_none()
    }

    #[test]
    fn flow_collections_are_counted_wherever_they_open() {
        for deep in [
            "[[[[",
            "{a: {a: {a: {a: ",
            "a: [a: [a: [a: [",
            "- [\n  [\n    [\n [",
            "x: !!seq [&a [!t [*a, [",
            "'k': [\"v\", [{\"x\": [",
            "a: |\n  text\nb: [[[[",
            "a: plain\n  continued\nb: [[[[",
            "- k: v\n  m: [[[[",
            "a:\n  - b: |\n      x\n    c: [[[[",
            "tenant: x\n---\n[[[[",
            "# c\n[ # c\n [ [ [",
            "a: [b#[[[",
        ] {
            assert!(depth_ok(deep, 4) && !depth_ok(deep, 3), "{deep}");
        }
        assert_eq!(
            scan("a:\n  [[[[", 3).too_deep,
            Some(Mark { line: 2, column: 6 })
        );
    }

    #[test]
    fn brackets_in_scalars_and_comments_are_not_collections() {
        for text in [
            "when: 'params.items[0] == \"x\" && [[[['",
            "when: \"a [[[[ \\\" [[[[\"",
            "reason: a [[[[ {{{{ b",
            "reason: it's [[[[ a\n  [[[[ continued\nalso: '[[[['",
            "reason: |\n  [[[[\n   [[[[\n\n  [[[[\nnext: x",
            "- reason: >-\n    [[[[\n  other: x",
            "a: b # [[[[\n# [[[[\n",
            "a: [x, 'it''s [[[[', \"[[[[\"] # [[[[",
            "a: x[[[[:y",
        ] {
            assert!(depth_ok(text, 1), "{text}");
        }
    }

    /// The deepest flow nesting the scan finds in `src`.
    fn depth(src: &str) -> usize {
        let (mut lo, mut hi) = (0, src.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if depth_ok(src, mid) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        lo
    }

    fn value_depth(v: &serde_yaml_ng::Value) -> usize {
        use serde_yaml_ng::Value;
        match v {
            Value::Sequence(s) => 1 + s.iter().map(value_depth).max().unwrap_or(0),
            Value::Mapping(m) => {
                let deepest = m.iter().map(|(k, v)| value_depth(k).max(value_depth(v)));
                1 + deepest.max().unwrap_or(0)
            }
            Value::Tagged(t) => value_depth(&t.value),
            _ => 0,
        }
    }

    /// Random lines of YAML pieces (brackets in every kind of scalar and comment, block
    /// scalars, continuations, markers, collections 130 deep) against the reader: a document
    /// it reads never nests deeper by the scan than by its value, and where the reader hits its
    /// depth limit the scan finds as deep a nesting. (400,000 documents passed in a longer run.)
    #[test]
    fn the_scan_agrees_with_the_reader_on_random_documents() {
        let deep = [
            format!("{}x{}", "[".repeat(130), "]".repeat(130)),
            format!("{}{}", "{a: ".repeat(130), "}".repeat(130)),
            "[".repeat(130),
        ];
        let mut pieces = vec![
            "a",
            "b c",
            "[",
            "]",
            "{",
            "}",
            "[a, b]",
            "{a: b}",
            "'it''s [ {'",
            "\"x \\\" [ {\"",
            "'",
            "\"",
            "#",
            " # c [",
            ":",
            ": ",
            "&a ",
            "*b",
            "!!str ",
            "- ",
            "? ",
            "|",
            ">-",
            "|2",
            "[\n a,\n  [b,\n",
            "{\n a: [\n",
            "]]\n",
            ",",
            "x[0]",
            "\t",
            "é",
            "\u{2028}",
            "\r\n",
        ];
        pieces.extend(deep.iter().map(String::as_str));
        let mut seed: u64 = 0x0bad_cafe_f00d_1234;
        let mut rand = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let (mut read, mut limited) = (0, 0);
        for _ in 0..5_000 {
            let mut doc = String::new();
            for _ in 0..1 + rand(12) {
                doc.push_str(&" ".repeat(rand(7)));
                doc.push_str(["k: ", "- ", "- k: ", "k: |\n", "---\n", "", "", ""][rand(8)]);
                for _ in 0..rand(4) {
                    doc.push_str(pieces[rand(pieces.len())]);
                    if rand(3) == 0 {
                        doc.push(' ');
                    }
                }
                doc.push('\n');
            }
            let values: Result<Vec<serde_yaml_ng::Value>, _> =
                serde_yaml_ng::Deserializer::from_str(&doc)
                    .map(serde::Deserialize::deserialize)
                    .collect();
            match values {
                Ok(values) => {
                    read += 1;
                    let most = values.iter().map(value_depth).max().unwrap_or(0);
                    assert!(depth(&doc) <= most, "{doc:?}");
                }
                Err(e) if e.to_string().contains("recursion limit exceeded") => {
                    limited += 1;
                    assert!(depth(&doc) > 128, "{doc:?}");
                }
                Err(_) => {}
            }
        }
        assert!(
            read > 200 && limited > 200,
            "{read} read, {limited} too deep"
        );
    }
}
