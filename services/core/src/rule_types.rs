//! A type check of policy rules against the variables they can read, when a tenant document is
//! validated or applied.
//!
//! The cel crate parses and evaluates CEL but has no type checker: `parmas.amount > 90000`
//! (a typo) and `params.amount <= "5000"` (a string) compiled, were applied, and then failed
//! on every proposal at run time, failing closed (every refund blocked or escalated). This
//! module walks a compiled rule's expression with the fixed set of declared variables and
//! their types ([`RuleEnv`]: `action`, `target`, `params` with the types of the enabled
//! handlers' params schemas, `agent`, `session`, `on_behalf_of`, `history`, `now`,
//! `facts` ([`crate::facts`])) and refuses:
//!
//! - a name that is not declared (`parmas`), with the nearest declared one;
//! - a field that the value does not have (`params.amout`, `agent.email`, `history.total`);
//! - an operator or function applied to types it does not take (`params.amount <= "5000"`,
//!   `action + 1`, `size(1)`, `params.amount.startsWith("1")`), which CEL fails at run time;
//! - a comparison that can never be true: `==`/`in` between values of different types
//!   (CEL answers `false`), a param compared with a value outside its schema's `enum`
//!   (`params.reason == "dupliate"`), an action compared with a name that is no handler;
//! - a function that does not exist, and a rule that gives something other than a boolean.
//!
//! Within `action == "X" && …` (and the `?` branch of `action == "X" ? … : …`) `params` has
//! the type of handler X's params; elsewhere it has every field of every enabled handler's
//! params (a field two handlers type differently is `dyn`). What only data can reveal (a
//! param another handler does not have, an optional param left out) still fails closed at run
//! time, as before.

use crate::handlers::HandlerKind;
use cel::common::ast::{Expr, LiteralValue, operators as op};
use serde_json::Value;
use std::collections::BTreeMap;

/// A CEL type as this check knows it.
#[derive(Debug, Clone, PartialEq)]
pub enum Ty {
    /// Unknown until run time: every operation is accepted.
    Dyn,
    /// `bool`.
    Bool,
    /// `int`.
    Int,
    /// `uint`.
    Uint,
    /// `double`.
    Double,
    /// `string`, with the only values it can take when its schema has an `enum`.
    String(Option<Vec<String>>),
    /// `bytes`.
    Bytes,
    /// `null`.
    Null,
    /// `list(T)`.
    List(Box<Ty>),
    /// `map(K, V)`.
    Map(Box<Ty>, Box<Ty>),
    /// A map with a fixed set of fields (`agent`, `history`, `params`): a field outside the
    /// set is refused. The name is the variable's, for messages.
    Object(String, BTreeMap<String, Ty>),
    /// `google.protobuf.Timestamp`.
    Timestamp,
    /// `google.protobuf.Duration`.
    Duration,
    /// A type value (`int`, `string`, `type(x)`).
    Type,
}

impl Ty {
    /// A plain string.
    pub fn string() -> Self {
        Ty::String(None)
    }

    /// The name used in messages (`an int`, `a string`, `a list`).
    pub fn describe(&self) -> String {
        match self {
            Ty::Dyn => "a value of unknown type".into(),
            Ty::Bool => "a bool".into(),
            Ty::Int => "an int".into(),
            Ty::Uint => "a uint".into(),
            Ty::Double => "a double".into(),
            Ty::String(_) => "a string".into(),
            Ty::Bytes => "bytes".into(),
            Ty::Null => "null".into(),
            Ty::List(_) => "a list".into(),
            Ty::Map(..) => "a map".into(),
            Ty::Object(name, _) => format!("`{name}` (a map)"),
            Ty::Timestamp => "a timestamp".into(),
            Ty::Duration => "a duration".into(),
            Ty::Type => "a type".into(),
        }
    }

    fn is_numeric(&self) -> bool {
        matches!(self, Ty::Int | Ty::Uint | Ty::Double)
    }

    /// The kind, ignoring element types and enums: two values of different kinds are never
    /// equal (numbers compare across int, uint and double; maps and objects are one kind).
    fn kind(&self) -> Option<u8> {
        Some(match self {
            Ty::Dyn => return None,
            Ty::Bool => 1,
            Ty::Int | Ty::Uint | Ty::Double => 2,
            Ty::String(_) => 3,
            Ty::Bytes => 4,
            Ty::Null => 5,
            Ty::List(_) => 6,
            Ty::Map(..) | Ty::Object(..) => 7,
            Ty::Timestamp => 8,
            Ty::Duration => 9,
            Ty::Type => 10,
        })
    }

