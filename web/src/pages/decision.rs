//! `GET /p/{id}`: the decision page of one proposal. A person sees only proposals of tenants
//! whose current document makes them an approver; any other id is a plain 404.

use crate::AppState;
use crate::card::{self, Fact};
use crate::describe::{describe, ttl_left_secs};
use crate::error::{WebError, WebResult};
use crate::freeze::AgentFacts;
use crate::pages::chrome::{Chrome, human_age, render, when};
use crate::params_view::ParamRow;
use crate::pieces::{self, PieceView};
use crate::session::{Viewer, require_viewer};
use actiond_core::approval::ConfirmField;
use actiond_core::handlers::HandlerKind;
use actiond_core::state::ProposalState;
use actiond_core::tenant::TenantDocument;
use actiond_core::text::reveal_invisible;
use actiond_store::approvals;
use actiond_store::previews;
use actiond_store::queue_views::{self, Filter};
use askama::Template;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use serde_json::Value;
use uuid::Uuid;

/// A person's decision so far.
#[derive(Debug, Clone)]
pub(crate) struct ApprovalRow {
    pub(crate) subject: String,
    pub(crate) email: String,
    pub(crate) decision: String,
    pub(crate) at: String,
    pub(crate) channel: String,
    /// The deny reason (quick pick and note) the person gave, if any.
    pub(crate) comment: String,
    /// "signed with a passkey registered … before (less than a day)", else empty.
    pub(crate) young_passkey: String,
}

