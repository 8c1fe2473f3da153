//! How the queue and the decision page show a staged approval: "stage 1 of 2: team-leads, 0
//! of 1 needed, 12 min left" and who is next ("next: finance", or "last stage").

use crate::pages::chrome::human_age;
use actiond_store::stages::{Stage, open_stage};

/// The open stage in words with its time left, and who is next; both empty when no stage is
/// open (no stages, or the proposal is decided). Time left is the database clock's, read with
/// the stages. For notifications, which carry no other clock.
pub(crate) fn stage_line(stages: &[Stage]) -> (String, String) {
    let (line, next) = stage_status(stages);
    match open_stage(stages) {
        Some(s) => (format!("{line}, {}", left_words(s.left_secs)), next),
        None => (line, next),
    }
}

/// "12 min left", or "out of time: moving on" once the stage's time is over.
fn left_words(left: Option<f64>) -> String {
    match left {
        Some(l) if l > 0.0 => format!("{} left", human_age(l.ceil() as i64)),
        _ => "out of time: moving on".into(),
    }
}

/// The open stage in words without a clock ("stage 1 of 2: team-leads, 0 of 1 needed"), and
/// who is next ("next: finance", "last stage"); both empty when no stage is open. The page
/// and the queue show the one clock of [`clock`] beside it.
pub(crate) fn stage_status(stages: &[Stage]) -> (String, String) {
    let Some(s) = open_stage(stages) else {
        return (String::new(), String::new());
    };
    let line = format!(
        "stage {} of {}: {}, {} of {} needed",
        s.stage,
        s.of,
        s.approvers,
        s.approved_by.len(),
        s.required
    );
    let next = match stages.iter().find(|n| n.stage == s.stage + 1) {
        Some(n) => format!("next: {}", n.approvers),
        None => "last stage".into(),
    };
    (line, next)
}

/// The one clock a waiting proposal shows: whichever runs out first of the escalation TTL
/// (`ttl_left` seconds; `None` when the document is missing) and the open stage's time
/// ("stage 1 ends in 12 min if nobody decides"). Empty when there is neither.
pub(crate) fn clock(stages: &[Stage], ttl_left: Option<i64>) -> String {
    let stage = open_stage(stages).and_then(|s| s.left_secs.map(|l| (s.stage, l)));
    match (stage, ttl_left) {
        (Some((n, l)), ttl) if ttl.is_none_or(|t| l < t as f64) => {
            if l > 0.0 {
                format!(
                    "stage {n} ends in {} if nobody decides",
                    human_age(l.ceil() as i64)
                )
            } else {
                format!("stage {n} out of time: moving on")
            }
        }
        (_, Some(t)) if t > 0 => format!("expires in {} if nobody decides", human_age(t)),
        (_, Some(_)) => "past its time limit: expiring".into(),
        (_, None) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(n: i32, group: &str, opened: bool, left: Option<f64>) -> Stage {
        Stage {
            stage: n,
            of: 2,
            approvers: group.into(),
            required: 1,
            within_secs: 1800.0,
            on_timeout: "next".into(),
            opened_at: opened.then(actiond_runtime::clock::now_utc),
            due_at: None,
            completed_at: None,
            timed_out_at: None,
            left_secs: left,
            approved_by: Vec::new(),
        }
    }

    #[test]
    fn the_open_stage_and_the_next_group() {
        let two = [
            stage(1, "team-leads", true, Some(720.0)),
            stage(2, "finance", false, None),
        ];
        let (line, next) = stage_line(&two);
        assert!(
            line.starts_with("stage 1 of 2: team-leads, 0 of 1 needed, "),
            "{line}"
        );
        assert!(line.ends_with(" left"), "{line}");
        assert_eq!(next, "next: finance");
        let mut last = two.clone();
        last[0].completed_at = Some(actiond_runtime::clock::now_utc());
        last[1].opened_at = Some(actiond_runtime::clock::now_utc());
        last[1].left_secs = Some(-1.0);
        assert_eq!(
            stage_line(&last),
            (
                "stage 2 of 2: finance, 0 of 1 needed, out of time: moving on".into(),
                "last stage".into()
            )
        );
        assert_eq!(stage_line(&[]), (String::new(), String::new()));
    }

    #[test]
    fn one_clock_whichever_ends_first() {
        let two = [
            stage(1, "team-leads", true, Some(720.0)),
            stage(2, "finance", false, None),
        ];
        assert_eq!(
            stage_status(&two),
            (
                "stage 1 of 2: team-leads, 0 of 1 needed".into(),
                "next: finance".into()
            )
        );
        // The stage ends first: its clock, and only it.
        assert_eq!(
            clock(&two, Some(86_000)),
            "stage 1 ends in 12 min if nobody decides"
        );
        // The escalation TTL ends first.
        assert_eq!(clock(&two, Some(300)), "expires in 5 min if nobody decides");
        assert_eq!(clock(&[], Some(300)), "expires in 5 min if nobody decides");
        assert_eq!(clock(&[], Some(0)), "past its time limit: expiring");
        assert_eq!(clock(&[], None), "");
        let mut late = two.clone();
        late[0].left_secs = Some(-3.0);
        assert_eq!(clock(&late, Some(600)), "stage 1 out of time: moving on");
    }
}
