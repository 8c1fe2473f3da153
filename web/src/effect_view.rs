//! The decision card's "before → approved → after": once the executor read a run's effect
//! back (`proposal.effect`, services/store/src/effects.rs), the card shows the preview the
//! approver saw, the approved action and what the provider shows now, and says plainly when
//! the two differ (`effect_mismatch`).

use crate::error::WebResult;
use crate::pages::decision::DecisionPage;
use actiond_core::effect::{EFFECT_MISMATCH_WORDS, Verdict};
use actiond_core::text::reveal_invisible;

/// Fills `page.effect` (rows of label and text) and `page.effect_words` for proposal `id`,
/// seen with `tenants`. When nothing was read back, a run whose effect cannot be read
/// (`not_readable`, [`actiond_core::effect::not_readable`]: SMTP, a webhook without
/// `read_back_url`, a statement without `read_back`) says so; otherwise they stay empty.
pub(crate) async fn fill(
    db: &actiond_store::Db,
    tenants: &[String],
    id: uuid::Uuid,
    state: &str,
    not_readable: Option<String>,
    page: &mut DecisionPage,
) -> WebResult<()> {
    let before = if page.preview.is_empty() {
        "(not previewed: it was never escalated)".to_owned()
    } else {
        page.preview.clone()
    };
    let Some((effect, at)) = actiond_store::effects::latest(db, tenants, id).await? else {
        if let Some(why) = not_readable.filter(|_| matches!(state, "succeeded" | "outcome_unknown"))
        {
            page.effect = vec![
                ("before".into(), before),
                ("approved".into(), page.sentence.clone()),
                ("after".into(), why),
            ];
        }
        return Ok(());
    };
    let mut after = effect.line();
    if effect.settled {
        after.push_str(" — read back to settle outcome_unknown");
    }
    page.effect = vec![
        ("before".into(), before),
        ("approved".into(), page.sentence.clone()),
        (
            format!("after (read {})", at.format("%Y-%m-%d %H:%M UTC")),
            reveal_invisible(&after, false),
        ),
    ];
    page.effect_words = match (state, effect.verdict) {
        ("effect_mismatch", _) => EFFECT_MISMATCH_WORDS.to_owned(),
        (_, Verdict::Matches) => "The provider shows what was approved.".to_owned(),
        (_, Verdict::Unread) => {
            "The provider could not be read back; its own answer stands.".to_owned()
        }
        _ => String::new(),
    };
    Ok(())
}
