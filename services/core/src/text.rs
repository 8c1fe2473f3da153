//! Making agent-written text safe to show to a person.
//!
//! Agent text (reasons, ticket excerpts, params) is attacker-controlled. Beyond HTML/terminal
//! escaping, invisible and bidirectional-control characters are made visible, so that
//! "Trojan Source"-style reordering (CVE-2021-42574) or zero-width padding cannot hide what
//! an approver is agreeing to.

/// Replaces control, invisible and bidirectional-control characters with a visible
/// `⟨U+XXXX⟩` marker. Newlines and tabs are kept when `keep_newlines` is true.
pub fn reveal_invisible(s: &str, keep_newlines: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if keep_newlines && (c == '\n' || c == '\t') {
            out.push(c);
        } else if is_suspicious(c) {
            out.push_str(&format!("⟨U+{:04X}⟩", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// True for characters a person cannot see or that reorder text: C0/C1 controls, zero-width
/// and joiner characters, bidi embeddings/overrides/isolates (U+202A–202E, U+2066–2069), the
/// LRM/RLM/ALM marks, soft hyphen, word joiner and friends, BOM, tag characters and
/// variation selectors.
pub fn is_suspicious(c: char) -> bool {
    let u = c as u32;
    c.is_control()
        || matches!(u,
            0x00AD | 0x034F | 0x061C | 0x115F | 0x1160 | 0x17B4 | 0x17B5 | 0x180E
            | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x206F | 0x3164 | 0xFE00..=0xFE0F
            | 0xFEFF | 0xFFA0 | 0xFFF9..=0xFFFB | 0xE0000..=0xE007F | 0xE0100..=0xE01EF)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn bidi_and_zero_width_become_visible() {
        assert_eq!(
            reveal_invisible("a\u{202E}b\u{200B}c", false),
            "a⟨U+202E⟩b⟨U+200B⟩c"
        );
        assert_eq!(reveal_invisible("x\ny\u{1b}[31m", true), "x\ny⟨U+001B⟩[31m");
        assert_eq!(reveal_invisible("x\ny", false), "x⟨U+000A⟩y");
    }
}