    /// The type of a JSON Schema (the subset the handlers' params schemas use).
    pub fn from_schema(schema: &Value) -> Self {
        match schema.get("type").and_then(Value::as_str) {
            Some("integer") => Ty::Int,
            Some("number") => Ty::Dyn,
            Some("boolean") => Ty::Bool,
            Some("string") => Ty::String(schema.get("enum").and_then(Value::as_array).map(|e| {
                e.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })),
            Some("array") => Ty::List(Box::new(
                schema.get("items").map_or(Ty::Dyn, Ty::from_schema),
            )),
            Some("object") => match schema.get("properties").and_then(Value::as_object) {
                Some(props) if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    Ty::Object(
                        "object".into(),
                        props
                            .iter()
                            .map(|(k, v)| (k.clone(), Ty::from_schema(v)))
                            .collect(),
                    )
                }
                _ => Ty::Map(
                    Box::new(Ty::string()),
                    Box::new(match schema.get("additionalProperties") {
                        Some(v @ Value::Object(_)) => Ty::from_schema(v),
                        _ => Ty::Dyn,
                    }),
                ),
            },
            _ => Ty::Dyn,
        }
    }

    /// One type for values that may be either: equal types stay, others become `dyn`.
    fn join(a: &Ty, b: &Ty) -> Ty {
        match (a, b) {
            _ if a == b => a.clone(),
            (Ty::String(_), Ty::String(_)) => Ty::string(),
            (Ty::List(x), Ty::List(y)) => Ty::List(Box::new(Ty::join(x, y))),
            _ => Ty::Dyn,
        }
    }
}

/// The variables a rule can read, with their types.
#[derive(Debug, Clone)]
pub struct RuleEnv {
    vars: BTreeMap<&'static str, Ty>,
    /// `params` of each enabled handler, by action name.
    handler_params: BTreeMap<&'static str, Ty>,
}

/// Every variable a rule can read, in the order messages list them.
pub const RULE_VARIABLES: [&str; 9] = [
    "action",
    "target",
    "params",
    "agent",
    "session",
    "on_behalf_of",
    "history",
    "now",
    "facts",
];

/// The type of `now`: the decision time in the tenant's time zone.
pub fn now_type() -> Ty {
    let int = |k: &str| (k.to_owned(), Ty::Int);
    Ty::Object(
        "now".into(),
        BTreeMap::from([
            ("time".to_owned(), Ty::Timestamp),
            int("year"),
            int("month"),
            int("day"),
            int("weekday"),
            int("hour"),
            int("minute"),
            ("date".to_owned(), Ty::string()),
            ("time_zone".to_owned(), Ty::string()),
        ]),
    )
}

impl RuleEnv {
    /// The variables of a document that enables `handlers` (every handler of the registry
    /// when it enables none).
    pub fn new(handlers: impl IntoIterator<Item = HandlerKind>) -> Self {
        let mut handler_params = BTreeMap::new();
        for h in handlers {
            let mut ty = Ty::from_schema(&h.params_schema());
            if let Ty::Object(name, _) = &mut ty {
                *name = format!("params of {}", h.action());
            }
            handler_params.insert(h.action(), ty);
        }
        if handler_params.is_empty() {
            return Self::new(HandlerKind::ALL);
        }
        let mut merged: BTreeMap<String, Ty> = BTreeMap::new();
        for ty in handler_params.values() {
            if let Ty::Object(_, fields) = ty {
                for (k, t) in fields {
                    merged
                        .entry(k.clone())
                        .and_modify(|m| *m = Ty::join(m, t))
                        .or_insert_with(|| t.clone());
                }
            }
        }
        let s = |k: &str| (k.to_owned(), Ty::string());
        let vars = BTreeMap::from([
            ("action", Ty::string()),
            ("target", Ty::string()),
            ("params", Ty::Object("params".into(), merged)),
            (
                "agent",
                Ty::Object(
                    "agent".into(),
                    BTreeMap::from([s("id"), s("name"), s("owner")]),
                ),
            ),
            ("session", Ty::string()),
            ("on_behalf_of", Ty::string()),
            (
                "history",
                Ty::Object(
                    "history".into(),
                    BTreeMap::from([("count".to_owned(), Ty::Int), ("sum".to_owned(), Ty::Int)]),
                ),
            ),
            ("now", now_type()),
            ("facts", crate::facts::rule_type()),
        ]);
        Self {
            vars,
            handler_params,
        }
    }

    /// Type-checks one rule's expression: every problem found, as sentences.
    pub fn check(&self, expr: &cel::IdedExpr) -> Vec<String> {
        let mut c = Checker {
            env: self,
            scopes: Vec::new(),
            params: None,
            errors: Vec::new(),
        };
        let ty = c.ty(expr);
        if !matches!(ty, Ty::Bool | Ty::Dyn) && crate::rule_check::non_boolean_expr(expr).is_none()
        {
            c.errors.push(format!(
                "must be a boolean expression (this one gives {})",
                ty.describe()
            ));
        }
        let mut seen = std::collections::HashSet::new();
        c.errors.retain(|e| seen.insert(e.clone()));
        c.errors
    }
}

struct Checker<'e> {
    env: &'e RuleEnv,
    /// Comprehension variables in scope, innermost last.
    scopes: Vec<(String, Ty)>,
    /// `params` narrowed by an `action == "X"` around the expression being checked.
    params: Option<Ty>,
    errors: Vec<String>,
}

/// The names a CEL expression may use as type values (`type(x) == int`).
const TYPE_NAMES: [&str; 12] = [
    "bool",
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
    "google.protobuf.Timestamp",
    "google.protobuf.Duration",
];

