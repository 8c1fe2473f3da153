//! `actiond approvals …`: the break-glass CLI. Operators list and inspect escalated proposals
//! and decide them with the break-glass key, by subject (the CLI sees no ID token).

use super::DbArgs;
use crate::args::IdArg;
use actiond_core::approval::ApprovalRefusal;
use actiond_core::grant::GrantSigner;
use actiond_core::state::ProposalState;
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
    /// Proposals waiting for a person (`escalated`), oldest first; `--state`, `--agent` and
    /// `--since` select others. Each row is flagged as the web app's queue flags it (injection
    /// phrases, the preview's warnings, hidden or mixed-script characters).
    List {
        /// Only this tenant.
        #[arg(long)]
        tenant: Option<String>,
        /// Only proposals in this state (`escalated` by default; `any` for every state).
        #[arg(long, default_value = "escalated", value_parser = state_filter)]
        state: StateFilter,
        /// Only proposals of the agent with this name.
        #[arg(long)]
        agent: Option<String>,
        /// Only proposals created since: a duration back from now (`1h`, `7d`) or an RFC 3339
        /// time with its offset (`2026-11-01T00:00:00Z`); a time in the future, or more than
        /// 36500d ago, is refused.
        #[arg(long, value_parser = crate::args::since)]
        since: Option<chrono::DateTime<chrono::Utc>>,
        /// At most this many rows (1 to 10000).
        #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(i64).range(1..=10_000), allow_negative_numbers = true)]
        limit: i64,
        #[command(flatten)]
        out: crate::output::Output,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Everything a person needs to decide one proposal, with the web app's flags (injection
    /// phrases, the preview's warnings, hidden or mixed-script characters) and the commands
    /// that decide it (with `--confirm-amount` when it must be typed again; deny only when
    /// just the web app can approve it: a staged proposal, or one that needs a passkey).
    Show {
        /// Proposal id, or a unique prefix of it (at least 4 hex digits).
        #[arg(value_parser = crate::args::id_arg)]
        id: IdArg,
        /// Print the whole 64-hex intent hash (by default its first 16 hex characters, which is
        /// what `--intent` asks for).
        #[arg(long)]
        full_intent: bool,
        #[command(flatten)]
        out: crate::output::Output,
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

/// `approvals list --state`: one state, or every state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateFilter {
    /// Every state.
    Any,
    /// This one.
    One(ProposalState),
}

/// Parses `--state`: a proposal state's name or `any`.
fn state_filter(s: &str) -> Result<StateFilter, String> {
    if s == "any" {
        return Ok(StateFilter::Any);
    }
    ProposalState::parse(s)
        .map(StateFilter::One)
        .ok_or_else(|| {
            let names: Vec<&str> = ProposalState::ALL.iter().map(|s| s.as_str()).collect();
            format!("must be any or one of {}", names.join(", "))
        })
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
    /// Proposal id, or a unique prefix of it (at least 4 hex digits).
    #[arg(value_parser = crate::args::id_arg)]
    pub id: IdArg,
    /// Your subject; must be an approver of the tenant and not the agent's owner. An empty
    /// one is a usage error naming `--as` (exit 2).
    /// Also read from `ACTIOND_OPERATOR`, so the commands `approvals show` prints paste as
    /// they are.
    #[arg(long = "as", env = "ACTIOND_OPERATOR", value_parser = super::non_empty)]
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
        ApprovalsCmd::List {
            tenant,
            state,
            agent,
            since,
            limit,
            out,
            db,
        } => {
            let filter = approvals::ListFilter {
                tenants: tenant.map(|t| vec![t]),
                state: match state {
                    StateFilter::Any => None,
                    StateFilter::One(s) => Some(s),
                },
                agent,
                since,
                limit,
            };
            list(&filter, out.output, &db).await
        }
        ApprovalsCmd::Show {
            id,
            full_intent,
            out,
            db,
        } => show(&id, full_intent, out.output, &db).await,
        ApprovalsCmd::Approve(a) => decide(a, Verdict::Approve).await,
        ApprovalsCmd::Deny(a) => decide(a, Verdict::Deny).await,
        ApprovalsCmd::Amend(a) => amend(a).await,
    }
}

