//! A `#[prefetch_next]` loop: its options, its form (a range, or a walk over a slice), and
//! what it fetches ahead.

use proc_macro2::{Span, TokenStream};
use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::{Attribute, Block, Expr, ExprForLoop, Ident, Pat, RangeLimits};

use super::prefetch::{parse_options, LevelChoice, LoopOptions};
use super::shown;
use crate::level::Level;

pub const FORMS: &str = "supported loops: `for i in a..b`, `for i in a..=b`, \
`for i in (a..b).step_by(s)`, `for x in xs.iter()`, `for x in xs.iter_mut()`, \
`for c in xs.chunks(k)` (and `chunks_mut`, `chunks_exact`, `chunks_exact_mut`), \
with `xs` a variable or field";

/// One loop with its `#[prefetch_next]`.
pub struct PrefetchLoop {
    pub options: LoopOptions,
    /// The loop, less its `#[prefetch_next]`.
    pub for_loop: ExprForLoop,
    pub form: Form,
    /// For `level = auto`: the levels it tries (empty for a fixed level).
    pub auto_levels: Vec<Level>,
}

pub enum Form {
    /// `for i in a..b` (`a..=b`, `(a..b).step_by(s)`).
    Range(RangeLoop),
    /// `for x in xs.iter()` (`iter_mut`) or `for c in xs.chunks(k)` (and the `_mut` and
    /// `_exact` forms).
    Slice(SliceLoop),
}

pub struct RangeLoop {
    pub start: Box<Expr>,
    pub end: Box<Expr>,
    pub inclusive: bool,
    pub step: Option<Expr>,
    /// The loop variable.
    pub var: Ident,
    pub targets: Vec<Target>,
}

pub struct SliceLoop {
    /// `xs`, a variable or field.
    pub receiver: Expr,
    pub method: Ident,
    /// `chunks(k)` and its kin: `k` (`None` for `iter`, `iter_mut`).
    pub chunk: Option<Expr>,
}

/// A range loop's prefetch target.
pub enum Target {
    /// A slice or view indexed by the loop variable: element `i + distance` is prefetched.
    Element(Expr),
    /// An expression of the loop variable naming what an iteration reads (such as
    /// `x.part(a[i]..a[i + 1])`): evaluated for iteration `i + distance`, all of it.
    Whole(Expr),
}

pub fn is_prefetch_attr(a: &Attribute) -> bool {
    let p = a.path();
    p.is_ident("prefetch_next")
        || p.segments
            .last()
            .is_some_and(|s| s.ident == "prefetch_next")
}

impl PrefetchLoop {
    /// The loop `f`, whose `#[prefetch_next]` was `attr`; `level = auto` is refused unless
    /// `allow_auto` (only a kernel has entries to choose between). `local_arrays` are the
    /// body's local arrays, which a loop without `of(..)` does not pick up.
    pub fn parse(
        f: &ExprForLoop,
        attr: &Attribute,
        allow_auto: bool,
        local_arrays: &[Ident],
    ) -> syn::Result<Self> {
        let options = parse_options(attr)?;
        if options.is_auto() && !allow_auto {
            return Err(syn::Error::new(
                options.level_span,
                "`level = auto` needs the enclosing #[kernel], which compiles its body once per \
                 candidate level (PTX entries chosen at launch by measurement); a #[device_fn] \
                 is not an entry: give this loop a fixed level (e.g. `level = l2`), or move the \
                 loop into the #[kernel]",
            ));
        }
        let auto_levels = match &options.level {
            LevelChoice::Auto(_) => auto_levels(f, &options),
            LevelChoice::Fixed(_) => Vec::new(),
        };
        let form = parse_form(f, &options, attr.span(), local_arrays)?;
        Ok(PrefetchLoop {
            options,
            for_loop: f.clone(),
            form,
            auto_levels,
        })
    }
}

