//! The `where` language: `event = 'click' and (state in ('CA', 'NY') or not cost < 10)`.
//!
//! Comparisons are `=`, `!=` (or `<>`), `<`, `>`, `<=`, `>=` and `in (...)`, combined with
//! `and`, `or`, `not` and parentheses (precedence not > and > or, as SQL). The left side is a
//! field name, the right side a literal: a quoted string ('...', a quote doubled inside)
//! compares as text, a number compares numerically (a value that is not a number is then
//! unequal to it and neither less nor greater). Field names are resolved when the rules are
//! loaded, so evaluating a filter on an event is index lookups and compares only.

use std::fmt;

/// A literal on the right of a comparison.
#[derive(Debug, Clone, PartialEq)]
pub enum Lit {
    Str(String),
    Num(f64),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Op {
    Eq,
    Ne,
    Lt,
    Gt,
    Le,
    Ge,
}

/// A compiled filter.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Or(Box<Expr>, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Cmp(usize, Op, Lit),
    In(usize, Vec<Lit>),
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    Num(f64),
    Op(Op),
    Open,
    Close,
    Comma,
}

/// Longest filter text accepted, and deepest nesting: bounds the recursive parser.
const MAX_FILTER_BYTES: usize = 4096;
const MAX_DEPTH: usize = 32;

#[derive(Debug)]
pub struct FilterError(String);

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn lex(s: &str) -> Result<Vec<Tok>, FilterError> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match c {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'(' => {
                out.push(Tok::Open);
                i += 1;
            }
            b')' => {
                out.push(Tok::Close);
                i += 1;
            }
            b',' => {
                out.push(Tok::Comma);
                i += 1;
            }
            b'=' => {
                out.push(Tok::Op(Op::Eq));
                i += if b.get(i + 1) == Some(&b'=') { 2 } else { 1 };
            }
            b'!' if b.get(i + 1) == Some(&b'=') => {
                out.push(Tok::Op(Op::Ne));
                i += 2;
            }
            b'<' => match b.get(i + 1) {
                Some(b'=') => {
                    out.push(Tok::Op(Op::Le));
                    i += 2;
                }
                Some(b'>') => {
                    out.push(Tok::Op(Op::Ne));
                    i += 2;
                }
                _ => {
                    out.push(Tok::Op(Op::Lt));
                    i += 1;
                }
            },
            b'>' => {
                if b.get(i + 1) == Some(&b'=') {
                    out.push(Tok::Op(Op::Ge));
                    i += 2;
                } else {
                    out.push(Tok::Op(Op::Gt));
                    i += 1;
                }
            }
            b'\'' | b'"' => {
                let q = c;
                let mut text = Vec::new();
                i += 1;
                loop {
                    match b.get(i) {
                        None => return Err(FilterError("unterminated string".into())),
                        Some(&x) if x == q => {
                            if b.get(i + 1) == Some(&q) {
                                text.push(q);
                                i += 2;
                            } else {
                                i += 1;
                                break;
                            }
                        }
                        Some(&x) => {
                            text.push(x);
                            i += 1;
                        }
                    }
                }
                out.push(Tok::Str(String::from_utf8(text).map_err(|_| FilterError("string is not UTF-8".into()))?));
            }
            b'-' | b'+' | b'.' | b'0'..=b'9' => {
                let start = i;
                i += 1;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.' || ((b[i] == b'-' || b[i] == b'+') && matches!(b[i - 1], b'e' | b'E'))) {
                    i += 1;
                }
                let t = &s[start..i];
                match t.parse::<f64>() {
                    Ok(n) if n.is_finite() => out.push(Tok::Num(n)),
                    _ => return Err(FilterError(format!("bad number '{t}'"))),
                }
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'-') {
                    i += 1;
                }
                out.push(Tok::Ident(s[start..i].to_string()));
            }
            _ => return Err(FilterError(format!("unexpected character '{}'", s[i..].chars().next().unwrap_or('?')))),
        }
    }
    Ok(out)
}

struct Parser<'a, F> {
    toks: Vec<Tok>,
    pos: usize,
    resolve: &'a F,
    depth: usize,
}

fn is_kw(t: Option<&Tok>, kw: &str) -> bool {
    matches!(t, Some(Tok::Ident(s)) if s.eq_ignore_ascii_case(kw))
}

