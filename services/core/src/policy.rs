//! Deterministic policy: effects, CEL rules and the decision procedure (design, "policy").
//!
//! - Severity is monotonic: `block > escalate > allow`. The most severe matching rule wins; a
//!   later input (a rule, `min_effect`, a classifier) may raise a decision, never lower it.
//! - An action that is not in the tenant's handler registry is blocked: "no handler for X"
//!   ([`no_handler_reason`]; an empty name reads `no handler for "" (empty action name)`, and
//!   one with white space at an end is quoted: `no handler for "billing.refund.issue "`).
//! - A rule that fails to evaluate (missing field, type mismatch, non-boolean result) fails
//!   closed: it counts as matched with at least `escalate` (or `block` if that is its effect).
//!   The error goes to the audit log only; the agent sees a generic reason.
//! - CEL has no evaluation budget of its own. [`decide_within`] gives an evaluation a deadline
//!   that every operation and every iteration of a comprehension checks ([`CompiledRule`]
//!   holds each rule rewritten so, [`with_deadline_checks`]): an evaluation past it stops at
//!   its next operation and fails closed as [`Decision::budget_exceeded`]. The same checks
//!   refuse values larger than a rule may build ([`MAX_RULE_VALUE_BYTES`]), and documents
//!   being applied are held to [`MAX_RULE_DEPTH`]. Callers still run it off the async
//!   executor with a timeout, for what the deadline cannot interrupt.

pub use crate::rule_check::{MAX_RULE_DEPTH, compile_rule, depth, non_boolean};
use crate::tenant::TenantDocument;
pub use crate::vocab::Effect;
use cel::{Context, Env, Value as Cel};
use serde::Serialize;
use serde_json::Value;
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A compiled rule.
#[derive(Clone)]
pub struct CompiledRule {
    /// Rule name.
    pub name: String,
    /// Effect when it matches.
    pub effect: Effect,
    /// Tenant-written reason.
    pub reason: String,
    /// The rule's expression with every comprehension's iterations checking the evaluation's
    /// deadline ([`with_deadline_checks`]).
    expression: Arc<cel::IdedExpr>,
}

/// The function a rule rewritten by [`with_deadline_checks`] calls around its operations and
/// in its comprehensions' iterations. A name that starts with `@` cannot be written in CEL source, so
/// no rule can call or shadow it.
const DEADLINE_CHECK: &str = "@actiond_deadline";