/// The web app's queue flags of a proposal: those of its agent-written text
/// ([`crate::output::flags`]) with its stored preview's `warnings` between them, in the queue's
/// order and words (`⚠ injection: …`, `⚠ preview: …`, `⚠ 1 hidden: …`).
fn flags_of(p: &approvals::ProposalDetail, warnings: &[String]) -> Vec<String> {
    let mut flags = crate::output::flags(&[
        p.source_text.as_deref().unwrap_or_default(),
        p.agent_reason.as_deref().unwrap_or_default(),
        &p.params_json,
        &p.target,
        &p.action,
    ]);
    if !warnings.is_empty() {
        let at = usize::from(flags.first().is_some_and(|f| f.starts_with("⚠ injection")));
        let said: Vec<String> = warnings.iter().map(|w| esc(w)).collect();
        flags.insert(at, format!("⚠ preview: {}", said.join("; ")));
    }
    flags
}

/// `actiond approvals list`.
async fn list(
    filter: &approvals::ListFilter,
    format: crate::output::Format,
    db: &DbArgs,
) -> anyhow::Result<()> {
    let db = db.connect()?;
    let rows = approvals::list(&db, filter).await?;
    if rows.is_empty() {
        // A misspelt tenant is not an empty queue: name it and exit 3.
        if let Some([tenant]) = filter.tenants.as_deref() {
            super::tenant_must_exist(&db, tenant).await?;
        }
    }
    let mut tenants: Vec<String> = rows.iter().map(|p| p.tenant_id.clone()).collect();
    tenants.sort();
    tenants.dedup();
    let ids: Vec<uuid::Uuid> = rows.iter().map(|p| p.id).collect();
    let warnings = actiond_store::previews::warnings_of(&db, &tenants, &ids).await?;
    let mut out = Vec::with_capacity(rows.len());
    for p in &rows {
        out.push(serde_json::json!({
            "id": p.id,
            "tenant": p.tenant_id,
            "created_at": p.created_at,
            "created": p.created_at.format("%Y-%m-%d %H:%M:%S").to_string(),
            "state": p.state.as_str(),
            "agent": p.agent_name,
            "action": p.action,
            "summary": summary_of(&db, p).await,
            "intent": short_intent(&p.intent_hash),
            "intent_hash": p.intent_hash,
            "flags": flags_of(p, warnings.get(&p.id).map_or(&[], Vec::as_slice)),
        }));
    }
    let empty = match filter.state {
        Some(ProposalState::Escalated) => "no escalated proposals".to_owned(),
        Some(s) => format!("no {} proposals", s.as_str()),
        None => "no proposals".to_owned(),
    };
    crate::output::print_list(
        format,
        &out,
        &[
            ("ID", "id"),
            ("TENANT", "tenant"),
            ("CREATED (UTC)", "created"),
            ("STATE", "state"),
            ("AGENT", "agent"),
            ("INTENT", "intent"),
            ("SUMMARY", "summary"),
            ("FLAGS", "flags"),
        ],
        &empty,
    )
}

/// The executor's preview, as `(lines for the table, JSON, its warnings)`: one line, or the
/// first line and the rest indented (an email), dated; "preview unavailable" with the reason;
/// nothing when there is none. The warnings ("this refund … is larger than what is left to
/// refund") are shown as a flag ([`flags_of`]).
async fn preview(
    db: &actiond_store::Db,
    tenant: &str,
    id: uuid::Uuid,
) -> anyhow::Result<(Vec<String>, serde_json::Value, Vec<String>)> {
    let Some(v) = actiond_store::previews::get(db, &[tenant.to_owned()], id).await? else {
        return Ok((Vec::new(), serde_json::Value::Null, Vec::new()));
    };
    let json = serde_json::json!({
        "ok": v.ok, "text": v.text, "read_at": v.read_at, "warnings": v.warnings,
    });
    let at = v.read_at.format("%H:%M UTC");
    if !v.ok {
        let line = format!("preview    unavailable: {} (tried {at})", esc(&v.text));
        return Ok((vec![line], json, v.warnings));
    }
    let mut lines = v.text.lines();
    let first = lines.next().unwrap_or_default();
    let rest: Vec<&str> = lines.collect();
    if rest.is_empty() {
        let line = format!("preview    {} (read {at})", esc(first));
        return Ok((vec![line], json, v.warnings));
    }
    let mut out = vec![format!("preview    (read {at})")];
    for line in std::iter::once(first).chain(rest) {
        out.push(format!("  | {}", esc(line)));
    }
    Ok((out, json, v.warnings))
}

