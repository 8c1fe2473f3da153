//! Agent-written text as the pages show it: split into pieces (plain runs, phrases that give
//! orders or claim an approval, and named hidden characters) so a template can highlight
//! phrases in place and show each invisible or direction-changing character as a chip with its
//! Unicode name; and excerpts of those pieces that keep the first flagged one in view.

use actiond_core::injection::find_phrases;
use actiond_core::text::{PieceKind, annotate};

/// One piece of agent text as the template shows it.
#[derive(Debug, Clone)]
pub(crate) struct PieceView {
    /// `plain`, `phrase`, `hidden` or `reversed` (the note after a RIGHT-TO-LEFT OVERRIDE).
    pub(crate) kind: &'static str,
    /// The characters (empty for a hidden character).
    pub(crate) text: String,
    /// For a phrase: why ("gives orders"); for a hidden character: its code point and name;
    /// for `reversed`: what the overridden text reads as on screen.
    pub(crate) label: String,
}

/// Splits agent text into pieces, see the module doc. Text after a U+202E RIGHT-TO-LEFT
/// OVERRIDE is shown here in its stored (logical) order, which is not what other screens show:
/// a `reversed` note right after the chip gives the on-screen (visual) reading.
pub(crate) fn pieces(text: &str) -> Vec<PieceView> {
    mark_reversed(split(text))
}

const RLO: &str = "U+202E";
/// The characters that end an override: POP DIRECTIONAL FORMATTING and POP DIRECTIONAL
/// ISOLATE (a paragraph end, a newline, ends it too; Unicode UAX #9).
const OVERRIDE_ENDS: [&str; 2] = ["U+202C", "U+2069"];

/// Inserts, after each RIGHT-TO-LEFT OVERRIDE chip, a `reversed` piece with the text it
/// reverses as a screen shows it ("text after this is shown reversed; on screen: …").
fn mark_reversed(all: Vec<PieceView>) -> Vec<PieceView> {
    let mut out: Vec<PieceView> = Vec::with_capacity(all.len() + 2);
    // (index of the note to insert, logical text of the run so far)
    let mut run: Option<(usize, String)> = None;
    let close = |out: &mut Vec<PieceView>, run: Option<(usize, String)>| {
        if let Some((at, logical)) = run
            && !logical.trim().is_empty()
        {
            let visual: String = logical.trim().chars().rev().collect();
            out.insert(
                at,
                PieceView {
                    kind: "reversed",
                    text: String::new(),
                    label: format!(
                        "text after this is shown reversed; on screen it reads “{visual}”"
                    ),
                },
            );
        }
    };
    for p in all {
        if p.kind == "hidden" {
            let ends =
                p.label.starts_with(RLO) || OVERRIDE_ENDS.iter().any(|e| p.label.starts_with(e));
            if ends {
                close(&mut out, run.take());
            }
            let starts = p.label.starts_with(RLO);
            out.push(p);
            if starts {
                run = Some((out.len(), String::new()));
            }
            continue;
        }
        match run.as_mut() {
            Some((_, logical)) => match p.text.split_once('\n') {
                Some((before, after)) => {
                    logical.push_str(before);
                    close(&mut out, run.take());
                    out.push(PieceView {
                        text: before.to_owned(),
                        ..p.clone()
                    });
                    out.push(PieceView {
                        text: format!("\n{after}"),
                        ..p
                    });
                }
                None => {
                    logical.push_str(&p.text);
                    out.push(p);
                }
            },
            None => out.push(p),
        }
    }
    close(&mut out, run.take());
    out.retain(|p| matches!(p.kind, "hidden" | "reversed") || !p.text.is_empty());
    out
}

fn split(text: &str) -> Vec<PieceView> {
    annotate(text, &find_phrases(text))
        .into_iter()
        .map(|p| match p.kind {
            PieceKind::Plain => PieceView {
                kind: "plain",
                text: p.text,
                label: String::new(),
            },
            PieceKind::Phrase { label } => PieceView {
                kind: "phrase",
                text: p.text,
                label: label.to_owned(),
            },
            PieceKind::Hidden { code, name } => PieceView {
                kind: "hidden",
                text: String::new(),
                label: format!("{code} {name}"),
            },
        })
        .collect()
}

/// At most `max` characters of `all`, starting a little before the first flagged piece when
/// that lies beyond the window; the bool says whether anything was cut.
pub(crate) fn excerpt(all: &[PieceView], max: usize) -> (Vec<PieceView>, bool) {
    let total: usize = all.iter().map(|p| p.text.chars().count().max(1)).sum();
    if total <= max {
        return (all.to_vec(), false);
    }
    let mut first_flag = 0usize;
    let mut pos = 0usize;
    for p in all {
        if p.kind != "plain" {
            first_flag = pos;
            break;
        }
        pos += p.text.chars().count().max(1);
    }
    let start = if first_flag + 40 > max {
        first_flag.saturating_sub(40)
    } else {
        0
    };
    let mut out = Vec::new();
    let mut pos = 0usize;
    let mut budget = max;
    if start > 0 {
        out.push(plain("…"));
    }
    for p in all {
        let len = p.text.chars().count().max(1);
        let (from, to) = (pos, pos + len);
        pos = to;
        if to <= start || budget == 0 {
            continue;
        }
        if p.kind == "hidden" {
            out.push(p.clone());
            budget = budget.saturating_sub(1);
            continue;
        }
        let skip = start.saturating_sub(from);
        let take = (len - skip).min(budget);
        let text: String = p.text.chars().skip(skip).take(take).collect();
        budget -= take;
        out.push(PieceView { text, ..p.clone() });
    }
    out.push(plain("…"));
    (out, true)
}

fn plain(s: &str) -> PieceView {
    PieceView {
        kind: "plain",
        text: s.into(),
        label: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_behind_a_right_to_left_override_is_labelled_with_its_screen_reading() {
        let p = pieces("pay to sync\u{202E}moc.live\u{202C} now\nand \u{202E}olleh\nbye");
        let kinds: Vec<(&str, &str)> = p
            .iter()
            .map(|x| {
                (
                    x.kind,
                    if x.text.is_empty() {
                        x.label.as_str()
                    } else {
                        x.text.as_str()
                    },
                )
            })
            .collect();
        assert_eq!(
            kinds,
            [
                ("plain", "pay to sync"),
                ("hidden", "U+202E RIGHT-TO-LEFT OVERRIDE"),
                (
                    "reversed",
                    "text after this is shown reversed; on screen it reads “evil.com”"
                ),
                ("plain", "moc.live"),
                ("hidden", "U+202C POP DIRECTIONAL FORMATTING"),
                ("plain", " now\nand "),
                ("hidden", "U+202E RIGHT-TO-LEFT OVERRIDE"),
                (
                    "reversed",
                    "text after this is shown reversed; on screen it reads “hello”"
                ),
                ("plain", "olleh"),
                ("plain", "\nbye"),
            ]
        );
        // No override, no note; an override with nothing after it, no note either.
        assert!(pieces("plain text").iter().all(|x| x.kind == "plain"));
        assert!(!pieces("end\u{202E}").iter().any(|x| x.kind == "reversed"));
    }
}
