//! `db.statement.execute`: a SQL statement *named* in the tenant document (written by the
//! tenant's admin, never by the agent), its parameters bound by name and type, run as a
//! dedicated role of the target database (the URL is the credential) under a
//! `statement_timeout` and a cap on the rows it may touch. The agent chooses only the
//! statement's name and its typed values.

use super::card::{Card, CardInput, Fact, str_of};
use super::spec::{Spec, check_token};
use crate::FieldError;
use crate::ids::parse_duration;
use crate::text::reveal_invisible;
use serde_json::{Map, Value, json};
use std::time::Duration;

/// The registry entry of `db.statement.execute`.
pub(super) static SPEC: Spec = Spec {
    action: "db.statement.execute",
    description: "Run one of the tenant's named SQL statements with typed values; rows touched over the statement's cap roll it back.",
    honours_idempotency_key: false,
    history_sum_param: None,
    default_risky: &["statement", "values"],
    editable: &["values"],
    default_summary: "Run statement {statement} with {values}",
    settings: &["credential", "statements", "statement_timeout"],
    credential_required: true,
    params_schema,
    check_params,
    check_settings,
    derive_target,
    placeholder,
    card,
    card_covers: &["statement", "values"],
    limits,
    ..Spec::BASE
};

/// Default of `statement_timeout`.
pub const DEFAULT_STATEMENT_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest text value, in characters.
const MAX_TEXT_CHARS: usize = 1000;

/// The SQL types a statement parameter may have, and the JSON value each accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqlType {
    /// `text`: a JSON string.
    Text,
    /// `bigint`: a JSON integer, or beyond ±(2^53−1) (which JSON does not carry exactly) a
    /// string of its decimal digits, e.g. `"9007199254740993"` (see [`bigint_of`]).
    Bigint,
    /// `integer`: a JSON integer within ±2^31.
    Integer,
    /// `boolean`: `true` or `false`.
    Boolean,
}

impl SqlType {
    /// Parses a type name of the settings.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "text" => Some(Self::Text),
            "bigint" => Some(Self::Bigint),
            "integer" => Some(Self::Integer),
            "boolean" => Some(Self::Boolean),
            _ => None,
        }
    }

    /// Whether `v` is a value of this type.
    pub fn accepts(self, v: &Value) -> bool {
        match self {
            Self::Text => v
                .as_str()
                .is_some_and(|s| s.chars().count() <= MAX_TEXT_CHARS && !s.contains('\0')),
            Self::Bigint => bigint_of(v).is_some(),
            Self::Integer => v.as_i64().is_some_and(|n| i32::try_from(n).is_ok()),
            Self::Boolean => v.is_boolean(),
        }
    }

    fn rule(self) -> String {
        match self {
            Self::Text => {
                format!("must be a string of at most {MAX_TEXT_CHARS} characters (type text)")
            }
            Self::Bigint => "must be an integer (type bigint); beyond ±(2^53−1) a string of its decimal digits, e.g. \"9007199254740993\"".into(),
            Self::Integer => {
                "must be an integer between -2147483648 and 2147483647 (type integer)".into()
            }
            Self::Boolean => "must be true or false (type boolean)".into(),
        }
    }
}

/// The `bigint` a value stands for: a JSON integer, or a string of decimal digits (an optional
/// `-`, no `+`, no leading zero) for a value beyond ±(2^53−1) that fits in 64 bits. A string
/// for a value JSON carries exactly is `None`, so each value has one spelling and one intent
/// hash.
pub fn bigint_of(v: &Value) -> Option<i64> {
    if let Some(n) = v.as_i64() {
        return Some(n);
    }
    let s = v.as_str()?;
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty() || digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: i64 = s.parse().ok()?;
    (n.unsigned_abs() > crate::canonical::MAX_SAFE_INTEGER).then_some(n)
}

/// A statement of the tenant document, as the executor runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedStatement {
    /// The SQL, with `$1`, `$2`, … for the parameters in order.
    pub sql: String,
    /// Parameter names and types, in `$n` order.
    pub params: Vec<(String, SqlType)>,
    /// Most rows the statement may touch; more rolls it back.
    pub max_rows: u64,
    /// How its effect is read back after the run, when the statement declares it.
    pub read_back: Option<ReadBackQuery>,
}