thread_local! {
    /// The deadline of the evaluation running on this thread ([`decide_within`]), if any.
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// The largest string or bytes value, in bytes, that a rule may build. Params are at most
/// 64 KiB (the API's body limit), so only a rule that multiplies them gets near: a chain such
/// as `s + s + … + s`, or `map`s nested so that each doubles its input, would otherwise fill
/// the process's memory within its time budget and abort it, for every tenant.
pub const MAX_RULE_VALUE_BYTES: usize = 1 << 20;

/// The most elements a list or map built by a rule may hold (see [`MAX_RULE_VALUE_BYTES`]).
pub const MAX_RULE_VALUE_ITEMS: i64 = 1 << 17;

/// An error once this thread's evaluation is past its deadline.
fn past_deadline() -> Result<(), cel::ExecutionError> {
    if DEADLINE
        .get()
        .is_some_and(|deadline| Instant::now() >= deadline)
    {
        return Err(cel::ExecutionError::function_error(
            DEADLINE_CHECK,
            "the evaluation ran past its time budget",
        ));
    }
    Ok(())
}

/// The function `matches` calls become in a rule rewritten by [`with_deadline_checks`]:
/// the same regular expressions as CEL's `matches` (the `regex` crate, RE2 syntax), within
/// [`MAX_MATCH_TEXT_BYTES`] and [`MAX_PATTERN_BYTES`].
const BOUNDED_MATCHES: &str = "@actiond_matches";

/// The longest text `matches` looks at in a rule, in bytes: the params' own limit. Matching
/// costs up to the text's length times the pattern's compiled size (the regex crate falls
/// back from its DFA to an NFA simulation when a pattern such as `a[ab]{100}c` has too many
/// states), so an agent's text concatenated in a rule, or a pattern from params, took
/// seconds to minutes in one call, past any deadline.
pub const MAX_MATCH_TEXT_BYTES: usize = 64 * 1024;

/// The largest compiled pattern `matches` accepts in a rule, in bytes of the regex crate's
/// `size_limit` (its default is 10 MiB): `a[ab]{100}c` fits, `a[ab]{300}c` does not. With
/// [`MAX_MATCH_TEXT_BYTES`] one call takes at most tens of milliseconds.
pub const MAX_PATTERN_BYTES: usize = 16 * 1024;

thread_local! {
    /// Patterns compiled on this thread, so that a rule does not compile its pattern again for
    /// every proposal and iteration. Emptied when it holds 64.
    static PATTERNS: std::cell::RefCell<HashMap<String, regex::Regex>> =
        std::cell::RefCell::new(HashMap::new());
}

/// `@actiond_matches(text, pattern)`: whether `pattern` matches somewhere in `text`, as CEL's
/// `text.matches(pattern)`; an error when `text` is longer than [`MAX_MATCH_TEXT_BYTES`] or
/// `pattern` is not a valid regular expression within [`MAX_PATTERN_BYTES`].
fn bounded_matches<'b, 'v>(
    args: Vec<cel::common::value::CowVal<'b, 'v>>,
) -> Result<cel::common::value::CowVal<'b, 'v>, cel::ExecutionError> {
    use cel::common::types::{CelBool, CelString};
    let text_of = |i: usize| {
        args.get(i)
            .and_then(|v| v.downcast_ref::<CelString>())
            .map(|s| s.inner())
            .ok_or_else(|| cel::ExecutionError::function_error("matches", "takes two strings"))
    };
    let (text, pattern) = (text_of(0)?, text_of(1)?);
    if text.len() > MAX_MATCH_TEXT_BYTES {
        return Err(cel::ExecutionError::function_error(
            "matches",
            format!(
                "the text is longer than {} KiB",
                MAX_MATCH_TEXT_BYTES / 1024
            ),
        ));
    }
    PATTERNS.with(|patterns| {
        let mut patterns = patterns.borrow_mut();
        if !patterns.contains_key(pattern) {
            let compiled = regex::RegexBuilder::new(pattern)
                .size_limit(MAX_PATTERN_BYTES)
                .build()
                .map_err(|e| {
                    cel::ExecutionError::function_error(
                        "matches",
                        format!(
                            "not a valid regular expression within {} KiB compiled: {e}",
                            MAX_PATTERN_BYTES / 1024
                        ),
                    )
                })?;
            if patterns.len() >= 64 {
                patterns.clear();
            }
            patterns.insert(pattern.to_owned(), compiled);
        }
        let matched = patterns.get(pattern).is_some_and(|re| re.is_match(text));
        Ok(cel::common::value::CowVal::owned(CelBool::from(matched)))
    })
}

/// `@actiond_deadline()`: `true`, or an error once this thread's evaluation is past its
/// deadline. As the condition of `@actiond_deadline() ? x : false` it is evaluated before `x`,
/// and its error spares `x` (a conditional's failed condition is its result): a check before
/// an operation, which the operands of `||` and `&&` need, since those go on past an error in
/// one operand to evaluate the other.
fn deadline_before<'b, 'v>(
    _: Vec<cel::common::value::CowVal<'b, 'v>>,
) -> Result<cel::common::value::CowVal<'b, 'v>, cel::ExecutionError> {
    past_deadline()?;
    Ok(cel::common::value::CowVal::owned(
        cel::common::types::CelBool::from(true),
    ))
}

/// `@actiond_deadline(x)`: `x` unchanged; an error once this thread's evaluation is past its
/// deadline, or when `x` is larger than a rule may build ([`MAX_RULE_VALUE_BYTES`],
/// [`MAX_RULE_VALUE_ITEMS`]).
fn deadline_check<'b, 'v>(
    args: Vec<cel::common::value::CowVal<'b, 'v>>,
) -> Result<cel::common::value::CowVal<'b, 'v>, cel::ExecutionError> {
    use cel::common::types::{CelBytes, CelString};
    past_deadline()?;
    let value = args
        .into_iter()
        .next()
        .ok_or_else(|| cel::ExecutionError::invalid_argument_count(1, 0))?;
    let too_large = if let Some(s) = value.downcast_ref::<CelString>() {
        s.inner().len() > MAX_RULE_VALUE_BYTES
    } else if let Some(b) = value.downcast_ref::<CelBytes>() {
        b.inner().len() > MAX_RULE_VALUE_BYTES
    } else {
        // Lists and maps know their size without counting (a string's `size()` would count
        // its characters, hence the byte length above).
        value
            .as_sizer()
            .is_some_and(|s| *s.size().inner() > MAX_RULE_VALUE_ITEMS)
    };
    if too_large {
        return Err(cel::ExecutionError::function_error(
            DEADLINE_CHECK,
            format!(
                "the rule built a value larger than {} KiB or {MAX_RULE_VALUE_ITEMS} items",
                MAX_RULE_VALUE_BYTES / 1024
            ),
        ));
    }
    Ok(value)
}

/// `expr` with a check ([`deadline_check`]: the deadline, and the size of what was built) on
/// the result of every operation that computes something, and in every iteration of every
/// comprehension, so that an evaluation past its deadline stops at its next operation
/// instead of running to the end: an agent's params can make a rule such as
/// `params.items.all(x, params.items.all(y, …))` take minutes, and a thread cannot be
/// stopped from outside.
///
/// Where the check goes keeps the cel crate's own shortcuts (pinned at 0.15.0, whose
/// evaluator this follows):
/// - after every argument and receiver of a call, element of a list and key or value of a
///   map that is itself a call, a comprehension, a list or a map (names, fields and literals
///   cost nothing to read): `@actiond_deadline(x)`;
/// - before each such operand of `||` and `&&` instead (`@actiond_deadline() ? x : false`):
///   those two evaluate their other operand past an error in one, so a check after would
///   not stop a long chain of them;
/// - not on the results of comparisons, arithmetic other than `+`, and negation
///   ([`cheap_operator`]): the operation around them checks the result it gets;
/// - not on the branches of `?:` nor the operands of a comprehension's `@result + …`, so that
///   `map` and `filter` keep the shape that is appended in place (the generic path copies
///   the list on every iteration), nor under `@not_strictly_false`, which would swallow the
///   error;
/// - `all`, `exists`: on the loop condition, checked before each iteration (an error in the
///   step of these two is held back in case a later element decides the result, so it would
///   not stop the loop);
/// - `map`, `filter`, `exists_one`: on the condition of a conditional step, or each element
///   of an appended `[expr]`;
/// - any other comprehension: on its whole step.
///
/// Each check is one call frame more when the rule is evaluated; documents being applied are
/// held to [`MAX_RULE_DEPTH`] so that the evaluation's stack stays small.
pub fn with_deadline_checks(expr: &cel::IdedExpr) -> cel::IdedExpr {
    let mut expr = expr.clone();
    add_deadline_checks(&mut expr);
    expr
}

fn add_deadline_checks(e: &mut cel::IdedExpr) {
    use cel::common::ast::{Expr, operators};
    match &mut e.expr {
        // `text.matches(pattern)` or `matches(text, pattern)` becomes
        // `@actiond_matches(text, pattern)`, with its limits.
        Expr::Call(call) if call.func_name == "matches" => {
            if let Some(text) = call.target.take() {
                call.args.insert(0, *text);
            }
            call.func_name = BOUNDED_MATCHES.to_owned();
            call.args.iter_mut().for_each(|arg| {
                add_deadline_checks(arg);
                check_result(arg);
            });
        }
        Expr::Call(call) => {
            if let Some(target) = call.target.as_deref_mut() {
                add_deadline_checks(target);
                check_result(target);
            }
            call.args.iter_mut().for_each(add_deadline_checks);
            // A comprehension's own step on its accumulator (`@` names cannot be written in
            // CEL): `@result && …`, `@result || …`, `@result + [expr]`.
            let on_accumulator = call
                .args
                .first()
                .is_some_and(|a| matches!(&a.expr, Expr::Ident(name) if name.starts_with('@')));
            match call.func_name.as_str() {
                operators::CONDITIONAL => {
                    if let Some(condition) = call.args.first_mut() {
                        check_result(condition);
                    }
                }
                // The step of `all` or `exists`: its loop condition is checked just before.
                operators::LOGICAL_AND | operators::LOGICAL_OR if on_accumulator => {}
                operators::LOGICAL_AND | operators::LOGICAL_OR => {
                    call.args.iter_mut().for_each(check_before)
                }
                operators::NOT_STRICTLY_FALSE => {}
                // `map`'s and `filter`'s append, which keeps its shape to append in place.
                operators::ADD if on_accumulator => {}
                _ => call.args.iter_mut().for_each(check_result),
            }
        }
        Expr::Select(select) => add_deadline_checks(&mut select.operand),
        Expr::List(list) => list.elements.iter_mut().for_each(|element| {
            add_deadline_checks(element);
            check_result(element);
        }),
        Expr::Map(map) => map.entries.iter_mut().for_each(add_entry_deadline_checks),
        Expr::Struct(strct) => strct.entries.iter_mut().for_each(add_entry_deadline_checks),
        Expr::Comprehension(c) => {
            for part in [
                &mut c.iter_range,
                &mut c.accu_init,
                &mut c.loop_cond,
                &mut c.loop_step,
                &mut c.result,
            ] {
                add_deadline_checks(part);
            }
            if !matches!(c.loop_cond.expr, Expr::Literal(_)) {
                wrap_in_deadline_check(&mut c.loop_cond);
            } else {
                add_step_deadline_check(&mut c.loop_step, &c.accu_var);
            }
        }
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

fn add_entry_deadline_checks(entry: &mut cel::common::ast::IdedEntryExpr) {
    use cel::common::ast::EntryExpr;
    match &mut entry.expr {
        EntryExpr::MapEntry(entry) => {
            add_deadline_checks(&mut entry.key);
            check_result(&mut entry.key);
            add_deadline_checks(&mut entry.value);
            check_result(&mut entry.value);
        }
        EntryExpr::StructField(field) => {
            add_deadline_checks(&mut field.value);
            check_result(&mut field.value);
        }
    }
}

/// Puts the deadline check into a comprehension step whose loop condition is a literal.
fn add_step_deadline_check(step: &mut cel::IdedExpr, accu: &str) {
    use cel::common::ast::{Expr, operators};
    let is_accu = |e: &cel::IdedExpr| matches!(&e.expr, Expr::Ident(name) if name == accu);
    match &mut step.expr {
        // `cond ? … : @result` (filter, exists_one, map with a filter)
        Expr::Call(call)
            if call.func_name == operators::CONDITIONAL
                && call.target.is_none()
                && call.args.len() == 3 =>
        {
            wrap_in_deadline_check(&mut call.args[0]);
        }
        // `@result + [expr]` (map)
        Expr::Call(call)
            if call.func_name == operators::ADD
                && call.target.is_none()
                && call.args.len() == 2
                && is_accu(&call.args[0])
                && matches!(call.args[1].expr, Expr::List(_)) =>
        {
            if let Expr::List(list) = &mut call.args[1].expr {
                list.elements
                    .iter_mut()
                    .filter(|element| !is_deadline_check(element))
                    .for_each(wrap_in_deadline_check);
            }
        }
        _ => wrap_in_deadline_check(step),
    }
}

/// Operators whose own work is small next to their operands' (comparing two values,
/// arithmetic other than `+`, negation). Their results are not checked: the operation around
/// them checks the result it gets, and a chain of them is as long as the rule. Their operands
/// are, when those are anything else (`s.matches(r) == true`).
fn cheap_operator(name: &str) -> bool {
    use cel::common::ast::operators;
    matches!(
        name,
        operators::EQUALS
            | operators::NOT_EQUALS
            | operators::LESS
            | operators::LESS_EQUALS
            | operators::GREATER
            | operators::GREATER_EQUALS
            | operators::SUBSTRACT
            | operators::MULTIPLY
            | operators::DIVIDE
            | operators::MODULO
            | operators::LOGICAL_NOT
            | operators::NEGATE
    )
}

/// Whether evaluating `e` computes something worth a check: a call (but not to a
/// [`cheap_operator`] nor to a check already added), a comprehension, a list or a map.
fn computes(e: &cel::IdedExpr) -> bool {
    use cel::common::ast::Expr;
    match &e.expr {
        Expr::Call(call) => !cheap_operator(&call.func_name) && call.func_name != DEADLINE_CHECK,
        Expr::Comprehension(_) | Expr::List(_) | Expr::Map(_) => true,
        _ => false,
    }
}

/// Wraps `e` in a check after it, when evaluating it [`computes`] something.
fn check_result(e: &mut cel::IdedExpr) {
    if computes(e) {
        wrap_in_deadline_check(e);
    }
}

/// `e` becomes `@actiond_deadline(e)`: checked after it is evaluated.
fn wrap_in_deadline_check(e: &mut cel::IdedExpr) {
    use cel::common::ast::{CallExpr, Expr};
    let inner = std::mem::take(e);
    *e = cel::IdedExpr {
        id: inner.id,
        expr: Expr::Call(CallExpr {
            func_name: DEADLINE_CHECK.to_owned(),
            target: None,
            args: vec![inner],
        }),
    };
}

/// Whether `e` is a check this module added.
fn is_deadline_check(e: &cel::IdedExpr) -> bool {
    matches!(&e.expr, cel::common::ast::Expr::Call(call) if call.func_name == DEADLINE_CHECK)
}

/// `e` becomes `@actiond_deadline() ? e : false`, checked before it is evaluated, when it is
/// an operation.
fn check_before(e: &mut cel::IdedExpr) {
    use cel::common::ast::{CallExpr, Expr, LiteralValue, operators};
    // Any operation, cheap ones too: `s.matches(r) == true || …` would otherwise go on
    // to its next operand past a failed check inside the comparison.
    if !matches!(
        e.expr,
        Expr::Call(_) | Expr::Comprehension(_) | Expr::List(_) | Expr::Map(_)
    ) {
        return;
    }
    let inner = std::mem::take(e);
    let id = inner.id;
    let before = cel::IdedExpr {
        id,
        expr: Expr::Call(CallExpr {
            func_name: DEADLINE_CHECK.to_owned(),
            target: None,
            args: Vec::new(),
        }),
    };
    let otherwise = cel::IdedExpr {
        id,
        expr: Expr::Literal(LiteralValue::Boolean(false.into())),
    };
    *e = cel::IdedExpr {
        id,
        expr: Expr::Call(CallExpr {
            func_name: operators::CONDITIONAL.to_owned(),
            target: None,
            args: vec![before, inner, otherwise],
        }),
    };
}

/// Sets this thread's evaluation deadline for as long as it lives, and clears it on drop
/// (also when the evaluation panics).
struct DeadlineGuard;

impl DeadlineGuard {
    fn set(deadline: Instant) -> Self {
        DEADLINE.set(Some(deadline));
        Self
    }
}

impl Drop for DeadlineGuard {
    fn drop(&mut self) {
        DEADLINE.set(None);
    }
}

/// A tenant document with its rules compiled, ready to evaluate. Cheap to clone.
#[derive(Clone)]
pub struct CompiledPolicy {
    /// The document.
    pub doc: Arc<TenantDocument>,
    /// Its version number.
    pub version: i32,
    /// Lowercase hex SHA-256 of its source.
    pub sha256: String,
    rules: Arc<Vec<CompiledRule>>,
}

impl CompiledPolicy {
    /// Compiles every rule of a validated document.
    pub fn new(doc: TenantDocument, version: i32, sha256: String) -> Result<Self, String> {
        let mut rules = Vec::with_capacity(doc.policy.rules.len());
        for r in &doc.policy.rules {
            let program = compile_rule(&r.when).map_err(|e| format!("rule {}: {e}", r.name))?;
            rules.push(CompiledRule {
                name: r.name.clone(),
                effect: r.effect,
                reason: r.reason.clone(),
                expression: Arc::new(with_deadline_checks(program.expression())),
            });
        }
        Ok(Self {
            doc: Arc::new(doc),
            version,
            sha256,
            rules: Arc::new(rules),
        })
    }
}

/// The agent as rules see it (`agent.id`, `agent.name`, `agent.owner`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct AgentFacts {
    /// Agent UUID.
    pub id: String,
    /// Agent name within the tenant.
    pub name: String,
    /// Owner subject, empty when none is recorded.
    pub owner: String,
}

/// The agent's recent history for the same action (`history.count`, `history.sum`) over the
/// tenant's `history_window`, excluding the proposal being decided and blocked, denied,
/// expired and withdrawn ones; `sum` adds only amounts in the decided proposal's currency.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct History {
    /// Number of proposals.
    pub count: i64,
    /// Sum of the handler's summed param (`amount` for refunds, in minor units) over the
    /// proposals in the same currency as the one decided, 0 when it has none.
    pub sum: i64,
}

/// Everything a rule can read.
#[derive(Debug, Clone)]
pub struct EvalInput {
    /// Action name as submitted.
    pub action: String,
    /// Derived target.
    pub target: String,
    /// Params (parsed from the stored canonical string).
    pub params: Value,
    /// The proposing agent.
    pub agent: AgentFacts,
    /// Agent-supplied session id, empty when none.
    pub session: String,
    /// The user the agent acts for (the `sub` of a delegated workload JWT, RFC 8693 `act`),
    /// empty when it acts for nobody: `on_behalf_of` in rules.
    pub on_behalf_of: String,
    /// Recent history.
    pub history: History,
    /// The decision time, from the database clock (`now` in rules, in the document's
    /// `policy.time_zone`). `None` when no rule reads `now`: a rule that reads it then fails
    /// closed.
    pub now: Option<chrono::DateTime<chrono::Utc>>,
    /// The facts the handler computed at submission, as stored (`facts` in rules, see
    /// [`crate::facts::for_rules`]); `None` when none were stored.
    pub facts: Option<Value>,
}

/// `now` as rules read it: the decision time `at` in time zone `tz`. Fields: `time` (a
/// timestamp), `year`, `month` (1–12), `day` (1–31), `weekday` (ISO: 1 Monday … 7 Sunday),
/// `hour` (0–23), `minute`, `date` (`YYYY-MM-DD`) and `time_zone` (its IANA name).
pub fn now_value(at: chrono::DateTime<chrono::Utc>, tz: chrono_tz::Tz) -> Cel {
    use chrono::{Datelike, Timelike};
    let local = at.with_timezone(&tz);
    let int = |k: &str, v: i64| (k.to_owned(), Cel::Int(v));
    let fields: HashMap<String, Cel> = HashMap::from([
        ("time".to_owned(), Cel::Timestamp(local.fixed_offset())),
        int("year", i64::from(local.year())),
        int("month", i64::from(local.month())),
        int("day", i64::from(local.day())),
        int("weekday", i64::from(local.weekday().number_from_monday())),
        int("hour", i64::from(local.hour())),
        int("minute", i64::from(local.minute())),
        (
            "date".to_owned(),
            Cel::String(Arc::new(local.format("%Y-%m-%d").to_string())),
        ),
        (
            "time_zone".to_owned(),
            Cel::String(Arc::new(tz.name().to_owned())),
        ),
    ]);
    Cel::Map(fields.into())
}

/// Whether any rule of `policy` reads `now` (the caller then reads the database clock).
pub fn reads_now(policy: &CompiledPolicy) -> bool {
    policy
        .doc
        .policy
        .rules
        .iter()
        .any(|r| r.when.contains("now"))
}

/// The outcome of evaluating a tenant's policy on one proposal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    /// Final effect.
    pub effect: Effect,
    /// Deciding rule (`null` for the default, `no-handler`, `min-effect` or a failure).
    pub rule: Option<String>,
    /// Tenant-written reason (or a fixed text), shown to the agent.
    pub reason: String,
    /// Evaluation errors, for the audit log only.
    pub errors: Vec<String>,
}