/// The timestamp and duration getters (`now.time.getHours()`).
const TIME_GETTERS: [&str; 10] = [
    "getFullYear",
    "getMonth",
    "getDayOfMonth",
    "getDayOfYear",
    "getDate",
    "getDayOfWeek",
    "getHours",
    "getMinutes",
    "getSeconds",
    "getMilliseconds",
];

/// Levenshtein distance, for "did you mean".
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (row[j + 1] + 1)
                .min(row[j] + 1)
                .min(prev + usize::from(ca != *cb));
            prev = cur;
        }
    }
    row[b.len()]
}

/// ` (did you mean `x`?)` when one of `known` is within two edits of `name`.
fn did_you_mean<'a>(name: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    known
        .into_iter()
        .map(|k| (distance(name, k), k))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, k)| format!(" (did you mean `{k}`?)"))
        .unwrap_or_default()
}

/// The string of a string literal.
fn string_literal(e: &cel::IdedExpr) -> Option<&str> {
    match &e.expr {
        Expr::Literal(LiteralValue::String(s)) => Some(s.as_ref()),
        _ => None,
    }
}

/// Whether `e` is a decimal literal (`50.00`, `-1.5`).
fn is_double_literal(e: &cel::IdedExpr) -> bool {
    match &e.expr {
        Expr::Literal(LiteralValue::Double(_)) => true,
        Expr::Call(c) if c.func_name == op::NEGATE && c.args.len() == 1 => {
            is_double_literal(&c.args[0])
        }
        _ => false,
    }
}

/// The handler named by `action == "X"` (either order), when `e` is that comparison.
fn action_equals(e: &cel::IdedExpr) -> Option<&str> {
    let Expr::Call(call) = &e.expr else {
        return None;
    };
    if call.func_name != op::EQUALS || call.args.len() != 2 {
        return None;
    }
    let is_action = |e: &cel::IdedExpr| matches!(&e.expr, Expr::Ident(n) if n == "action");
    match (&call.args[0], &call.args[1]) {
        (a, b) if is_action(a) => string_literal(b),
        (a, b) if is_action(b) => string_literal(a),
        _ => None,
    }
}

/// A short rendering of a field read (`params.amount`) for messages, or `this value`.
fn shown(e: &cel::IdedExpr) -> String {
    match &e.expr {
        Expr::Ident(n) => format!("`{n}`"),
        Expr::Select(s) => match shown(&s.operand).strip_prefix('`') {
            Some(inner) => format!("`{}.{}`", inner.trim_end_matches('`'), s.field),
            None => "this value".into(),
        },
        Expr::Literal(LiteralValue::String(s)) => format!("{:?}", s.as_ref() as &str),
        Expr::Literal(LiteralValue::Int(i)) => i.to_string(),
        _ => "this value".into(),
    }
}