/// How this binary was invoked, for commands to paste: the path that ran when it was run by
/// a path (`target/debug/actiond`, which nothing puts on `PATH`), else `actiond`.
pub(crate) fn invoked_as() -> String {
    let arg0 = std::env::args().next().unwrap_or_default();
    let ok = arg0.contains('/')
        && arg0
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+".contains(c));
    if ok { arg0 } else { "actiond".into() }
}

/// What a break-glass Approve of a proposal must add, or why it cannot approve it at all, by
/// the rules the store applies to it ([`approvals::decide`]).
#[derive(Debug, Default)]
struct ApproveHint {
    /// Why only the approval web app can approve it (a staged proposal, a passkey); the
    /// approve command is then not printed.
    web_only: Option<String>,
    /// The `--confirm-…` arguments the handler's `confirm:` asks for, each with a placeholder
    /// the person replaces with the value they read (`--confirm-amount AMOUNT_AS_SHOWN`).
    confirm: Vec<String>,
}

/// [`ApproveHint`] of `p`, from the handler of the document version that escalated it and the
/// tenant's current `approvers` (as a decision reads them). Nothing is added when either cannot
/// be read: the store then refuses with the reason.
async fn approve_hint(db: &Db, p: &approvals::ProposalDetail) -> ApproveHint {
    use actiond_core::approval::{ConfirmField, confirm_required, passkey_required};
    let params: serde_json::Value = serde_json::from_str(&p.params_json).unwrap_or_default();
    let docs = async {
        let c = db.client().await.ok()?;
        let at = decided_document(&c, p).await?;
        let now: actiond_core::tenant::TenantDocument = tenants::latest(&c, &p.tenant_id)
            .await
            .ok()
            .flatten()?
            .parse()
            .ok()?;
        Some((at, now))
    };
    let Some((at, now)) = docs.await else {
        return ApproveHint::default();
    };
    let Some(h) = at.handler(&p.action) else {
        return ApproveHint::default();
    };
    if h.approvals
        .as_ref()
        .is_some_and(|s| !s.applicable(&params).is_empty())
    {
        return ApproveHint {
            web_only: Some(
                "approve in the approval web app, stage by stage: break-glass cannot approve a staged proposal".into(),
            ),
            confirm: Vec::new(),
        };
    }
    if passkey_required(now.approvers.require_passkey, h, &params) {
        return ApproveHint {
            web_only: Some(
                "approve in the approval web app, with your passkey: break-glass cannot give one"
                    .into(),
            ),
            confirm: Vec::new(),
        };
    }
    // A placeholder, never the value: the person types what they read above (a command that
    // carried the value would let a push-bombed operator approve without reading it, which
    // is what `confirm:` exists to prevent). Pasted unchanged, the store refuses it.
    let confirm = confirm_required(&h.confirm, h.confirm_over, &params)
        .into_iter()
        .map(|f| match f {
            ConfirmField::Amount => "--confirm-amount AMOUNT_AS_SHOWN".to_owned(),
            ConfirmField::Target => "--confirm-target TARGET_AS_SHOWN".to_owned(),
        })
        .collect();
    ApproveHint {
        web_only: None,
        confirm,
    }
}

/// The commands that decide `p`, to paste as printed (approve, unless `hint` says only the
/// web app can, with the values `confirm:` asks for; then deny); `--as` is left out when
/// `ACTIOND_OPERATOR` names the operator (it is then read from there).
fn decide_commands(p: &approvals::ProposalDetail, hint: &ApproveHint) -> Vec<String> {
    let exe = invoked_as();
    let who = if std::env::var("ACTIOND_OPERATOR").is_ok_and(|v| !v.trim().is_empty()) {
        String::new()
    } else {
        " --as YOUR_SUBJECT".into()
    };
    let intent = short_intent(&p.intent_hash);
    let mut out = Vec::new();
    if hint.web_only.is_none() {
        let confirm: String = hint.confirm.iter().map(|c| format!(" {c}")).collect();
        out.push(format!(
            "{exe} approvals approve {} --intent {intent}{confirm}{who}",
            p.id
        ));
    }
    out.push(format!(
        "{exe} approvals deny {} --intent {intent}{who}",
        p.id
    ));
    out
}

