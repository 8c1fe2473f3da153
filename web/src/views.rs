//! Askama page models. All agent-written text reaches these structs already passed through
//! `text::reveal_invisible`; askama HTML-escapes every value (no `|safe` anywhere).

use crate::card::{Fact, PieceView};
use askama::Template;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

/// Renders a template as an HTML response, or an opaque 500.
pub(crate) fn render<T: Template>(t: &T) -> Response {
    match t.render() {
        Ok(html) => ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response(),
        Err(e) => {
            let op = uuid::Uuid::new_v4();
            tracing::error!(operation_id = %op, error = %e, "template rendering failed");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("internal error; operation id {op}"),
            )
                .into_response()
        }
    }
}

/// The header of every signed-in page.
#[derive(Debug, Clone)]
pub(crate) struct Chrome {
    pub(crate) who: String,
    pub(crate) subject: String,
    pub(crate) tenants: String,
    pub(crate) csrf: String,
    pub(crate) dev: bool,
    /// The person administers at least one tenant: the nav links the admin pages.
    pub(crate) admin: bool,
}

/// An error page.
#[derive(Template)]
#[template(path = "error.html")]
pub(crate) struct ErrorPage<'a> {
    pub(crate) status: u16,
    pub(crate) title: &'a str,
    pub(crate) message: &'a str,
    pub(crate) operation_id: Option<String>,
    /// The signed-in header, when the request carried a valid session (see
    /// `error::navigation_on_errors`); anonymous error pages link the queue and history.
    pub(crate) chrome: Option<Chrome>,
}

/// `/login`.
#[derive(Template)]
#[template(path = "login.html")]
pub(crate) struct LoginPage {
    pub(crate) oidc_issuer: Option<String>,
    pub(crate) oidc_href: String,
    pub(crate) dev: bool,
    pub(crate) prelogin: String,
    pub(crate) next: String,
    pub(crate) logged_out: bool,
}

/// One risky value shown in the queue.
#[derive(Debug, Clone)]
pub(crate) struct RiskyValue {
    pub(crate) name: String,
    pub(crate) value: String,
}

