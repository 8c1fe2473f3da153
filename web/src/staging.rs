//! How the queue and the decision page show a staged approval: "stage 1 of 2: team-leads, 0
//! of 1 needed, 12 min left" and who is next ("next: finance", or "last stage").

use crate::pages::human_age;
use actiond_store::stages::{Stage, open_stage};

/// The open stage in words, and who is next; both empty when no stage is open (no stages, or
/// the proposal is decided). Time left is the database clock's, read with the stages.
pub(crate) fn stage_line(stages: &[Stage]) -> (String, String) {
    let Some(s) = open_stage(stages) else {
        return (String::new(), String::new());
    };
    let left = match s.left_secs {
        Some(l) if l > 0.0 => format!("{} left", human_age(l.ceil() as i64)),
        _ => "out of time: moving on".into(),
    };
    let line = format!(
        "stage {} of {}: {}, {} of {} needed, {left}",
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
            opened_at: opened.then(chrono::Utc::now),
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
        last[0].completed_at = Some(chrono::Utc::now());
        last[1].opened_at = Some(chrono::Utc::now());
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
}