/// `/p/{id}`.
#[derive(Template, Default)]
#[template(path = "decision.html")]
pub(crate) struct DecisionPage {
    pub(crate) chrome: Chrome,
    /// The params a person may edit ("Edit and approve"): (name, label, current value as
    /// typed: a refund's amount in major units), empty when the handler declares none.
    pub(crate) editable: Vec<(String, String, String)>,
    /// On a person's edit of another proposal: that proposal's id, who edited, and the diff
    /// in words; empty otherwise.
    pub(crate) amended_from: String,
    pub(crate) amended_by: String,
    pub(crate) amended_diff: String,
    /// On an `amended` proposal: the new proposal's id and state; empty otherwise.
    pub(crate) amended_to: String,
    pub(crate) amended_to_state: String,
    pub(crate) id: String,
    pub(crate) tenant: String,
    pub(crate) sentence: String,
    pub(crate) action: String,
    pub(crate) params: Vec<ParamRow>,
    /// "2 optional fields not set (cc, reply_to)", empty when every field is set.
    pub(crate) unset_optional: String,
    pub(crate) agent_name: String,
    /// The user the agent acted for (delegated workload JWT), empty when none.
    pub(crate) on_behalf_of: String,
    pub(crate) agent_owner: String,
    pub(crate) session: String,
    pub(crate) agent_reason: String,
    pub(crate) rule_name: String,
    pub(crate) rule_reason: String,
    pub(crate) raw_params: String,
    pub(crate) intent_hash: String,
    pub(crate) doc_version: i32,
    pub(crate) state: String,
    pub(crate) created: String,
    pub(crate) age: String,
    pub(crate) expires: String,
    pub(crate) can_decide: bool,
    pub(crate) is_owner: bool,
    pub(crate) already_mine: bool,
    pub(crate) approvals: Vec<ApprovalRow>,
    /// Once decided: "Approved by bob (bob@acme.test) at … UTC via web." (see
    /// `decided_line`); empty while escalated.
    pub(crate) decided_by: String,
    pub(crate) approvals_required: u32,
    pub(crate) approvals_have: usize,
    /// The open approval stage ("stage 1 of 2: team-leads, 0 of 1 needed, 12 min left").
    pub(crate) stage: String,
    /// Who is next after it ("next: finance", "last stage").
    pub(crate) stage_next: String,
    pub(crate) notice: String,
    /// After a decision: the next waiting proposal, if any.
    pub(crate) next_href: String,
    pub(crate) next_label: String,
    pub(crate) warning: String,
    /// The handler's `confirm` asks for the amount / the target to be typed again.
    pub(crate) confirm_amount: bool,
    pub(crate) confirm_target: bool,
    /// The currency the amount is typed in.
    pub(crate) confirm_currency: String,
    /// What the provider holds now (the executor's preview), or "preview unavailable".
    pub(crate) preview: String,
    /// When the preview was read, or why it is unavailable.
    pub(crate) preview_note: String,
    /// The stored preview's SHA-256 (the form's `preview_sha256`), empty when none was read.
    pub(crate) preview_sha256: String,
    /// The preview's warnings ("this refund … is larger than what is left to refund"), shown
    /// as a banner like the injection one.
    pub(crate) preview_warnings: Vec<String>,
    /// After the run: "before → approved → after" rows (label, text) from the executor's
    /// read-back, empty until there is one (`effect_view`).
    pub(crate) effect: Vec<(String, String)>,
    /// The read-back in words (`effect_mismatch`: it ran, but the provider shows otherwise).
    pub(crate) effect_words: String,
    /// The plain-words facts of the card.
    pub(crate) facts: Vec<Fact>,
    /// "Approve refund of 120.00 USD".
    pub(crate) approve_label: String,
    /// "gives orders and claims an approval", empty when no phrase was found.
    pub(crate) banner_reasons: String,
    pub(crate) banner_phrases: Vec<String>,
    /// Hidden characters: code point, name, count.
    pub(crate) hidden: Vec<(String, String, usize)>,
    pub(crate) hidden_total: usize,
    pub(crate) reason_pieces: Vec<PieceView>,
    /// The card shows only the start of the agent's reason; the whole is further down.
    pub(crate) reason_cut: bool,
    pub(crate) source_excerpt: Vec<PieceView>,
    pub(crate) source_cut: bool,
    pub(crate) source_pieces: Vec<PieceView>,
    /// Quick picks of the Deny reason.
    pub(crate) deny_reasons: &'static [&'static str],
    /// When the page was rendered, signed (see `fatigue`).
    pub(crate) shown: String,
    /// The agent: id, whether it is frozen, its open escalations, and whether this person
    /// may freeze it.
    pub(crate) agent_id: String,
    pub(crate) agent_frozen: bool,
    pub(crate) agent_open: i64,
    pub(crate) can_freeze: bool,
    pub(crate) can_unfreeze: bool,
    /// Approve must be signed with a passkey (the page loads the passkey script).
    pub(crate) passkey_needed: bool,
}

/// Query of the decision page: the outcome of the POST that redirected here.
#[derive(Debug, Default)]
pub(crate) struct DecisionQuery {
    result: Option<String>,
}

impl DecisionQuery {
    /// The query of a `/p/{id}` request. It takes only `result`, at most once; any other
    /// parameter is a 400 naming it (at most 64 characters of it, invisible characters shown),
    /// as on `/queue` and `/history`.
    fn parse(uri: &Uri) -> WebResult<Self> {
        let mut q = DecisionQuery::default();
        let raw = uri.query().unwrap_or("");
        for (name, value) in url::form_urlencoded::parse(raw.as_bytes()) {
            let shown: String = reveal_invisible(&name, false).chars().take(64).collect();
            if name != "result" {
                return Err(WebError::BadRequest(format!(
                    "{shown}: is not a parameter of this page (it takes result)"
                )));
            }
            if q.result.replace(value.into_owned()).is_some() {
                return Err(WebError::BadRequest(format!(
                    "{shown}: must be given at most once"
                )));
            }
        }
        Ok(q)
    }
}

/// The proposal id of a `/p/{id}` path: a malformed one is a 400 naming the field and the rule
/// (a missing or invisible proposal stays a 404).
pub(crate) fn parse_id(id: &str) -> WebResult<Uuid> {
    Uuid::parse_str(id).map_err(|_| WebError::BadRequest("proposal id: must be a UUID".into()))
}