impl Checker<'_> {
    fn err(&mut self, message: String) -> Ty {
        self.errors.push(message);
        Ty::Dyn
    }

    fn ty(&mut self, e: &cel::IdedExpr) -> Ty {
        match &e.expr {
            Expr::Literal(l) => match l {
                LiteralValue::Boolean(_) => Ty::Bool,
                LiteralValue::Int(_) => Ty::Int,
                LiteralValue::UInt(_) => Ty::Uint,
                LiteralValue::Double(_) => Ty::Double,
                LiteralValue::String(_) => Ty::string(),
                LiteralValue::Bytes(_) => Ty::Bytes,
                LiteralValue::Null => Ty::Null,
            },
            Expr::Ident(name) => self.ident(name),
            Expr::Select(s) => {
                let operand = self.ty(&s.operand);
                let field = self.field(&s.operand, operand, &s.field);
                if s.test { Ty::Bool } else { field }
            }
            Expr::List(list) => {
                let mut elem: Option<Ty> = None;
                for element in &list.elements {
                    let t = self.ty(element);
                    elem = Some(match elem {
                        None => t,
                        Some(prev) => Ty::join(&prev, &t),
                    });
                }
                Ty::List(Box::new(elem.unwrap_or(Ty::Dyn)))
            }
            Expr::Map(map) => {
                for entry in &map.entries {
                    if let cel::common::ast::EntryExpr::MapEntry(m) = &entry.expr {
                        self.ty(&m.key);
                        self.ty(&m.value);
                    }
                }
                Ty::Map(Box::new(Ty::Dyn), Box::new(Ty::Dyn))
            }
            Expr::Struct(s) => self.err(format!(
                "uses the message type `{}`; rules have no message types",
                s.type_name
            )),
            Expr::Comprehension(c) => {
                let range = self.ty(&c.iter_range);
                let (first, second) = match &range {
                    Ty::List(t) => (Ty::Int, (**t).clone()),
                    Ty::Map(k, v) => ((**k).clone(), (**v).clone()),
                    Ty::Object(_, _) => (Ty::string(), Ty::Dyn),
                    Ty::Dyn => (Ty::Dyn, Ty::Dyn),
                    other => {
                        let d = other.describe();
                        self.err(format!(
                            "{} is {d}: a macro such as `all` or `exists` needs a list or a map",
                            shown(&c.iter_range)
                        ));
                        (Ty::Dyn, Ty::Dyn)
                    }
                };
                let accu = self.ty(&c.accu_init);
                let depth = self.scopes.len();
                match &c.iter_var2 {
                    Some(v2) => {
                        self.scopes.push((c.iter_var.clone(), first));
                        self.scopes.push((v2.clone(), second));
                    }
                    None => {
                        // One variable: a list's elements, a map's keys.
                        let t = if matches!(range, Ty::List(_)) {
                            second
                        } else {
                            first
                        };
                        self.scopes.push((c.iter_var.clone(), t));
                    }
                }
                self.scopes.push((c.accu_var.clone(), accu));
                self.ty(&c.loop_cond);
                self.ty(&c.loop_step);
                let result = self.ty(&c.result);
                self.scopes.truncate(depth);
                result
            }
            Expr::Call(call) => self.call(call),
            Expr::Unspecified => Ty::Dyn,
        }
    }

    fn ident(&mut self, name: &str) -> Ty {
        if let Some((_, t)) = self.scopes.iter().rev().find(|(n, _)| n == name) {
            return t.clone();
        }
        if name == "params"
            && let Some(p) = &self.params
        {
            return p.clone();
        }
        if let Some(t) = self.env.vars.get(name) {
            return t.clone();
        }
        if TYPE_NAMES.contains(&name) {
            return Ty::Type;
        }
        let hint = did_you_mean(
            name,
            RULE_VARIABLES
                .into_iter()
                .chain(self.scopes.iter().map(|(n, _)| n.as_str())),
        );
        self.err(format!(
            "undeclared reference to `{name}`{hint}; rules can read {}",
            RULE_VARIABLES.join(", ")
        ))
    }

    fn field(&mut self, operand_expr: &cel::IdedExpr, operand: Ty, field: &str) -> Ty {
        match operand {
            Ty::Dyn => Ty::Dyn,
            Ty::Map(_, v) => *v,
            Ty::Object(name, fields) => match fields.get(field) {
                Some(t) => t.clone(),
                None => {
                    let hint = did_you_mean(field, fields.keys().map(String::as_str));
                    let known: Vec<&str> = fields.keys().map(String::as_str).collect();
                    let known = if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    };
                    let what = shown(operand_expr);
                    match name.strip_prefix("params of ") {
                        Some(action) => self.err(format!(
                            "{what} has no param `{field}`{hint} for {action}; its params are {known}"
                        )),
                        None if name == "params" => self.err(format!(
                            "{what} has no param `{field}`{hint} in any handler this document enables; their params are {known}"
                        )),
                        None => self.err(format!(
                            "{what} has no field `{field}`{hint}; {name} has {known}"
                        )),
                    }
                }
            },
            other => self.err(format!(
                "{} is {}: it has no field `{field}`",
                shown(operand_expr),
                other.describe()
            )),
        }
    }

    fn call(&mut self, call: &cel::common::ast::CallExpr) -> Ty {
        let f = call.func_name.as_str();
        // `action == "X" && …`: the right side reads X's params.
        if (f == op::LOGICAL_AND || f == op::CONDITIONAL)
            && call.target.is_none()
            && let [first, rest @ ..] = call.args.as_slice()
        {
            return self.narrowing(f, first, rest);
        }
        let target = call.target.as_deref().map(|t| (t, self.ty(t)));
        let args: Vec<Ty> = call.args.iter().map(|a| self.ty(a)).collect();
        match (f, &target, args.as_slice()) {
            (op::LOGICAL_OR, None, [a, b]) => {
                self.expect_bool(&call.args[0], a, f);
                self.expect_bool(&call.args[1], b, f);
                Ty::Bool
            }
            (op::LOGICAL_NOT, None, [a]) => {
                self.expect_bool(&call.args[0], a, f);
                Ty::Bool
            }
            (op::NOT_STRICTLY_FALSE, _, _) => Ty::Bool,
            (op::EQUALS | op::NOT_EQUALS, None, [a, b]) => {
                self.equality(&call.args[0], a, &call.args[1], b);
                Ty::Bool
            }
            (op::LESS | op::LESS_EQUALS | op::GREATER | op::GREATER_EQUALS, None, [a, b]) => {
                self.ordering(call, a, b)
            }
            (op::ADD, None, [a, b]) => self.arithmetic(call, "+", a, b),
            (op::SUBSTRACT, None, [a, b]) => self.arithmetic(call, "-", a, b),
            (op::MULTIPLY, None, [a, b]) => self.arithmetic(call, "*", a, b),
            (op::DIVIDE, None, [a, b]) => self.arithmetic(call, "/", a, b),
            (op::MODULO, None, [a, b]) => self.arithmetic(call, "%", a, b),
            (op::NEGATE, None, [a]) => match a {
                Ty::Dyn | Ty::Int | Ty::Double | Ty::Duration => a.clone(),
                other => {
                    let d = other.describe();
                    self.err(format!(
                        "negates {} ({d}): `-` takes a number",
                        shown(&call.args[0])
                    ))
                }
            },
            (op::IN, None, [a, b]) => {
                self.membership(&call.args[0], a, &call.args[1], b);
                Ty::Bool
            }
            (op::INDEX | op::OPT_INDEX, None, [a, b]) => self.index(call, a, b),
            ("size", _, _) => self.size(&target, call, &args),
            ("contains" | "startsWith" | "endsWith" | "matches", _, _) => {
                self.string_function(f, &target, call, &args)
            }
            ("int", None, _) => Ty::Int,
            ("uint", None, _) => Ty::Uint,
            ("double", None, _) => Ty::Double,
            ("string", None, _) => Ty::string(),
            ("bool", None, _) => Ty::Bool,
            ("bytes", None, _) => Ty::Bytes,
            ("timestamp", None, _) => Ty::Timestamp,
            ("duration", None, _) => Ty::Duration,
            ("dyn", None, [_]) => Ty::Dyn,
            ("type", None, _) => Ty::Type,
            (getter, Some((e, t)), _) if TIME_GETTERS.contains(&getter) => {
                if !matches!(t, Ty::Dyn | Ty::Timestamp | Ty::Duration) {
                    self.errors.push(format!(
                        "calls `{getter}` on {} ({}): it takes a timestamp or a duration",
                        shown(e),
                        t.describe()
                    ));
                }
                Ty::Int
            }
            _ => self.err(format!(
                "calls `{f}`, which is not a function rules have (they have the CEL standard functions: size, contains, startsWith, endsWith, matches, int, uint, double, string, timestamp, duration, the timestamp getters, and the macros has, all, exists, exists_one, map, filter)"
            )),
        }
    }

    /// `&&` and `? :`: the condition must be a bool, and when it is `action == "X"` the
    /// operand after it reads X's params.
    fn narrowing(&mut self, f: &str, first: &cel::IdedExpr, rest: &[cel::IdedExpr]) -> Ty {
        let cond = self.ty(first);
        self.expect_bool(first, &cond, f);
        let narrowed = action_equals(first).and_then(|a| {
            self.env
                .handler_params
                .get(a)
                .cloned()
                .or_else(|| HandlerKind::lookup(a).map(|h| Ty::from_schema(&h.params_schema())))
        });
        let saved = self.params.clone();
        let mut types = Vec::new();
        for (i, arg) in rest.iter().enumerate() {
            if i == 0 && narrowed.is_some() {
                self.params = narrowed.clone();
            }
            types.push(self.ty(arg));
            self.params = saved.clone();
        }
        if f == op::LOGICAL_AND {
            if let Some(t) = types.first() {
                self.expect_bool(&rest[0], t, f);
            }
            return Ty::Bool;
        }
        match types.as_slice() {
            [a, b] => Ty::join(a, b),
            _ => Ty::Dyn,
        }
    }

    /// `<`, `<=`, `>`, `>=`: numbers with numbers, or two values of one ordered kind.
    fn ordering(&mut self, call: &cel::common::ast::CallExpr, a: &Ty, b: &Ty) -> Ty {
        let ok = matches!((a, b), (Ty::Dyn, _) | (_, Ty::Dyn))
            || (a.is_numeric() && b.is_numeric())
            || (a.kind() == b.kind()
                && matches!(
                    a,
                    Ty::String(_) | Ty::Bytes | Ty::Bool | Ty::Timestamp | Ty::Duration
                ));
        if !ok {
            self.errors.push(format!(
                "compares {} ({}) with {} ({}): CEL cannot order these, so the rule fails on every proposal",
                shown(&call.args[0]),
                a.describe(),
                shown(&call.args[1]),
                b.describe()
            ));
        }
        // An int (an amount in minor units, a count, an hour) against a decimal literal:
        // CEL orders them, so `params.amount <= 50.00` was accepted and meant 0.50 USD.
        for (int, other, t) in [(0, 1, a), (1, 0, b)] {
            if matches!(t, Ty::Int) && is_double_literal(&call.args[other]) {
                self.errors.push(format!(
                    "compares {} (an int) with a decimal number: amounts are ints in minor units (50.00 USD is 5000), counts and hours are whole; write an int",
                    shown(&call.args[int])
                ));
            }
        }
        Ty::Bool
    }

    /// `a[b]`: a list by an int, a map by a key, an object by a field name.
    fn index(&mut self, call: &cel::common::ast::CallExpr, a: &Ty, b: &Ty) -> Ty {
        match a {
            Ty::Dyn => Ty::Dyn,
            Ty::List(t) => {
                if !matches!(b, Ty::Int | Ty::Uint | Ty::Dyn) {
                    self.errors.push(format!(
                        "indexes a list with {}: list indexes are ints",
                        b.describe()
                    ));
                }
                (**t).clone()
            }
            Ty::Map(_, v) => (**v).clone(),
            Ty::Object(..) => match string_literal(&call.args[1]) {
                Some(field) => self.field(&call.args[0], a.clone(), field),
                None => Ty::Dyn,
            },
            other => {
                let d = other.describe();
                self.err(format!(
                    "indexes {} ({d}): `[]` takes a list or a map",
                    shown(&call.args[0])
                ))
            }
        }
    }

    /// `size(x)` or `x.size()`: of a string, bytes, a list or a map.
    fn size(
        &mut self,
        target: &Option<(&cel::IdedExpr, Ty)>,
        call: &cel::common::ast::CallExpr,
        args: &[Ty],
    ) -> Ty {
        let subject = target
            .as_ref()
            .map(|(e, t)| (*e, t.clone()))
            .or_else(|| call.args.first().zip(args.first().cloned()));
        if let Some((e, t)) = subject
            && !matches!(
                t,
                Ty::Dyn | Ty::String(_) | Ty::Bytes | Ty::List(_) | Ty::Map(..) | Ty::Object(..)
            )
        {
            self.errors.push(format!(
                "takes the size of {} ({}): `size` takes a string, bytes, a list or a map",
                shown(e),
                t.describe()
            ));
        }
        Ty::Int
    }

    /// `contains`, `startsWith`, `endsWith`, `matches`: every operand a string.
    fn string_function(
        &mut self,
        f: &str,
        target: &Option<(&cel::IdedExpr, Ty)>,
        call: &cel::common::ast::CallExpr,
        args: &[Ty],
    ) -> Ty {
        let mut operands: Vec<(&cel::IdedExpr, Ty)> = Vec::new();
        if let Some((e, t)) = target {
            operands.push((e, t.clone()));
        }
        operands.extend(call.args.iter().zip(args.iter().cloned()));
        for (e, t) in operands {
            if !matches!(t, Ty::Dyn | Ty::String(_)) {
                self.errors.push(format!(
                    "calls `{f}` with {} ({}): it takes strings",
                    shown(e),
                    t.describe()
                ));
            }
        }
        Ty::Bool
    }

    fn expect_bool(&mut self, e: &cel::IdedExpr, t: &Ty, f: &str) {
        if !matches!(t, Ty::Bool | Ty::Dyn) {
            let what = match f {
                op::CONDITIONAL => "the condition of `? :`".to_owned(),
                op::LOGICAL_NOT => "`!`".to_owned(),
                op::LOGICAL_AND => "`&&`".to_owned(),
                _ => "`||`".to_owned(),
            };
            self.errors.push(format!(
                "{what} needs booleans, but {} is {}",
                shown(e),
                t.describe()
            ));
        }
    }

    fn equality(&mut self, ea: &cel::IdedExpr, a: &Ty, eb: &cel::IdedExpr, b: &Ty) {
        if let (Some(ka), Some(kb)) = (a.kind(), b.kind())
            && ka != kb
            && !matches!((a, b), (Ty::Null, _) | (_, Ty::Null))
        {
            self.errors.push(format!(
                "compares {} ({}) with {} ({}): values of different types are never equal, so this can never be true",
                shown(ea),
                a.describe(),
                shown(eb),
                b.describe()
            ));
            return;
        }
        self.enum_member(ea, a, eb);
        self.enum_member(eb, b, ea);
        // `action == "X"` where X is no handler of the registry.
        if matches!(&ea.expr, Expr::Ident(n) if n == "action")
            && let Some(name) = string_literal(eb)
        {
            self.known_action(name);
        }
        if matches!(&eb.expr, Expr::Ident(n) if n == "action")
            && let Some(name) = string_literal(ea)
        {
            self.known_action(name);
        }
    }

    fn known_action(&mut self, name: &str) {
        if HandlerKind::lookup(name).is_none() {
            let hint = did_you_mean(name, HandlerKind::ALL.iter().map(|h| h.action()));
            self.errors.push(format!(
                "compares `action` with {name:?}, which is no handler{hint}, so this can never be true; the handlers are {}",
                HandlerKind::ALL.map(|h| h.action()).join(", ")
            ));
        }
    }

    /// `e` (of type `t`, a string with an enum) compared with the literal `other`.
    fn enum_member(&mut self, e: &cel::IdedExpr, t: &Ty, other: &cel::IdedExpr) {
        if let Ty::String(Some(values)) = t
            && let Some(lit) = string_literal(other)
            && !values.iter().any(|v| v == lit)
        {
            let hint = did_you_mean(lit, values.iter().map(String::as_str));
            self.errors.push(format!(
                "compares {} with {lit:?}{hint}, which it can never be: it is one of {}",
                shown(e),
                values.join(", ")
            ));
        }
    }

    fn membership(&mut self, ea: &cel::IdedExpr, a: &Ty, eb: &cel::IdedExpr, b: &Ty) {
        let elem = match b {
            Ty::Dyn => return,
            Ty::List(t) => (**t).clone(),
            Ty::Map(k, _) => (**k).clone(),
            Ty::Object(..) => Ty::string(),
            other => {
                self.errors.push(format!(
                    "looks for {} in {} ({}): `in` takes a list or a map",
                    shown(ea),
                    shown(eb),
                    other.describe()
                ));
                return;
            }
        };
        if let (Some(ka), Some(kb)) = (a.kind(), elem.kind())
            && ka != kb
        {
            self.errors.push(format!(
                "looks for {} ({}) among {}: values of different types are never equal, so this can never be true",
                shown(ea),
                a.describe(),
                match &elem {
                    Ty::Dyn => "values".to_owned(),
                    t => format!("{} values", t.describe().trim_start_matches("a ").trim_start_matches("an ")),
                }
            ));
            return;
        }
        if let (Ty::String(Some(_)), Expr::List(list)) = (a, &eb.expr) {
            for element in &list.elements {
                self.enum_member(ea, a, element);
            }
        }
        if matches!(&ea.expr, Expr::Ident(n) if n == "action")
            && let Expr::List(list) = &eb.expr
        {
            for element in &list.elements {
                if let Some(name) = string_literal(element) {
                    self.known_action(name);
                }
            }
        }
    }

    fn arithmetic(&mut self, call: &cel::common::ast::CallExpr, sym: &str, a: &Ty, b: &Ty) -> Ty {
        use Ty::*;
        let result = match (sym, a, b) {
            (_, Dyn, _) | (_, _, Dyn) => Some(Dyn),
            (_, Int, Int) => Some(Int),
            (_, Uint, Uint) => Some(Uint),
            (_, Double, Double) => Some(Double),
            ("+", String(_), String(_)) => Some(Ty::string()),
            ("+", Bytes, Bytes) => Some(Bytes),
            ("+", List(x), List(y)) => Some(List(Box::new(Ty::join(x, y)))),
            ("+", Timestamp, Duration) | ("+", Duration, Timestamp) => Some(Timestamp),
            ("+" | "-", Duration, Duration) => Some(Duration),
            ("-", Timestamp, Timestamp) => Some(Duration),
            ("-", Timestamp, Duration) => Some(Timestamp),
            _ => None,
        };
        match result {
            Some(t) => t,
            None => self.err(format!(
                "applies `{sym}` to {} ({}) and {} ({}): CEL has no such operation (convert one side with int(), double() or string()), so the rule fails on every proposal",
                shown(&call.args[0]),
                a.describe(),
                shown(&call.args[1]),
                b.describe()
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::compile_rule;

    fn check(when: &str) -> Vec<String> {
        let program = compile_rule(when).unwrap_or_else(|e| panic!("{when}: {e}"));
        RuleEnv::new(HandlerKind::ALL).check(program.expression())
    }

    /// Typos and type errors that compile as CEL and then fail (or never match) on every
    /// proposal: each is refused, with a message that names the problem.
    #[test]
    fn typos_and_type_errors_are_refused() {
        for (when, says) in [
            (
                "parmas.amount > 90000",
                "undeclared reference to `parmas` (did you mean `params`?)",
            ),
            (
                "params.amount <= \"5000\"",
                "compares `params.amount` (an int) with \"5000\" (a string)",
            ),
            (
                "params.amout > 5000",
                "has no param `amout` (did you mean `amount`?)",
            ),
            (
                "action == \"billing.refund.issue\" && params.amout > 5000",
                "has no param `amout` (did you mean `amount`?) for billing.refund.issue",
            ),
            (
                "action == \"dns.record.update\" && params.amount > 1",
                "has no param `amount` for dns.record.update",
            ),
            (
                "action == \"billing.refund.isue\"",
                "which is no handler (did you mean `billing.refund.issue`?)",
            ),
            (
                "action in [\"billing.refund.issue\", \"shell.exec\"]",
                "\"shell.exec\", which is no handler",
            ),
            ("params.amount == \"5000\"", "never equal"),
            ("params.currency == 978", "never equal"),
            (
                "params.reason == \"dupliate\"",
                "can never be: it is one of duplicate, fraudulent, requested_by_customer",
            ),
            ("params.reason in [\"fraud\"]", "which it can never be"),
            (
                "params.type == \"SRV\"",
                "it is one of A, AAAA, CNAME, TXT, MX, NS",
            ),
            ("params.amount in [\"5000\"]", "never equal"),
            (
                "agent.email == \"x\"",
                "`agent` has no field `email`; agent has id, name, owner",
            ),
            (
                "facts.new_recipient_domian",
                "`facts` has no field `new_recipient_domian`",
            ),
            ("facts.new_recipient_domain == \"yes\"", "never equal"),
            ("history.total > 3", "`history` has no field `total`"),
            ("histroy.count > 3", "did you mean `history`?"),
            ("history.count > \"3\"", "CEL cannot order these"),
            (
                "action == \"billing.refund.issue\" && params.amount <= 50.00",
                "compares `params.amount` (an int) with a decimal number",
            ),
            ("50.5 < history.sum", "50.00 USD is 5000"),
            (
                "history.sum + 1.5 > 2.0",
                "applies `+` to `history.sum` (an int) and",
            ),
            ("action + 1 == 2", "applies `+`"),
            ("size(1) > 0", "takes the size of 1 (an int)"),
            (
                "params.amount.startsWith(\"1\")",
                "calls `startsWith` with `params.amount` (an int)",
            ),
            (
                "params.amount && true",
                "`&&` needs booleans, but `params.amount` is an int",
            ),
            ("!params.currency", "`!` needs booleans"),
            (
                "params.amount",
                "must be a boolean expression (this one gives an int)",
            ),
            (
                "params.currency.foo == 1",
                "is a string: it has no field `foo`",
            ),
            (
                "lower(params.currency) == \"usd\"",
                "calls `lower`, which is not a function",
            ),
            (
                "params.recipients.exists(r, r.endsWith(1))",
                "calls `endsWith` with 1 (an int)",
            ),
            ("params.amount.exists(x, x > 1)", "needs a list or a map"),
            ("now.weekdya < 6", "did you mean `weekday`?"),
            ("now.hour >= \"9\"", "CEL cannot order these"),
            (
                "timestamp(\"2026-01-01T00:00:00Z\") < 5",
                "CEL cannot order these",
            ),
            ("session == 1", "never equal"),
        ] {
            let problems = check(when);
            assert!(
                problems.iter().any(|p| p.contains(says)),
                "{when}: wanted {says:?}, got {problems:?}"
            );
        }
    }

    /// Rules that make sense are accepted, whatever they read.
    #[test]
    fn valid_rules_are_accepted() {
        for when in [
            "action == \"billing.refund.issue\" && params.amount > 5000",
            "action == \"billing.refund.issue\" && history.sum + params.amount > 5000",
            "history.count >= 3 || history.sum + params.amount > 20000",
            "params.currency in [\"USD\", \"EUR\"] && params.amount <= 1000",
            "params.reason == \"fraudulent\"",
            "has(params.order_id) && params.order_id.startsWith(\"ord_\")",
            "action.startsWith(\"shell.\")",
            "!(action in [\"billing.refund.issue\", \"webhook.post\"])",
            "params.records.exists(r, r.startsWith(\"10.\"))",
            "params.recipients.all(r, r.endsWith(\"@example.com\"))",
            "size(params.recipients) > 3",
            "action == \"email.send\" && facts.new_recipient_domain",
            "\"partner.example\" in facts.new_recipient_domains",
            "params.type == \"NS\" || params.ttl < 300",
            "params.zone == \"example.com\" && params.name.matches(\"^www\\\\.\")",
            "params.body.priority == \"high\"",
            "params.body.amount > 100",
            "params.variables.name.contains(\"<\")",
            "params.statement == \"close_account\" && params.values.id > 10",
            "agent.owner == \"\" || on_behalf_of != \"\"",
            "session == \"\" && agent.name.startsWith(\"bot-\")",
            "target.endsWith(\".example.com\")",
            "params.amount > 5 ? true : false",
            "int(params.amount) * 2 > 100",
            "double(params.amount) / 100.0 > 50.0",
            "string(params.amount).size() > 4",
            "type(params.amount) == int",
            "params.recipients.map(r, r.size()).exists(n, n > 50)",
            "params.recipients.filter(r, r.endsWith(\".ru\")).size() > 0",
            "params.records.exists_one(r, r == \"x\")",
            "now.weekday >= 6 || now.hour < 9 || now.hour >= 17",
            "now.time.getHours() < 9",
            "now.date == \"2026-12-25\"",
            "now.time > timestamp(\"2026-01-01T00:00:00Z\")",
            "{\"a\": 1}.exists(k, k == \"a\")",
            "[1, 2, 3].all(x, x > 0)",
            "params[\"amount\"] > 10",
            "params.amount == null || params.amount > 1",
        ] {
            let problems = check(when);
            assert!(problems.is_empty(), "{when}: {problems:?}");
        }
    }

    /// Every rule written in the repository's documentation and seed documents (the `when:`
    /// lines of docs/*.md and of `actiond dev`'s demo document) passes the check.
    #[test]
    fn every_documented_and_seeded_rule_is_accepted() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(root.join("docs"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "md"))
            .collect();
        files.push(root.join("services/cli/src/dev.rs"));
        files.push(root.join("README.md"));
        let mut seen = 0;
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for (n, line) in text.lines().enumerate() {
                let Some(rest) = line.trim_start().strip_prefix("when: ") else {
                    continue;
                };
                let when: String = match serde_yaml_ng_when(rest) {
                    Some(w) => w,
                    None => continue,
                };
                seen += 1;
                let problems = check(&when);
                assert!(
                    problems.is_empty(),
                    "{}:{}: {when}: {problems:?}",
                    file.display(),
                    n + 1
                );
            }
        }
        assert!(seen >= 3, "found only {seen} rules");
    }

    /// The YAML scalar of a `when:` line: single- or double-quoted, or plain.
    fn serde_yaml_ng_when(rest: &str) -> Option<String> {
        let rest = rest.trim();
        if let Some(inner) = rest.strip_prefix('\'') {
            return Some(inner.strip_suffix('\'')?.replace("''", "'"));
        }
        if rest.starts_with('"') {
            return serde_json::from_str(rest).ok();
        }
        (!rest.is_empty() && !rest.starts_with(['|', '>'])).then(|| rest.to_owned())
    }
}