impl<F: Fn(&str) -> Option<usize>> Parser<'_, F> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    fn enter(&mut self) -> Result<(), FilterError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(FilterError(format!("nested deeper than {MAX_DEPTH}")));
        }
        Ok(())
    }

    fn or(&mut self) -> Result<Expr, FilterError> {
        self.enter()?;
        let mut left = self.and()?;
        while is_kw(self.peek(), "or") {
            self.pos += 1;
            left = Expr::Or(Box::new(left), Box::new(self.and()?));
        }
        self.depth -= 1;
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, FilterError> {
        let mut left = self.not()?;
        while is_kw(self.peek(), "and") {
            self.pos += 1;
            left = Expr::And(Box::new(left), Box::new(self.not()?));
        }
        Ok(left)
    }

    fn not(&mut self) -> Result<Expr, FilterError> {
        if is_kw(self.peek(), "not") {
            self.pos += 1;
            self.enter()?;
            let e = Expr::Not(Box::new(self.not()?));
            self.depth -= 1;
            return Ok(e);
        }
        self.atom()
    }

    fn literal(&mut self) -> Result<Lit, FilterError> {
        match self.toks.get(self.pos).cloned() {
            Some(Tok::Str(s)) => {
                self.pos += 1;
                Ok(Lit::Str(s))
            }
            Some(Tok::Num(n)) => {
                self.pos += 1;
                Ok(Lit::Num(n))
            }
            other => Err(FilterError(format!("expected a 'string' or a number, found {}", describe(other.as_ref())))),
        }
    }

    fn atom(&mut self) -> Result<Expr, FilterError> {
        match self.toks.get(self.pos).cloned() {
            Some(Tok::Open) => {
                self.pos += 1;
                let e = self.or()?;
                if self.peek() != Some(&Tok::Close) {
                    return Err(FilterError(format!("expected ')', found {}", describe(self.peek()))));
                }
                self.pos += 1;
                Ok(e)
            }
            Some(Tok::Ident(name)) => {
                self.pos += 1;
                let Some(field) = (self.resolve)(&name) else {
                    return Err(FilterError(format!("unknown field '{name}'")));
                };
                if is_kw(self.peek(), "in") {
                    self.pos += 1;
                    if self.peek() != Some(&Tok::Open) {
                        return Err(FilterError("expected '(' after in".into()));
                    }
                    self.pos += 1;
                    let mut lits = vec![self.literal()?];
                    while self.peek() == Some(&Tok::Comma) {
                        self.pos += 1;
                        lits.push(self.literal()?);
                    }
                    if self.peek() != Some(&Tok::Close) {
                        return Err(FilterError(format!("expected ',' or ')' in the in-list, found {}", describe(self.peek()))));
                    }
                    self.pos += 1;
                    return Ok(Expr::In(field, lits));
                }
                let Some(Tok::Op(op)) = self.peek().cloned() else {
                    return Err(FilterError(format!("expected a comparison after '{name}', found {}", describe(self.peek()))));
                };
                self.pos += 1;
                Ok(Expr::Cmp(field, op, self.literal()?))
            }
            other => Err(FilterError(format!("expected a field or '(', found {}", describe(other.as_ref())))),
        }
    }
}

fn describe(t: Option<&Tok>) -> String {
    match t {
        None => "the end".into(),
        Some(Tok::Ident(s)) => format!("'{s}'"),
        Some(Tok::Str(s)) => format!("'{s}'"),
        Some(Tok::Num(n)) => format!("{n}"),
        Some(Tok::Op(_)) => "an operator".into(),
        Some(Tok::Open) => "'('".into(),
        Some(Tok::Close) => "')'".into(),
        Some(Tok::Comma) => "','".into(),
    }
}

fn cmp_one(v: &str, x: impl FnOnce() -> Option<f64>, op: Op, lit: &Lit) -> bool {
    // Text (in)equality, the usual filter (`event = 'click'`): lengths first, no ordering.
    if let (Lit::Str(s), Op::Eq | Op::Ne) = (lit, op) {
        return (v == s.as_str()) == (op == Op::Eq);
    }
    let ord = match lit {
        Lit::Str(s) => Some(v.cmp(s.as_str())),
        Lit::Num(n) => x().and_then(|x| x.partial_cmp(n)),
    };
    use std::cmp::Ordering::*;
    match (op, ord) {
        (Op::Ne, None) => true,
        (_, None) => false,
        (Op::Eq, Some(o)) => o == Equal,
        (Op::Ne, Some(o)) => o != Equal,
        (Op::Lt, Some(o)) => o == Less,
        (Op::Gt, Some(o)) => o == Greater,
        (Op::Le, Some(o)) => o != Greater,
        (Op::Ge, Some(o)) => o != Less,
    }
}

impl Expr {
    /// Parses `text`, resolving field names with `resolve`.
    pub fn parse<F: Fn(&str) -> Option<usize>>(text: &str, resolve: F) -> Result<Expr, FilterError> {
        if text.len() > MAX_FILTER_BYTES {
            return Err(FilterError(format!("longer than {MAX_FILTER_BYTES} bytes")));
        }
        let toks = lex(text)?;
        if toks.is_empty() {
            return Err(FilterError("empty".into()));
        }
        let mut p = Parser { toks, pos: 0, resolve: &resolve, depth: 0 };
        let e = p.or()?;
        if p.pos != p.toks.len() {
            return Err(FilterError(format!("unexpected {} after a complete condition", describe(p.peek()))));
        }
        Ok(e)
    }

    /// Adds the fields the filter reads to `out`.
    pub fn fields(&self, out: &mut Vec<usize>) {
        match self {
            Expr::Or(a, b) | Expr::And(a, b) => {
                a.fields(out);
                b.fields(out);
            }
            Expr::Not(a) => a.fields(out),
            Expr::Cmp(f, _, _) | Expr::In(f, _) => out.push(*f),
        }
    }

    /// Evaluates the filter; `value(field)` gives a field's value.
    pub fn eval<'v>(&self, value: &impl Fn(usize) -> &'v str) -> bool {
        self.eval_with(value, &|f| value(f).trim().parse::<f64>().ok())
    }

    /// [`Expr::eval`] with the fields' numeric values from `num` (the batch parses each
    /// field once per event for its filters and sums; `num(f)` must be field f's text
    /// trimmed and parsed as an `f64`, None if it is not a number).
    pub fn eval_with<'v>(&self, value: &impl Fn(usize) -> &'v str, num: &impl Fn(usize) -> Option<f64>) -> bool {
        match self {
            Expr::Or(a, b) => a.eval_with(value, num) || b.eval_with(value, num),
            Expr::And(a, b) => a.eval_with(value, num) && b.eval_with(value, num),
            Expr::Not(a) => !a.eval_with(value, num),
            Expr::Cmp(f, op, lit) => cmp_one(value(*f), || num(*f), *op, lit),
            Expr::In(f, lits) => {
                let v = value(*f);
                lits.iter().any(|l| cmp_one(v, || num(*f), Op::Eq, l))
            }
        }
    }
}