impl Decision {
    /// The fail-closed decision when evaluating `policy` ran over its time budget. Which rule
    /// was still running is unknown, so every rule counts as failed, and a failed rule fails
    /// closed as in [`decide`]: at least `escalate`, `block` if that was its effect. A
    /// document with any `block` rule therefore blocks (rule `evaluation-budget`); otherwise
    /// the proposal escalates. Otherwise an agent whose params make a rule slow would turn a
    /// rule's `block` into an `escalate` that a person could approve, and the executor's
    /// re-check, timing out alike, would let the approval run.
    pub fn budget_exceeded(policy: &CompiledPolicy) -> Self {
        let effect = policy
            .rules
            .iter()
            .map(|r| r.effect.max(Effect::Escalate))
            .max()
            .unwrap_or(Effect::Escalate);
        let (rule, reason) = if effect == Effect::Block {
            (
                Some("evaluation-budget".to_owned()),
                "policy could not be evaluated in time, and a rule that blocks could not be ruled out",
            )
        } else {
            (
                None,
                "policy could not be evaluated in time; a person must review this",
            )
        };
        Self {
            effect,
            rule,
            reason: reason.into(),
            errors: vec!["evaluation exceeded its time budget".into()],
        }
    }

    /// The decision for a proposal whose agent is frozen (an approver stopped it, or an
    /// operator froze it): `block`, rule `agent-frozen`, whatever the rules say. The
    /// database refuses `pending → approved|escalated` for a frozen agent's proposal (V20);
    /// this is how policy ends such a row without trying.
    pub fn agent_frozen() -> Self {
        Self {
            effect: Effect::Block,
            rule: Some("agent-frozen".into()),
            reason: "its agent is frozen: an approver stopped it, so nothing was decided or run"
                .into(),
            errors: Vec::new(),
        }
    }

