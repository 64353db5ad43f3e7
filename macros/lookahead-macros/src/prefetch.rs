//! `#[prefetch_next]`: rewriting annotated `for` loops inside `#[kernel]`/`#[device_fn]`.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::visit_mut::VisitMut;
use syn::{Attribute, Block, Expr, ExprForLoop, Ident, Lit, Meta, Pat, RangeLimits, Token};

const LEVELS: &str = "auto, l1, l2, l2_evict_last, l2_evict_normal, bulk";
const FORMS: &str = "supported loops: `for i in a..b`, `for i in a..=b`, \
`for i in (a..b).step_by(s)`, `for x in xs.iter()`, `for x in xs.iter_mut()`, \
`for c in xs.chunks(k)` (and `chunks_mut`, `chunks_exact`, `chunks_exact_mut`), \
with `xs` a variable or field";

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Level {
    L1,
    L2,
    L2EvictLast,
    L2EvictNormal,
    Bulk,
    /// One entry per candidate level, chosen at launch by measurement.
    Auto,
}

/// The levels `level = auto(..)` may list, in the order entries are generated.
const AUTO_LEVELS: [(&str, Level); 5] = [
    ("l1", Level::L1),
    ("l2", Level::L2),
    ("l2_evict_last", Level::L2EvictLast),
    ("l2_evict_normal", Level::L2EvictNormal),
    ("bulk", Level::Bulk),
];

/// The distances `distance = auto` tries.
const AUTO_DISTANCES: [u64; 5] = [1, 2, 4, 8, 16];