/// A statement's `read_back`: a read-only query of the rows it changes, run after the
/// statement under the same credential with the same typed values (`$1`, `$2`, … as the
/// statement's params; it may leave some out), and what their columns must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadBackQuery {
    /// One SELECT (run as a subquery of a read-only transaction).
    pub sql: String,
    /// Column → what it must hold in every row read back: a value of the statement's
    /// params, or a literal.
    pub expect: Vec<(String, Expected)>,
}

/// What one column of a read-back row must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    /// The approved value of this statement param (`{param: NAME}`).
    Param(String),
    /// This JSON value (a string, a number, a boolean or null).
    Literal(Value),
}

impl Expected {
    /// The value a column must hold, given the approved `values`.
    pub fn value<'a>(&'a self, values: Option<&'a Value>) -> Option<&'a Value> {
        match self {
            Self::Param(name) => values.and_then(|v| v.get(name)),
            Self::Literal(v) => Some(v),
        }
    }
}

/// Whether `got` (a column read back, as `to_jsonb` gives it) is `want` (an approved value or
/// a literal): equal JSON, the same bigint however it is spelled, or the same number (a
/// `numeric` column reads `80.00` for a literal `80`).
pub fn same_value(got: &Value, want: &Value) -> bool {
    got == want
        || matches!((bigint_of(got), bigint_of(want)), (Some(a), Some(b)) if a == b)
        || matches!((got, want), (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64())
}

/// The `read_back` of a statement's settings, if well formed.
fn read_back_of(s: &Value) -> Option<ReadBackQuery> {
    let rb = s.get("read_back")?;
    let expect = rb
        .get("expect")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(col, v)| {
                    let e = match v.get("param").and_then(Value::as_str) {
                        Some(p) => Expected::Param(p.to_owned()),
                        None => Expected::Literal(v.clone()),
                    };
                    (col.clone(), e)
                })
                .collect()
        })
        .unwrap_or_default();
    Some(ReadBackQuery {
        sql: rb.get("sql")?.as_str()?.to_owned(),
        expect,
    })
}