    /// The decision for a proposal whose agent is revoked (an operator ran `actiond agent
    /// revoke` while it was pending): `block`, rule `agent-revoked`, whatever the rules say.
    /// The database refuses `pending → approved|escalated` for a revoked agent's proposal (V34).
    pub fn agent_revoked() -> Self {
        Self {
            effect: Effect::Block,
            rule: Some("agent-revoked".into()),
            reason: "its agent was revoked: an operator stopped it, so nothing was decided or run"
                .into(),
            errors: Vec::new(),
        }
    }
}

/// Raises `decision` because a proposal would take `budget` past its `max`: `allow` becomes
/// `escalate` with rule `budget` and the budget's reason; an `escalate` or `block` stays what it
/// was (severity only rises). Returns whether the decision changed.
pub fn raise_for_budget(decision: &mut Decision, budget: &crate::tenant::Budget) -> bool {
    if decision.effect >= Effect::Escalate {
        return false;
    }
    decision.effect = Effect::Escalate;
    decision.rule = Some("budget".into());
    decision.reason = budget.reason.clone();
    true
}

/// JSON → CEL with integers as CEL `int` (serde's path gives `uint`, and `uint * int` errors).
pub fn to_cel(v: &Value) -> Cel {
    match v {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::String(s) => Cel::String(Arc::new(s.clone())),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Cel::Int(i),
            None => Cel::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::Array(a) => Cel::List(Arc::new(a.iter().map(to_cel).collect())),
        Value::Object(o) => {
            let m: HashMap<String, Cel> = o.iter().map(|(k, v)| (k.clone(), to_cel(v))).collect();
            Cel::Map(m.into())
        }
    }
}