/// `actiond approvals show`: everything a person needs to decide, untrusted text escaped.
async fn show(
    id: &IdArg,
    full_intent: bool,
    format: crate::output::Format,
    db: &DbArgs,
) -> anyhow::Result<()> {
    let db = db.connect()?;
    let id = crate::args::resolve(&db, id).await?;
    let Some(p) = approvals::get(&db, None, id).await? else {
        return Err(crate::exit::not_found(format!("proposal {id} not found")));
    };
    let summary = summary_of(&db, &p).await;
    let (preview_lines, preview_json, warnings) = preview(&db, &p.tenant_id, id).await?;
    let (stage_line, stages_json) = stage(&db, &p.tenant_id, id).await?;
    let not_readable = not_readable_of(&db, &p).await;
    let rule_reason = rule_reason_of(&db, &p).await;
    let effect_lines = super::effect_lines::effect_lines(
        &db,
        &p.tenant_id,
        (id, p.state),
        &summary,
        not_readable,
        esc,
    )
    .await?;
    let flags = flags_of(&p, &warnings);
    let (decide, web_only) = if p.state == ProposalState::Escalated {
        let hint = approve_hint(&db, &p).await;
        (decide_commands(&p, &hint), hint.web_only)
    } else {
        (Vec::new(), None)
    };
    let mut v = serde_json::to_value(&p)?;
    if let Some(m) = v.as_object_mut() {
        m.insert("summary".into(), summary.clone().into());
        m.insert("preview".into(), preview_json);
        m.insert("stages".into(), stages_json);
        m.insert("flags".into(), flags.clone().into());
        m.insert(
            "intent".into(),
            short_intent(&p.intent_hash).to_owned().into(),
        );
        m.insert("decide_with".into(), decide.clone().into());
        m.insert("approve_elsewhere".into(), web_only.clone().into());
    }
    crate::output::print(format, &v, || {
        let mut l = vec![
            format!("proposal   {}", p.id),
            format!("tenant     {}", p.tenant_id),
            format!("state      {}", p.state),
            format!("action     {}", esc(&summary)),
            format!("target     {}", esc(&p.target)),
        ];
        l.extend(preview_lines);
        l.extend(effect_lines);
        l.push(format!(
            "agent      {} ({}), owner {}",
            esc(&p.agent_name),
            p.agent_id,
            esc(p.agent_owner.as_deref().unwrap_or("-"))
        ));
        l.push(format!(
            "session    {}",
            esc(p.session_id.as_deref().unwrap_or("-"))
        ));
        l.push(format!(
            "rule       {} — {}",
            esc(p.rule_name.as_deref().unwrap_or_default()),
            esc(rule_reason
                .as_deref()
                .or(p.decision_reason.as_deref())
                .unwrap_or(""))
        ));
        // The proposal's reason now, what its agent reads, when it is no longer the rule's: a
        // person's decision (their comment, or "approved by an approver"), a re-escalation's.
        if let (Some(rule), Some(now)) = (&rule_reason, &p.decision_reason)
            && rule != now
        {
            l.push(format!("reason     {}", esc(now)));
        }
        l.push(format!("params     {}", esc(&p.params_json)));
        l.push(format!(
            "agent says {}",
            esc(p.agent_reason.as_deref().unwrap_or("-"))
        ));
        l.push("source text (untrusted, written by whoever the agent read):".into());
        for line in p.source_text.as_deref().unwrap_or("-").lines() {
            l.push(format!("  | {}", esc(line)));
        }
        for f in &flags {
            l.push(format!("flag       {f}"));
        }
        l.extend(stage_line);
        l.push(if full_intent {
            format!("intent     {}", p.intent_hash)
        } else {
            format!(
                "intent     {}… (all 64 hex: --full-intent)",
                short_intent(&p.intent_hash)
            )
        });
        l.push(format!(
            "policy     version {}",
            p.doc_version
                .map(|v| v.to_string())
                .unwrap_or_else(|| "-".into())
        ));
        if let Some(why) = &web_only {
            l.push("deny with:".into());
            l.extend(decide.iter().map(|c| format!("  {c}")));
            l.push(why.clone());
        } else if !decide.is_empty() {
            l.push("decide with one of:".into());
            l.extend(decide.iter().map(|c| format!("  {c}")));
        }
        l.join("\n")
    })
}