/// The levels a `level = auto` loop tries: those listed, else `l2` and `l2_evict_last`, and
/// `bulk` when an iteration reads more than one element (a chunk, or an `of(..)` expression
/// of the loop variable): a bulk prefetch per element is the slowest choice there is.
fn auto_levels(f: &ExprForLoop, o: &LoopOptions) -> Vec<Level> {
    if let LevelChoice::Auto(listed) = &o.level {
        if !listed.is_empty() {
            return listed.clone();
        }
    }
    let mut levels = vec![Level::L2, Level::L2_EVICT_LAST];
    let chunked = matches!(strip(&f.expr), Expr::MethodCall(mc) if mc.method.to_string().starts_with("chunks"));
    let ranged = match &*f.pat {
        Pat::Ident(pi) => o.of.iter().any(|t| mentions(t, &pi.ident)),
        _ => false,
    };
    if chunked || ranged {
        levels.push(Level::BULK);
    }
    levels
}

fn parse_form(
    f: &ExprForLoop,
    o: &LoopOptions,
    attr_span: Span,
    local_arrays: &[Ident],
) -> syn::Result<Form> {
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
        return parse_range_loop(f, r, step, o, (attr_span, local_arrays)).map(Form::Range);
    }
    if let Expr::MethodCall(mc) = iter {
        if let Some(s) = parse_slice_loop(mc, o)? {
            return Ok(Form::Slice(s));
        }
    }
    Err(syn::Error::new(
        f.expr.span(),
        format!("#[prefetch_next] does not know what this loop reads ahead; {FORMS}"),
    ))
}

/// `for i in a..b` (`a..=b`, `.step_by(s)`).
fn parse_range_loop(
    f: &ExprForLoop,
    r: &syn::ExprRange,
    step: Option<Expr>,
    o: &LoopOptions,
    (attr_span, local_arrays): (Span, &[Ident]),
) -> syn::Result<RangeLoop> {
    let (Some(start), Some(end)) = (&r.start, &r.end) else {
        return Err(syn::Error::new(
            r.span(),
            format!(
                "#[prefetch_next] needs a bounded range (`a..b` or `a..=b`) so it never \
                 prefetches past the end; {FORMS}"
            ),
        ));
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
    let targets = range_targets(o, &f.body, &var, (attr_span, local_arrays))?;
    let element = targets.iter().find(|t| matches!(t, Target::Element(_)));
    if let (true, Some(Target::Element(t))) = (o.cache.is_some(), element) {
        return Err(syn::Error::new(
            t.span(),
            format!(
                "with `cache = c`, each `of(..)` target is a range of the cache's elements \
                 that iteration `{var}` reads, such as `of(off[{var}] as usize..off[{var} + 1] \
                 as usize)`"
            ),
        ));
    }
    Ok(RangeLoop {
        start: start.clone(),
        end: end.clone(),
        inclusive: matches!(r.limits, RangeLimits::Closed(_)),
        step,
        var,
        targets,
    })
}

/// `for x in xs.iter()` (`iter_mut`) and `for c in xs.chunks(k)` (and the `_mut`/`_exact`
/// forms); `None` when the call is none of these.
fn parse_slice_loop(mc: &syn::ExprMethodCall, o: &LoopOptions) -> syn::Result<Option<SliceLoop>> {
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
            "#[prefetch_next]: bind the slice to a variable first (`let xs = ...; for x in \
             xs.iter()`), so it is evaluated once",
        ));
    }
    if let Some(c) = &o.cache {
        return Err(syn::Error::new(
            c.span(),
            "`cache = c` goes on a range loop (`for i in a..b`) with `of(lo..hi)`, the \
             elements of `c` iteration `i` reads",
        ));
    }
    if let Some(span) = o.of_span {
        return Err(syn::Error::new(
            span,
            format!(
                "`of(...)` is for range loops (`for i in a..b`); a `.{method}()` loop \
                 prefetches from `{}` itself: remove `of(...)`",
                shown(recv)
            ),
        ));
    }
    Ok(Some(SliceLoop {
        receiver: (**recv).clone(),
        method: mc.method.clone(),
        chunk: by_chunk.then(|| mc.args[0].clone()),
    }))
}

/// The targets of a range loop over `var`: the slices the body indexes with it, or `of(..)`.
fn range_targets(
    o: &LoopOptions,
    body: &Block,
    var: &Ident,
    (attr_span, local_arrays): (Span, &[Ident]),
) -> syn::Result<Vec<Target>> {
    let targets: Vec<Target> = if o.of.is_empty() {
        let mut finder = IndexFinder {
            var,
            local_arrays,
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
            format!(
                "#[prefetch_next]: nothing to prefetch: the body indexes no slice with `{var}` \
                 (`x[{var}]`); name the slices with `of(x, y)`, or the range an iteration \
                 reads with `of(x.part(a..b))`"
            ),
        ));
    }
    Ok(targets)
}

