//! Passes over the body of a `#[kernel]` or `#[device_fn]`: its `#[prefetch_next]` loops
//! (each parsed by `parse::loops`, its code from `generate::prefetch`), then the emulator's
//! instrumentation of read-modify-writes (`updates`); `nested` reports the attribute where
//! the pass cannot reach it (a nested function, a `macro_rules!`).

mod nested;
pub mod updates;

use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::visit_mut::VisitMut;
use syn::{Attribute, Block, Expr, Ident, Pat};

use crate::generate;
use crate::level::Level;
use crate::parse::loops::{is_prefetch_attr, PrefetchLoop, FORMS};
use crate::parse::pipeline::{self, Copy, PipelinedLoop};
use crate::parse::prefetch::Distance;

/// Which entry of a kernel a body is rewritten for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// The kernel's own entry (or a device function): `level = auto` loops do not prefetch.
    Plain,
    /// The entry at a candidate level: `level = auto` loops that list it prefetch at it.
    At(Level),
    /// The entry of a candidate pipeline: `stages = auto` / `copy = auto` loops copy with
    /// this kind through this many stages (in the plain entry, with `load_store` through 2).
    Piped(Copy, usize),
}

/// What a body's auto-tuned loops ask for: the kernel's candidate levels and distances, or
/// its candidate pipelines.
#[derive(Default)]
pub struct AutoSummary {
    /// Every level some `level = auto` loop tries, sorted (empty: there is no such loop).
    pub levels: Vec<Level>,
    /// Every distance some `distance = auto` loop tries, sorted (empty: none has one).
    pub distances: Vec<u64>,
    /// The (copy, stages) every `stages = auto` / `copy = auto` loop tries, sorted (empty:
    /// there is no such loop). The loops of one kernel share its entries, so they list the
    /// same candidates.
    pub pipelines: Vec<(Copy, usize)>,
}

/// Rewrites every `#[prefetch_next]` loop in `block` for `entry` (inner loops first, so an
/// outer loop is parsed with its inner ones rewritten); returns the errors found and what
/// the `level = auto` loops ask for. `level = auto` is an error unless `allow_auto`.
pub fn loops(block: &mut Block, entry: Entry, allow_auto: bool) -> (Vec<syn::Error>, AutoSummary) {
    let mut r = Rewriter {
        local_arrays: local_arrays(block),
        errors: Vec::new(),
        entry,
        allow_auto,
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
    local_arrays: Vec<Ident>,
    errors: Vec<syn::Error>,
    entry: Entry,
    allow_auto: bool,
    summary: AutoSummary,
}

impl Rewriter {
    /// The loop `e`, if it has a `#[prefetch_next]`.
    fn rewrite(&mut self, e: &mut Expr) {
        let Expr::ForLoop(f) = e else { return };
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
        if pipeline::is_pipeline(&attr) {
            match PipelinedLoop::parse(f, &attr) {
                Ok(l) => match self.pipeline_for(&l, &attr) {
                    Ok((copy, stages)) => *e = generate::pipeline::pipelined_loop(&l, copy, stages),
                    Err(err) => self.errors.push(err),
                },
                Err(err) => self.errors.push(err),
            }
            return;
        }
        let l = match PrefetchLoop::parse(f, &attr, self.allow_auto, &self.local_arrays) {
            Ok(l) => l,
            Err(err) => return self.errors.push(err),
        };
        self.summary.levels.extend(&l.auto_levels);
        if let Distance::Auto(ds) = &l.options.distance {
            self.summary.distances.extend(ds);
        }
        if let Some(new) = generate::prefetch::loop_for(&l, self.entry) {
            *e = new;
        }
    }

    /// How the pipelined loop `l` copies in this entry: as written, or for `stages = auto`
    /// / `copy = auto` the entry's candidate (`load_store` through 2 stages in the plain
    /// entry: the baseline without asynchronous copies).
    fn pipeline_for(&mut self, l: &PipelinedLoop, attr: &Attribute) -> syn::Result<(Copy, usize)> {
        let candidates = l.options.candidates();
        if !l.options.is_auto() {
            return Ok(candidates[0]);
        }
        if !self.allow_auto {
            return Err(syn::Error::new_spanned(
                attr,
                "`stages = auto` and `copy = auto` need the enclosing #[kernel], which compiles \
                 its body once per candidate (PTX entries chosen at launch by measurement); a \
                 #[device_fn] is not an entry: give this loop fixed `stages` and `copy`, or \
                 move the loop into the #[kernel]",
            ));
        }
        let s = &mut self.summary.pipelines;
        if s.is_empty() {
            *s = candidates.clone();
        } else if *s != candidates {
            return Err(syn::Error::new_spanned(
                attr,
                "the `stages = auto` / `copy = auto` loops of one kernel share its entries \
                 (one per candidate): give them the same `stages` and `copy` options",
            ));
        }
        Ok(match self.entry {
            Entry::Piped(copy, stages) => (copy, stages),
            _ => (Copy::LoadStore, 2),
        })
    }
}

impl VisitMut for Rewriter {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        // Inner loops first.
        syn::visit_mut::visit_expr_mut(self, e);
        if let Expr::ForLoop(_) = e {
            self.rewrite(e);
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
            // Nested items are not part of this function, but a `#[prefetch_next]` in one
            // is misplaced.
            syn::Stmt::Item(item) => return self.errors.extend(nested::errors(item)),
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

/// The names the body binds to arrays (`let w = [..];`, `let w: [T; N] = ..;`).
fn local_arrays(block: &Block) -> Vec<Ident> {
    #[derive(Default)]
    struct Finder(Vec<Ident>);
    impl<'ast> Visit<'ast> for Finder {
        fn visit_local(&mut self, l: &'ast syn::Local) {
            let init_is_array = (l.init.as_ref())
                .is_some_and(|i| matches!(&*i.expr, Expr::Array(_) | Expr::Repeat(_)));
            let (pat, typed_array) = match &l.pat {
                Pat::Type(t) => (&*t.pat, matches!(&*t.ty, syn::Type::Array(_))),
                p => (p, false),
            };
            if let (Pat::Ident(p), true) = (pat, init_is_array || typed_array) {
                self.0.push(p.ident.clone());
            }
            syn::visit::visit_local(self, l);
        }
        fn visit_item(&mut self, _: &'ast syn::Item) {}
    }
    let mut f = Finder::default();
    f.visit_block(block);
    f.0
}