/// The recorded decisions as the decision page lists them.
fn approval_rows(approvals_rows: &[queue_views::ApprovalEntry]) -> Vec<ApprovalRow> {
    approvals_rows
        .iter()
        .map(|r| ApprovalRow {
            subject: reveal_invisible(&r.subject, false),
            email: reveal_invisible(r.email.as_deref().unwrap_or_default(), false),
            decision: match r.decision.as_str() {
                "approve" => "Approved".into(),
                _ => "Denied".into(),
            },
            at: when(r.decided_at),
            channel: r.channel.clone(),
            comment: reveal_invisible(r.comment.as_deref().unwrap_or_default(), false),
            young_passkey: young_passkey(r.passkey_age_secs),
        })
        .collect()
}

/// A passkey registered less than this before it signed an approval is pointed out on the
/// decision page: a passkey registered with a stolen session would be that young.
pub(crate) const YOUNG_PASSKEY_SECS: f64 = 86_400.0;

/// "signed with a passkey registered 2 h 05 min before (less than a day)", or empty for an
/// older key or an approval without a passkey.
fn young_passkey(age_secs: Option<f64>) -> String {
    match age_secs {
        Some(a) if a < YOUNG_PASSKEY_SECS => format!(
            "signed with a passkey registered {} before (less than a day)",
            human_age(a as i64)
        ),
        _ => String::new(),
    }
}

/// Who decided a proposal that is no longer escalated, for the top of its page (reloaded, or
/// reached again by Back after the decision): "Approved by bob (bob@acme.test) at … UTC", the
/// people of the deciding verdict joined with "and"; empty while it is pending or escalated.
fn decided_line(state: ProposalState, rows: &[ApprovalRow]) -> String {
    if matches!(state, ProposalState::Escalated | ProposalState::Pending) {
        return String::new();
    }
    if state == ProposalState::Withdrawn {
        return "Withdrawn by its agent before it was approved; nothing ran.".to_owned();
    }
    let after = if state == ProposalState::Stale {
        format!(" {}", actiond_core::preview::STALE_CARD)
    } else {
        String::new()
    };
    let verdict = if state == ProposalState::Denied {
        "Denied"
    } else {
        "Approved"
    };
    let people: Vec<String> = rows
        .iter()
        .filter(|r| r.decision == verdict)
        .map(|r| {
            let email = if r.email.is_empty() {
                String::new()
            } else {
                format!(" ({})", r.email)
            };
            let young = if r.young_passkey.is_empty() {
                String::new()
            } else {
                format!(", {}", r.young_passkey)
            };
            format!("{}{email} at {} via {}{young}", r.subject, r.at, r.channel)
        })
        .collect();
    if people.is_empty() {
        return format!("No person decided this here; it is {state}.{after}");
    }
    format!("{verdict} by {}.{after}", people.join(" and "))
}

/// Quick picks of the Deny reason.
pub(crate) const DENY_REASONS: &[&str] = &[
    "looks injected",
    "wrong amount",
    "not our customer",
    "wrong target",
    "not needed",
    "agent misbehaving",
];

