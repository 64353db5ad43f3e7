//! The code of a `#[prefetch_next]` loop: before each iteration's body, fetch (prefetch, or
//! request from the host) what iteration `i + distance` reads, never past the loop's end.

use proc_macro2::{Ident, Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::Expr;

use crate::ident::{distance, mixed};
use crate::level::Level;
use crate::parse::loops::{Form, PrefetchLoop, RangeLoop, SliceLoop, Target};
use crate::parse::prefetch::{Distance, LevelChoice, LoopOptions};
use crate::paths;
use crate::rewrite::Entry;

/// The loop `l` as `entry` runs it: `None` leaves it as written (a `level = auto` loop in an
/// entry whose level it does not try).
pub fn loop_for(l: &PrefetchLoop, entry: Entry) -> Option<Expr> {
    match (&l.options.level, entry) {
        (LevelChoice::Fixed(level), _) => Some(rewrite(l, *level, l.options.portable.is_some())),
        // No architecture guard: each level falls back by itself on older GPUs.
        (LevelChoice::Auto(_), Entry::At(level)) if l.auto_levels.contains(&level) => {
            Some(rewrite(l, level, true))
        }
        (LevelChoice::Auto(_), _) => None,
    }
}

/// The compile error for a level the target architecture lacks (unless `portable`).
fn arch_guard(o: &LoopOptions, level: Level, portable: bool) -> TokenStream {
    if portable {
        return quote!();
    }
    let (feature, needs, fallback, only) = match level {
        Level::L2_EVICT_LAST | Level::L2_EVICT_NORMAL => {
            ("sm_80", "sm_80 (Ampere) or newer", "plain", "sm_80+")
        }
        Level::BULK => (
            "sm_90",
            "sm_90 (Hopper) or newer for `cp.async.bulk.prefetch.L2.global`",
            "per-line",
            "sm_90",
        ),
        _ => return quote!(),
    };
    let msg = format!(
        "#[prefetch_next(level = {})] needs {needs}: this crate is being compiled for an older \
         GPU. Add `portable` to fall back to {fallback} `prefetch.global.L2` there, or build \
         only {only}",
        level.name()
    );
    quote_spanned! {o.level_span=>
        #[cfg(all(target_arch = "nvptx64", not(target_feature = #feature)))]
        ::core::compile_error!(#msg);
    }
}

/// What every loop rewrite shares: the options, and the names the generated code uses
/// (mixed-site, so they never clash with the user's).
struct Gen<'a> {
    o: &'a LoopOptions,
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

impl<'a> Gen<'a> {
    fn new(o: &'a LoopOptions, level: Level) -> Self {
        Gen {
            o,
            level: paths::level(level.info().variant),
            dist: match &o.distance {
                Distance::Auto(ds) => {
                    let (lo, hi) = (ds[0] as usize, ds[ds.len() - 1] as usize);
                    let d = distance();
                    quote_spanned!(o.distance_span=> (#d as usize).clamp(#lo, #hi))
                }
                Distance::Fixed(n) => {
                    let lit = syn::LitInt::new(&n.to_string(), o.distance_span);
                    quote!(#lit)
                }
            },
            pf: paths::prefetch(),
            ul: paths::uvm_loops(),
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
            Some(qe) => {
                let ty = paths::at(qe.span(), paths::request_queue());
                quote_spanned! {qe.span()=>
                    let #q: &#ty = &(#qe);
                }
            }
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

/// The loop prefetching at `level`.
fn rewrite(l: &PrefetchLoop, level: Level, portable: bool) -> Expr {
    let g = Gen::new(&l.options, level);
    let guard = arch_guard(&l.options, level, portable);
    match &l.form {
        Form::Range(r) => range_loop(&g, l, r, guard),
        Form::Slice(s) => slice_loop(&g, l, s, guard),
    }
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
                let cached = paths::at(t.span(), paths::host_cached());
                return quote_spanned! {t.span()=> {
                    let #var = #pf::index_like(#ahead, &#start);
                    #cached::prefetch(&(#c), #t);
                }};
            }
            match (t, &g.o.queue) {
                (Target::Element(t), None) => {
                    quote_spanned!(t.span()=> #pf::PrefetchSource::prefetch_element(&#t, #ahead, #level);)
                }
                (Target::Element(t), Some(_)) => quote_spanned! {t.span()=>
                    let _ = #ul::request_index(#q, #flag, &#t, #ahead, #level);
                },
                (Target::Whole(t), None) => quote_spanned! {t.span()=> {
                    let #var = #pf::index_like(#ahead, &#start);
                    #pf::PrefetchSource::prefetch_whole(&(#t), #level);
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
fn range_loop(g: &Gen<'_>, l: &PrefetchLoop, r: &RangeLoop, guard: TokenStream) -> Expr {
    let (f, var, start, end) = (&l.for_loop, &r.var, &r.start, &r.end);
    let (start_id, end_id, step_id) = (mixed("__lk_start"), mixed("__lk_end"), mixed("__lk_step"));
    let (ahead, j, dist, pf, scope) = (&g.ahead, &g.j, &g.dist, &g.pf, &g.scope);
    let (in_bounds, range_expr) = if r.inclusive {
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
    let (step_let, iter_expr) = match &r.step {
        Some(s) => (
            quote!(let #step_id: usize = #s;),
            quote!(::core::iter::Iterator::step_by(#range_expr, #step_id)),
        ),
        None => (quote!(let #step_id: usize = 1;), quote!(#range_expr)),
    };
    let fetch = range_fetches(g, &r.targets, var, &start_id);
    let before = g.requests_before(quote! {
        if let ::core::option::Option::Some(#ahead) =
            (#start_id as usize).checked_add(#j * #step_id)
        {
            if #in_bounds {
                #(#fetch)*
            }
        }
    });
    let (waits, queue_let) = (range_waits(g, &r.targets, var), g.queue_let());
    let (label, pat, body, attrs) = (&f.label, &f.pat, &f.body, &f.attrs);
    syn::parse_quote_spanned! {f.span()=> {
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
    }}
}

/// `for x in xs.iter()` (`iter_mut`) and `for c in xs.chunks(k)` (and the `_mut`/`_exact`
/// forms): before iteration `i`'s body, fetch element or chunk `i + distance` of `xs`.
fn slice_loop(g: &Gen<'_>, l: &PrefetchLoop, s: &SliceLoop, guard: TokenStream) -> Expr {
    let (f, recv, method_id) = (&l.for_loop, &s.receiver, &s.method);
    let by_elem = s.chunk.is_none();
    let (snap, idx, k, c) = (
        mixed("__lk_snap"),
        mixed("__lk_i"),
        mixed("__lk_k"),
        mixed("__lk_c"),
    );
    let (pf, ul, q, level, dist, scope, j) =
        (&g.pf, &g.ul, &g.q, &g.level, &g.dist, &g.scope, &g.j);
    let exact = method_id.to_string().contains("exact");
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
    let (chunk_let, iter_call) = match &s.chunk {
        Some(chunk) => (
            quote!(let #k: usize = #chunk;),
            quote!(#recv.#method_id(#k)),
        ),
        None => (quote!(), quote!(#recv.#method_id())),
    };
    let queue_let = g.queue_let();
    let (label, pat, body, attrs) = (&f.label, &f.pat, &f.body, &f.attrs);
    syn::parse_quote_spanned! {f.span()=> {
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
    }}
}

/// `#[prefetch_next]` reached by itself: it was not inside a `#[kernel]`/`#[device_fn]`.
pub fn misplaced(_attr: TokenStream, item: TokenStream) -> TokenStream {
    let msg = "#[prefetch_next] only works on `for` loops inside a #[kernel] or #[device_fn] \
               function (the enclosing macro rewrites the loop): mark the function with \
               #[device_fn], or move the loop into a kernel (a loop that a `macro_rules!` \
               writes is not seen by the kernel's macro either: write it in the body)";
    let err = syn::Error::new(Span::call_site(), msg).to_compile_error();
    // On an item, the error beside it; on a loop (rustc calls the attribute on the
    // expression too), a block, which is an expression where the error and the loop fit.
    match syn::parse2::<syn::Item>(item.clone()) {
        Ok(_) => quote!(#err #item),
        Err(_) => quote!({ #err #item }),
    }
}
