//! What a CEL rule must be before a tenant document carrying it is applied: it compiles
//! ([`compile_rule`]), it may give a boolean ([`non_boolean`]) and it nests no deeper than
//! [`MAX_RULE_DEPTH`] ([`depth`]). The tenant-document parser and the policy evaluator both
//! use these; this module uses neither.

use cel::Program;

/// Compiles one CEL expression; the error is CEL's message with line, column and caret.
pub fn compile_rule(src: &str) -> Result<Program, String> {
    // The cel parser panics on nothing we know of, but a panic here must never take down apply
    // or the policy worker; it becomes a compile error.
    let src = src.to_owned();
    std::panic::catch_unwind(move || Program::compile(&src))
        .map_err(|_| "the CEL parser failed on this expression".to_owned())?
        .map_err(|e| e.to_string())
}

/// What a compiled rule certainly gives when that is not a boolean (`"an int"`, `"a list"`,
/// `"the result of +"`, ...); `None` when it gives or may give one.
///
/// The cel crate has no type checker, so this reads the expression's outermost shape: a
/// literal, a list or map, arithmetic, a conversion such as `size()` or `string()`, a `map` or
/// `filter` macro, or a conditional whose two branches are all of these. A field read such as
/// `params.flag` may be a boolean, so it passes here and is checked when it runs.
pub fn non_boolean(program: &Program) -> Option<&'static str> {
    non_boolean_expr(program.expression())
}

pub(crate) fn non_boolean_expr(e: &cel::IdedExpr) -> Option<&'static str> {
    use cel::common::ast::{Expr, LiteralValue};
    match &e.expr {
        Expr::Literal(LiteralValue::Boolean(_)) => None,
        Expr::Literal(LiteralValue::Int(_)) => Some("an int"),
        Expr::Literal(LiteralValue::UInt(_)) => Some("a uint"),
        Expr::Literal(LiteralValue::Double(_)) => Some("a double"),
        Expr::Literal(LiteralValue::String(_)) => Some("a string"),
        Expr::Literal(LiteralValue::Bytes(_)) => Some("bytes"),
        Expr::Literal(LiteralValue::Null) => Some("null"),
        Expr::List(_) => Some("a list"),
        Expr::Map(_) => Some("a map"),
        Expr::Struct(_) => Some("a message"),
        Expr::Call(call) => non_boolean_call(call),
        // `map` and `filter` build a list in their accumulator; `all`, `exists` and
        // `exists_one` end in a boolean.
        Expr::Comprehension(c) => match &c.result.expr {
            Expr::Ident(name) if *name == c.accu_var => non_boolean_expr(&c.accu_init),
            _ => non_boolean_expr(&c.result),
        },
        Expr::Ident(_) | Expr::Select(_) | Expr::Unspecified => None,
    }
}

fn non_boolean_call(call: &cel::common::ast::CallExpr) -> Option<&'static str> {
    use cel::common::ast::operators as op;
    let f = call.func_name.as_str();
    match f {
        op::CONDITIONAL => match call.args.as_slice() {
            [_, yes, no] => non_boolean_expr(yes).and(non_boolean_expr(no)),
            _ => None,
        },
        op::ADD => Some("the result of +"),
        op::SUBSTRACT => Some("the result of -"),
        op::MULTIPLY => Some("the result of *"),
        op::DIVIDE => Some("the result of /"),
        op::MODULO => Some("the result of %"),
        op::NEGATE => Some("the result of unary -"),
        "size" | "int" => Some("an int"),
        "uint" => Some("a uint"),
        "double" => Some("a double"),
        "string" => Some("a string"),
        "bytes" => Some("bytes"),
        "timestamp" => Some("a timestamp"),
        "duration" => Some("a duration"),
        "type" => Some("a type"),
        "getFullYear" | "getMonth" | "getDayOfMonth" | "getDayOfYear" | "getDate"
        | "getDayOfWeek" | "getHours" | "getMinutes" | "getSeconds" | "getMilliseconds" => {
            Some("an int")
        }
        _ => None,
    }
}

/// How deeply a compiled rule nests, counting its root as 1.
pub fn depth(e: &cel::IdedExpr) -> usize {
    use cel::common::ast::{EntryExpr, Expr};
    let entry = |entry: &cel::common::ast::IdedEntryExpr| match &entry.expr {
        EntryExpr::MapEntry(m) => depth(&m.key).max(depth(&m.value)),
        EntryExpr::StructField(f) => depth(&f.value),
    };
    1 + match &e.expr {
        Expr::Call(call) => call
            .target
            .as_deref()
            .into_iter()
            .chain(call.args.iter())
            .map(depth)
            .max()
            .unwrap_or(0),
        Expr::Select(select) => depth(&select.operand),
        Expr::List(list) => list.elements.iter().map(depth).max().unwrap_or(0),
        Expr::Map(map) => map.entries.iter().map(entry).max().unwrap_or(0),
        Expr::Struct(strct) => strct.entries.iter().map(entry).max().unwrap_or(0),
        Expr::Comprehension(c) => [
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ]
        .into_iter()
        .map(depth)
        .max()
        .unwrap_or(0),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => 0,
    }
}

/// How deeply a rule may nest when its document is applied ([`depth`]): `a + b + c` nests
/// one level per operator (the parser balances chains of `&&` and `||`, so 130 alternatives
/// nest 9 levels). The evaluator recurses once per level, and twice with the checks of
/// [`crate::policy::with_deadline_checks`], on a thread of the blocking pool with a 2 MiB stack; a chain of
/// a thousand operators, which fits in [`crate::tenant::MAX_RULE_LEN`] characters, could
/// overflow it and abort the process.
pub const MAX_RULE_DEPTH: usize = 128;
