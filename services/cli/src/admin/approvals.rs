//! `actiond approvals …`: the break-glass CLI. Operators list and inspect escalated proposals
//! and decide them with the break-glass key, by subject (the CLI sees no ID token).

use super::DbArgs;
use actiond_core::approval::ApprovalRefusal;
use actiond_core::grant::GrantSigner;
use actiond_runtime::credentials::CredentialsDir;
use actiond_runtime::say;
use actiond_store::approvals::{self, Approver, Decided, Verdict};
use actiond_store::{Db, tenants};
use anyhow::{Context, bail};
use std::path::PathBuf;

/// Break-glass key arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct BreakGlassKey {
    /// Directory with this operator's `grant_signing_key`; default `$CREDENTIALS_DIRECTORY`.
    #[arg(long, env = "ACTIOND_CLI_CREDENTIALS_DIR")]
    pub credentials_dir: Option<PathBuf>,
    /// Key id (must start with `breakglass-`); executors must trust it explicitly.
    #[arg(
        long,
        env = "ACTIOND_BREAKGLASS_KEY_ID",
        default_value = "breakglass-1"
    )]
    pub key_id: String,
}

/// `actiond approvals …`.
#[derive(Debug, clap::Subcommand)]
pub enum ApprovalsCmd {
    /// Escalated proposals, oldest first.
    List {
        /// Only this tenant.
        #[arg(long)]
        tenant: Option<String>,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Everything a person needs to decide one proposal.
    Show {
        /// Proposal id.
        id: uuid::Uuid,
        /// Print the whole 64-hex intent hash (by default its first 16 hex characters, which is
        /// what `--intent` asks for).
        #[arg(long)]
        full_intent: bool,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Approve (break-glass): issues a grant with the break-glass key.
    Approve(DecideArgs),
    /// Deny (break-glass).
    Deny(DecideArgs),
    /// Approve with an edit (break-glass): the edited params become a new proposal linked to
    /// this one (which ends `amended`); policy evaluates it like any proposal, and your edit
    /// counts as your approval of it when policy escalates it.
    Amend(AmendArgs),
}

/// Arguments of `approvals amend`.
#[derive(Debug, clap::Args)]
pub struct AmendArgs {
    /// The new values of the params to change, as one JSON object in the params' own units
    /// (`{"amount": 8000}` is 80.00 for a refund in minor units); only the handler's editable
    /// params (`approvals show` lists them), `null` removes an optional one.
    #[arg(long)]
    pub edits: String,
    #[command(flatten)]
    pub decide: DecideArgs,
}

/// Arguments of approve/deny.
#[derive(Debug, Clone, clap::Args)]
pub struct DecideArgs {
    /// Proposal id.
    pub id: uuid::Uuid,
    /// Your subject; must be an approver of the tenant and not the agent's owner. An empty
    /// one is a usage error naming `--as` (exit 2).
    #[arg(long = "as", value_parser = super::non_empty)]
    pub as_subject: String,
    /// The intent hash printed by `approvals list` and `approvals show` (its first 16 hex
    /// characters, or more). Anything but 16 to 64 hex characters is a usage error naming
    /// `--intent` (exit 2); hex that is not this proposal's intent is refused (exit 1).
    #[arg(long, value_parser = parse_intent)]
    pub intent: String,
    /// Comment shown to the agent: one line of at most 500 characters (longer, or with a
    /// control character, is a usage error naming `--comment`, exit 2).
    #[arg(long, value_parser = super::comment)]
    pub comment: Option<String>,
    /// The amount typed again, in major units (`1200.50`), when the handler's `confirm` lists
    /// `amount`.
    #[arg(long)]
    pub confirm_amount: Option<String>,
    /// The target typed again, when the handler's `confirm` lists `target`.
    #[arg(long)]
    pub confirm_target: Option<String>,
    #[command(flatten)]
    pub key: BreakGlassKey,
    #[command(flatten)]
    pub db: DbArgs,
}

/// `--intent`: 16 to 64 hex characters, case-insensitive (normalized to lower case), the start
/// of an intent hash as `approvals list|show` print it.
fn parse_intent(s: &str) -> Result<String, String> {
    let min = actiond_core::approval::INTENT_PREFIX_LEN;
    match actiond_core::approval::shown_intent(s) {
        Ok(h) if h.len() <= 64 => Ok(h),
        _ => Err(format!(
            "must be {min} to 64 hex characters: the start of the intent hash that `actiond approvals show` prints"
        )),
    }
}

/// Shows untrusted text with invisible and control characters made visible.
fn esc(s: &str) -> String {
    crate::output::text(s)
}

/// The first 16 hex characters of an intent hash, as shown and asked for everywhere.
fn short_intent(h: &str) -> &str {
    h.get(..actiond_core::approval::INTENT_PREFIX_LEN)
        .unwrap_or(h)
}

/// `actiond approvals …`.
pub async fn approvals(cmd: ApprovalsCmd) -> anyhow::Result<()> {
    match cmd {
        ApprovalsCmd::List { tenant, db } => list(tenant, &db).await,
        ApprovalsCmd::Show {
            id,
            full_intent,
            db,
        } => show(id, full_intent, &db).await,
        ApprovalsCmd::Approve(a) => decide(a, Verdict::Approve).await,
        ApprovalsCmd::Deny(a) => decide(a, Verdict::Deny).await,
        ApprovalsCmd::Amend(a) => amend(a).await,
    }
}

/// `actiond approvals list`.
async fn list(tenant: Option<String>, db: &DbArgs) -> anyhow::Result<()> {
    let db = db.connect()?;
    let t = tenant.map(|t| vec![t]);
    let rows = approvals::list_escalated(&db, t.as_deref(), 200).await?;
    if rows.is_empty() {
        // A misspelt tenant is not an empty queue: name it and exit 3.
        if let Some([tenant]) = t.as_deref() {
            super::tenant_must_exist(&db, tenant).await?;
        }
        say("no escalated proposals");
    }
    for p in rows {
        let summary = summary_of(&db, &p).await;
        say(&format!(
            "{}\t{}\t{}\t{}\tintent {}",
            p.id,
            p.tenant_id,
            p.created_at.format("%Y-%m-%d %H:%M:%S"),
            esc(&summary),
            short_intent(&p.intent_hash)
        ));
    }
    Ok(())
}

/// Prints the executor's preview: one line, or the first line and the rest indented (an
/// email), dated; "preview unavailable" with the reason; nothing when there is none.
async fn show_preview(db: &actiond_store::Db, tenant: &str, id: uuid::Uuid) -> anyhow::Result<()> {
    let Some(v) = actiond_store::previews::get(db, &[tenant.to_owned()], id).await? else {
        return Ok(());
    };
    let at = v.read_at.format("%H:%M UTC");
    if !v.ok {
        say(&format!(
            "preview    unavailable: {} (tried {at})",
            esc(&v.text)
        ));
        return Ok(());
    }
    let mut lines = v.text.lines();
    let first = lines.next().unwrap_or_default();
    let rest: Vec<&str> = lines.collect();
    if rest.is_empty() {
        say(&format!("preview    {} (read {at})", esc(first)));
    } else {
        say(&format!("preview    (read {at})"));
        for line in std::iter::once(first).chain(rest) {
            say(&format!("  | {}", esc(line)));
        }
    }
    Ok(())
}

/// `actiond approvals show`: everything a person needs to decide, untrusted text escaped.
async fn show(id: uuid::Uuid, full_intent: bool, db: &DbArgs) -> anyhow::Result<()> {
    let db = db.connect()?;
    let Some(p) = approvals::get(&db, None, id).await? else {
        return Err(crate::exit::not_found(format!("proposal {id} not found")));
    };
    let summary = summary_of(&db, &p).await;
    say(&format!("proposal   {}", p.id));
    say(&format!("tenant     {}", p.tenant_id));
    say(&format!("state      {}", p.state));
    say(&format!("action     {}", esc(&summary)));
    say(&format!("target     {}", esc(&p.target)));
    show_preview(&db, &p.tenant_id, id).await?;
    super::effect_lines::show_effect(&db, &p.tenant_id, id, &summary, esc).await?;
    say(&format!(
        "agent      {} ({}), owner {}",
        esc(&p.agent_name),
        p.agent_id,
        esc(p.agent_owner.as_deref().unwrap_or("-"))
    ));
    say(&format!(
        "session    {}",
        esc(p.session_id.as_deref().unwrap_or("-"))
    ));
    say(&format!(
        "rule       {} — {}",
        esc(p.rule_name.as_deref().unwrap_or_default()),
        esc(p.decision_reason.as_deref().unwrap_or(""))
    ));
    say(&format!("params     {}", esc(&p.params_json)));
    say(&format!(
        "agent says {}",
        esc(p.agent_reason.as_deref().unwrap_or("-"))
    ));
    say("source text (untrusted, written by whoever the agent read):");
    for line in p.source_text.as_deref().unwrap_or("-").lines() {
        say(&format!("  | {}", esc(line)));
    }
    show_stage(&db, &p.tenant_id, id).await?;
    if full_intent {
        say(&format!("intent     {}", p.intent_hash));
    } else {
        say(&format!(
            "intent     {}… (all 64 hex: --full-intent)",
            short_intent(&p.intent_hash)
        ));
    }
    say(&format!(
        "policy     version {}",
        p.doc_version
            .map(|v| v.to_string())
            .unwrap_or_else(|| "-".into())
    ));
    say(&format!(
        "decide with: actiond approvals approve|deny {} --as YOUR_SUBJECT --intent {}",
        p.id,
        short_intent(&p.intent_hash)
    ));
    Ok(())
}

/// Prints the stage line of a staged proposal (`stage 1 of 2: team-leads, 0 of 1 needed, 29 min
/// left; next: finance`), or how its stages ended; nothing for a proposal without stages.
async fn show_stage(db: &Db, tenant: &str, id: uuid::Uuid) -> anyhow::Result<()> {
    let all = actiond_store::stages::of_proposals(db, &[tenant.to_owned()], &[id]).await?;
    let Some(stages) = all.get(&id).filter(|s| !s.is_empty()) else {
        return Ok(());
    };
    let Some(s) = actiond_store::stages::open_stage(stages) else {
        let done = stages.iter().filter(|s| s.completed_at.is_some()).count();
        say(&format!(
            "stages     {done} of {} completed; none open",
            stages.len()
        ));
        return Ok(());
    };
    let left = match s.left_secs {
        Some(l) if l > 0.0 => format!("{} s left", l.ceil() as i64),
        _ => "out of time: moving on".into(),
    };
    let next = match stages.iter().find(|n| n.stage == s.stage + 1) {
        Some(n) => format!("next: {}", esc(&n.approvers)),
        None => "last stage".into(),
    };
    say(&format!(
        "stage      {} of {}: {}, {} of {} needed, {left}; {next}",
        s.stage,
        s.of,
        esc(&s.approvers),
        s.approved_by.len(),
        s.required
    ));
    Ok(())
}

/// The proposal's one-sentence summary, with the template of the document that decided it.
async fn summary_of(db: &Db, p: &approvals::ProposalDetail) -> String {
    let params: serde_json::Value = serde_json::from_str(&p.params_json).unwrap_or_default();
    let template = match (p.doc_version, db.client().await) {
        (Some(v), Ok(c)) => tenants::version(&c, &p.tenant_id, v)
            .await
            .ok()
            .flatten()
            .and_then(|d| d.parse().ok())
            .and_then(|d| d.handlers.get(&p.action).and_then(|h| h.summary.clone())),
        _ => None,
    };
    actiond_core::handlers::summary_of(&p.action, template.as_deref(), &params, &p.target)
        .unwrap_or_else(|| format!("{} (no handler)", p.action))
}

/// `actiond approvals approve|deny`: checks the operator is in `approvers.subjects`, records
/// the decision (a grant signed with the break-glass key once enough people approved) and wakes
/// the executors.
async fn decide(a: DecideArgs, verdict: Verdict) -> anyhow::Result<()> {
    let (db, signer, p, approver) = operator(&a).await?;
    let retyped = actiond_core::approval::Retyped {
        amount: a.confirm_amount.clone(),
        target: a.confirm_target.clone(),
    };
    let shown = approvals::Shown {
        intent: &a.intent,
        doc_version: None,
        retyped: &retyped,
        seconds_on_page: None,
        // Break-glass has no authenticator: an Approve that needs a passkey is refused.
        passkey: None,
    };
    let out = approvals::decide(
        &db,
        &signer,
        &p.tenant_id,
        a.id,
        &approver,
        verdict,
        &shown,
        a.comment.as_deref(),
    )
    .await?;
    tracing::warn!(proposal = %a.id, operator = %a.as_subject, "break-glass decision recorded");
    report(&db, &a, out).await
}

/// The break-glass signer, the proposal and the operator as an [`Approver`], once the key id
/// and the operator's listing in `approvers.subjects` are checked.
async fn operator(
    a: &DecideArgs,
) -> anyhow::Result<(Db, GrantSigner, approvals::ProposalDetail, Approver)> {
    if !a.key.key_id.starts_with("breakglass-") {
        return Err(crate::exit::invalid("--key-id must start with breakglass-"));
    }
    let creds = CredentialsDir::resolve(a.key.credentials_dir.as_deref())?;
    let signer = GrantSigner::from_pkcs8_b64(&a.key.key_id, &creds.read("grant_signing_key")?)?;
    let db = a.db.connect()?;
    let Some(p) = approvals::get(&db, None, a.id).await? else {
        return Err(crate::exit::not_found(format!(
            "proposal {} not found",
            a.id
        )));
    };
    // The operator must be an approver of this tenant (by subject: the CLI sees no ID token).
    let c = db.client().await?;
    let doc = tenants::latest(&c, &p.tenant_id)
        .await?
        .context("tenant has no document")?
        .parse()?;
    drop(c);
    if !actiond_core::approval::may_decide_by_subject(&doc.approvers, &a.as_subject) {
        bail!(
            "{} is not listed in approvers.subjects of tenant {}",
            a.as_subject,
            p.tenant_id
        );
    }
    // `--as SUB` is the person SUB of the tenant's pinned issuer: the same person as a web
    // login of SUB, so the two count once.
    let approver = Approver {
        issuer: doc
            .approvers
            .issuer
            .clone()
            .unwrap_or_else(|| "breakglass".into()),
        subject: a.as_subject.clone(),
        email: None,
        channel: "breakglass",
        session: None,
        claims: None,
    };
    Ok((db, signer, p, approver))
}

/// Says what a decision did (exit 0), or why nothing was decided (exit 1).
async fn report(db: &Db, a: &DecideArgs, out: Decided) -> anyhow::Result<()> {
    match out {
        Decided::Approved { grant_id } => {
            let c = db.client().await?;
            let _ = c
                .execute(
                    "SELECT pg_notify($1, '')",
                    &[&actiond_store::listen::CHANNEL_APPROVED],
                )
                .await;
            say(&format!(
                "approved {} (grant {grant_id}); an executor will run it",
                a.id
            ));
        }
        Decided::Denied => say(&format!("denied {}; nothing will run", a.id)),
        Decided::NeedsMore { have, need } => say(&format!(
            "approval recorded ({have} of {need}); another person must approve"
        )),
        // Unreachable today (break-glass cannot approve a staged proposal), said plainly anyway.
        Decided::StageComplete { stage, of, next } => say(&format!(
            "stage {stage} of {of} complete; stage {} ({next}) is open",
            stage + 1
        )),
        Decided::AlreadyDecided { state, by, at } => bail!(
            "proposal is already {state}{}",
            match (by, at) {
                (Some(b), Some(t)) => format!(" (decided by {b} at {})", t.to_rfc3339()),
                _ => String::new(),
            }
        ),
        // The web app's wording says "reload"; here the operator looks again with `show`.
        Decided::Refused(r @ ApprovalRefusal::StaleIntent) => bail!(
            "refused ({}): --intent {} is not the start of this proposal's intent hash; look at it again with `actiond approvals show {}` and decide with the intent it prints; nothing was decided",
            r.rule(),
            a.intent,
            a.id
        ),
        Decided::Refused(r) => bail!("refused ({}): {r}; nothing was decided", r.rule()),
    }
    Ok(())
}

/// `actiond approvals amend`: approve with an edit (see [`approvals::amend::amend`]). Prints
/// the new proposal's id, the diff and what policy (and the operator's approval) made of it.
async fn amend(a: AmendArgs) -> anyhow::Result<()> {
    use actiond_store::approvals::amend::{self as am, Amended};
    let edits = actiond_core::canonical::parse_strict(a.edits.as_bytes()).map_err(|e| {
        crate::exit::invalid(format!(
            "--edits: {}{}",
            if e.path.is_empty() {
                String::new()
            } else {
                format!("{}: ", e.path)
            },
            e.rule
        ))
    })?;
    let d = &a.decide;
    let (db, signer, p, approver) = operator(d).await?;
    let retyped = actiond_core::approval::Retyped {
        amount: d.confirm_amount.clone(),
        target: d.confirm_target.clone(),
    };
    let shown = approvals::Shown {
        intent: &d.intent,
        doc_version: None,
        retyped: &retyped,
        seconds_on_page: None,
        passkey: None,
    };
    let out = am::amend(
        &db,
        &signer,
        &p.tenant_id,
        d.id,
        &approver,
        &shown,
        &edits,
        d.comment.as_deref(),
    )
    .await?;
    tracing::warn!(proposal = %d.id, operator = %d.as_subject, "break-glass amendment recorded");
    match out {
        Amended::Filed(f) => {
            say(&format!(
                "amended {} ({}); new proposal {} is {}",
                d.id,
                am::describe_diff(&f.diff),
                f.id,
                f.state
            ));
            match f.approval {
                Some(Decided::Refused(r)) => say(&format!(
                    "your approval of the new proposal was refused ({}): {r}",
                    r.rule()
                )),
                Some(out) => {
                    let mut again = DecideArgs {
                        id: f.id,
                        ..d.clone()
                    };
                    again.intent = f.intent_hash.clone();
                    report(&db, &again, out).await?;
                }
                None if f.state == actiond_core::state::ProposalState::Pending => say(
                    "policy has not evaluated it yet; your approval is not recorded: approve it with `actiond approvals approve`",
                ),
                None => {}
            }
            Ok(())
        }
        Amended::AlreadyDecided { state, by } => bail!(
            "proposal is already {state}{}; nothing was amended",
            by.map(|b| format!(" (decided by {b})")).unwrap_or_default()
        ),
        Amended::Refused(r) => bail!("refused ({}): {r}; nothing was amended", r.rule()),
        Amended::Invalid(e) => Err(crate::exit::invalid(format!("--edits: {e}"))),
    }
}