/// The stage line of a staged proposal (`stage 1 of 2: team-leads, 0 of 1 needed, 29 s
/// left; next: finance`), or how its stages ended; none for a proposal without stages. With
/// the stages as JSON (`[]` without).
async fn stage(
    db: &Db,
    tenant: &str,
    id: uuid::Uuid,
) -> anyhow::Result<(Option<String>, serde_json::Value)> {
    let all = actiond_store::stages::of_proposals(db, &[tenant.to_owned()], &[id]).await?;
    let Some(stages) = all.get(&id).filter(|s| !s.is_empty()) else {
        return Ok((None, serde_json::json!([])));
    };
    let json: Vec<serde_json::Value> = stages
        .iter()
        .map(|s| {
            serde_json::json!({
                "stage": s.stage, "of": s.of, "approvers": s.approvers, "required": s.required,
                "opened_at": s.opened_at, "due_at": s.due_at, "completed_at": s.completed_at,
                "timed_out_at": s.timed_out_at, "approved_by": s.approved_by,
            })
        })
        .collect();
    let json = serde_json::Value::Array(json);
    let Some(s) = actiond_store::stages::open_stage(stages) else {
        let done = stages.iter().filter(|s| s.completed_at.is_some()).count();
        let line = format!("stages     {done} of {} completed; none open", stages.len());
        return Ok((Some(line), json));
    };
    let left = match s.left_secs {
        Some(l) if l > 0.0 => format!("{} s left", l.ceil() as i64),
        _ => "out of time: moving on".into(),
    };
    let next = match stages.iter().find(|n| n.stage == s.stage + 1) {
        Some(n) => format!("next: {}", esc(&n.approvers)),
        None => "last stage".into(),
    };
    let line = format!(
        "stage      {} of {}: {}, {} of {} needed, {left}; {next}",
        s.stage,
        s.of,
        esc(&s.approvers),
        s.approved_by.len(),
        s.required
    );
    Ok((Some(line), json))
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

/// The reason the deciding rule gave, from policy's `proposal.decided` event: the proposal's
/// `decision_reason` holds it only until a person decides (then their comment, or "approved by
/// an approver", which is what the agent reads). `None` when there is no such event, or once
/// retention cleared the proposal's reason (nothing of it comes back from the audit log).
async fn rule_reason_of(db: &Db, p: &approvals::ProposalDetail) -> Option<String> {
    p.decision_reason.as_ref()?;
    let c = db.client().await.ok()?;
    let events = actiond_store::audit::for_proposal(&c, &p.tenant_id, p.id)
        .await
        .ok()?;
    let decided = actiond_core::audit::AuditKind::ProposalDecided.as_str();
    events
        .iter()
        .rev()
        .find(|e| e.kind == decided && e.actor == "policy")
        .and_then(|e| e.detail.get("reason")?.as_str().map(str::to_owned))
}

/// Why `p`'s effect is not read back ([`actiond_core::effect::not_readable`]), from the
/// settings of the document version that decided it.
async fn not_readable_of(db: &Db, p: &approvals::ProposalDetail) -> Option<String> {
    let params: serde_json::Value = serde_json::from_str(&p.params_json).unwrap_or_default();
    let c = db.client().await.ok()?;
    let doc = decided_document(&c, p).await?;
    let h = doc.handlers.get(&p.action)?;
    actiond_core::effect::not_readable(&p.action, &h.settings, &params)
}

/// The tenant document version that decided `p` (`doc_version`), parsed; `None` when `p` has
/// none or it cannot be read or parsed.
async fn decided_document(
    c: &actiond_store::Client,
    p: &approvals::ProposalDetail,
) -> Option<actiond_core::tenant::TenantDocument> {
    tenants::version(c, &p.tenant_id, p.doc_version?)
        .await
        .ok()
        .flatten()?
        .parse()
        .ok()
}

/// `actiond approvals approve|deny`: checks the operator is in `approvers.subjects`, records
/// the decision (a grant signed with the break-glass key once enough people approved) and wakes
/// the executors.
async fn decide(a: DecideArgs, verdict: Verdict) -> anyhow::Result<()> {
    let (db, signer, p, approver) = operator(&a).await?;
    let id = p.id;
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
        preview: None,
    };
    let out = approvals::decide(
        &db,
        &signer,
        &p.tenant_id,
        id,
        &approver,
        verdict,
        &shown,
        a.comment.as_deref(),
    )
    .await?;
    tracing::warn!(proposal = %id, operator = %a.as_subject, "break-glass decision recorded");
    report(&db, id, &a.intent, out).await
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
    let id = crate::args::resolve(&db, &a.id).await?;
    let Some(p) = approvals::get(&db, None, id).await? else {
        return Err(crate::exit::not_found(format!("proposal {id} not found")));
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
        deployment_issuer: None,
    };
    Ok((db, signer, p, approver))
}