/// `GET /p/{id}`: the decision page.
pub(crate) async fn decision(
    State(state): State<AppState>,
    headers: HeaderMap,
    uri: Uri,
    Path(id): Path<String>,
) -> WebResult<Response> {
    let v = require_viewer(&state, &headers, uri.path()).await?;
    let id = parse_id(&id)?;
    let q = DecisionQuery::parse(&uri)?;
    let p = approvals::get(&state.db, Some(&v.tenants), id)
        .await?
        .ok_or(WebError::NotFound)?;
    let approvals_rows = queue_views::approvals_of(&state.db, &p.tenant_id, id).await?;
    let preview = PreviewView::of(previews::get(&state.db, &v.tenants, id).await?);
    let doc = match p.doc_version {
        Some(ver) => {
            let c = state.db.client().await?;
            state.docs.version_of(&c, &p.tenant_id, ver).await?
        }
        None => None,
    };
    let agent = crate::freeze::agent_facts(&state, &v, &p).await?;
    let next = if q.result.is_some() {
        next_waiting(&state, &v, id).await?
    } else {
        None
    };
    let mut page = decision_page(
        &state,
        &v,
        &p,
        doc.as_deref(),
        &approvals_rows,
        preview,
        agent,
    );
    show_amendment(&state, &p, &mut page).await?;
    let not_readable = doc
        .as_deref()
        .and_then(|d| d.handler(&p.action))
        .and_then(|h| {
            actiond_core::effect::not_readable(
                &p.action,
                &h.settings,
                &serde_json::from_str(&p.params_json).unwrap_or(Value::Null),
            )
        });
    crate::effect_view::fill(
        &state.db,
        &v.tenants,
        id,
        p.state.as_str(),
        not_readable,
        &mut page,
    )
    .await?;
    page.passkey_needed = passkey_needed(
        doc.as_deref(),
        tenant_wide_passkey(&state, &p.tenant_id).await?,
        &p.action,
        &serde_json::from_str(&p.params_json).unwrap_or(Value::Null),
    );
    page.notice = notice(q.result.as_deref()).to_owned();
    show_stage(&state, &v, &p, doc.as_deref(), &mut page).await?;
    if let Some((href, label)) = next {
        page.next_href = href;
        page.next_label = label;
    }
    Ok(render(&page))
}

/// The `approvers.require_passkey` of `tenant`'s *current* document (see [`passkey_needed`]).
async fn tenant_wide_passkey(state: &AppState, tenant: &str) -> WebResult<bool> {
    let c = state.db.client().await?;
    Ok(state
        .docs
        .latest_of(&c, tenant)
        .await?
        .is_some_and(|d| d.approvers.require_passkey))
}

/// The links of an amendment on the page: the proposal `p` was edited from (who edited, the
/// diff in words), or the proposal an edit of `p` became (its state).
async fn show_amendment(
    state: &AppState,
    p: &approvals::ProposalDetail,
    page: &mut DecisionPage,
) -> WebResult<()> {
    use actiond_store::approvals::amend::{describe_diff, links};
    let l = links(&state.db, &p.tenant_id, p.id).await?;
    if let (Some(from), Some(diff)) = (l.amended_from, &l.diff) {
        page.amended_from = from.to_string();
        page.amended_by = reveal_invisible(l.amended_by.as_deref().unwrap_or_default(), false);
        page.amended_diff = describe_diff(diff);
    }
    if let Some((to, st)) = l.amended_to {
        page.amended_to = to.to_string();
        page.amended_to_state = st.to_string();
        page.amended_by = reveal_invisible(l.amended_to_by.as_deref().unwrap_or_default(), false);
        page.amended_diff = l
            .amended_to_diff
            .as_ref()
            .map(describe_diff)
            .unwrap_or_default();
    }
    Ok(())
}

/// The open approval stage of `p` and who is next, and the stage's clock in place of the
/// escalation's when the page shows one.
async fn show_stage(
    state: &AppState,
    v: &Viewer,
    p: &approvals::ProposalDetail,
    doc: Option<&TenantDocument>,
    page: &mut DecisionPage,
) -> WebResult<()> {
    let staged = actiond_store::stages::of_proposals(&state.db, &v.tenants, &[p.id]).await?;
    if let Some(st) = staged.get(&p.id) {
        (page.stage, page.stage_next) = crate::staging::stage_status(st);
        if !page.expires.is_empty() {
            let ttl =
                doc.map(|d| ttl_left_secs(d, p.created_at, actiond_runtime::clock::now_utc()));
            page.expires = crate::staging::clock(st, ttl);
        }
    }
    Ok(())
}