impl Level {
    /// The level's name in `#[prefetch_next(level = ..)]`, and its entry's suffix.
    pub fn name(self) -> &'static str {
        match self {
            Level::L1 => "l1",
            Level::L2 => "l2",
            Level::L2EvictLast => "l2_evict_last",
            Level::L2EvictNormal => "l2_evict_normal",
            Level::Bulk => "bulk",
            Level::Auto => "auto",
        }
    }

    /// The host's `lookahead::launch::autotune::Hint` for this level.
    pub fn hint(self) -> TokenStream {
        let h = quote!(::lookahead::launch::autotune::Hint);
        match self {
            Level::L1 => quote!(#h::L1),
            Level::L2 | Level::Auto => quote!(#h::L2),
            Level::L2EvictLast => quote!(#h::L2EvictLast),
            Level::L2EvictNormal => quote!(#h::L2EvictNormal),
            Level::Bulk => quote!(#h::Bulk),
        }
    }
}

/// How this pass expands `level = auto` loops: `#[kernel]` rewrites its body once per entry.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum AutoMode {
    /// An entry of the kernel: `level = auto` loops prefetch at the level when they list it,
    /// and do not prefetch (nor request) otherwise; `None` is the plain entry.
    Entry(Option<Level>),
    /// A `#[device_fn]`: `level = auto` is an error (it is not an entry of its own).
    Forbidden,
}

/// What a body's `level = auto` loops ask for: the kernel's candidate levels and distances.
#[derive(Default)]
pub struct AutoSummary {
    /// Whether there is a `level = auto` loop.
    pub found: bool,
    /// Every level some `level = auto` loop lists, sorted.
    pub levels: Vec<Level>,
    /// Every distance some `distance = auto` loop tries, sorted (empty: none has one).
    pub distances: Vec<u64>,
}

/// The name of the runtime distance every entry of a `level = auto` kernel takes.
pub fn distance_param() -> Ident {
    mixed("__lk_distance")
}

struct Options {
    distance: usize,
    distance_span: Span,
    /// `distance = auto(..)`: the distances to try.
    auto_distances: Option<Vec<u64>>,
    level: Level,
    level_span: Span,
    /// `level = auto(..)`: the levels listed (empty: the default set for the loop's shape).
    auto_levels: Vec<Level>,
    portable: Option<Span>,
    of: Vec<Expr>,
    of_span: Option<Span>,
    queue: Option<Expr>,
    /// `cache = c`: the targets are element ranges of the host cache `c`.
    cache: Option<Expr>,
}

const OPTIONS: &str = "options: `distance = N | auto | auto(a..=b) | auto(a, b, ..)`, \
`level = auto | auto(l2, l2_evict_last, ..) | l1 | l2 | l2_evict_last | l2_evict_normal | bulk`, \
`portable`, `of(a, b, ...)`, `queue = q`, `cache = c` (with `of(a..b)`)";

/// The most iterations ahead a loop may prefetch: further than this the data would be
/// evicted before it is used, and the arithmetic on the loop index stays far from overflow.
const MAX_DISTANCE: u64 = 1 << 16;

/// `distance = N`: an integer literal from 1 to [`MAX_DISTANCE`].
fn parse_distance(value: &Expr) -> syn::Result<usize> {
    let span = value.span();
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
        Ok(0) => Err(syn::Error::new(span, "`distance` must be at least 1 (0 would prefetch what the iteration is about to load anyway)")),
        Ok(n) if n <= MAX_DISTANCE => Ok(n as usize),
        _ => Err(syn::Error::new(span, format!("`distance = {}` is too far ahead: write 1 to {MAX_DISTANCE} iterations (a prefetch that far ahead is evicted before its iteration runs; 2 to 16 is typical)", i.base10_digits()))),
    }
}

/// `distance = auto`, `auto(a..=b)` (the powers of two from `a` to `b`, and `b`) or
/// `auto(a, b, ..)`; `None` when the value is not `auto`.
fn parse_auto_distance(value: &Expr) -> Option<syn::Result<Vec<u64>>> {
    let args = match value {
        Expr::Path(p) if p.path.is_ident("auto") => return Some(Ok(AUTO_DISTANCES.to_vec())),
        Expr::Call(c) if matches!(&*c.func, Expr::Path(p) if p.path.is_ident("auto")) => &c.args,
        _ => return None,
    };
    let hint = "write `distance = auto` (1, 2, 4, 8, 16), `distance = auto(1..=16)` (the powers of two in the range) or `distance = auto(2, 3, 6)`";
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

/// `level = auto` (`None`: the default set) or `auto(l2, bulk, ..)`.
fn parse_auto_levels(value: &Expr) -> Option<syn::Result<Vec<Level>>> {
    let args = match value {
        Expr::Path(p) if p.path.is_ident("auto") => return Some(Ok(Vec::new())),
        Expr::Call(c) if matches!(&*c.func, Expr::Path(p) if p.path.is_ident("auto")) => &c.args,
        _ => return None,
    };
    let names = AUTO_LEVELS.map(|(n, _)| n).join(", ");
    let level = |e: &Expr| {
        let id = match e {
            Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
            _ => None,
        };
        AUTO_LEVELS
            .iter()
            .find(|(n, _)| Some(*n) == id.as_deref())
            .map(|(_, l)| *l)
            .ok_or_else(|| syn::Error::new(e.span(), format!("`level = auto(..)` lists levels to try: {names} (the plain entry is always a candidate)")))
    };
    if args.is_empty() {
        return Some(Err(syn::Error::new(value.span(), format!("`auto()` lists no level: write `level = auto` for the default set, or name some of {names}"))));
    }
    Some(
        args.iter()
            .map(level)
            .collect::<syn::Result<Vec<_>>>()
            .map(|mut v| {
                v.sort();
                v.dedup();
                v
            }),
    )
}

fn parse_options(attr: &Attribute) -> syn::Result<Options> {
    let mut o = Options {
        distance: 1,
        distance_span: attr.span(),
        auto_distances: None,
        level: Level::L2,
        level_span: attr.span(),
        auto_levels: Vec::new(),
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
    let mut seen: Vec<String> = Vec::new();
    for meta in metas {
        let key = meta
            .path()
            .get_ident()
            .map(|i| i.to_string())
            .unwrap_or_default();
        if seen.contains(&key) {
            return Err(syn::Error::new(meta.span(), format!("`{key}` given twice")));
        }
        seen.push(key.clone());
        match (key.as_str(), &meta) {
            ("distance", Meta::NameValue(nv)) => {
                o.distance_span = nv.value.span();
                match parse_auto_distance(&nv.value) {
                    Some(ds) => o.auto_distances = Some(ds?),
                    None => o.distance = parse_distance(&nv.value)?,
                }
            }
            ("level", Meta::NameValue(nv)) if parse_auto_levels(&nv.value).is_some() => {
                o.auto_levels = parse_auto_levels(&nv.value).into_iter().next().transpose()?.unwrap_or_default();
                o.level = Level::Auto;
                o.level_span = nv.value.span();
            }
            ("level", Meta::NameValue(nv)) => {
                let id = match &nv.value {
                    Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
                    _ => None,
                };
                o.level = match id.as_deref() {
                    Some("l1") => Level::L1,
                    Some("l2") => Level::L2,
                    Some("l2_evict_last") => Level::L2EvictLast,
                    Some("l2_evict_normal") => Level::L2EvictNormal,
                    Some("bulk") => Level::Bulk,
                    _ => {
                        return Err(syn::Error::new(
                            nv.value.span(),
                            format!("unknown prefetch level `{}`; levels: {LEVELS}", {
                                let v = &nv.value;
                                quote!(#v).to_string()
                            }),
                        ))
                    }
                };
                o.level_span = nv.value.span();
            }
            ("portable", Meta::Path(p)) => o.portable = Some(p.span()),
            ("of", Meta::List(l)) => {
                let targets = Punctuated::<Expr, Token![,]>::parse_terminated.parse2(l.tokens.clone())?;
                if targets.is_empty() {
                    return Err(syn::Error::new(l.span(), "`of(...)` needs at least one slice, e.g. `of(x)` or `of(x.part(a..b))`"));
                }
                o.of = targets.into_iter().collect();
                o.of_span = Some(meta.span());
            }
            ("queue", Meta::NameValue(nv)) => o.queue = Some(nv.value.clone()),
            ("cache", Meta::NameValue(nv)) => o.cache = Some(nv.value.clone()),
            ("queue", _) => {
                return Err(syn::Error::new(
                    meta.span(),
                    "write `queue = q`, with `q` a `RequestQueue` (usually a kernel parameter `q: RequestQueue`)",
                ))
            }
            _ => {
                return Err(syn::Error::new(
                    meta.span(),
                    format!(
                        "unknown or malformed #[prefetch_next] option `{}`; {OPTIONS}",
                        quote!(#meta).to_string().replace(' ', ""),
                    ),
                ))
            }
        }
    }
    if let (Level::Auto, Some(p)) = (o.level, o.portable) {
        return Err(syn::Error::new(
            p,
            "`portable` has no effect with `level = auto`: its candidates fall back on GPUs without their level by themselves (`l2_evict_last` to `l2` before sm_80, `bulk` to per-line `l2` before sm_90); remove `portable`",
        ));
    }
    if let Some(c) = &o.cache {
        check_cache_options(&o, c)?;
    }
    if o.auto_distances.is_some() && o.level != Level::Auto {
        return Err(syn::Error::new(
            o.distance_span,
            format!("`distance = auto` is tuned with the level: write `level = auto({})` to tune the distance at that level alone", o.level.name()),
        ));
    }
    Ok(o)
}

/// `cache = c` takes no level or queue (it prefetches the host memory of the pages that are
/// not cached into L2) and needs `of(a..b)`, the element ranges of `c` an iteration reads.
fn check_cache_options(o: &Options, c: &Expr) -> syn::Result<()> {
    let span = c.span();
    if o.queue.is_some() {
        return Err(syn::Error::new(
            span,
            "`cache = c` and `queue = q` are two mechanisms for two kinds of memory: give one",
        ));
    }
    if o.level != Level::L2 || o.portable.is_some() {
        return Err(syn::Error::new(o.level_span, "`cache = c` prefetches the host memory of pages not yet in the cache into L2 (`prefetch.global.L2`): remove `level` and `portable`"));
    }
    if o.of.is_empty() {
        return Err(syn::Error::new(span, "`cache = c` needs the elements of `c` an iteration reads as ranges of the loop variable: `of(off[i] as usize..off[i + 1] as usize)`"));
    }
    Ok(())
}

/// Rewrites every `#[prefetch_next]` loop in `block`, expanding `level = auto` loops as
/// `mode` says; returns the errors found and what the `level = auto` loops ask for.
pub fn rewrite_body(block: &mut Block, mode: AutoMode) -> (Vec<syn::Error>, AutoSummary) {
    let mut r = Rewriter {
        errors: Vec::new(),
        mode,
        summary: AutoSummary::default(),
    };
    r.visit_block_mut(block);
    let s = &mut r.summary;
    s.levels.sort();
    s.levels.dedup();
    s.distances.sort_unstable();
    s.distances.dedup();
    (r.errors, r.summary)
}

struct Rewriter {
    errors: Vec<syn::Error>,
    mode: AutoMode,
    summary: AutoSummary,
}

/// The levels a `level = auto` loop tries: those listed, else `l2` and `l2_evict_last`, and
/// `bulk` when an iteration reads more than one element (a chunk, or an `of(..)` expression
/// of the loop variable): a bulk prefetch per element is the slowest choice there is.
fn auto_levels(f: &ExprForLoop, o: &Options) -> Vec<Level> {
    if !o.auto_levels.is_empty() {
        return o.auto_levels.clone();
    }
    let mut levels = vec![Level::L2, Level::L2EvictLast];
    let chunked = matches!(strip(&f.expr), Expr::MethodCall(mc) if mc.method.to_string().starts_with("chunks"));
    let ranged = match &*f.pat {
        Pat::Ident(pi) => o.of.iter().any(|t| mentions(t, &pi.ident)),
        _ => false,
    };
    if chunked || ranged {
        levels.push(Level::Bulk);
    }
    levels
}

impl Rewriter {
    /// A `level = auto` loop: checked at its first level (so its errors show in every
    /// pass), and rewritten at the entry's level when it lists it; otherwise left as written.
    fn rewrite_auto(&mut self, f: &ExprForLoop, mut o: Options, attr_span: Span) -> Option<Expr> {
        let levels = auto_levels(f, &o);
        self.summary.found = true;
        self.summary.levels.extend(&levels);
        if let Some(ds) = &o.auto_distances {
            self.summary.distances.extend(ds);
        }
        // No architecture guard: each level falls back by itself on older GPUs.
        o.portable = Some(o.level_span);
        o.level = levels[0];
        if let Err(e) = rewrite_loop(f, &o, attr_span) {
            self.errors.push(e);
            return None;
        }
        match self.mode {
            AutoMode::Entry(Some(level)) if levels.contains(&level) => {
                o.level = level;
                rewrite_loop(f, &o, attr_span).ok()
            }
            _ => None,
        }
    }
}

fn is_prefetch_attr(a: &Attribute) -> bool {
    let p = a.path();
    p.is_ident("prefetch_next")
        || p.segments
            .last()
            .is_some_and(|s| s.ident == "prefetch_next")
}

impl VisitMut for Rewriter {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        // Inner loops first.
        syn::visit_mut::visit_expr_mut(self, e);
        if let Expr::ForLoop(f) = e {
            let Some(pos) = f.attrs.iter().position(is_prefetch_attr) else {
                return;
            };
            let attr = f.attrs.remove(pos);
            if let Some(again) = f.attrs.iter().find(|a| is_prefetch_attr(a)) {
                self.errors.push(syn::Error::new(
                    again.span(),
                    "only one #[prefetch_next] per loop",
                ));
                return;
            }
            if crate::pipeline::is_pipeline(&attr) {
                match crate::pipeline::rewrite(f, &attr, attr.span()) {
                    Ok(new) => *e = new,
                    Err(err) => self.errors.push(err),
                }
                return;
            }
            let o = match parse_options(&attr) {
                Ok(o) => o,
                Err(err) => {
                    self.errors.push(err);
                    return;
                }
            };
            if o.level == Level::Auto {
                if self.mode == AutoMode::Forbidden {
                    self.errors.push(syn::Error::new(
                        o.level_span,
                        "`level = auto` needs the enclosing #[kernel], which compiles its body once per candidate level (PTX entries chosen at launch by measurement); a #[device_fn] is not an entry: give this loop a fixed level (e.g. `level = l2`), or move the loop into the #[kernel]",
                    ));
                    return;
                }
                if let Some(new) = self.rewrite_auto(f, o, attr.span()) {
                    *e = new;
                }
                return;
            }
            match rewrite_loop(f, &o, attr.span()) {
                Ok(new) => *e = new,
                Err(err) => self.errors.push(err),
            }
        } else if let Some(attrs) = expr_attrs(e) {
            if let Some(a) = attrs.iter().find(|a| is_prefetch_attr(a)) {
                self.errors.push(syn::Error::new(
                    a.span(),
                    format!("#[prefetch_next] goes on a `for` loop; {FORMS}"),
                ));
            }
        }
    }

    fn visit_stmt_mut(&mut self, s: &mut syn::Stmt) {
        match s {
            syn::Stmt::Local(l) => {
                if let Some(a) = l.attrs.iter().find(|a| is_prefetch_attr(a)) {
                    self.errors.push(syn::Error::new(
                        a.span(),
                        format!("#[prefetch_next] goes on a `for` loop, not a `let`; {FORMS}"),
                    ));
                }
            }
            syn::Stmt::Item(_) => return, // nested items are not part of this function
            _ => {}
        }
        syn::visit_mut::visit_stmt_mut(self, s);
    }
}

fn expr_attrs(e: &Expr) -> Option<&Vec<Attribute>> {
    Some(match e {
        Expr::While(x) => &x.attrs,
        Expr::Loop(x) => &x.attrs,
        Expr::Block(x) => &x.attrs,
        Expr::If(x) => &x.attrs,
        Expr::Call(x) => &x.attrs,
        Expr::MethodCall(x) => &x.attrs,
        Expr::Assign(x) => &x.attrs,
        _ => return None,
    })
}

pub(crate) fn strip(e: &Expr) -> &Expr {
    match e {
        Expr::Paren(p) => strip(&p.expr),
        Expr::Group(g) => strip(&g.expr),
        _ => e,
    }
}

fn is_place(e: &Expr) -> bool {
    match strip(e) {
        Expr::Path(_) => true,
        Expr::Field(f) => is_place(&f.base),
        _ => false,
    }
}

/// Finds slices indexed by the loop variable: `x[i]` with `x` a variable or field.
struct IndexFinder<'a> {
    var: &'a Ident,
    found: Vec<Expr>,
}

impl<'ast> Visit<'ast> for IndexFinder<'_> {
    fn visit_expr_index(&mut self, ix: &'ast syn::ExprIndex) {
        if let Expr::Path(p) = strip(&ix.index) {
            if p.path.is_ident(self.var) && is_place(&ix.expr) {
                let base = (*ix.expr).clone();
                let key = quote!(#base).to_string();
                if !self.found.iter().any(|f| quote!(#f).to_string() == key) {
                    self.found.push(base);
                }
            }
        }
        syn::visit::visit_expr_index(self, ix);
    }
    fn visit_item(&mut self, _: &'ast syn::Item) {}
}

/// Whether `e` mentions the variable `var` (as a plain path `var`).
struct Mentions<'a> {
    var: &'a Ident,
    found: bool,
}

impl<'ast> Visit<'ast> for Mentions<'_> {
    fn visit_expr_path(&mut self, p: &'ast syn::ExprPath) {
        if p.qself.is_none() && p.path.is_ident(self.var) {
            self.found = true;
        }
    }
    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        // Macro arguments are tokens: look for the identifier among them.
        fn has(ts: TokenStream, var: &Ident) -> bool {
            ts.into_iter().any(|t| match t {
                proc_macro2::TokenTree::Ident(i) => i == *var,
                proc_macro2::TokenTree::Group(g) => has(g.stream(), var),
                _ => false,
            })
        }
        if has(m.tokens.clone(), self.var) {
            self.found = true;
        }
    }
    fn visit_item(&mut self, _: &'ast syn::Item) {}
}

fn mentions(e: &Expr, var: &Ident) -> bool {
    let mut m = Mentions { var, found: false };
    m.visit_expr(e);
    m.found
}

/// A range loop's prefetch target.
enum Target {
    /// A slice or view indexed by the loop variable: element `i + distance` is prefetched.
    Element(Expr),
    /// An expression of the loop variable naming what an iteration reads (such as
    /// `x.part(a[i]..a[i + 1])`): evaluated for iteration `i + distance`, all of it.
    Whole(Expr),
}

fn level_tokens(level: Level) -> TokenStream {
    match level {
        Level::L1 => quote!(::lookahead_device::prefetch::Level::L1),
        // `Auto` is resolved before expansion (a level per entry); listed for completeness.
        Level::L2 | Level::Auto => quote!(::lookahead_device::prefetch::Level::L2),
        Level::L2EvictLast => quote!(::lookahead_device::prefetch::Level::L2EvictLast),
        Level::L2EvictNormal => quote!(::lookahead_device::prefetch::Level::L2EvictNormal),
        Level::Bulk => quote!(::lookahead_device::prefetch::Level::Bulk),
    }
}

/// The compile error for a level the target architecture lacks (unless `portable`).
fn arch_guard(o: &Options) -> TokenStream {
    if o.portable.is_some() {
        return quote!();
    }
    let (feature, msg) = match o.level {
        Level::L2EvictLast => ("sm_80", "#[prefetch_next(level = l2_evict_last)] needs sm_80 (Ampere) or newer: this crate is being compiled for an older GPU. Add `portable` to fall back to plain `prefetch.global.L2` there, or build only sm_80+"),
        Level::L2EvictNormal => ("sm_80", "#[prefetch_next(level = l2_evict_normal)] needs sm_80 (Ampere) or newer: this crate is being compiled for an older GPU. Add `portable` to fall back to plain `prefetch.global.L2` there, or build only sm_80+"),
        Level::Bulk => ("sm_90", "#[prefetch_next(level = bulk)] needs sm_90 (Hopper) or newer for `cp.async.bulk.prefetch.L2.global`: this crate is being compiled for an older GPU. Add `portable` to fall back to per-line `prefetch.global.L2` there, or build only sm_90"),
        _ => return quote!(),
    };
    quote_spanned! {o.level_span=>
        #[cfg(all(target_arch = "nvptx64", not(target_feature = #feature)))]
        ::core::compile_error!(#msg);
    }
}

/// What every loop rewrite shares: the options, and the names the generated code uses
/// (mixed-site, so they never clash with the user's).
struct Gen<'a> {
    o: &'a Options,
    level: TokenStream,
    /// How many iterations ahead: the literal, or the entry's runtime distance clamped to
    /// the loop's own range for `distance = auto`.
    dist: TokenStream,
    pf: TokenStream,
    ul: TokenStream,
    q: Ident,
    scope: Ident,
    ahead: Ident,
    j: Ident,
}

pub(crate) fn mixed(name: &str) -> Ident {
    Ident::new(name, Span::mixed_site())
}

impl<'a> Gen<'a> {
    fn new(o: &'a Options) -> Self {
        Gen {
            o,
            level: level_tokens(o.level),
            dist: match &o.auto_distances {
                Some(ds) => {
                    let (lo, hi) = (ds[0] as usize, ds[ds.len() - 1] as usize);
                    let d = distance_param();
                    quote_spanned!(o.distance_span=> (#d as usize).clamp(#lo, #hi))
                }
                None => {
                    let lit = syn::LitInt::new(&o.distance.to_string(), o.distance_span);
                    quote!(#lit)
                }
            },
            pf: quote!(::lookahead_device::prefetch),
            ul: quote!(::lookahead_device::uvm::loops),
            q: mixed("__lk_queue"),
            scope: mixed("__lk_iteration"),
            ahead: mixed("__lk_ahead"),
            j: mixed("__lk_j"),
        }
    }

    /// `let <queue> = &(q);` when the loop requests through a queue.
    fn queue_let(&self) -> TokenStream {
        let q = &self.q;
        match &self.o.queue {
            Some(qe) => quote_spanned! {qe.span()=>
                let #q: &::lookahead_device::uvm::RequestQueue = &(#qe);
            },
            None => quote!(),
        }
    }

    /// With a queue: before the loop, ask for what the first `distance` iterations read
    /// (`fetch(j)` for iteration number `j`, guarded by `valid(j)`).
    fn requests_before(&self, fetch: TokenStream) -> TokenStream {
        if self.o.queue.is_none() {
            return quote!();
        }
        let (pf, scope, j, dist) = (&self.pf, &self.scope, &self.j, &self.dist);
        quote! {{
            let #scope = #pf::IterationScope::outside();
            let mut #j: usize = 0;
            while #j < #dist {
                #fetch
                #j += 1;
            }
            ::core::mem::drop(#scope);
        }}
    }
}

fn rewrite_loop(f: &ExprForLoop, o: &Options, attr_span: Span) -> syn::Result<Expr> {
    let g = Gen::new(o);
    let iter = strip(&f.expr);
    // Integer ranges, optionally `.step_by(s)`.
    let (range, step) = match iter {
        Expr::Range(r) => (Some(r), None),
        Expr::MethodCall(mc) if mc.method == "step_by" && mc.args.len() == 1 => {
            match strip(&mc.receiver) {
                Expr::Range(r) => (Some(r), Some(mc.args[0].clone())),
                _ => (None, None),
            }
        }
        _ => (None, None),
    };
    if let Some(r) = range {
        return rewrite_range_loop(&g, f, r, step, attr_span);
    }
    if let Expr::MethodCall(mc) = iter {
        if let Some(e) = rewrite_slice_loop(&g, f, mc)? {
            return Ok(e);
        }
    }
    Err(syn::Error::new(
        f.expr.span(),
        format!("#[prefetch_next] does not know what this loop reads ahead; {FORMS}"),
    ))
}

/// One `of(..)` target of a range loop over `var`: an expression of the loop variable names
/// what an iteration reads; a slice or view (a name or a field) is indexed by it. Anything
/// else does not change from one iteration to the next, so there is nothing ahead to fetch.
fn of_target(t: &Expr, var: &Ident) -> syn::Result<Target> {
    if mentions(t, var) {
        return Ok(Target::Whole(t.clone()));
    }
    if matches!(strip_expr(t), Expr::Path(_) | Expr::Field(_)) {
        return Ok(Target::Element(t.clone()));
    }
    let shown = quote!(#t).to_string().replace(' ', "");
    Err(syn::Error::new(
        t.span(),
        format!("`of({shown})` does not use the loop variable `{var}`, so it names the same data in every iteration and iteration `{var} + distance` has nothing of its own to fetch. Write a slice (`of(x)`: element `{var} + distance`) or an expression of `{var}` (`of(x.at(idx[{var}] as usize))`, `of(x.part(off[{var}]..off[{var} + 1]))`). A pointer chase, where the next address comes from this iteration's load, cannot be fetched ahead: prefetch by hand once the address is known (`prefetch::prefetch_l2(...)`)"),
    ))
}

fn strip_expr(e: &Expr) -> &Expr {
    match e {
        Expr::Paren(p) => strip_expr(&p.expr),
        Expr::Group(g) => strip_expr(&g.expr),
        Expr::Reference(r) => strip_expr(&r.expr),
        _ => e,
    }
}

/// The targets of a range loop over `var`: the slices the body indexes with it, or `of(..)`.
fn range_targets(
    o: &Options,
    body: &Block,
    var: &Ident,
    attr_span: Span,
) -> syn::Result<Vec<Target>> {
    let targets: Vec<Target> = if o.of.is_empty() {
        let mut finder = IndexFinder {
            var,
            found: Vec::new(),
        };
        finder.visit_block(body);
        finder.found.into_iter().map(Target::Element).collect()
    } else {
        (o.of.iter())
            .map(|t| of_target(t, var))
            .collect::<syn::Result<_>>()?
    };
    if targets.is_empty() {
        return Err(syn::Error::new(
            attr_span,
            format!("#[prefetch_next]: nothing to prefetch: the body indexes no slice with `{var}` (`x[{var}]`); name the slices with `of(x, y)`, or the range an iteration reads with `of(x.part(a..b))`"),
        ));
    }
    Ok(targets)
}

/// What iteration `ahead` (a loop value, as usize) of a range loop reads, prefetched or
/// requested, for each target.
fn range_fetches(g: &Gen<'_>, targets: &[Target], var: &Ident, start: &Ident) -> Vec<TokenStream> {
    let (pf, ul, q, level, ahead) = (&g.pf, &g.ul, &g.q, &g.level, &g.ahead);
    let n = targets.len();
    targets
        .iter()
        .enumerate()
        .map(|(kk, t)| {
            let flag = quote!(#ul::flag(#ahead, #n, #kk));
            if let (Some(c), Target::Whole(t)) = (&g.o.cache, t) {
                return quote_spanned! {t.span()=> {
                    let #var = #pf::index_like(#ahead, &#start);
                    ::lookahead_device::cache::HostCached::prefetch(&(#c), #t);
                }};
            }
            match (t, &g.o.queue) {
                (Target::Element(t), None) => {
                    quote_spanned!(t.span()=> #pf::prefetch_index(&#t, #ahead, #level);)
                }
                (Target::Element(t), Some(_)) => quote_spanned! {t.span()=>
                    let _ = #ul::request_index(#q, #flag, &#t, #ahead, #level);
                },
                (Target::Whole(t), None) => quote_spanned! {t.span()=> {
                    let #var = #pf::index_like(#ahead, &#start);
                    #pf::prefetch_all(&(#t), #level);
                }},
                (Target::Whole(t), Some(_)) => quote_spanned! {t.span()=> {
                    let #var = #pf::index_like(#ahead, &#start);
                    let _ = #ul::request_all(#q, #flag, &(#t), #level);
                }},
            }
        })
        .collect()
}

/// With a queue: the waits for the current iteration's ranges, before its body.
fn range_waits(g: &Gen<'_>, targets: &[Target], var: &Ident) -> TokenStream {
    if g.o.queue.is_none() {
        return quote!();
    }
    let (ul, q, n) = (&g.ul, &g.q, targets.len());
    let waits = targets.iter().enumerate().map(|(kk, t)| {
        let flag = quote!(#ul::flag(#var as usize, #n, #kk));
        match t {
            Target::Element(t) => quote_spanned! {t.span()=>
                let _ = #ul::wait_ready(#q, #flag, &#t);
            },
            Target::Whole(t) => quote_spanned! {t.span()=>
                let _ = #ul::wait_ready_for(#q, #flag, || #t);
            },
        }
    });
    quote!(#(#waits)*)
}

/// `for i in a..b` (`a..=b`, `.step_by(s)`): before iteration `i`'s body, fetch what
/// iteration `i + distance * step` reads.
fn rewrite_range_loop(
    g: &Gen<'_>,
    f: &ExprForLoop,
    r: &syn::ExprRange,
    step: Option<Expr>,
    attr_span: Span,
) -> syn::Result<Expr> {
    let (Some(start), Some(end)) = (&r.start, &r.end) else {
        return Err(syn::Error::new(r.span(), format!("#[prefetch_next] needs a bounded range (`a..b` or `a..=b`) so it never prefetches past the end; {FORMS}")));
    };
    let var = match &*f.pat {
        Pat::Ident(pi) if pi.subpat.is_none() => pi.ident.clone(),
        other => {
            return Err(syn::Error::new(
                other.span(),
                "#[prefetch_next] on a range needs a plain loop variable (`for i in ...`)",
            ))
        }
    };
    let targets = range_targets(g.o, &f.body, &var, attr_span)?;
    let element = targets.iter().find(|t| matches!(t, Target::Element(_)));
    if let (true, Some(Target::Element(t))) = (g.o.cache.is_some(), element) {
        return Err(syn::Error::new(t.span(), format!("with `cache = c`, each `of(..)` target is a range of the cache's elements that iteration `{var}` reads, such as `of(off[{var}] as usize..off[{var} + 1] as usize)`")));
    }
    let (start_id, end_id, step_id) = (mixed("__lk_start"), mixed("__lk_end"), mixed("__lk_step"));
    let (ahead, j, dist, pf, scope) = (&g.ahead, &g.j, &g.dist, &g.pf, &g.scope);
    let inclusive = matches!(r.limits, RangeLimits::Closed(_));
    let (in_bounds, range_expr) = if inclusive {
        (
            quote!(#ahead <= (#end_id as usize)),
            quote!(#start_id..=#end_id),
        )
    } else {
        (
            quote!(#ahead < (#end_id as usize)),
            quote!(#start_id..#end_id),
        )
    };
    let (step_let, iter_expr) = match &step {
        Some(s) => (
            quote!(let #step_id: usize = #s;),
            quote!(::core::iter::Iterator::step_by(#range_expr, #step_id)),
        ),
        None => (quote!(let #step_id: usize = 1;), quote!(#range_expr)),
    };
    let fetch = range_fetches(g, &targets, &var, &start_id);
    let before = g.requests_before(quote! {
        if let ::core::option::Option::Some(#ahead) = (#start_id as usize).checked_add(#j * #step_id) {
            if #in_bounds {
                #(#fetch)*
            }
        }
    });
    let (waits, guard, queue_let) = (
        range_waits(g, &targets, &var),
        arch_guard(g.o),
        g.queue_let(),
    );
    let (label, pat, body, attrs) = (&f.label, &f.pat, &f.body, &f.attrs);
    Ok(syn::parse_quote_spanned! {f.span()=> {
        #guard
        #queue_let
        let #start_id = #start;
        let #end_id = #end;
        #step_let
        #before
        #(#attrs)*
        #label for #pat in #iter_expr {
            // Names the iteration in the emulator's prefetch trace; nothing on the GPU.
            let #scope = #pf::IterationScope::enter(#var as usize);
            if let ::core::option::Option::Some(#ahead) =
                (#var as usize).checked_add(#dist * #step_id)
            {
                if #in_bounds {
                    #(#fetch)*
                }
            }
            #waits
            #body
        }
    }})
}

/// `for x in xs.iter()` (`iter_mut`) and `for c in xs.chunks(k)` (and the `_mut`/`_exact`
/// forms): before iteration `i`'s body, fetch element or chunk `i + distance` of `xs`.
/// `None` when the call is none of these.
fn rewrite_slice_loop(
    g: &Gen<'_>,
    f: &ExprForLoop,
    mc: &syn::ExprMethodCall,
) -> syn::Result<Option<Expr>> {
    let method = mc.method.to_string();
    let recv = &mc.receiver;
    let by_elem = matches!(method.as_str(), "iter" | "iter_mut") && mc.args.is_empty();
    let by_chunk = matches!(
        method.as_str(),
        "chunks" | "chunks_mut" | "chunks_exact" | "chunks_exact_mut"
    ) && mc.args.len() == 1;
    if !by_elem && !by_chunk {
        return Ok(None);
    }
    if !is_place(recv) {
        return Err(syn::Error::new(
            recv.span(),
            "#[prefetch_next]: bind the slice to a variable first (`let xs = ...; for x in xs.iter()`), so it is evaluated once",
        ));
    }
    if let Some(c) = &g.o.cache {
        return Err(syn::Error::new(c.span(), "`cache = c` goes on a range loop (`for i in a..b`) with `of(lo..hi)`, the elements of `c` iteration `i` reads"));
    }
    if let Some(span) = g.o.of_span {
        return Err(syn::Error::new(
            span,
            format!("`of(...)` is for range loops (`for i in a..b`); a `.{method}()` loop prefetches from `{}` itself: remove `of(...)`", quote!(#recv).to_string().replace(' ', "")),
        ));
    }
    let (snap, idx, k, c) = (
        mixed("__lk_snap"),
        mixed("__lk_i"),
        mixed("__lk_k"),
        mixed("__lk_c"),
    );
    let (pf, ul, q, level, dist, scope, j) =
        (&g.pf, &g.ul, &g.q, &g.level, &g.dist, &g.scope, &g.j);
    let exact = method.contains("exact");
    // Fetch (prefetch, or with a queue request) what iteration `$c` reads.
    let fetch = |c: TokenStream| -> TokenStream {
        match (&g.o.queue, by_elem) {
            (None, true) => quote!(#pf::prefetch_index(&#snap, #c, #level);),
            (None, false) => quote!(#pf::prefetch_chunk(&#snap, #c, #k, #exact, #level);),
            (Some(_), true) => quote! {
                let _ = #ul::request_index(#q, #ul::flag(#c, 1, 0), &#snap, #c, #level);
            },
            (Some(_), false) => quote! {
                let _ = #ul::request_chunk(#q, #ul::flag(#c, 1, 0), &#snap, #c, #k, #exact, #level);
            },
        }
    };
    let fetch_ahead = fetch(quote!(#c));
    let before = g.requests_before(fetch(quote!(#j)));
    let wait = match &g.o.queue {
        Some(_) => quote!(let _ = #ul::wait_ready(#q, #ul::flag(#idx, 1, 0), &#snap);),
        None => quote!(),
    };
    let method_id = &mc.method;
    let (chunk_let, iter_call) = if by_chunk {
        let chunk = &mc.args[0];
        (
            quote!(let #k: usize = #chunk;),
            quote!(#recv.#method_id(#k)),
        )
    } else {
        (quote!(), quote!(#recv.#method_id()))
    };
    let (guard, queue_let) = (arch_guard(g.o), g.queue_let());
    let (label, pat, body, attrs) = (&f.label, &f.pat, &f.body, &f.attrs);
    Ok(Some(syn::parse_quote_spanned! {f.span()=> {
        #guard
        #queue_let
        let #snap = #pf::Snapshot::of(&#recv);
        #chunk_let
        #before
        #(#attrs)*
        #label for (#idx, #pat) in ::core::iter::Iterator::enumerate(#iter_call) {
            let #scope = #pf::IterationScope::enter(#idx);
            if let ::core::option::Option::Some(#c) = #idx.checked_add(#dist) {
                #fetch_ahead
            }
            #wait
            #body
        }
    }}))
}

/// `#[prefetch_next]` reached by itself: it was not inside a `#[kernel]`/`#[device_fn]`.
pub fn misplaced(_attr: TokenStream, item: TokenStream) -> TokenStream {
    let msg = "#[prefetch_next] only works on `for` loops inside a #[kernel] or #[device_fn] function (the enclosing macro rewrites the loop): mark the function with #[device_fn], or move the loop into a kernel";
    let err = syn::Error::new(Span::call_site(), msg).to_compile_error();
    // On an item, the error beside it; on a loop (rustc calls the attribute on the
    // expression too), a block, which is an expression where the error and the loop fit.
    match syn::parse2::<syn::Item>(item.clone()) {
        Ok(_) => quote!(#err #item),
        Err(_) => quote!({ #err #item }),
    }
}
