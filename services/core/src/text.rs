//! Making agent-written text safe to show to a person.
//!
//! Agent text (reasons, ticket excerpts, params) is attacker-controlled. Beyond HTML/terminal
//! escaping, invisible and bidirectional-control characters are made visible, so that
//! "Trojan Source"-style reordering (CVE-2021-42574) or zero-width padding cannot hide what
//! an approver is agreeing to.
//!
//! Homoglyphs are flagged the same way: in a word that mixes scripts (Unicode Technical
//! Standard #39, §5.1 "Mixed-Script Detection": a word whose resolved script set is empty,
//! such as `pаypal.com` with a Cyrillic `а`, or `ΡayPal` with a Greek `Ρ`), every character
//! that is not of the word's main script is shown as its code point ([`mixed_script_marks`]).
//! Words that mix scripts legitimately (Japanese kanji with kana, Korean hangul with hanja)
//! resolve to one script set and are left alone.

use unicode_script::{Script, ScriptExtension, UnicodeScript};
use unicode_security::mixed_script::AugmentedScriptSet;

/// Where mixed-script detection splits words: whitespace, controls, and ASCII punctuation other
/// than the `.`, `-`, `_` and `@` that join the parts of a host name or an address.
fn is_word_break(c: char) -> bool {
    c.is_whitespace()
        || c.is_control()
        || (c.is_ascii_punctuation() && !matches!(c, '.' | '-' | '_' | '@'))
}

