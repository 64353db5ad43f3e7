//! The options of `#[prefetch_next(..)]`: how far ahead, at which level, what, and through
//! which mechanism.

use proc_macro2::Span;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Attribute, Expr, Lit, Meta, RangeLimits, Token};

use super::{is_negative, shown};
use crate::level::{self, Level};

/// How many iterations ahead a loop fetches.
pub enum Distance {
    /// `distance = N` (1 unless given).
    Fixed(usize),
    /// `distance = auto(..)`: the distances to try, sorted.
    Auto(Vec<u64>),
}

/// At which level a loop prefetches.
#[derive(Clone, PartialEq, Eq)]
pub enum LevelChoice {
    /// `level = l2` and the like (`l2` unless given).
    Fixed(Level),
    /// `level = auto` / `auto(..)`: the levels listed, sorted (empty: the default set for
    /// the loop's shape).
    Auto(Vec<Level>),
}

pub struct LoopOptions {
    pub distance: Distance,
    pub distance_span: Span,
    pub level: LevelChoice,
    pub level_span: Span,
    pub portable: Option<Span>,
    pub of: Vec<Expr>,
    pub of_span: Option<Span>,
    pub queue: Option<Expr>,
    /// `cache = c`: the targets are element ranges of the host cache `c`.
    pub cache: Option<Expr>,
}

impl LoopOptions {
    pub fn is_auto(&self) -> bool {
        matches!(self.level, LevelChoice::Auto(_))
    }
}

fn options() -> String {
    let names = level::names(" | ");
    format!(
        "options: `distance = N | auto | auto(a..=b) | auto(a, b, ..)`, \
         `level = auto | auto(l2, l2_evict_last, ..) | {names}`, \
         `portable`, `of(a, b, ...)`, `queue = q`, `cache = c` (with `of(a..b)`)"
    )
}

/// The most iterations ahead a loop may prefetch: further than this the data would be
/// evicted before it is used, and the arithmetic on the loop index stays far from overflow.
const MAX_DISTANCE: u64 = 1 << 16;

/// The distances `distance = auto` tries.
const AUTO_DISTANCES: [u64; 5] = [1, 2, 4, 8, 16];

/// `distance = N`: an integer literal from 1 to [`MAX_DISTANCE`].
fn parse_distance(value: &Expr) -> syn::Result<usize> {
    let span = value.span();
    if is_negative(value) {
        return Err(syn::Error::new(
            span,
            format!(
                "`distance = {}`: a distance counts iterations ahead of the current one, so it \
                 is at least 1 (a loop cannot prefetch for iterations it has already run); \
                 write 1 to {MAX_DISTANCE}, 2 to 16 being typical",
                shown(value)
            ),
        ));
    }
    let Expr::Lit(syn::ExprLit {
        lit: Lit::Int(i), ..
    }) = value
    else {
        return Err(syn::Error::new(
            span,
            "`distance` takes an integer literal, e.g. `distance = 4`",
        ));
    };
    match i.base10_parse::<u64>() {
        Ok(0) => Err(syn::Error::new(
            span,
            "`distance` must be at least 1 (0 would prefetch what the iteration is about to \
             load anyway)",
        )),
        Ok(n) if n <= MAX_DISTANCE => Ok(n as usize),
        _ => Err(syn::Error::new(
            span,
            format!(
                "`distance = {}` is too far ahead: write 1 to {MAX_DISTANCE} iterations (a \
                 prefetch that far ahead is evicted before its iteration runs; 2 to 16 is \
                 typical)",
                i.base10_digits()
            ),
        )),
    }
}

/// The arguments of `auto(..)` when `value` is `auto` (`Some(None)`) or `auto(..)`, `None`
/// when it is neither.
fn auto_args(value: &Expr) -> Option<Option<&Punctuated<Expr, Token![,]>>> {
    match value {
        Expr::Path(p) if p.path.is_ident("auto") => Some(None),
        Expr::Call(c) if matches!(&*c.func, Expr::Path(p) if p.path.is_ident("auto")) => {
            Some(Some(&c.args))
        }
        _ => None,
    }
}