/// The notice at the top of the page after the POST that redirected here (`?result=`).
fn notice(result: Option<&str>) -> &'static str {
    match result {
        Some("approved") => "Approved. A grant was issued; the executor will run the action.",
        Some("denied") => "Denied. Nothing will run; the agent will be told.",
        Some("recorded") => "Your approval is recorded; more approvers are needed.",
        Some("stage-complete") => {
            "Your approval completed its stage; the next stage is open and its approvers are notified."
        }
        Some("already") => "This proposal was already decided: see below who decided and when.",
        Some("amended") => {
            "Your edit is a new proposal (this page). Policy evaluated it; its state and your approval are below."
        }
        Some("frozen") => "Agent frozen: its open requests are denied and new ones are refused.",
        Some("already-frozen") => "This agent was already frozen.",
        Some("unfrozen") => "Agent unfrozen: it may propose again.",
        _ => "",
    }
}

/// The oldest other proposal waiting for this person, as a link and its sentence.
async fn next_waiting(
    state: &AppState,
    v: &Viewer,
    after: Uuid,
) -> WebResult<Option<(String, String)>> {
    let list = queue_views::escalated(&state.db, &v.tenants, Filter::default(), 2).await?;
    let Some(r) = list.into_iter().find(|r| r.id != after) else {
        return Ok(None);
    };
    let c = state.db.client().await?;
    let doc = match r.doc_version {
        Some(ver) => state.docs.version_of(&c, &r.tenant_id, ver).await?,
        None => None,
    };
    let params: Value = serde_json::from_str(&r.params_json).unwrap_or(Value::Null);
    let d = describe(doc.as_deref(), &r.action, &params, &r.target);
    Ok(Some((format!("/p/{}", r.id), d.sentence)))
}