/// The statement `params.statement` names in `settings`, or `None`.
pub fn statement(params: &Value, settings: &Value) -> Option<NamedStatement> {
    let name = params.get("statement")?.as_str()?;
    let s = settings.get("statements")?.get(name)?;
    let list = s.get("params").and_then(Value::as_array);
    let params = list
        .map(|a| {
            a.iter()
                .filter_map(|p| {
                    Some((
                        p.get("name")?.as_str()?.to_owned(),
                        SqlType::parse(p.get("type")?.as_str()?)?,
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    Some(NamedStatement {
        sql: s.get("sql")?.as_str()?.to_owned(),
        params,
        max_rows: s.get("max_rows")?.as_u64()?,
        read_back: read_back_of(s),
    })
}

/// The `statement_timeout` of the settings (default 5 s).
pub fn statement_timeout(settings: &Value) -> Duration {
    settings
        .get("statement_timeout")
        .and_then(Value::as_str)
        .and_then(|s| parse_duration(s).ok())
        .unwrap_or(DEFAULT_STATEMENT_TIMEOUT)
}

fn params_schema() -> Value {
    json!({
        "type": "object", "additionalProperties": false,
        "required": ["statement"],
        "properties": {
            "statement": {"type": "string", "description": "name of one of the tenant's statements"},
            "values": {"type": "object", "description": "the statement's parameters by name: strings, integers or booleans as its types say"}
        }
    })
}

fn check_params(obj: &Map<String, Value>, settings: &Value, errs: &mut Vec<FieldError>) {
    let Some(v) = obj.get("statement") else {
        return;
    };
    check_token(errs, "statement", v, 64);
    let Some(st) = statement(&Value::Object(obj.clone()), settings) else {
        if v.as_str().is_some() {
            errs.push(FieldError::new(
                "params.statement",
                "is not one of this tenant's statements",
            ));
        }
        return;
    };
    let empty = Map::new();
    let values = match obj.get("values") {
        None => &empty,
        Some(Value::Object(m)) => m,
        Some(_) => {
            errs.push(FieldError::new(
                "params.values",
                "must be an object of the statement's parameters",
            ));
            return;
        }
    };
    for (name, ty) in &st.params {
        match values.get(name) {
            None => errs.push(FieldError::new(
                format!("params.values.{name}"),
                "is required by the statement",
            )),
            Some(v) if !ty.accepts(v) => {
                errs.push(FieldError::new(format!("params.values.{name}"), ty.rule()))
            }
            Some(_) => {}
        }
    }
    for k in values.keys() {
        if !st.params.iter().any(|(n, _)| n == k) {
            errs.push(FieldError::new(
                super::spec::field(k).replacen("params", "params.values", 1),
                "is not a parameter of the statement",
            ));
        }
    }
}

fn check_settings(path: &str, settings: &Map<String, Value>, errs: &mut Vec<FieldError>) {
    if let Some(t) = settings.get("statement_timeout") {
        let ok = t
            .as_str()
            .and_then(|s| parse_duration(s).ok())
            .is_some_and(|d| d >= Duration::from_millis(10) && d <= Duration::from_secs(60));
        if !ok {
            errs.push(FieldError::new(
                format!("{path}.statement_timeout"),
                "must be a duration between 10ms and 60s, like 2s",
            ));
        }
    }
    let Some(m) = settings
        .get("statements")
        .and_then(Value::as_object)
        .filter(|m| !m.is_empty())
    else {
        errs.push(FieldError::new(
            format!("{path}.statements"),
            "is required: a mapping of statement name to {sql, params, max_rows}",
        ));
        return;
    };
    for (name, s) in m {
        check_statement(&format!("{path}.statements.{name}"), name, s, errs);
    }
}

fn check_statement(p: &str, name: &str, s: &Value, errs: &mut Vec<FieldError>) {
    if name.is_empty()
        || name.len() > 64
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        errs.push(FieldError::new(
            p,
            "the name must match ^[A-Za-z0-9_-]{1,64}$",
        ));
    }
    if let Some(k) = s.as_object().and_then(|o| {
        o.keys()
            .find(|k| !matches!(k.as_str(), "sql" | "params" | "max_rows" | "read_back"))
    }) {
        errs.push(FieldError::new(
            format!("{p}.{k}"),
            "unknown setting; expected sql, params, max_rows, read_back",
        ));
    }
    let mut repeated = false;
    let n_params = match s.get("params") {
        None => 0,
        Some(Value::Array(a)) => {
            for (i, prm) in a.iter().enumerate() {
                let name = prm.get("name").and_then(Value::as_str);
                if let Some(n) = name
                    && let Some(j) = a[..i]
                        .iter()
                        .position(|q| q.get("name").and_then(Value::as_str) == Some(n))
                {
                    repeated = true;
                    errs.push(FieldError::new(
                        format!("{p}.params[{i}].name"),
                        format!("{n:?} is already params[{j}]: each param binds its own $n, so names must differ"),
                    ));
                }
                let ok_name = name.is_some_and(|n| {
                    !n.is_empty()
                        && n.len() <= 64
                        && n.chars()
                            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                });
                let ok_type = prm
                    .get("type")
                    .and_then(Value::as_str)
                    .and_then(SqlType::parse)
                    .is_some();
                if !ok_name || !ok_type {
                    errs.push(FieldError::new(
                        format!("{p}.params[{i}]"),
                        "must be {name: [a-z0-9_]+, type: text | bigint | integer | boolean}",
                    ));
                }
            }
            a.len()
        }
        Some(_) => {
            errs.push(FieldError::new(
                format!("{p}.params"),
                "must be a list of {name, type}",
            ));
            0
        }
    };
    match s.get("sql").and_then(Value::as_str) {
        Some(sql) if !sql.trim().is_empty() && sql.len() <= 4000 => {
            let max = highest_placeholder(sql);
            if max != n_params && !repeated {
                errs.push(FieldError::new(
                    format!("{p}.sql"),
                    format!("uses ${max} as its highest parameter but params lists {n_params}: $1…$n bind params in order"),
                ));
            }
        }
        _ => errs.push(FieldError::new(
            format!("{p}.sql"),
            "is required: one SQL statement of at most 4000 characters",
        )),
    }
    if let Some(rb) = s.get("read_back") {
        check_read_back(&format!("{p}.read_back"), rb, s, n_params, errs);
    }
    if !s
        .get("max_rows")
        .and_then(Value::as_u64)
        .is_some_and(|n| (1..=1_000_000).contains(&n))
    {
        errs.push(FieldError::new(
            format!("{p}.max_rows"),
            "is required: the most rows the statement may touch, 1 to 1000000",
        ));
    }
}

/// Checks a statement's `read_back`: `{sql: one SELECT using at most the statement's $n,
/// expect: {column: literal | {param: NAME}}}`.
fn check_read_back(p: &str, rb: &Value, s: &Value, n_params: usize, errs: &mut Vec<FieldError>) {
    let Some(o) = rb.as_object() else {
        errs.push(FieldError::new(
            p,
            "must be {sql: a SELECT of the rows the statement changes, expect: {column: value or {param: NAME}}}",
        ));
        return;
    };
    if let Some(k) = o.keys().find(|k| !matches!(k.as_str(), "sql" | "expect")) {
        errs.push(FieldError::new(
            format!("{p}.{k}"),
            "unknown setting; expected sql, expect",
        ));
    }
    match o.get("sql").and_then(Value::as_str) {
        Some(sql)
            if sql
                .trim_start()
                .get(..6)
                .is_some_and(|w| w.eq_ignore_ascii_case("select"))
                && sql.len() <= 4000
                && !sql.contains(';') =>
        {
            let max = highest_placeholder(sql);
            if max > n_params {
                errs.push(FieldError::new(
                    format!("{p}.sql"),
                    format!("uses ${max} but the statement has {n_params} params: the read-back binds the statement's values"),
                ));
            }
        }
        _ => errs.push(FieldError::new(
            format!("{p}.sql"),
            "is required: one SELECT (no ';') of at most 4000 characters",
        )),
    }
    let names: Vec<&str> = s
        .get("params")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|q| q.get("name")?.as_str()).collect())
        .unwrap_or_default();
    let Some(expect) = o
        .get("expect")
        .and_then(Value::as_object)
        .filter(|m| !m.is_empty())
    else {
        errs.push(FieldError::new(
            format!("{p}.expect"),
            "is required: the columns the rows must hold afterwards, {column: value or {param: NAME}}",
        ));
        return;
    };
    for (col, v) in expect {
        let ok = match v {
            Value::Object(m) => {
                m.len() == 1
                    && m.get("param")
                        .and_then(Value::as_str)
                        .is_some_and(|n| names.contains(&n))
            }
            Value::Array(_) => false,
            _ => true,
        };
        if !ok {
            errs.push(FieldError::new(
                format!("{p}.expect.{col}"),
                "must be a string, number, boolean, null, or {param: NAME} naming one of the statement's params",
            ));
        }
    }
}

/// The highest `$n` placeholder in `sql` (0 when there is none).
fn highest_placeholder(sql: &str) -> usize {
    let b = sql.as_bytes();
    let mut max = 0;
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'$' {
            let start = i + 1;
            let mut j = start;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            if j > start {
                max = max.max(sql[start..j].parse().unwrap_or(usize::MAX));
            }
            i = j.max(i + 1);
        } else {
            i += 1;
        }
    }
    max
}

/// The target is the statement's name.
fn derive_target(params: &Value, _settings: &Value) -> String {
    super::spec::param_str(params, "statement")
}

/// `{values}` reads as `name = value, …`.
fn placeholder(key: &str, params: &Value) -> Option<String> {
    if key != "values" {
        return None;
    }
    let vals = params.get("values").and_then(Value::as_object)?;
    if vals.is_empty() {
        return Some("no values".into());
    }
    Some(
        vals.iter()
            .map(|(k, v)| format!("{k} = {v}"))
            .collect::<Vec<_>>()
            .join(", "),
    )
}

/// The card: the statement's name, its values and the SQL it stands for.
fn card(c: &CardInput<'_>) -> Card {
    let (params, settings) = (c.params, c.settings);
    let st = reveal_invisible(str_of(params, "statement"), false);
    // The SQL the name stands for, from the tenant's settings (what will run).
    let sql = settings
        .get("statements")
        .and_then(|s| s.get(str_of(params, "statement")))
        .and_then(|s| s.get("sql"))
        .and_then(Value::as_str)
        .map(|s| reveal_invisible(s, false))
        .unwrap_or_else(|| "(not in the tenant's statements)".into());
    let mut with = Fact::new("With", String::new(), c.is_hot("values"));
    match params.get("values") {
        Some(v) => with = with.values(v),
        None => with.value = "(no values)".into(),
    }
    Card {
        facts: vec![
            Fact::new("Statement", st.clone(), c.is_hot("statement")),
            with,
            Fact::new("Runs", sql, false),
        ],
        approve_label: format!("Approve running {st}"),
    }
}

/// For agents: the named statements with the typed values each takes (never their SQL).
fn limits(s: &Value) -> Vec<String> {
    let Some(st) = s.get("statements").and_then(Value::as_object) else {
        return Vec::new();
    };
    let names: Vec<String> = st
        .iter()
        .map(|(name, def)| {
            let vals: Vec<String> = def
                .get("params")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .map(|p| {
                            format!(
                                "{}: {}",
                                p["name"].as_str().unwrap_or_default(),
                                p["type"].as_str().unwrap_or_default()
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            format!("{name} (values: {})", vals.join(", "))
        })
        .collect();
    vec![format!("statement one of {}", names.join(", "))]
}

#[cfg(test)]
mod tests {
    use super::super::HandlerKind;
    use super::*;

    fn settings() -> Value {
        json!({"statements": {"cancel_order": {
            "sql": "UPDATE orders SET status = 'cancelled' WHERE id = $1 AND status = $2",
            "params": [{"name": "order_id", "type": "bigint"}, {"name": "status", "type": "text"}],
            "max_rows": 1}}})
    }

    /// docs/ARCHITECTURE.md promises "integers beyond ±(2^53−1) (send them as strings)": a bigint id past
    /// 2^53 could not be proposed at all before (a number is refused by the strict parser, a
    /// string by the type check).
    #[test]
    fn a_bigint_beyond_json_exactness_is_sent_as_a_string() {
        let h = HandlerKind::DbStatementExecute;
        let big = json!({"statement": "cancel_order", "values": {"order_id": "9007199254740993", "status": "open"}});
        assert!(h.validate_params(&big, &settings()).is_ok());
        assert_eq!(
            bigint_of(&json!("9007199254740993")),
            Some(9_007_199_254_740_993)
        );
        assert_eq!(bigint_of(&json!("-9223372036854775808")), Some(i64::MIN));
        assert_eq!(bigint_of(&json!(7)), Some(7));
        // One spelling per value: a string for a value JSON carries exactly, a sign, a
        // leading zero, spaces or an overflow are refused.
        for bad in [
            "7",
            "9007199254740991",
            "+9007199254740993",
            "09007199254740993",
            " 9007199254740993",
            "9223372036854775808",
            "-",
            "",
        ] {
            assert_eq!(bigint_of(&json!(bad)), None, "{bad:?}");
            let p =
                json!({"statement": "cancel_order", "values": {"order_id": bad, "status": "open"}});
            assert!(h.validate_params(&p, &settings()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn only_a_named_statement_with_typed_values_passes() {
        let h = HandlerKind::DbStatementExecute;
        let ok = json!({"statement": "cancel_order", "values": {"order_id": 7, "status": "open"}});
        assert!(h.validate_params(&ok, &settings()).is_ok());
        assert_eq!(h.derive_target(&ok, &settings()), "cancel_order");
        assert_eq!(
            h.summary(None, &ok, "cancel_order"),
            "Run statement cancel_order with order_id = 7, status = \"open\""
        );
        for (p, field, rule) in [
            (
                json!({"statement": "drop_all", "values": {}}),
                "params.statement",
                "is not one of this tenant's statements",
            ),
            (
                json!({"statement": "cancel_order", "values": {"order_id": "7 OR 1=1", "status": "open"}}),
                "params.values.order_id",
                "must be an integer (type bigint); beyond ±(2^53−1) a string of its decimal digits, e.g. \"9007199254740993\"",
            ),
            (
                json!({"statement": "cancel_order", "values": {"order_id": 7}}),
                "params.values.status",
                "is required by the statement",
            ),
            (
                json!({"statement": "cancel_order", "values": {"order_id": 7, "status": "open", "sql": "DROP TABLE orders"}}),
                "params.values.sql",
                "is not a parameter of the statement",
            ),
            (
                json!({"statement": "cancel_order", "values": {"order_id": 7, "status": "open"}, "sql": "DROP TABLE orders"}),
                "params.sql",
                "unknown parameter for db.statement.execute; expected one of: statement, values",
            ),
        ] {
            let e = h.validate_params(&p, &settings()).unwrap_err();
            assert_eq!(e.0.len(), 1, "{p}: {e}");
            assert_eq!((e.0[0].field.as_str(), e.0[0].rule.as_str()), (field, rule));
        }
    }

    #[test]
    fn settings_must_bind_every_placeholder() {
        let errs = HandlerKind::DbStatementExecute.validate_settings(
            "h",
            json!({"credential": "db", "statement_timeout": "2m", "statements": {"x": {"sql": "DELETE FROM t WHERE a = $1 AND b = $2", "params": [{"name": "a", "type": "uuid"}], "max_rows": 0}}})
                .as_object()
                .unwrap(),
        );
        let fields: Vec<_> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "h.statement_timeout",
                "h.statements.x.params[0]",
                "h.statements.x.sql",
                "h.statements.x.max_rows"
            ]
        );
        assert_eq!(highest_placeholder("SELECT $1, '$$', $12"), 12);
    }

    /// A params list naming one param twice is refused naming the repeated name and where it
    /// first was, not with a count of placeholders that does not tell what is wrong.
    #[test]
    fn a_param_listed_twice_is_named() {
        let settings = json!({"statements": {"cancel": {
            "sql": "UPDATE orders SET status = 'cancelled' WHERE id = $1",
            "params": [{"name": "order_id", "type": "bigint"}, {"name": "order_id", "type": "bigint"}],
            "max_rows": 1}}});
        let mut errs = Vec::new();
        check_settings("handlers.db", settings.as_object().unwrap(), &mut errs);
        let all: Vec<String> = errs
            .iter()
            .map(|e| format!("{}: {}", e.field, e.rule))
            .collect();
        assert_eq!(
            all,
            vec![
                "handlers.db.statements.cancel.params[1].name: \"order_id\" is already params[0]: each param binds its own $n, so names must differ"
            ],
            "{all:?}"
        );
    }

    /// A `read_back` is one SELECT over the statement's own params, with what its columns
    /// must hold; anything else is refused naming the field.
    #[test]
    fn a_read_back_is_one_select_with_expected_columns() {
        let with = |rb: Value| {
            let settings = json!({"statements": {"hold": {
                "sql": "UPDATE orders SET status = $2 WHERE id = $1",
                "params": [{"name": "order_id", "type": "bigint"}, {"name": "status", "type": "text"}],
                "max_rows": 1, "read_back": rb}}});
            let mut errs = Vec::new();
            check_settings("h", settings.as_object().unwrap(), &mut errs);
            errs.iter().map(|e| e.field.clone()).collect::<Vec<_>>()
        };
        let ok = json!({"sql": "SELECT id, status FROM orders WHERE id = $1",
                        "expect": {"status": {"param": "status"}, "id": {"param": "order_id"}}});
        assert!(with(ok.clone()).is_empty(), "{:?}", with(ok));
        for (rb, field) in [
            (
                json!({"sql": "DELETE FROM orders WHERE id = $1", "expect": {"id": 1}}),
                "h.statements.hold.read_back.sql",
            ),
            (
                json!({"sql": "SELECT 1; DELETE FROM orders", "expect": {"id": 1}}),
                "h.statements.hold.read_back.sql",
            ),
            (
                json!({"sql": "SELECT id FROM orders WHERE id = $3", "expect": {"id": 1}}),
                "h.statements.hold.read_back.sql",
            ),
            (
                json!({"sql": "SELECT id FROM orders WHERE id = $1"}),
                "h.statements.hold.read_back.expect",
            ),
            (
                json!({"sql": "SELECT id FROM orders WHERE id = $1", "expect": {"id": {"param": "nope"}}}),
                "h.statements.hold.read_back.expect.id",
            ),
            (
                json!({"sql": "SELECT id FROM orders WHERE id = $1", "expect": {"id": 1}, "url": "x"}),
                "h.statements.hold.read_back.url",
            ),
        ] {
            assert_eq!(with(rb.clone()), vec![field.to_owned()], "{rb}");
        }
        let st = statement(
            &json!({"statement": "hold"}),
            &json!({"statements": {"hold": {
            "sql": "UPDATE orders SET status = $2 WHERE id = $1", "params": [], "max_rows": 1,
            "read_back": ok}}}),
        )
        .unwrap();
        let rb = st.read_back.unwrap();
        assert_eq!(
            rb.expect[0],
            ("id".to_owned(), Expected::Param("order_id".into()))
        );
        assert!(same_value(
            &json!(9_007_199_254_740_993_i64),
            &json!("9007199254740993")
        ));
        assert!(same_value(&json!(80.0), &json!(80)));
        assert!(!same_value(&json!("7"), &json!(7)));
    }
}