/// `distance = auto`, `auto(a..=b)` (the powers of two from `a` to `b`, and `b`) or
/// `auto(a, b, ..)`; `None` when the value is not `auto`.
fn parse_auto_distance(value: &Expr) -> Option<syn::Result<Vec<u64>>> {
    let Some(args) = auto_args(value)? else {
        return Some(Ok(AUTO_DISTANCES.to_vec()));
    };
    let hint = "write `distance = auto` (1, 2, 4, 8, 16), `distance = auto(1..=16)` (the powers \
                of two in the range) or `distance = auto(2, 3, 6)`";
    let one = |e: &Expr| parse_distance(e).map(|d| d as u64);
    let ds: syn::Result<Vec<u64>> = match args.iter().collect::<Vec<_>>().as_slice() {
        [Expr::Range(r)] => match (&r.start, &r.end, &r.limits) {
            (Some(a), Some(b), RangeLimits::Closed(_)) => one(a).and_then(|lo| {
                let hi = one(b)?;
                if lo > hi {
                    return Err(syn::Error::new(r.span(), format!("empty range: {hint}")));
                }
                let mut v: Vec<u64> = (0..17)
                    .map(|k| 1u64 << k)
                    .filter(|d| (lo..=hi).contains(d))
                    .collect();
                v.extend([lo, hi]);
                Ok(v)
            }),
            _ => Err(syn::Error::new(
                r.span(),
                format!("an inclusive range with both ends: {hint}"),
            )),
        },
        [] => Err(syn::Error::new(
            value.span(),
            format!("no distances: {hint}"),
        )),
        list => list.iter().map(|e| one(e)).collect(),
    };
    Some(ds.map(|mut v| {
        v.sort_unstable();
        v.dedup();
        v
    }))
}

/// `level = auto` (empty: the default set) or `auto(l2, bulk, ..)`; `None` when the value is
/// not `auto`.
fn parse_auto_levels(value: &Expr) -> Option<syn::Result<Vec<Level>>> {
    let Some(args) = auto_args(value)? else {
        return Some(Ok(Vec::new()));
    };
    let names = level::names(", ");
    let level = |e: &Expr| {
        named_level(e).ok_or_else(|| {
            syn::Error::new(
                e.span(),
                format!(
                    "`level = auto(..)` lists levels to try: {names} (the plain entry is \
                     always a candidate)"
                ),
            )
        })
    };
    if args.is_empty() {
        return Some(Err(syn::Error::new(
            value.span(),
            format!(
                "`auto()` lists no level: write `level = auto` for the default set, or name \
                 some of {names}"
            ),
        )));
    }
    let levels = args.iter().map(level).collect::<syn::Result<Vec<_>>>();
    Some(levels.map(|mut v| {
        v.sort();
        v.dedup();
        v
    }))
}

/// The level `e` names (`l2`, `bulk`...), if it is one.
fn named_level(e: &Expr) -> Option<Level> {
    match e {
        Expr::Path(p) => Level::named(&p.path.get_ident()?.to_string()),
        _ => None,
    }
}

