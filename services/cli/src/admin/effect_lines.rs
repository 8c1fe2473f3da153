//! `actiond approvals show`'s effect block: once the executor read a run's effect back, the
//! card's "before → approved → after" (the preview the approver saw, the approved action, what
//! the provider shows now), from the proposal's newest `proposal.effect` audit event.

/// The effect block of proposal `id` (in `state`) of `tenant`, `summary` being its approved
/// action in words; when nothing was read back, the reason a run's effect cannot be
/// (`not_readable`: SMTP, a webhook without `read_back_url`, a statement without `read_back`)
/// for a run that went ahead, else no lines. `esc` makes provider text printable.
pub(super) async fn effect_lines(
    db: &actiond_store::Db,
    tenant: &str,
    (id, state): (uuid::Uuid, actiond_core::state::ProposalState),
    summary: &str,
    not_readable: Option<String>,
    esc: fn(&str) -> String,
) -> anyhow::Result<Vec<String>> {
    use actiond_core::state::ProposalState;
    let tenants = [tenant.to_owned()];
    let Some((effect, at)) = actiond_store::effects::latest(db, &tenants, id).await? else {
        let ran = matches!(
            state,
            ProposalState::Succeeded | ProposalState::OutcomeUnknown
        );
        return Ok(match not_readable.filter(|_| ran) {
            Some(why) => vec![
                "effect     before → approved → after".to_owned(),
                format!("  approved {}", esc(summary)),
                format!("  after    {}", esc(&why)),
            ],
            None => Vec::new(),
        });
    };
    let before = match actiond_store::previews::get(db, &tenants, id).await? {
        Some(p) if p.ok => format!(
            "{} (read {})",
            p.text.lines().next().unwrap_or_default(),
            p.read_at.format("%H:%M UTC")
        ),
        Some(p) => format!("preview unavailable: {}", p.text),
        None => "(not previewed: it was never escalated)".to_owned(),
    };
    let settled = if effect.settled {
        ", settling outcome_unknown"
    } else {
        ""
    };
    Ok(vec![
        "effect     before → approved → after".to_owned(),
        format!("  before   {}", esc(&before)),
        format!("  approved {}", esc(summary)),
        format!(
            "  after    {} (read {}{settled})",
            esc(&effect.line()),
            at.format("%H:%M UTC")
        ),
    ])
}