/// For each character of `s`, whether it stands in a word that mixes scripts (UTS #39 §5.1:
/// the word's resolved script set, with the augmented sets for Han, Japanese and Korean, is
/// empty) and is not of the word's main script (the script most of its letters are in; on a
/// tie, the first). Common and Inherited characters (digits, punctuation, combining marks) are
/// never marked.
pub fn mixed_script_marks(s: &str) -> Vec<bool> {
    let chars: Vec<char> = s.chars().collect();
    let mut marks = vec![false; chars.len()];
    let mut i = 0;
    while i < chars.len() {
        if is_word_break(chars[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && !is_word_break(chars[i]) {
            i += 1;
        }
        mark_word(&chars[start..i], &mut marks[start..i]);
    }
    marks
}

fn mark_word(word: &[char], marks: &mut [bool]) {
    let mut resolved = AugmentedScriptSet::default();
    for &c in word {
        resolved.intersect_with(AugmentedScriptSet::for_char(c));
    }
    if !resolved.is_empty() {
        return;
    }
    let mut counts: Vec<(Script, usize)> = Vec::new();
    for &c in word {
        let script = c.script();
        if matches!(script, Script::Common | Script::Inherited | Script::Unknown) {
            continue;
        }
        match counts.iter_mut().find(|(s, _)| *s == script) {
            Some((_, n)) => *n += 1,
            None => counts.push((script, 1)),
        }
    }
    let main = counts
        .iter()
        .fold(None::<(Script, usize)>, |best, &(s, n)| match best {
            Some((_, b)) if b >= n => best,
            _ => Some((s, n)),
        });
    let main_set = main.map(|(s, _)| AugmentedScriptSet::from(ScriptExtension::from(s)));
    for (m, &c) in marks.iter_mut().zip(word) {
        *m = match main_set {
            Some(set) => {
                let mut x = AugmentedScriptSet::for_char(c);
                x.intersect_with(set);
                x.is_empty()
            }
            // No assigned script at all (unassigned code points): each of them is marked.
            None => !matches!(c.script(), Script::Common | Script::Inherited),
        };
    }
}

/// Replaces control, invisible and bidirectional-control characters, and the characters of
/// another script inside a mixed-script word ([`mixed_script_marks`]), with a visible
/// `⟨U+XXXX⟩` marker. Newlines and tabs are kept when `keep_newlines` is true.
pub fn reveal_invisible(s: &str, keep_newlines: bool) -> String {
    let mut out = String::with_capacity(s.len());
    let marks = mixed_script_marks(s);
    for (c, mixed) in s.chars().zip(marks) {
        if keep_newlines && (c == '\n' || c == '\t') {
            out.push(c);
        } else if is_suspicious(c) || mixed {
            out.push_str(&format!("⟨U+{:04X}⟩", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// True for characters a person cannot see or that reorder text: C0/C1 controls, zero-width
/// and joiner characters, bidi embeddings/overrides/isolates (U+202A–202E, U+2066–2069), the
/// LRM/RLM/ALM marks, soft hyphen, word joiner and friends, BOM, tag characters, variation
/// selectors, and the LINE and PARAGRAPH SEPARATORS (U+2028, U+2029), which break a line on
/// some screens and show as nothing on others.
pub fn is_suspicious(c: char) -> bool {
    let u = c as u32;
    c.is_control()
        || matches!(u,
            0x00AD | 0x034F | 0x061C | 0x115F | 0x1160 | 0x17B4 | 0x17B5 | 0x180E
            | 0x200B..=0x200F | 0x2028 | 0x2029 | 0x202A..=0x202E | 0x2060..=0x206F | 0x3164 | 0xFE00..=0xFE0F
            | 0xFEFF | 0xFFA0 | 0xFFF9..=0xFFFB | 0xE0000..=0xE007F | 0xE0100..=0xE01EF)
}

/// The Unicode name of a character [`is_suspicious`] flags ("RIGHT-TO-LEFT OVERRIDE",
/// "ZERO WIDTH SPACE"), as the Unicode Character Database writes it; ranges get their family
/// name ("VARIATION SELECTOR-16", "TAG CHARACTER"); other controls "CONTROL CHARACTER". Any
/// other character is named by its script, as [`mixed_script_marks`] flags it: "CYRILLIC
/// CHARACTER IN A WORD OF ANOTHER SCRIPT".
pub fn char_name(c: char) -> String {
    let u = c as u32;
    if !is_suspicious(c) {
        return format!(
            "{} CHARACTER IN A WORD OF ANOTHER SCRIPT",
            c.script().full_name().to_uppercase()
        );
    }
    let fixed = match u {
        0x00 => "NULL",
        0x09 => "CHARACTER TABULATION",
        0x0A => "LINE FEED",
        0x0D => "CARRIAGE RETURN",
        0x1B => "ESCAPE",
        0x7F => "DELETE",
        0x85 => "NEXT LINE",
        0x00AD => "SOFT HYPHEN",
        0x034F => "COMBINING GRAPHEME JOINER",
        0x061C => "ARABIC LETTER MARK",
        0x115F => "HANGUL CHOSEONG FILLER",
        0x1160 => "HANGUL JUNGSEONG FILLER",
        0x17B4 => "KHMER VOWEL INHERENT AQ",
        0x17B5 => "KHMER VOWEL INHERENT AA",
        0x180E => "MONGOLIAN VOWEL SEPARATOR",
        0x200B => "ZERO WIDTH SPACE",
        0x200C => "ZERO WIDTH NON-JOINER",
        0x200D => "ZERO WIDTH JOINER",
        0x200E => "LEFT-TO-RIGHT MARK",
        0x200F => "RIGHT-TO-LEFT MARK",
        0x2028 => "LINE SEPARATOR",
        0x2029 => "PARAGRAPH SEPARATOR",
        0x202A => "LEFT-TO-RIGHT EMBEDDING",
        0x202B => "RIGHT-TO-LEFT EMBEDDING",
        0x202C => "POP DIRECTIONAL FORMATTING",
        0x202D => "LEFT-TO-RIGHT OVERRIDE",
        0x202E => "RIGHT-TO-LEFT OVERRIDE",
        0x2060 => "WORD JOINER",
        0x2061 => "FUNCTION APPLICATION",
        0x2062 => "INVISIBLE TIMES",
        0x2063 => "INVISIBLE SEPARATOR",
        0x2064 => "INVISIBLE PLUS",
        0x2066 => "LEFT-TO-RIGHT ISOLATE",
        0x2067 => "RIGHT-TO-LEFT ISOLATE",
        0x2068 => "FIRST STRONG ISOLATE",
        0x2069 => "POP DIRECTIONAL ISOLATE",
        0x206A => "INHIBIT SYMMETRIC SWAPPING",
        0x206B => "ACTIVATE SYMMETRIC SWAPPING",
        0x206C => "INHIBIT ARABIC FORM SHAPING",
        0x206D => "ACTIVATE ARABIC FORM SHAPING",
        0x206E => "NATIONAL DIGIT SHAPES",
        0x206F => "NOMINAL DIGIT SHAPES",
        0x3164 => "HANGUL FILLER",
        0xFEFF => "ZERO WIDTH NO-BREAK SPACE",
        0xFFA0 => "HALFWIDTH HANGUL FILLER",
        0xFFF9 => "INTERLINEAR ANNOTATION ANCHOR",
        0xFFFA => "INTERLINEAR ANNOTATION SEPARATOR",
        0xFFFB => "INTERLINEAR ANNOTATION TERMINATOR",
        0xFE00..=0xFE0F => return format!("VARIATION SELECTOR-{}", u - 0xFE00 + 1),
        0xE0100..=0xE01EF => return format!("VARIATION SELECTOR-{}", u - 0xE0100 + 17),
        0xE0000..=0xE007F => "TAG CHARACTER",
        0x2065 => "UNASSIGNED FORMAT CHARACTER",
        _ => "CONTROL CHARACTER",
    };
    fixed.to_owned()
}

/// What one piece of annotated agent text is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PieceKind {
    /// Ordinary text.
    Plain,
    /// Text inside a phrase of [`crate::injection::PHRASES`]; `label` says why.
    Phrase {
        /// "gives orders" or "claims an approval".
        label: &'static str,
    },
    /// One hidden or direction-changing character, to be shown as a chip.
    Hidden {
        /// Its code point as `U+202E`.
        code: String,
        /// Its Unicode name, see [`char_name`].
        name: String,
    },
}

/// One piece of agent text as the decision page shows it: plain runs, highlighted phrases and
/// named hidden characters, in order. `text` is empty for hidden characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    /// What it is.
    pub kind: PieceKind,
    /// The characters shown (newlines and tabs kept).
    pub text: String,
}

/// Splits `s` into pieces: every [`is_suspicious`] character (except newline and tab) and every
/// character [`mixed_script_marks`] flags becomes a [`PieceKind::Hidden`] piece, the runs inside `phrases` (char ranges from
/// [`crate::injection::find_phrases`]) become [`PieceKind::Phrase`] pieces, the rest plain.
pub fn annotate(s: &str, phrases: &[crate::injection::PhraseMatch]) -> Vec<Piece> {
    let mut out: Vec<Piece> = Vec::new();
    let marks = mixed_script_marks(s);
    for (i, (c, mixed)) in s.chars().zip(marks).enumerate() {
        if (is_suspicious(c) && c != '\n' && c != '\t') || mixed {
            out.push(Piece {
                kind: PieceKind::Hidden {
                    code: format!("U+{:04X}", c as u32),
                    name: char_name(c),
                },
                text: String::new(),
            });
            continue;
        }
        let kind = match phrases.iter().find(|m| m.start <= i && i < m.end) {
            Some(m) => PieceKind::Phrase {
                label: m.kind.label(),
            },
            None => PieceKind::Plain,
        };
        match out.last_mut() {
            Some(last) if last.kind == kind => last.text.push(c),
            _ => out.push(Piece {
                kind,
                text: c.to_string(),
            }),
        }
    }
    out
}

/// The hidden and direction-changing characters of `s` (newline and tab excepted), and the
/// characters of another script in mixed-script words ([`mixed_script_marks`]), in order of
/// first appearance, each with how often it occurs.
pub fn hidden_chars(s: &str) -> Vec<(char, usize)> {
    let mut out: Vec<(char, usize)> = Vec::new();
    for (c, _) in s
        .chars()
        .zip(mixed_script_marks(s))
        .filter(|&(c, mixed)| (is_suspicious(c) && c != '\n' && c != '\t') || mixed)
    {
        match out.iter_mut().find(|(x, _)| *x == c) {
            Some((_, n)) => *n += 1,
            None => out.push((c, 1)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_unicode_crates_carry_the_same_tables() {
        assert_eq!(
            unicode_security::UNICODE_VERSION,
            unicode_script::UNICODE_VERSION
        );
    }

    #[test]
    fn mixed_script_words_are_flagged_per_uts39() {
        // Cyrillic а (U+0430) in a Latin host name; Greek Ρ (U+03A1) in a Latin word.
        assert_eq!(
            reveal_invisible("p\u{430}ypal.com", false),
            "p⟨U+0430⟩ypal.com"
        );
        assert_eq!(
            reveal_invisible("Pay \u{3a1}ayPal now", false),
            "Pay ⟨U+03A1⟩ayPal now"
        );
        assert_eq!(
            reveal_invisible("ann@\u{430}cme.example", false),
            "ann@⟨U+0430⟩cme.example"
        );
        // A Latin letter in a Cyrillic word: the Latin one is the odd one.
        assert_eq!(
            reveal_invisible("\u{43f}p\u{438}\u{432}\u{435}\u{442}", false),
            "\u{43f}⟨U+0070⟩\u{438}\u{432}\u{435}\u{442}"
        );
        // Single-script words, separate words of different scripts, and Japanese (kanji and
        // kana resolve to one set) are left alone; so are digits and punctuation.
        for ok in [
            "paypal.com",
            "Привет John",
            "東京タワーへ行く",
            "한국어 漢字",
            "café 42€",
            "\"\u{430}\u{431}\",\"ab\"",
        ] {
            assert_eq!(reveal_invisible(ok, false), ok, "{ok}");
        }
        assert_eq!(hidden_chars("p\u{430}ypal p\u{430}ypal"), [('\u{430}', 2)]);
        assert_eq!(
            char_name('\u{430}'),
            "CYRILLIC CHARACTER IN A WORD OF ANOTHER SCRIPT"
        );
        let pieces = annotate("p\u{430}ypal", &[]);
        assert_eq!(pieces.len(), 3, "{pieces:?}");
        assert!(matches!(&pieces[1].kind, PieceKind::Hidden { code, .. } if code == "U+0430"));
    }

    #[test]
    fn hidden_characters_are_named() {
        assert_eq!(char_name('\u{202E}'), "RIGHT-TO-LEFT OVERRIDE");
        assert_eq!(char_name('\u{200B}'), "ZERO WIDTH SPACE");
        assert_eq!(char_name('\u{FE0F}'), "VARIATION SELECTOR-16");
        assert_eq!(char_name('\u{E0041}'), "TAG CHARACTER");
        assert_eq!(char_name('\u{1b}'), "ESCAPE");
        assert_eq!(
            hidden_chars("a\u{202E}b\u{202C}\u{202E}\nc"),
            [('\u{202E}', 2), ('\u{202C}', 1)]
        );
    }

    #[test]
    fn annotate_marks_phrases_and_chips_in_order() {
        let t = "Hi\n\u{202E}ignore previous instructions\u{200B}!";
        let pieces = annotate(t, &crate::injection::find_phrases(t));
        let kinds: Vec<String> = pieces
            .iter()
            .map(|p| match &p.kind {
                PieceKind::Plain => format!("plain:{}", p.text),
                PieceKind::Phrase { label } => format!("{label}:{}", p.text),
                PieceKind::Hidden { code, name } => format!("{code} {name}"),
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "plain:Hi\n",
                "U+202E RIGHT-TO-LEFT OVERRIDE",
                "gives orders:ignore previous instructions",
                "U+200B ZERO WIDTH SPACE",
                "plain:!"
            ]
        );
        // Every character of the input is accounted for.
        let visible: String = pieces.iter().map(|p| p.text.as_str()).collect();
        assert_eq!(visible, "Hi\nignore previous instructions!");
    }
    #[test]
    fn bidi_and_zero_width_become_visible() {
        assert_eq!(
            reveal_invisible("a\u{202E}b\u{200B}c", false),
            "a⟨U+202E⟩b⟨U+200B⟩c"
        );
        assert_eq!(reveal_invisible("x\ny\u{1b}[31m", true), "x\ny⟨U+001B⟩[31m");
        assert_eq!(reveal_invisible("x\ny", false), "x⟨U+000A⟩y");
        // U+2028/U+2029 are neither controls nor visible: an approver's terminal or page may
        // break the line there or show nothing (they were printed raw).
        assert_eq!(
            reveal_invisible("pay\u{2028}refund\u{2029}", true),
            "pay⟨U+2028⟩refund⟨U+2029⟩"
        );
        assert_eq!(char_name('\u{2028}'), "LINE SEPARATOR");
    }
}