/// One row of the queue or the history.
#[derive(Debug, Clone)]
pub(crate) struct QueueRow {
    pub(crate) id: String,
    pub(crate) tenant: String,
    pub(crate) age: String,
    pub(crate) sentence: String,
    pub(crate) action: String,
    pub(crate) agent: String,
    pub(crate) risky: Vec<RiskyValue>,
    pub(crate) state: String,
    pub(crate) decided: String,
    /// Triage flags: (css class, text), e.g. ("inj", "injection: gives orders").
    pub(crate) flags: Vec<(&'static str, String)>,
    /// The one clock of the row (queue only): "expires in 3 h 10 min", or the open stage's
    /// "stage 1 ends in 12 min" when that comes first.
    pub(crate) left: String,
    /// Seconds until the escalation TTL runs out (queue only; `None` without the document).
    pub(crate) ttl_left: Option<i64>,
    /// Sort key: more flags first.
    pub(crate) risk: usize,
    /// The open approval stage and who is next ("stage 1 of 2: team-leads, 0 of 1 needed,
    /// 12 min left · next: finance"); empty without stages.
    pub(crate) stage: String,
}

/// `/queue` and `/history`.
#[derive(Template)]
#[template(path = "queue.html")]
pub(crate) struct QueuePage {
    pub(crate) chrome: Chrome,
    pub(crate) history: bool,
    pub(crate) rows: Vec<QueueRow>,
    pub(crate) my_tenants: Vec<String>,
    pub(crate) f_tenant: String,
    /// The tenant filter names a tenant this person does not approve for.
    pub(crate) f_tenant_not_mine: bool,
    pub(crate) f_agent: String,
    pub(crate) f_action: String,
    /// Rows the filters match on every page (the queue; the history shows `rows.len()`).
    pub(crate) total: i64,
    /// "41–60 of 75" when the queue has more than one page, else empty.
    pub(crate) page_range: String,
    /// Link to the next page (`/queue?…&after=…`), empty on the last page.
    pub(crate) next_href: String,
    /// Link to the first page with the same filters, empty on the first page.
    pub(crate) first_href: String,
}

/// One parameter of the handler's schema on the decision page.
#[derive(Debug, Clone)]
pub(crate) struct ParamRow {
    pub(crate) name: String,
    /// What shows without a click: the value, or the head of a long one with what it leaves
    /// out marked (see `params_view::fold`).
    pub(crate) value: Vec<crate::card::PieceView>,
    /// The whole value when `value` is only its head, else empty.
    pub(crate) full: String,
    /// Lines of the whole value.
    pub(crate) lines: usize,
    pub(crate) risky: bool,
    pub(crate) missing: bool,
    pub(crate) unexpected: bool,
    pub(crate) description: String,
}

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
#[derive(Template)]
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
    /// `pages::decided_line`); empty while escalated.
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

/// `/passkeys`.
#[derive(Template)]
#[template(path = "passkeys.html")]
pub(crate) struct PasskeysPage {
    pub(crate) chrome: Chrome,
    pub(crate) notice: String,
    pub(crate) rows: Vec<PasskeyRow>,
    /// Tenants the person may register a passkey for.
    pub(crate) tenants: Vec<String>,
    /// Local path to go back to.
    pub(crate) next: String,
    /// How recent a sign-in registration needs, in minutes.
    pub(crate) sign_in_minutes: u64,
}

/// One registered passkey.
pub(crate) struct PasskeyRow {
    pub(crate) tenant: String,
    pub(crate) label: String,
    pub(crate) alg: String,
    pub(crate) created: String,
    pub(crate) last_used: String,
}

/// An Approve refused because it needs a passkey.
#[derive(Template)]
#[template(path = "passkey_needed.html")]
pub(crate) struct PasskeyNeededPage {
    pub(crate) chrome: Chrome,
    pub(crate) tenant: String,
    pub(crate) id: String,
    /// The person has a passkey for the tenant (the browser sent no signature).
    pub(crate) registered: bool,
}

/// One example proposal of a shadow flip.
#[derive(Debug, Clone)]
pub(crate) struct ShadowExample {
    pub(crate) proposal_id: String,
    pub(crate) action: String,
    pub(crate) live_rule: String,
}

/// One group of flipped decisions.
#[derive(Debug, Clone)]
pub(crate) struct ShadowFlipRow {
    pub(crate) direction: &'static str,
    pub(crate) from: &'static str,
    pub(crate) to: &'static str,
    pub(crate) rule: String,
    pub(crate) count: i64,
    pub(crate) examples: Vec<ShadowExample>,
}

/// The report of one shadow document.
#[derive(Debug, Clone)]
pub(crate) struct ShadowSummary {
    pub(crate) seq: i32,
    pub(crate) status: String,
    pub(crate) stored_by: String,
    pub(crate) stored_at: String,
    pub(crate) live_version: String,
    pub(crate) evaluated: i64,
    pub(crate) agreed: i64,
    pub(crate) flipped: i64,
    pub(crate) flips: Vec<ShadowFlipRow>,
}

/// `/admin/shadow`.
#[derive(Template)]
#[template(path = "shadow.html")]
pub(crate) struct ShadowPage {
    pub(crate) chrome: Chrome,
    pub(crate) admin_tenants: Vec<String>,
    pub(crate) tenant: String,
    pub(crate) report: Option<ShadowSummary>,
}

/// One person on the Approvers page.
#[derive(Debug, Clone)]
pub(crate) struct ApproverRow {
    pub(crate) who: String,
    pub(crate) subject: String,
    pub(crate) issuer: String,
    pub(crate) decisions: i64,
    pub(crate) approve_pct: String,
    pub(crate) median: String,
    pub(crate) fast_approvals: i64,
    /// Looks like rubber-stamping: ≥ 20 decisions, > 95% approved, median under 5 s.
    pub(crate) flag: bool,
}

/// One agent on `/admin/agents`.
pub(crate) struct AgentAdminRow {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) owner: String,
    pub(crate) created: String,
    pub(crate) frozen: bool,
    /// When it was revoked (empty: live).
    pub(crate) revoked: String,
}

/// `/admin/agents`.
#[derive(Template)]
#[template(path = "agents.html")]
pub(crate) struct AgentsPage {
    pub(crate) chrome: Chrome,
    pub(crate) admin_tenants: Vec<String>,
    pub(crate) tenant: String,
    pub(crate) rows: Vec<AgentAdminRow>,
    /// What the last revocation did (empty: nothing to say).
    pub(crate) notice: String,
}

/// `/admin/approvers`.
#[derive(Template)]
#[template(path = "approvers.html")]
pub(crate) struct ApproversPage {
    pub(crate) chrome: Chrome,
    pub(crate) admin_tenants: Vec<String>,
    pub(crate) tenant: String,
    pub(crate) rows: Vec<ApproverRow>,
}
