//! What the CLI prints of text it did not write (agent-chosen action names, reasons, params,
//! audit details): control, invisible and bidirectional-control characters never reach the
//! terminal raw, nor do look-alike letters of another script inside a word (`pаypal.com`).
//! Text lines show them as `⟨U+202E⟩` ([`reveal_invisible`]); JSON shows them as
//! JSON escapes (`\u202e`), so the output is still valid JSON that parses back to the same
//! strings (an exported audit line still verifies).

use actiond_core::text::{is_suspicious, mixed_script_marks, reveal_invisible};
use std::io::Write;

/// `s` for a text line: every suspicious character (newlines and tabs included) made visible.
pub fn text(s: &str) -> String {
    reveal_invisible(s, false)
}

/// Escapes the suspicious characters of serialized JSON `json` as `\uXXXX` (a surrogate pair
/// above U+FFFF). JSON's own whitespace between tokens (space, newline, tab, carriage return)
/// is kept: inside strings the serializer already escaped those.
///
/// Characters of another script inside a mixed-script word (`pаypal.com` with a Cyrillic `а`,
/// [`mixed_script_marks`]) are escaped too, as text output marks them.
pub fn json_escaped(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for (c, mixed) in json.chars().zip(mixed_script_marks(json)) {
        push_json_char(&mut out, c, mixed);
    }
    out
}

fn push_json_char(out: &mut String, c: char, mixed: bool) {
    if !mixed && (matches!(c, '\n' | '\t' | '\r') || !is_suspicious(c)) {
        out.push(c);
        return;
    }
    let mut units = [0u16; 2];
    for u in c.encode_utf16(&mut units) {
        out.push_str(&format!("\\u{u:04x}"));
    }
}

/// `v` as JSON (indented when `pretty`), with [`json_escaped`] applied.
pub fn json(v: &serde_json::Value, pretty: bool) -> anyhow::Result<String> {
    let s = if pretty {
        serde_json::to_string_pretty(v)?
    } else {
        serde_json::to_string(v)?
    };
    Ok(json_escaped(&s))
}

/// A writer of JSON Lines that applies [`json_escaped`] to everything written through it.
/// Whole characters only are converted: a UTF-8 sequence split across two writes waits for
/// its end (at most 3 bytes are held back).
pub struct JsonEscaping<W: Write> {
    inner: W,
    pending: Vec<u8>,
}

impl<W: Write> JsonEscaping<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            pending: Vec::new(),
        }
    }
}

impl<W: Write> Write for JsonEscaping<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(buf);
        let valid = match std::str::from_utf8(&self.pending) {
            Ok(s) => s.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(e) => {
                return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e));
            }
        };
        let rest = self.pending.split_off(valid);
        let done = std::mem::replace(&mut self.pending, rest);
        let s = String::from_utf8_lossy(&done);
        self.inner.write_all(json_escaped(&s).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// A writer for a command's streaming output (`audit export`): when the reader has gone
/// (`actiond audit export … | head -1`), the command ends quietly with exit 0, as other Unix
/// tools do and as [`actiond_runtime::say`] does for line output, instead of "Broken pipe" and
/// exit 1. Every other write error is returned as is.
pub struct EndOnClosedPipe<W: Write>(pub W);

impl<W: Write> EndOnClosedPipe<W> {
    fn check<T>(r: std::io::Result<T>) -> std::io::Result<T> {
        match r {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
            r => r,
        }
    }
}

impl<W: Write> Write for EndOnClosedPipe<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        Self::check(self.0.write(buf))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Self::check(self.0.flush())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixed_script_letters_become_json_escapes_and_parse_back() {
        let v = serde_json::json!({"payment_id": "pi_p\u{430}ypal", "name": "Привет"});
        let s = json(&v, false).unwrap();
        assert!(s.contains("pi_p\\u0430ypal"), "{s}");
        assert!(
            s.contains("Привет"),
            "a single-script word is left as it is: {s}"
        );
        assert_eq!(serde_json::from_str::<serde_json::Value>(&s).unwrap(), v);
        assert_eq!(text("pi_p\u{430}ypal"), "pi_p⟨U+0430⟩ypal");
    }

    #[test]
    fn bidi_and_controls_become_json_escapes_and_parse_back() {
        let v =
            serde_json::json!({"action": "billing.refund.issue\u{202e}", "t": "a\u{7f}b\u{e0041}"});
        let s = json(&v, true).unwrap();
        assert!(s.contains("billing.refund.issue\\u202e"), "{s}");
        assert!(s.contains("a\\u007fb\\udb40\\udc41"), "{s}");
        assert!(!s.chars().any(|c| is_suspicious(c) && c != '\n'), "{s}");
        let back: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn the_writer_waits_for_a_split_character() {
        let mut w = JsonEscaping::new(Vec::new());
        let bytes = "\"x\u{202e}\"\n".as_bytes();
        for b in bytes {
            w.write_all(std::slice::from_ref(b)).unwrap();
        }
        assert_eq!(String::from_utf8(w.inner).unwrap(), "\"x\\u202e\"\n");
    }

    #[test]
    fn text_shows_the_marker() {
        assert_eq!(text("a\u{202e}b\n"), "a⟨U+202E⟩b⟨U+000A⟩");
    }
}