/// Builds the decision page of `p` as `v` sees it (the amendment links, stage, notice, next
/// link and passkey prompt are left for [`decision`] to fill).
fn decision_page(
    state: &AppState,
    v: &Viewer,
    p: &approvals::ProposalDetail,
    doc: Option<&TenantDocument>,
    approvals_rows: &[queue_views::ApprovalEntry],
    preview: PreviewView,
    agent: AgentFacts,
) -> DecisionPage {
    let PreviewView {
        text: preview,
        note: preview_note,
        sha256: preview_sha256,
        warnings: preview_warnings,
    } = preview;
    let params: Value = serde_json::from_str(&p.params_json).unwrap_or(Value::Null);
    let d = describe(doc, &p.action, &params, &p.target);
    let rule = p.rule_name.clone().unwrap_or_default();
    let hot = card::hot_params(doc, &rule, &d.risky, &params);
    let plain = card::plain_words(d.kind, doc, &p.action, &params, &p.target, &hot, &preview);
    let approvals_have = approvals_rows
        .iter()
        .filter(|r| r.decision == "approve")
        .count();
    let already_mine = approvals_rows
        .iter()
        .any(|r| r.subject == v.subject && r.issuer == v.issuer);
    let escalated = p.state == ProposalState::Escalated;
    let now = actiond_runtime::clock::now_utc();
    let confirm = doc
        .and_then(|doc| doc.handler(&p.action))
        .map(|h| actiond_core::approval::confirm_required(&h.confirm, h.confirm_over, &params))
        .unwrap_or_default();
    let (params_rows, unset) = crate::params_view::param_rows(&params, &d, &hot);
    let mut page = DecisionPage {
        editable: d
            .kind
            .filter(|_| escalated)
            .map(|k| editable_fields(k, &params))
            .unwrap_or_default(),
        effect: Vec::new(),
        effect_words: String::new(),
        confirm_amount: confirm.contains(&ConfirmField::Amount),
        confirm_target: confirm.contains(&ConfirmField::Target),
        confirm_currency: reveal_invisible(
            params
                .get("currency")
                .and_then(Value::as_str)
                .unwrap_or_default(),
            false,
        ),
        chrome: v.chrome(),
        id: p.id.to_string(),
        tenant: p.tenant_id.clone(),
        sentence: d.sentence.clone(),
        action: reveal_invisible(&p.action, false),
        params: params_rows,
        unset_optional: crate::params_view::unset_line(&unset),
        agent_name: reveal_invisible(&p.agent_name, false),
        on_behalf_of: reveal_invisible(p.on_behalf_of.as_deref().unwrap_or_default(), false),
        agent_owner: reveal_invisible(p.agent_owner.as_deref().unwrap_or_default(), false),
        session: reveal_invisible(p.session_id.as_deref().unwrap_or_default(), false),
        rule_name: rule,
        rule_reason: reveal_invisible(p.decision_reason.as_deref().unwrap_or_default(), false),
        raw_params: reveal_invisible(&p.params_json, false),
        intent_hash: p.intent_hash.clone(),
        doc_version: p.doc_version.unwrap_or_default(),
        state: p.state.to_string(),
        created: when(p.created_at),
        age: human_age((now - p.created_at).num_seconds()),
        expires: escalation_clock(doc.filter(|_| escalated), p.created_at, now),
        can_decide: escalated && !already_mine && p.doc_version.is_some(),
        is_owner: p.agent_owner.as_deref() == Some(v.subject.as_str()),
        already_mine: escalated && already_mine,
        decided_by: decided_line(p.state, &approval_rows(approvals_rows)),
        approvals: approval_rows(approvals_rows),
        approvals_required: d.approvals_required,
        approvals_have,
        warning: warning(doc, d.kind).to_owned(),
        preview,
        preview_note,
        preview_sha256,
        preview_warnings,
        facts: plain.facts,
        approve_label: plain.approve_label,
        deny_reasons: DENY_REASONS,
        shown: state
            .form_clock
            .stamp(p.id, &v.id_sha256, now.timestamp_millis()),
        agent_id: p.agent_id.to_string(),
        agent_frozen: agent.frozen,
        agent_open: agent.open,
        can_freeze: agent.can_freeze,
        can_unfreeze: agent.can_unfreeze,
        ..DecisionPage::default()
    };
    show_agent_text(&mut page, p);
    page
}

/// The agent-written text of the card: the source text and the agent's reason in pieces
/// (phrases marked, hidden characters named), their excerpts, and the injection banner over
/// everything the agent wrote (source, reason, params, target).
fn show_agent_text(page: &mut DecisionPage, p: &approvals::ProposalDetail) {
    let source = p.source_text.as_deref().unwrap_or_default();
    let reason = p.agent_reason.as_deref().unwrap_or_default();
    let flags = card::Flags::of(&[source, reason, &p.params_json, &p.target]);
    page.source_pieces = pieces::pieces(source);
    (page.source_excerpt, page.source_cut) = pieces::excerpt(&page.source_pieces, 220);
    (page.reason_pieces, page.reason_cut) = pieces::excerpt(&pieces::pieces(reason), 160);
    page.agent_reason = reveal_invisible(reason, true);
    page.banner_reasons = flags.reasons().join(" and ");
    page.banner_phrases = flags.phrases.iter().map(|(p, _)| p.clone()).collect();
    page.hidden_total = flags.hidden_count();
    page.hidden = flags.hidden;
}

/// "expires in 3 h 10 min if nobody decides" for an escalated proposal created at `created`
/// under `doc` (the version that escalated it); empty without one. The stage's clock replaces
/// this one in [`decision`] when the stage ends first.
fn escalation_clock(
    doc: Option<&TenantDocument>,
    created: chrono::DateTime<chrono::Utc>,
    now: chrono::DateTime<chrono::Utc>,
) -> String {
    doc.map(|doc| crate::staging::clock(&[], Some(ttl_left_secs(doc, created, now))))
        .unwrap_or_default()
}