/// `level = l2` and the like.
fn parse_level(value: &Expr) -> syn::Result<Level> {
    named_level(value).ok_or_else(|| {
        syn::Error::new(
            value.span(),
            format!(
                "unknown prefetch level `{}`; levels: auto, {}",
                quote::quote!(#value),
                level::names(", ")
            ),
        )
    })
}

/// The options of one `#[prefetch_next]` attribute.
pub fn parse_options(attr: &Attribute) -> syn::Result<LoopOptions> {
    let mut o = LoopOptions {
        distance: Distance::Fixed(1),
        distance_span: attr.span(),
        level: LevelChoice::Fixed(Level::L2),
        level_span: attr.span(),
        portable: None,
        of: Vec::new(),
        of_span: None,
        queue: None,
        cache: None,
    };
    let metas = match &attr.meta {
        Meta::Path(_) => Punctuated::new(),
        Meta::List(l) => {
            Punctuated::<Meta, Token![,]>::parse_terminated.parse2(l.tokens.clone())?
        }
        Meta::NameValue(nv) => {
            return Err(syn::Error::new(
                nv.span(),
                "write `#[prefetch_next(distance = N, level = ...)]`",
            ))
        }
    };
    for (key, meta) in super::keyed_options(metas)? {
        parse_option(&mut o, &key, meta)?;
    }
    check_combinations(&o)?;
    Ok(o)
}

/// One option, `key` being its name.
fn parse_option(o: &mut LoopOptions, key: &str, meta: Meta) -> syn::Result<()> {
    match (key, &meta) {
        ("distance", Meta::NameValue(nv)) => {
            o.distance_span = nv.value.span();
            o.distance = match parse_auto_distance(&nv.value) {
                Some(ds) => Distance::Auto(ds?),
                None => Distance::Fixed(parse_distance(&nv.value)?),
            };
        }
        ("level", Meta::NameValue(nv)) => {
            o.level = match parse_auto_levels(&nv.value) {
                Some(levels) => LevelChoice::Auto(levels?),
                None => LevelChoice::Fixed(parse_level(&nv.value)?),
            };
            o.level_span = nv.value.span();
        }
        ("portable", Meta::Path(p)) => o.portable = Some(p.span()),
        ("of", Meta::List(l)) => {
            let targets =
                Punctuated::<Expr, Token![,]>::parse_terminated.parse2(l.tokens.clone())?;
            if targets.is_empty() {
                return Err(syn::Error::new(
                    l.span(),
                    "`of(...)` needs at least one slice, e.g. `of(x)` or `of(x.part(a..b))`",
                ));
            }
            o.of = targets.into_iter().collect();
            o.of_span = Some(meta.span());
        }
        ("queue", Meta::NameValue(nv)) => o.queue = Some(nv.value.clone()),
        ("cache", Meta::NameValue(nv)) => o.cache = Some(nv.value.clone()),
        ("queue", _) => {
            return Err(syn::Error::new(
                meta.span(),
                "write `queue = q`, with `q` a `RequestQueue` (usually a kernel parameter `q: \
                 RequestQueue`)",
            ))
        }
        _ => {
            return Err(syn::Error::new(
                meta.span(),
                format!(
                    "unknown or malformed #[prefetch_next] option `{}`; {}",
                    shown(&meta),
                    options()
                ),
            ))
        }
    }
    Ok(())
}

/// Options that do not go together.
fn check_combinations(o: &LoopOptions) -> syn::Result<()> {
    if let (true, Some(p)) = (o.is_auto(), o.portable) {
        return Err(syn::Error::new(
            p,
            "`portable` has no effect with `level = auto`: its candidates fall back on GPUs \
             without their level by themselves (`l2_evict_last` to `l2` before sm_80, `bulk` \
             to per-line `l2` before sm_90); remove `portable`",
        ));
    }
    if let Some(c) = &o.cache {
        check_cache_options(o, c)?;
    }
    match (&o.distance, &o.level) {
        (Distance::Auto(_), LevelChoice::Fixed(level)) => Err(syn::Error::new(
            o.distance_span,
            format!(
                "`distance = auto` is tuned with the level: write `level = auto({})` to tune \
                 the distance at that level alone",
                level.name()
            ),
        )),
        _ => Ok(()),
    }
}

/// `cache = c` takes no level or queue (it prefetches the host memory of the pages that are
/// not cached into L2) and needs `of(a..b)`, the element ranges of `c` an iteration reads.
fn check_cache_options(o: &LoopOptions, c: &Expr) -> syn::Result<()> {
    let span = c.span();
    if o.queue.is_some() {
        return Err(syn::Error::new(
            span,
            "`cache = c` and `queue = q` are two mechanisms for two kinds of memory: give one",
        ));
    }
    if o.level != LevelChoice::Fixed(Level::L2) || o.portable.is_some() {
        return Err(syn::Error::new(
            o.level_span,
            "`cache = c` prefetches the host memory of pages not yet in the cache into L2 \
             (`prefetch.global.L2`): remove `level` and `portable`",
        ));
    }
    if o.of.is_empty() {
        return Err(syn::Error::new(
            span,
            "`cache = c` needs the elements of `c` an iteration reads as ranges of the loop \
             variable: `of(off[i] as usize..off[i + 1] as usize)`",
        ));
    }
    Ok(())
}