/// The reason of the block for an action outside the registry: `no handler for X` with the
/// name's first 128 characters. A name whose ends would not show unquoted is quoted (with
/// Rust's escapes): an empty one or one of only white space, said to be so (`no handler for ""
/// (empty action name)`), since nothing after "for" reads as a cut; one that starts or ends
/// with white space (`no handler for "billing.refund.issue "`), whose space read as nothing.
pub fn no_handler_reason(action: &str) -> String {
    let shown: String = action.chars().take(128).collect();
    if shown.is_empty() {
        r#"no handler for "" (empty action name)"#.to_owned()
    } else if shown.trim().is_empty() {
        format!("no handler for {shown:?} (an action name of white space only)")
    } else if shown.trim() != shown {
        format!("no handler for {shown:?}")
    } else {
        format!("no handler for {shown}")
    }
}

/// CEL's standard environment (its functions, macros and types) plus the deadline check
/// ([`with_deadline_checks`]), built once per process. `Context::default()` builds the
/// standard one afresh for every context: measured in the executor's re-check, a fifth of its
/// CPU per proposal went to that (`perf record`, issue #10). Every rule is compiled with
/// `Program::compile`, which is the standard environment's compiler, so evaluating with this
/// `Env` is what `Context::default()` did.
static STDLIB: std::sync::LazyLock<Arc<Env>> = std::sync::LazyLock::new(|| {
    let mut env = Env::stdlib();
    // Fails only if the name were declared already; it starts with `@`, which the standard
    // library does not use for functions it lets a program call.
    let _ = env.add_overload(DEADLINE_CHECK, "actiond_deadline", vec![], deadline_before);
    let _ = env.add_overload(
        BOUNDED_MATCHES,
        "actiond_matches_string_string",
        vec![
            cel::common::types::STRING_TYPE,
            cel::common::types::STRING_TYPE,
        ],
        bounded_matches,
    );
    let _ = env.add_overload(
        DEADLINE_CHECK,
        "actiond_deadline_dyn",
        vec![cel::common::types::DYN_TYPE],
        deadline_check,
    );
    Arc::new(env)
});

/// Evaluates the tenant's policy without a deadline: for tools that evaluate a tenant's own
/// rules on inputs it chose (`actiond dev`, tests). Anything that evaluates an agent's params
/// uses [`decide_within`].
pub fn decide(policy: &CompiledPolicy, input: &EvalInput) -> Decision {
    decide_until(policy, input, None)
}

/// Evaluates the tenant's policy, giving up `budget` from now. Pure and deterministic within
/// the budget. An evaluation past it stops at its next operation or comprehension iteration
/// and gives [`Decision::budget_exceeded`], whichever rule was running. The operation under
/// way still runs to its end (such as `in` over a list of 64 KiB of params, or a regular
/// expression compiled from params, tens of milliseconds), so callers also run it off the
/// async executor with a timeout (`actiond_runtime::with_budget_each`).
pub fn decide_within(policy: &CompiledPolicy, input: &EvalInput, budget: Duration) -> Decision {
    decide_until(policy, input, Instant::now().checked_add(budget))
}

fn decide_until(policy: &CompiledPolicy, input: &EvalInput, deadline: Option<Instant>) -> Decision {
    let past_deadline = || deadline.is_some_and(|d| Instant::now() >= d);
    let Some(handler) = policy.doc.handler(&input.action) else {
        return Decision {
            effect: Effect::Block,
            rule: Some("no-handler".into()),
            reason: no_handler_reason(&input.action),
            errors: Vec::new(),
        };
    };
    let mut ctx = Context::with_env(STDLIB.clone());
    ctx.add_variable_from_value("action", Cel::String(Arc::new(input.action.clone())));
    ctx.add_variable_from_value("target", Cel::String(Arc::new(input.target.clone())));
    ctx.add_variable_from_value("params", to_cel(&input.params));
    ctx.add_variable_from_value("session", Cel::String(Arc::new(input.session.clone())));
    ctx.add_variable_from_value(
        "on_behalf_of",
        Cel::String(Arc::new(input.on_behalf_of.clone())),
    );
    let agent = serde_json::to_value(&input.agent).unwrap_or(Value::Null);
    ctx.add_variable_from_value("agent", to_cel(&agent));
    let history = serde_json::to_value(input.history).unwrap_or(Value::Null);
    ctx.add_variable_from_value("history", to_cel(&history));
    if let Some(at) = input.now {
        ctx.add_variable_from_value("now", now_value(at, policy.doc.policy.time_zone));
    }
    if let Some(facts) = crate::facts::for_rules(handler.kind, input.facts.as_ref()) {
        ctx.add_variable_from_value("facts", to_cel(&facts));
    }

    let _deadline = deadline.map(DeadlineGuard::set);
    let mut best: Option<(Effect, &CompiledRule, bool)> = None;
    let mut errors = Vec::new();
    for rule in policy.rules.iter() {
        let result = Cel::resolve(&rule.expression, &ctx);
        if past_deadline() {
            return Decision::budget_exceeded(policy);
        }
        let (matched_effect, failed) = match result {
            Ok(Cel::Bool(true)) => (Some(rule.effect), false),
            Ok(Cel::Bool(false)) => (None, false),
            Ok(other) => {
                errors.push(format!(
                    "rule {}: result is not a boolean: {other:?}",
                    rule.name
                ));
                (Some(rule.effect.max(Effect::Escalate)), true)
            }
            Err(e) => {
                errors.push(format!("rule {}: {e}", rule.name));
                (Some(rule.effect.max(Effect::Escalate)), true)
            }
        };
        if let Some(eff) = matched_effect
            && best.as_ref().is_none_or(|(b, _, _)| eff > *b)
        {
            best = Some((eff, rule, failed));
        }
    }
    let mut decision = match best {
        Some((effect, rule, false)) => Decision {
            effect,
            rule: Some(rule.name.clone()),
            reason: rule.reason.clone(),
            errors: errors.clone(),
        },
        Some((effect, rule, true)) => Decision {
            effect,
            rule: Some(rule.name.clone()),
            reason: failed_rule_reason(&rule.name, effect),
            errors: errors.clone(),
        },
        None => Decision {
            effect: policy.doc.policy.default,
            rule: None,
            reason: format!(
                "no rule matched; the tenant's default is {}",
                policy.doc.policy.default.as_str()
            ),
            errors: errors.clone(),
        },
    };
    if handler.min_effect > decision.effect {
        decision.effect = handler.min_effect;
        decision.rule = Some("min-effect".into());
        decision.reason = format!(
            "{} requires at least {} for this tenant",
            input.action,
            handler.min_effect.as_str()
        );
    }
    decision
}