/// The warning above the card: the escalating document version is missing, or the action is
/// not in the handler registry; empty otherwise.
fn warning(doc: Option<&TenantDocument>, kind: Option<HandlerKind>) -> &'static str {
    if doc.is_none() {
        "The tenant document version that escalated this proposal is missing; decide with care."
    } else if kind.is_none() {
        "This action is not in the handler registry; it cannot run."
    } else {
        ""
    }
}

/// Whether Approve of `action` with `params` must be signed with a passkey, by the rule the
/// decision itself is checked with (`approvals::decide`): the handler's
/// `require_passkey`/`passkey_over` from `doc`, the version that escalated the proposal (like
/// every handler setting), or `tenant_wide`, the `approvers.require_passkey` of the tenant's
/// *current* document (like who is an approver), so switching it on after an escalation
/// shows the passkey prompt rather than refusing an unsigned Approve.
fn passkey_needed(
    doc: Option<&TenantDocument>,
    tenant_wide: bool,
    action: &str,
    params: &Value,
) -> bool {
    doc.and_then(|doc| {
        doc.handler(action)
            .map(|h| actiond_core::approval::passkey_required(tenant_wide, h, params))
    })
    .unwrap_or(false)
}

/// The preview as the decision page shows it.
#[derive(Debug, Default)]
pub(crate) struct PreviewView {
    /// What the provider held when the executor read it; "preview unavailable"; empty for
    /// actions without previews. Invisible characters made visible.
    text: String,
    /// When it was read and what an approval binds, or why it is unavailable.
    note: String,
    /// The stored preview's SHA-256, sent back with the decision (the form's `preview_sha256`),
    /// empty when none was read: an Approve is refused when the stored one differs.
    sha256: String,
    /// The handler's warnings, shown as a banner.
    warnings: Vec<String>,
}

impl PreviewView {
    /// The view of a stored preview.
    fn of(p: Option<previews::Preview>) -> Self {
        match p {
            Some(p) if p.ok => Self {
                text: reveal_invisible(&p.text, true),
                note: format!(
                    "read {} from the provider; an approval is bound to it: if what it binds changes before the run, nothing runs (stale)",
                    p.read_at.format("%H:%M UTC on %Y-%m-%d")
                ),
                sha256: p.sha256.unwrap_or_default(),
                warnings: p
                    .warnings
                    .iter()
                    .map(|w| reveal_invisible(w, false))
                    .collect(),
            },
            Some(p) => Self {
                text: "preview unavailable".into(),
                note: format!(
                    "{} (tried {})",
                    reveal_invisible(&p.text, false),
                    p.read_at.format("%H:%M UTC")
                ),
                ..Self::default()
            },
            None => Self::default(),
        }
    }
}

/// The editable params of handler `kind` with their current values as a person types them:
/// a refund's `amount` in major units of its currency (`120.00`), text as it is, anything
/// else as JSON.
fn editable_fields(kind: HandlerKind, params: &Value) -> Vec<(String, String, String)> {
    let currency = params.get("currency").and_then(Value::as_str).unwrap_or("");
    kind.editable()
        .iter()
        .map(|f| {
            let v = params.get(*f).cloned().unwrap_or(Value::Null);
            let (label, shown) = match (kind, *f, &v) {
                (HandlerKind::BillingRefundIssue, "amount", Value::Number(n)) => (
                    format!("amount in {currency}"),
                    actiond_core::handlers::format_minor_units(n.as_i64().unwrap_or(0), currency),
                ),
                (_, _, Value::Null) => ((*f).to_owned(), String::new()),
                (_, _, Value::String(t)) => ((*f).to_owned(), t.clone()),
                (_, _, other) => ((*f).to_owned(), other.to_string()),
            };
            ((*f).to_owned(), label, reveal_invisible(&shown, false))
        })
        .collect()
}
