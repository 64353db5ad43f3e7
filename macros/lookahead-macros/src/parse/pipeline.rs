//! A pipelined `#[prefetch_next(into = shared([T; N]), stages = S, copy = K, of(name =
//! target, ..))]` loop: its options and its range. `generate::pipeline` writes the
//! prologue and the steady state over `lookahead_device::pipeline`.

use proc_macro2::Span;
use quote::ToTokens;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Attribute, Expr, ExprForLoop, Ident, Lit, Meta, Pat, RangeLimits, Token, Type};

use crate::parse::loops::strip;

/// How the stages are copied (`lookahead_device::pipeline`'s copy kinds).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Copy {
    CpAsync,
    Bulk,
    BulkPortable,
    LoadStore,
}

impl Copy {
    /// The kind's type in `lookahead_device::pipeline` (and variant of the tuner's
    /// `CopyKind`).
    pub fn kind(self) -> &'static str {
        match self {
            Copy::CpAsync => "CpAsync",
            Copy::Bulk => "Bulk",
            Copy::BulkPortable => "BulkPortable",
            Copy::LoadStore => "LoadStore",
        }
    }
    /// Its name in `copy = ..`, and in entry names (`NAME__cp_async_s3`).
    pub fn name(self) -> &'static str {
        match self {
            Copy::CpAsync => "cp_async",
            Copy::Bulk => "bulk",
            Copy::BulkPortable => "bulk_portable",
            Copy::LoadStore => "load_store",
        }
    }
}

/// A fixed option, or the candidates the tuner measures (`auto`, `auto(a, b, ..)`).
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Choice<T> {
    Fixed(T),
    Auto(Vec<T>),
}

impl<T: Clone> Choice<T> {
    fn values(&self) -> Vec<T> {
        match self {
            Choice::Fixed(v) => vec![v.clone()],
            Choice::Auto(vs) => vs.clone(),
        }
    }
}

/// A staged target: the name the body reads it by, and what one iteration reads.
pub struct Target {
    pub name: Ident,
    pub source: Expr,
}

pub struct Options {
    /// The element type and the elements per target of a stage (`into = shared([T; N])`).
    pub elem: Type,
    pub len: Expr,
    pub stages: Choice<usize>,
    pub copy: Choice<Copy>,
    pub targets: Vec<Target>,
}

impl Options {
    /// Whether the tuner chooses (`stages = auto` or `copy = auto`).
    pub fn is_auto(&self) -> bool {
        matches!(self.copy, Choice::Auto(_)) || matches!(self.stages, Choice::Auto(_))
    }
    /// Every (copy, stages) the options allow, sorted: the one written, or for `auto` the
    /// candidates the tuner measures, one entry each.
    pub fn candidates(&self) -> Vec<(Copy, usize)> {
        let mut all: Vec<(Copy, usize)> = (self.copy.values().into_iter())
            .flat_map(|c| self.stages.values().into_iter().map(move |s| (c, s)))
            .collect();
        all.sort();
        all.dedup();
        all
    }
}

const USAGE: &str =
    "write `#[prefetch_next(into = shared([f32; 1024]), stages = 3, of(tile = &x[a..b]))]`: \
`into = shared([T; N])` (N elements of T per target and stage), `stages = 2..=8` (default 3) or \
`stages = auto` / `auto(2, 4, ..)`, `copy = cp_async | bulk | bulk_portable | load_store` (default \
cp_async) or `copy = auto` / `auto(cp_async, bulk, ..)`, `of(name = target, ..)`";

/// `stages = auto`'s candidates.
const AUTO_STAGES: [usize; 3] = [2, 3, 4];
/// `copy = auto`'s candidates: `bulk_portable` is `cp_async` below sm_90, so every
/// architecture can build both.
const AUTO_COPIES: [Copy; 2] = [Copy::CpAsync, Copy::BulkPortable];

/// The most stages: `cp.async.wait_group` counts up to 7 groups in flight.
const MAX_STAGES: u64 = 8;

/// `shared([T; N])`: the element type and the length.
fn into(value: &Expr) -> syn::Result<(Type, Expr)> {
    let value = strip(value);
    let err = || {
        syn::Error::new(
            value.span(),
            "`into` takes `shared([T; N])`: a stage holds N elements of T per target in shared memory, e.g. `into = shared([f32; 1024])`",
        )
    };
    let Expr::Call(c) = value else {
        return Err(err());
    };
    if !matches!(&*c.func, Expr::Path(p) if p.path.is_ident("shared")) || c.args.len() != 1 {
        return Err(err());
    }
    let Expr::Repeat(r) = &c.args[0] else {
        return Err(err());
    };
    // `[T; N]` parses as an array-repeat expression; its element is the type.
    let elem: Type = syn::parse2(r.expr.to_token_stream()).map_err(|_| err())?;
    Ok((elem, (*r.len).clone()))
}