/// One `of(..)` target of a range loop over `var`: an expression of the loop variable names
/// what an iteration reads; a slice or view (a name or a field) is indexed by it. Anything
/// else does not change from one iteration to the next, so there is nothing ahead to fetch.
fn of_target(t: &Expr, var: &Ident) -> syn::Result<Target> {
    if let Expr::Index(ix) = strip_reference(t) {
        if is_place(&ix.expr) {
            let base = shown(&ix.expr);
            return Err(syn::Error::new_spanned(
                t,
                format!(
                    "`of({})` names one element's value, not the data it lives in: write \
                     `of({base})` to fetch element `{var} + distance` of `{base}`, or \
                     `of({base}.at(k))` for the element at an index `k` computed from `{var}`",
                    shown(t)
                ),
            ));
        }
    }
    if mentions(t, var) {
        return Ok(Target::Whole(t.clone()));
    }
    if matches!(strip_reference(t), Expr::Path(_) | Expr::Field(_)) {
        return Ok(Target::Element(t.clone()));
    }
    let shown = shown(t);
    Err(syn::Error::new(
        t.span(),
        format!(
            "`of({shown})` does not use the loop variable `{var}`, so it names the same data \
             in every iteration and iteration `{var} + distance` has nothing of its own to \
             fetch. Write a slice (`of(x)`: element `{var} + distance`) or an expression of \
             `{var}` (`of(x.at(idx[{var}] as usize))`, `of(x.part(off[{var}]..off[{var} + \
             1]))`). A pointer chase, where the next address comes from this iteration's \
             load, cannot be fetched ahead: prefetch by hand once the address is known, \
             with `prefetch::prefetch_l2(ptr)` (docs/guide.md, \"Naming what an iteration \
             reads\")"
        ),
    ))
}

/// `e` without parentheses and invisible groups.
pub fn strip(e: &Expr) -> &Expr {
    match e {
        Expr::Paren(p) => strip(&p.expr),
        Expr::Group(g) => strip(&g.expr),
        _ => e,
    }
}

/// [`strip`], and without `&`.
fn strip_reference(e: &Expr) -> &Expr {
    match e {
        Expr::Paren(p) => strip_reference(&p.expr),
        Expr::Group(g) => strip_reference(&g.expr),
        Expr::Reference(r) => strip_reference(&r.expr),
        _ => e,
    }
}

/// A variable or a field of one.
fn is_place(e: &Expr) -> bool {
    match strip(e) {
        Expr::Path(_) => true,
        Expr::Field(f) => is_place(&f.base),
        _ => false,
    }
}

/// Finds slices indexed by the loop variable: `x[i]` with `x` a variable or field, not one
/// of the body's local arrays (in registers or on the stack: nothing to fetch).
struct IndexFinder<'a> {
    var: &'a Ident,
    local_arrays: &'a [Ident],
    found: Vec<Expr>,
}

impl IndexFinder<'_> {
    fn is_local_array(&self, base: &Expr) -> bool {
        matches!(strip(base), Expr::Path(p) if self.local_arrays.iter().any(|a| p.path.is_ident(a)))
    }
}

impl<'ast> Visit<'ast> for IndexFinder<'_> {
    fn visit_expr_index(&mut self, ix: &'ast syn::ExprIndex) {
        if let Expr::Path(p) = strip(&ix.index) {
            if p.path.is_ident(self.var) && is_place(&ix.expr) && !self.is_local_array(&ix.expr) {
                let base = (*ix.expr).clone();
                let key = shown_spaced(&base);
                if !self.found.iter().any(|f| shown_spaced(f) == key) {
                    self.found.push(base);
                }
            }
        }
        syn::visit::visit_expr_index(self, ix);
    }
    fn visit_item(&mut self, _: &'ast syn::Item) {}
}

fn shown_spaced(e: &Expr) -> String {
    quote::quote!(#e).to_string()
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

pub fn mentions(e: &Expr, var: &Ident) -> bool {
    let mut m = Mentions { var, found: false };
    m.visit_expr(e);
    m.found
}