/// Says what a decision did (exit 0), or why nothing was decided (exit 1).
async fn report(db: &Db, id: uuid::Uuid, intent: &str, out: Decided) -> anyhow::Result<()> {
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
                "approved {id} (grant {grant_id}); an executor will run it"
            ));
        }
        Decided::Denied => say(&format!("denied {id}; nothing will run")),
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
            "refused ({}): --intent {intent} is not the start of this proposal's intent hash; look at it again with `{} approvals show {id}` and decide with the intent it prints; nothing was decided",
            r.rule(),
            invoked_as()
        ),
        Decided::Refused(r) => bail!(
            "refused ({}): {}; nothing was decided",
            r.rule(),
            refusal(&r)
        ),
    }
    Ok(())
}

/// A refusal in the CLI's words: the `confirm:` rules name the flag (`--confirm-amount`) where
/// the web app's words name its form field (`confirm_amount`); the others are the same.
fn refusal(r: &ApprovalRefusal) -> String {
    match r {
        ApprovalRefusal::ConfirmMissing { field } => format!(
            "--confirm-{field}: type the {field} shown by `{} approvals show` to approve",
            invoked_as()
        ),
        ApprovalRefusal::ConfirmMismatch { field } => {
            format!("--confirm-{field}: the {field} typed is not the proposal's {field}")
        }
        r => r.to_string(),
    }
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
    let id = p.id;
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
        preview: None,
    };
    let out = am::amend(
        &db,
        &signer,
        &p.tenant_id,
        id,
        &approver,
        &shown,
        &edits,
        d.comment.as_deref(),
    )
    .await?;
    tracing::warn!(proposal = %id, operator = %d.as_subject, "break-glass amendment recorded");
    match out {
        Amended::Filed(f) => {
            say(&format!(
                "amended {id} ({}); new proposal {} is {}",
                am::describe_diff(&f.diff),
                f.id,
                f.state
            ));
            match f.approval {
                Some(Decided::Refused(r)) => say(&format!(
                    "your approval of the new proposal was refused ({}): {}",
                    r.rule(),
                    refusal(&r)
                )),
                Some(out) => report(&db, f.id, &f.intent_hash, out).await?,
                None if f.state == actiond_core::state::ProposalState::Pending => say(
                    "policy has not evaluated it yet; your approval is not recorded: approve it with `actiond approvals approve` (`approvals show` prints the command)",
                ),
                None => {}
            }
            Ok(())
        }
        Amended::AlreadyDecided { state, by } => bail!(
            "proposal is already {state}{}; nothing was amended",
            by.map(|b| format!(" (decided by {b})")).unwrap_or_default()
        ),
        Amended::Refused(r) => bail!(
            "refused ({}): {}; nothing was amended",
            r.rule(),
            refusal(&r)
        ),
        Amended::Invalid(e) => Err(crate::exit::invalid(format!("--edits: {e}"))),
    }
}