/// `auto` (`None`) or `auto(a, b, ..)` (the listed values, each parsed by `one`); `Err`
/// with the value itself when it is not `auto` at all.
fn auto_list<T: PartialEq>(
    value: &Expr,
    one: impl Fn(&Expr) -> syn::Result<T>,
) -> Option<syn::Result<Option<Vec<T>>>> {
    match strip(value) {
        Expr::Path(p) if p.path.is_ident("auto") => Some(Ok(None)),
        Expr::Call(c) if matches!(&*c.func, Expr::Path(p) if p.path.is_ident("auto")) => {
            let listed: syn::Result<Vec<T>> = c.args.iter().map(one).collect();
            Some(listed.and_then(|v| {
                if v.is_empty() {
                    Err(syn::Error::new(c.span(), "`auto(..)` lists at least one candidate; write `auto` for the default ones"))
                } else {
                    Ok(Some(v))
                }
            }))
        }
        _ => None,
    }
}

/// `stages = S`, `stages = auto` or `stages = auto(a, b, ..)`.
fn stages_choice(value: &Expr) -> syn::Result<Choice<usize>> {
    match auto_list(value, stages) {
        Some(listed) => Ok(Choice::Auto(
            listed?.unwrap_or_else(|| AUTO_STAGES.to_vec()),
        )),
        None => stages(value).map(Choice::Fixed),
    }
}

/// `copy = K`, `copy = auto` or `copy = auto(a, b, ..)`.
fn copy_choice(value: &Expr) -> syn::Result<Choice<Copy>> {
    match auto_list(value, copy) {
        Some(listed) => Ok(Choice::Auto(
            listed?.unwrap_or_else(|| AUTO_COPIES.to_vec()),
        )),
        None => copy(value).map(Choice::Fixed),
    }
}

/// `stages = S`: an integer literal from 2 to [`MAX_STAGES`].
fn stages(value: &Expr) -> syn::Result<usize> {
    // A literal passed through `macro_rules!` arrives wrapped in an invisible group.
    let value = strip(value);
    let err = |why: &str| {
        syn::Error::new(
            value.span(),
            format!("`stages` {why}: 2 to {MAX_STAGES} stages (one is read while the others are in flight; 3 or 4 is typical)"),
        )
    };
    let Expr::Lit(syn::ExprLit {
        lit: Lit::Int(i), ..
    }) = value
    else {
        return Err(err("takes an integer literal"));
    };
    match i.base10_parse::<u64>() {
        Ok(n) if (2..=MAX_STAGES).contains(&n) => Ok(n as usize),
        _ => Err(err(&format!("= {} is out of range", i.base10_digits()))),
    }
}

fn copy(value: &Expr) -> syn::Result<Copy> {
    let value = strip(value);
    let id = match value {
        Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
        _ => None,
    };
    match id.as_deref() {
        Some("cp_async") => Ok(Copy::CpAsync),
        Some("bulk") => Ok(Copy::Bulk),
        Some("bulk_portable") => Ok(Copy::BulkPortable),
        Some("load_store") => Ok(Copy::LoadStore),
        _ => Err(syn::Error::new(
            value.span(),
            "`copy` is `cp_async` (sm_80: every thread copies its share), `bulk` (sm_90: the copy engine, rows 16-byte aligned), `bulk_portable` (bulk on sm_90, cp_async below), `load_store` (loads and stores through registers, any GPU) or `auto` (the tuner measures `cp_async` and `bulk_portable`; `auto(..)` lists others)",
        )),
    }
}

/// `of(name = target, ..)`.
fn targets(list: &syn::MetaList) -> syn::Result<Vec<Target>> {
    let exprs = Punctuated::<Expr, Token![,]>::parse_terminated.parse2(list.tokens.clone())?;
    if exprs.is_empty() {
        return Err(syn::Error::new(
            list.span(),
            "`of(..)` names at least one staged target: `of(tile = &x[a..b])`",
        ));
    }
    exprs
        .into_iter()
        .map(|e| {
            let named = match &e {
                Expr::Assign(a) => match &*a.left {
                    Expr::Path(p) => p.path.get_ident().cloned().map(|n| (n, (*a.right).clone())),
                    _ => None,
                },
                _ => None,
            };
            named
                .map(|(name, source)| Target { name, source })
                .ok_or_else(|| syn::Error::new(e.span(), "with `into = shared(..)`, each target is named for the body: `of(tile = &x[a..b])` stages what iteration `i` reads of `x` and binds the staged copy to `tile`"))
        })
        .collect()
}