/// The reason the agent (and the approver) reads when rule `name` failed to evaluate and the
/// decision failed closed to `effect`. It names the rule and says who can act: a blocked row
/// cannot be reviewed by anyone, so "a person must review this" (the text before) was wrong
/// for it. The evaluation error itself stays in the audit log.
fn failed_rule_reason(name: &str, effect: Effect) -> String {
    if effect == Effect::Block {
        format!(
            "blocked because rule {name} could not be evaluated and its effect is block (fail closed); nothing ran. \
             The tenant's rule needs fixing: the error is in the audit log"
        )
    } else {
        format!(
            "rule {name} could not be evaluated, so this needs a person (fail closed); the error is in the audit log"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(extra_rules: &str, min_effect: &str) -> CompiledPolicy {
        let src = format!(
            r#"
tenant: acme
policy:
  default: allow
  rules:
    - name: big-refund
      when: 'action == "billing.refund.issue" && params.amount > 5000'
      effect: escalate
      reason: Refunds over 50.00 need a person.
    - name: many-refunds
      when: 'history.count >= 3 || history.sum + params.amount > 20000'
      effect: escalate
      reason: Many refunds in a day.
{extra_rules}
handlers:
  billing.refund.issue:
    credential: payments
    max_amount: 100000
    min_effect: {min_effect}
"#
        );
        // Loaded as a stored document: these tests run rules that the type check refuses on
        // apply (fields no handler has), to show what the worker does with them at run time.
        let doc = TenantDocument::parse_stored(&src).unwrap();
        CompiledPolicy::new(doc, 1, "x".into()).unwrap()
    }

    /// `now` is the decision time in the document's time zone: a rule about office hours
    /// reads the local hour and weekday, and without a time a rule that reads `now` fails
    /// closed.
    #[test]
    fn rules_read_the_decision_time_in_the_tenant_time_zone() {
        let src = r#"
tenant: acme
policy:
  default: allow
  time_zone: Europe/Paris
  rules:
    - name: office-hours
      when: 'now.weekday >= 6 || now.hour < 9 || now.hour >= 17'
      effect: escalate
      reason: Outside office hours a person decides.
handlers:
  billing.refund.issue:
    credential: payments
    max_amount: 100000
"#;
        let p = CompiledPolicy::new(TenantDocument::parse(src).unwrap(), 1, "x".into()).unwrap();
        let at = |s: &str| Some(chrono::DateTime::parse_from_rfc3339(s).unwrap().to_utc());
        let mut i = input("billing.refund.issue", 100);
        // Friday 2026-12-04 08:30 UTC is 09:30 in Paris: office hours.
        i.now = at("2026-12-04T08:30:00Z");
        assert_eq!(decide(&p, &i).effect, Effect::Allow);
        // 07:30 UTC is 08:30 in Paris: before nine.
        i.now = at("2026-12-04T07:30:00Z");
        assert_eq!(decide(&p, &i).effect, Effect::Escalate);
        // Saturday.
        i.now = at("2026-12-05T10:00:00Z");
        assert_eq!(decide(&p, &i).rule.as_deref(), Some("office-hours"));
        // No time: fails closed.
        i.now = None;
        let d = decide(&p, &i);
        assert_eq!(d.effect, Effect::Escalate);
        assert!(!d.errors.is_empty(), "{d:?}");
        let v = now_value(
            at("2026-07-01T22:15:00Z").unwrap(),
            "America/New_York".parse().unwrap(),
        );
        let Cel::Map(m) = v else { panic!() };
        let get = |k: &str| m.map.get(&cel::objects::Key::from(k)).cloned();
        assert_eq!(get("hour"), Some(Cel::Int(18)));
        assert_eq!(get("weekday"), Some(Cel::Int(3)));
        assert_eq!(
            get("date"),
            Some(Cel::String(Arc::new("2026-07-01".into())))
        );
        for bad in ["Mars/Olympus", "CET+1", "", "5"] {
            let e = TenantDocument::parse(&src.replace("Europe/Paris", &format!("'{bad}'")))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("policy.time_zone: must be an IANA time zone name"),
                "{bad}: {e}"
            );
        }
    }

    fn input(action: &str, amount: i64) -> EvalInput {
        EvalInput {
            action: action.into(),
            target: "pi_1".into(),
            params: json!({"payment_id":"pi_1","amount":amount,"currency":"USD"}),
            agent: AgentFacts::default(),
            session: String::new(),
            on_behalf_of: String::new(),
            history: History::default(),
            now: None,
            facts: None,
        }
    }

    /// An overrun counts every rule as failed: a document with a `block` rule blocks, one
    /// without escalates; never `allow`, even when the document's default is `allow`.
    #[test]
    fn an_overrun_blocks_when_any_rule_blocks_and_escalates_otherwise() {
        let escalating = Decision::budget_exceeded(&policy("", "allow"));
        assert_eq!(escalating.effect, Effect::Escalate);
        assert_eq!(escalating.rule, None);
        let blocking = policy(
            "    - name: shell-never\n      when: 'action.startsWith(\"shell.\")'\n      effect: block\n      reason: No shell.\n",
            "allow",
        );
        let d = Decision::budget_exceeded(&blocking);
        assert_eq!(d.effect, Effect::Block);
        assert_eq!(d.rule.as_deref(), Some("evaluation-budget"));
        assert_eq!(d.errors, ["evaluation exceeded its time budget"]);
    }

    /// A rule that params make quadratic (every pair of a 3,000-item list: nine million
    /// comparisons, many seconds) stops at its deadline instead of running on: the thread
    /// is back within a few iterations, and the decision is the overrun's fail-closed one.
    #[test]
    fn an_evaluation_stops_at_its_deadline() {
        let p = policy(
            "    - name: impossible-pair\n      when: 'params.items.exists(x, params.items.exists(y, x < y && y < x))'\n      effect: block\n      reason: No pair.\n",
            "allow",
        );
        let mut i = input("billing.refund.issue", 100);
        i.params["items"] = json!((0..3000).collect::<Vec<_>>());
        let started = Instant::now();
        let d = decide_within(&p, &i, Duration::from_millis(50));
        let took = started.elapsed();
        assert_eq!(d, Decision::budget_exceeded(&p));
        assert!(
            took < Duration::from_millis(1000),
            "the evaluation took {took:?} with a 50 ms budget"
        );
        // Without a deadline the same rule runs to its end and does not match.
        i.params["items"] = json!((0..30).collect::<Vec<_>>());
        assert_eq!(decide(&p, &i).effect, Effect::Allow);
        // The deadline is this evaluation's only: the thread's next one has none.
        assert!(DEADLINE.get().is_none());
    }

    /// Rules that multiply their params within one operation, not over many iterations, stop
    /// too (found by review, times in a release build without these checks): a chain of
    /// concatenations (67 s), hostile regular expressions compiled call after call (8 s),
    /// `map`s nested so that each doubles a string (7.5 s and 2 GB at 14 levels, a process
    /// abort at 24). Each now ends at the deadline or at the size a rule may build, and
    /// fails closed.
    #[test]
    fn rules_that_multiply_their_params_stop_early() {
        let chain = format!("size(l{}) > 0", "+l".repeat(99));
        let regex = vec!["s.matches(r)"; 60].join(" || ");
        let compared = vec!["s.matches(r)"; 60].join(" == ");
        let alternatives = vec!["s.matches(r) == true"; 60].join(" || ");
        let mut doubling = "size(n) > 0".to_owned();
        for level in (0..14).rev() {
            let (v, next) = (format!("v{level}"), format!("v{}", level + 1));
            doubling = doubling.replace("size(n)", &format!("size([{v} + {v}].map({next}, n)[0])"));
        }
        let doubling = doubling.replace("size(n)", "size(v14)");
        for (what, when) in [
            ("concatenation", format!("[params.l].all(l, {chain})")),
            (
                "regex",
                format!("[params.s].all(s, [params.r].all(r, {regex}))"),
            ),
            (
                "regex list",
                format!(
                    "[params.s].all(s, [params.r].all(r, size([{}]) > 0))",
                    vec!["s.matches(r)"; 60].join(", ")
                ),
            ),
            (
                "regex comparisons",
                format!("[params.s].all(s, [params.r].all(r, {compared}))"),
            ),
            (
                "regex alternatives",
                format!("[params.s].all(s, [params.r].all(r, {alternatives}))"),
            ),
            ("doubling", format!("[params.s].map(v0, {doubling})[0]")),
            // Found by an attack on the running gateway: a pattern from params that the
            // regex crate accepts but matches slowly (3 s to minutes per call).
            (
                "pattern from params",
                "params.ab.matches(params.slow)".to_owned(),
            ),
            (
                "concatenated text",
                format!("({}).matches(params.fast)", ["params.ab"; 8].join(" + ")),
            ),
        ] {
            let rule = format!(
                "    - name: hostile\n      when: '{}'\n      effect: block\n      reason: Hostile.\n",
                when.replace('\'', "''")
            );
            let p = policy(&rule, "allow");
            let mut i = input("billing.refund.issue", 100);
            i.params["l"] = json!(vec![0; 32_000]);
            i.params["s"] = json!("a".repeat(60_000));
            i.params["r"] = json!(r"(?:\pL{30}){30}z");
            let mut seed = 7u64;
            i.params["ab"] = json!(
                (0..60_000)
                    .map(|_| {
                        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                        if (seed >> 33) & 1 == 0 { 'a' } else { 'b' }
                    })
                    .collect::<String>()
            );
            i.params["slow"] = json!("a[ab]{10000}c");
            i.params["fast"] = json!("a[ab]{30}c");
            // Where a limit, not the clock, stops the rule, the audit log says which. Those
            // cases get a budget the limit is always reached within, even on a loaded
            // machine: with 100 ms, a busy CI host ran out of time first.
            let said = match what {
                "concatenation" => Some("larger than 1024 KiB or 131072 items"),
                "pattern from params" => Some("not a valid regular expression within 16 KiB"),
                "concatenated text" => Some("the text is longer than 64 KiB"),
                _ => None,
            };
            let budget = match said {
                Some(_) => Duration::from_secs(10),
                None => Duration::from_millis(100),
            };
            let started = Instant::now();
            let d = decide_within(&p, &i, budget);
            let took = started.elapsed();
            assert_eq!(d.effect, Effect::Block, "{what}: {d:?}");
            if let Some(said) = said {
                assert!(d.errors.iter().any(|e| e.contains(said)), "{what}: {d:?}");
            }
            assert!(took < Duration::from_secs(3), "{what} took {took:?}");
        }
    }

    /// A document whose rule nests deeper than the evaluator's stack allows for is refused
    /// when applied, with the field and the way out.
    #[test]
    fn a_rule_nested_too_deep_is_refused_on_apply() {
        let chain = format!("{} > 0", vec!["params.amount"; 130].join("+"));
        let src = format!(
            "tenant: acme\npolicy:\n  default: allow\n  rules:\n    - name: long\n      when: '{chain}'\n      effect: block\n      reason: x\nhandlers:\n  billing.refund.issue:\n    credential: payments\n    max_amount: 100\n"
        );
        let err = TenantDocument::parse(&src).unwrap_err().to_string();
        assert!(
            err.contains("policy.rules[0].when")
                && err.contains("more than 128")
                && err.contains("split it"),
            "{err}"
        );
        // `||` and `&&` chains are balanced by the parser: 130 alternatives nest 9 levels.
        let alternatives = vec!["action == \"x\""; 130].join(" || ");
        let program = compile_rule(&alternatives).unwrap();
        assert!(depth(program.expression()) < 12);
        let shorter = format!("{} > 0", vec!["params.amount"; 120].join("+"));
        assert!(TenantDocument::parse(&src.replace(&chain, &shorter)).is_ok());
    }

    /// The deadline checks change no result: every macro, the errors that `all` and `exists`
    /// absorb (`error && false` is `false`), the ones they keep, and nested comprehensions,
    /// give what the cel crate gives for the rule as written.
    #[test]
    fn deadline_checks_keep_every_result() {
        let mut ctx = Context::with_env(STDLIB.clone());
        ctx.add_variable_from_value("l", to_cel(&json!([3, 1, 2])));
        ctx.add_variable_from_value("m", to_cel(&json!({"a": 1, "b": "x"})));
        ctx.add_variable_from_value("mixed", to_cel(&json!([0, "a"])));
        ctx.add_variable_from_value("mixed_true", to_cel(&json!([1, "a"])));
        for src in [
            "l.all(x, x > 0)",
            "l.all(x, x > 1)",
            "l.exists(x, x == 2)",
            "l.exists(x, x == 9)",
            "l.exists_one(x, x > 2)",
            "l.exists_one(x, x > 1)",
            "l.map(x, x * 2)",
            "l.map(x, x > 1, x * 10)",
            "l.filter(x, x != 1)",
            "l.map(x, l.filter(y, y < x))",
            "l.all(x, l.exists(y, y > x) || x == 3)",
            "m.all(k, k in ['a', 'b'])",
            "m.map(k, k + '!')",
            "[l.map(x, x)[0], {'k': l.filter(x, x > 2)}]",
            "mixed.all(x, x > 0)",
            "mixed.exists(x, x == 0)",
            "mixed_true.all(x, x > 0)",
            "mixed_true.exists(x, x == 2)",
            "mixed.map(x, x + 1)",
            "mixed.exists_one(x, x == 0)",
            "'abc'.matches('b') && !'abc'.matches('^b')",
            "matches('abc', '^a') && l.exists(x, string(x).matches('[23]'))",
        ] {
            let program = compile_rule(src).unwrap();
            let guarded = with_deadline_checks(program.expression());
            assert_ne!(&guarded, program.expression(), "{src}: no check was added");
            let _deadline = DeadlineGuard::set(Instant::now() + Duration::from_secs(60));
            assert_eq!(Cel::resolve(&guarded, &ctx), program.execute(&ctx), "{src}");
        }
    }

    /// `map` and `filter` still append in place with the checks in: building a 100,000-item
    /// list stays linear. Copying the list on every iteration, as the cel crate does for a
    /// step of any other shape, would take five billion copies.
    #[test]
    fn deadline_checks_keep_map_and_filter_linear() {
        let rule = "    - name: many\n      when: 'params.items.map(x, x + 1).filter(x, x > 0).size() > 50000'\n      effect: escalate\n      reason: Many items.\n";
        let p = policy(rule, "allow");
        let mut i = input("billing.refund.issue", 100);
        i.params["items"] = json!((0..100_000).collect::<Vec<_>>());
        let d = decide_within(&p, &i, Duration::from_secs(30));
        assert_eq!(
            (d.effect, d.rule.as_deref()),
            (Effect::Escalate, Some("many"))
        );
    }

    #[test]
    fn most_severe_rule_wins_and_defaults_apply() {
        let p = policy("", "allow");
        assert_eq!(
            decide(&p, &input("billing.refund.issue", 5000)).effect,
            Effect::Allow
        );
        let d = decide(&p, &input("billing.refund.issue", 12000));
        assert_eq!(
            (d.effect, d.rule.as_deref()),
            (Effect::Escalate, Some("big-refund"))
        );
        let block = "    - name: blocker\n      when: 'params.amount > 10000'\n      effect: block\n      reason: too much\n";
        let d = decide(
            &policy(block, "allow"),
            &input("billing.refund.issue", 12000),
        );
        assert_eq!(
            (d.effect, d.rule.as_deref()),
            (Effect::Block, Some("blocker"))
        );
    }

    #[test]
    fn rules_see_whom_the_agent_acts_for() {
        let rule = "    - name: customer-refund\n      when: 'on_behalf_of.endsWith(\"@customer.example\")'\n      effect: escalate\n      reason: A customer asked.\n";
        let p = policy(rule, "allow");
        let mut i = input("billing.refund.issue", 100);
        assert_eq!(decide(&p, &i).effect, Effect::Allow);
        i.on_behalf_of = "jane@customer.example".into();
        let d = decide(&p, &i);
        assert_eq!(
            (d.effect, d.rule.as_deref()),
            (Effect::Escalate, Some("customer-refund"))
        );
    }

    /// `facts`: a handler that computes none gives the defaults (a rule on them is false);
    /// stored facts are what the rule reads.
    #[test]
    fn rules_read_the_facts_computed_at_submission() {
        let rule = "    - name: new-domain\n      when: 'facts.new_recipient_domain'\n      effect: escalate\n      reason: A new domain.\n";
        let p = policy(rule, "allow");
        let mut i = input("billing.refund.issue", 100);
        assert_eq!(decide(&p, &i).effect, Effect::Allow);
        i.facts =
            Some(json!({"new_recipient_domain": true, "new_recipient_domains": ["x.example"]}));
        let d = decide(&p, &i);
        assert_eq!(
            (d.effect, d.rule.as_deref()),
            (Effect::Escalate, Some("new-domain"))
        );
    }

    #[test]
    fn history_splitting_escalates() {
        let p = policy("", "allow");
        let mut i = input("billing.refund.issue", 4000);
        i.history = History {
            count: 2,
            sum: 17000,
        };
        let d = decide(&p, &i);
        assert_eq!(
            (d.effect, d.rule.as_deref()),
            (Effect::Escalate, Some("many-refunds"))
        );
    }

    #[test]
    fn unknown_actions_are_blocked() {
        let p = policy("", "allow");
        for a in [
            "constructor",
            "__proto__",
            "toString",
            "shell.exec",
            "",
            " \t",
            "billing.refund.issue ",
            "\tshell.exec",
        ] {
            let d = decide(&p, &input(a, 1));
            assert_eq!(d.effect, Effect::Block);
            let want = match a {
                "" => r#"no handler for "" (empty action name)"#.to_owned(),
                " \t" => r#"no handler for " \t" (an action name of white space only)"#.to_owned(),
                "billing.refund.issue " => r#"no handler for "billing.refund.issue ""#.to_owned(),
                "\tshell.exec" => r#"no handler for "\tshell.exec""#.to_owned(),
                _ => format!("no handler for {a}"),
            };
            assert_eq!(d.reason, want);
        }
    }

    #[test]
    fn failing_rules_fail_closed() {
        let rule = "    - name: missing\n      when: 'params.nope > 1'\n      effect: allow\n      reason: never\n";
        let d = decide(&policy(rule, "allow"), &input("billing.refund.issue", 100));
        assert_eq!(d.effect, Effect::Escalate);
        assert!(!d.errors.is_empty());
        assert!(
            !d.reason.contains("nope"),
            "errors stay out of the agent-visible reason"
        );
        // The agent reads which rule failed and who can act; not "a person must review this"
        // for a row nobody can review.
        assert!(
            d.reason.contains("rule missing could not be evaluated"),
            "{}",
            d.reason
        );
        assert!(d.reason.contains("needs a person"), "{}", d.reason);
        let rule = "    - name: missing\n      when: 'params.nope > 1'\n      effect: block\n      reason: never\n";
        let d = decide(&policy(rule, "allow"), &input("billing.refund.issue", 100));
        assert_eq!(d.effect, Effect::Block);
        assert!(
            d.reason
                .starts_with("blocked because rule missing could not be evaluated"),
            "{}",
            d.reason
        );
        assert!(!d.reason.contains("a person must review"), "{}", d.reason);
        assert!(!d.reason.contains("nope"), "{}", d.reason);
        let rule = "    - name: notbool\n      when: 'params.amount'\n      effect: allow\n      reason: x\n";
        assert_eq!(
            decide(&policy(rule, "allow"), &input("billing.refund.issue", 100)).effect,
            Effect::Escalate
        );
    }

    #[test]
    fn min_effect_only_raises() {
        let d = decide(&policy("", "escalate"), &input("billing.refund.issue", 100));
        assert_eq!(
            (d.effect, d.rule.as_deref()),
            (Effect::Escalate, Some("min-effect"))
        );
    }

    #[test]
    fn budgets_only_raise() {
        let doc = TenantDocument::parse(
            "tenant: acme\npolicy:\n  default: allow\nhandlers:\n  billing.refund.issue:\n    credential: p\n    max_amount: 100000\nbudgets:\n  - {action: billing.refund.issue, sum_of: amount, max: 100, per: 24h, scope: tenant, reason: over the daily refund budget}\n",
        )
        .unwrap();
        let b = &doc.budgets[0];
        let mut d = decide(
            &CompiledPolicy::new(doc.clone(), 1, "x".into()).unwrap(),
            &input("billing.refund.issue", 5),
        );
        assert!(raise_for_budget(&mut d, b));
        assert_eq!(
            (d.effect, d.rule.as_deref(), d.reason.as_str()),
            (
                Effect::Escalate,
                Some("budget"),
                "over the daily refund budget"
            )
        );
        for effect in [Effect::Escalate, Effect::Block] {
            let mut d = Decision {
                effect,
                rule: Some("r".into()),
                reason: "x".into(),
                errors: vec![],
            };
            assert!(!raise_for_budget(&mut d, b));
            assert_eq!((d.effect, d.rule.as_deref()), (effect, Some("r")));
        }
    }

    #[test]
    fn integers_are_cel_ints() {
        let rule = "    - name: arith\n      when: 'params.amount * 2 > 10000'\n      effect: block\n      reason: x\n";
        assert_eq!(
            decide(&policy(rule, "allow"), &input("billing.refund.issue", 5001)).effect,
            Effect::Block
        );
    }
}