/// The pipeline options of `attr` (which has `into = ..`).
fn options(attr: &Attribute) -> syn::Result<Options> {
    let Meta::List(l) = &attr.meta else {
        return Err(syn::Error::new(attr.span(), USAGE));
    };
    let metas = Punctuated::<Meta, Token![,]>::parse_terminated.parse2(l.tokens.clone())?;
    let (mut into_, mut stages_, mut copy_, mut of) = (None, None, None, None);
    for (key, meta) in super::keyed_options(metas)? {
        match (key.as_str(), &meta) {
            ("into", Meta::NameValue(nv)) => into_ = Some(into(&nv.value)?),
            ("stages", Meta::NameValue(nv)) => stages_ = Some(stages_choice(&nv.value)?),
            ("copy", Meta::NameValue(nv)) => copy_ = Some(copy_choice(&nv.value)?),
            ("of", Meta::List(list)) => of = Some(targets(list)?),
            ("distance" | "level" | "portable" | "queue" | "cache", _) => {
                return Err(syn::Error::new(
                    meta.span(),
                    format!("`{key}` is an option of prefetch hints; a pipeline (`into = shared(..)`) copies the data itself, ahead by its `stages`: remove `{key}`"),
                ))
            }
            _ => return Err(syn::Error::new(meta.span(), format!("unknown or malformed option; {USAGE}"))),
        }
    }
    let (elem, len) = into_.ok_or_else(|| syn::Error::new(l.span(), USAGE))?;
    let targets = of.ok_or_else(|| {
        syn::Error::new(l.span(), "a pipeline needs `of(name = target, ..)`: what each iteration reads, staged for it, e.g. `of(tile = &x[i * 1024..(i + 1) * 1024])`")
    })?;
    Ok(Options {
        elem,
        len,
        stages: stages_.unwrap_or(Choice::Fixed(3)),
        copy: copy_.unwrap_or(Choice::Fixed(Copy::CpAsync)),
        targets,
    })
}

/// Whether a `#[prefetch_next]` attribute asks for a pipeline (it has `into = ..`).
pub fn is_pipeline(attr: &Attribute) -> bool {
    let Meta::List(l) = &attr.meta else {
        return false;
    };
    let mut found = false;
    let _ = l.parse_nested_meta(|m| {
        found |= m.path.is_ident("into");
        // Skip the option's value or list: only the keys matter here.
        if m.input.peek(syn::Token![=]) {
            let _: Expr = m.value()?.parse()?;
        } else if m.input.peek(syn::token::Paren) {
            let _: proc_macro2::Group = m.input.parse()?;
        }
        Ok(())
    });
    found
}

/// A pipelined loop: the loop, its options, and the range its variable walks.
pub struct PipelinedLoop {
    pub f: ExprForLoop,
    pub options: Options,
    pub attr_span: Span,
    pub var: Ident,
    pub start: Expr,
    pub end: Expr,
    /// `.step_by(s)`'s `s`, if any.
    pub step: Option<Expr>,
    /// `a..=b` rather than `a..b`.
    pub inclusive: bool,
}

const FORMS: &str = "a pipelined loop counts the block's iterations: `for i in a..b`, `for i in a..=b` or `for i in (a..b).step_by(s)` (the same in every thread of the block: the pipeline's waits are block barriers), e.g. `for t in (block_idx_x() as usize..tiles).step_by(grid_dim_x() as usize)`";

/// The loop's range (`a..b`, `a..=b`), and its step when `.step_by(s)`.
fn range_of(e: &Expr) -> Option<(&syn::ExprRange, Option<&Expr>)> {
    match strip(e) {
        Expr::Range(r) => Some((r, None)),
        Expr::MethodCall(mc) if mc.method == "step_by" && mc.args.len() == 1 => {
            match strip(&mc.receiver) {
                Expr::Range(r) => Some((r, Some(&mc.args[0]))),
                _ => None,
            }
        }
        _ => None,
    }
}

impl PipelinedLoop {
    /// The loop `f` under `attr` (which has `into = ..`).
    pub fn parse(f: &ExprForLoop, attr: &Attribute) -> syn::Result<PipelinedLoop> {
        let options = options(attr)?;
        let (r, step) = range_of(&f.expr).ok_or_else(|| syn::Error::new(f.expr.span(), FORMS))?;
        let (Some(start), Some(end)) = (&r.start, &r.end) else {
            return Err(syn::Error::new(r.span(), FORMS));
        };
        let var = match &*f.pat {
            Pat::Ident(pi) if pi.subpat.is_none() => pi.ident.clone(),
            other => return Err(syn::Error::new(other.span(), "a pipelined loop needs a plain loop variable (`for i in ...`): the targets are evaluated for later values of it")),
        };
        Ok(PipelinedLoop {
            f: f.clone(),
            options,
            attr_span: attr.span(),
            var,
            start: (**start).clone(),
            end: (**end).clone(),
            step: step.cloned(),
            inclusive: matches!(r.limits, RangeLimits::Closed(_)),
        })
    }
}
