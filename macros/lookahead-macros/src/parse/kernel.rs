//! `#[kernel]` and `#[device_fn]`: options, signature checks, parameters, and the
//! `#[prefetch_next]` loops of the body.

use proc_macro2::{Span, TokenStream};
use syn::ext::IdentExt;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr, Ident, ItemFn, Meta, Path, ReturnType, Token};

use super::params::{classify, Param};
use super::{combine, is_negative, shown};
use crate::level::Level;
use crate::parse::pipeline::Copy;
use crate::rewrite::{self, AutoSummary, Entry};

/// The options of `#[kernel(..)]`.
#[derive(Default)]
pub struct Options {
    pub same_len: Vec<Vec<Ident>>,
    pub min_len: Vec<(Ident, Expr)>,
    pub ptx: Option<Path>,
    pub bounds: Option<LaunchBounds>,
}

/// CUDA's `__launch_bounds__`: the most threads per block the kernel is launched with and,
/// optionally, the blocks per multiprocessor it must fit (which caps its registers). Each is
/// a `u32` literal or constant.
#[derive(Clone)]
pub struct LaunchBounds {
    pub threads: Expr,
    pub blocks_per_sm: Option<Expr>,
}

/// A parsed and checked `#[kernel]`.
pub struct Kernel {
    /// The function as written.
    pub f: ItemFn,
    pub params: Vec<Param>,
    pub opts: Options,
    /// For `level = auto`: the candidate levels, one entry each (empty: no such loop).
    pub levels: Vec<Level>,
    /// For `level = auto`: the distances its `distance = auto` loops try (empty: none).
    pub distances: Vec<u64>,
    /// For `stages = auto` / `copy = auto`: the candidate pipelines, one entry each (empty:
    /// no such loop).
    pub pipelines: Vec<(Copy, usize)>,
}

/// A parsed and checked `#[device_fn]`.
pub struct DeviceFn {
    /// The function as written.
    pub f: ItemFn,
}

const KNOWN_OPTIONS: &str = "known #[kernel] options: `same_len(a, b, ...)`, `min_len(a = N)`, \
     `launch_bounds(threads = N, blocks_per_sm = M)`, `ptx = path`";

pub fn is_int_literal(e: &Expr) -> bool {
    matches!(
        e,
        Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(_),
            ..
        })
    )
}

impl Kernel {
    pub fn parse(attr: TokenStream, item: TokenStream) -> syn::Result<Kernel> {
        let f: ItemFn = syn::parse2(item)
            .map_err(|e| syn::Error::new(e.span(), format!("#[kernel] goes on a function: {e}")))?;
        if let Some(e) = check_placement(&f) {
            return Err(e);
        }
        let mut errs = check_signature(&f, true);
        errs.extend(check_repeated(&f, "kernel"));
        let opts = parse_options(attr).unwrap_or_else(|e| {
            errs.push(e);
            Options::default()
        });
        let mut params = Vec::new();
        for arg in &f.sig.inputs {
            match classify(arg) {
                Ok(p) => params.push(p),
                Err(e) => errs.push(e),
            }
        }
        errs.extend(check_length_rules(&opts, &params));
        // The loops are checked as the plain entry rewrites them.
        let (loop_errs, summary) = rewrite::loops(&mut f.block.clone(), Entry::Plain, true);
        errs.extend(loop_errs);
        let AutoSummary {
            levels,
            distances,
            pipelines,
        } = summary;
        if !levels.is_empty() && !pipelines.is_empty() {
            errs.push(syn::Error::new(
                f.sig.ident.span(),
                "a #[kernel] tunes either its prefetch hints (`level = auto`) or its pipelines \
                 (`stages = auto`, `copy = auto`), not both: each is compiled once per \
                 candidate; give one kind of loop fixed options",
            ));
        }
        if let Some(e) = combine(errs) {
            return Err(e);
        }
        Ok(Kernel {
            f,
            params,
            opts,
            levels,
            distances,
            pipelines,
        })
    }
}

/// A `#[kernel]` inside an `impl` or `trait` block, which the attribute is not told (see
/// `crate::context`): the error, in place of the expansion's own errors about items those
/// blocks cannot hold. With a `self` receiver, its own error says more.
fn check_placement(f: &ItemFn) -> Option<syn::Error> {
    if f.sig.receiver().is_some() {
        return None;
    }
    let block = crate::context::enclosing_block(Span::call_site())?;
    let (name, a) = (
        f.sig.ident.unraw(),
        if block == "impl" { "an" } else { "a" },
    );
    Some(syn::Error::new(
        Span::call_site(),
        format!("a #[kernel] cannot stand in {a} `{block}` block: a kernel is a free function, launched through the module the macro writes beside it; move `fn {name}` out of the `{block}` to the module, and launch it as `{name}::launch(on, cfg, ..)`"),
    ))
}

impl DeviceFn {
    pub fn parse(attr: TokenStream, item: TokenStream) -> syn::Result<DeviceFn> {
        if !attr.is_empty() {
            return Err(syn::Error::new(
                attr.span(),
                "#[device_fn] takes no options",
            ));
        }
        let f: ItemFn = syn::parse2(item).map_err(|e| {
            syn::Error::new(e.span(), format!("#[device_fn] goes on a function: {e}"))
        })?;
        let mut errs = check_signature(&f, false);
        errs.extend(check_repeated(&f, "device_fn"));
        errs.extend(rewrite::loops(&mut f.block.clone(), Entry::Plain, false).0);
        match combine(errs) {
            Some(e) => Err(e),
            None => Ok(DeviceFn { f }),
        }
    }
}

/// `launch_bounds(threads = N)` or `launch_bounds(threads = N, blocks_per_sm = M)`.
fn parse_launch_bounds(l: &syn::MetaList) -> syn::Result<LaunchBounds> {
    let usage =
        "write `launch_bounds(threads = 256)` or `launch_bounds(threads = 256, blocks_per_sm = 2)`";
    let pairs =
        Punctuated::<syn::MetaNameValue, Token![,]>::parse_terminated.parse2(l.tokens.clone())?;
    let (mut threads, mut blocks) = (None, None);
    for p in pairs {
        let key = p.path.get_ident().map(|i| i.to_string());
        let (slot, most) = match key.as_deref() {
            Some("threads") => (&mut threads, 1024),
            Some("blocks_per_sm") => (&mut blocks, u32::MAX),
            _ => return Err(syn::Error::new(p.path.span(), usage)),
        };
        if let Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(i),
            ..
        }) = &p.value
        {
            match i.base10_parse::<u32>() {
                Ok(v) if v > 0 && v <= most => {}
                _ => {
                    return Err(syn::Error::new(
                        i.span(),
                        "a launch bound is a positive `u32`; `threads` is at most 1024",
                    ))
                }
            }
        }
        *slot = Some(p.value);
    }
    let threads = threads.ok_or_else(|| syn::Error::new(l.span(), usage))?;
    Ok(LaunchBounds {
        threads,
        blocks_per_sm: blocks,
    })
}

/// `min_len(a = N, ..)`: each a slice parameter and a length that is not negative.
fn parse_min_len(l: &syn::MetaList, o: &mut Options) -> syn::Result<()> {
    let metas = Punctuated::<Meta, Token![,]>::parse_terminated.parse2(l.tokens.clone())?;
    for meta in metas {
        let p = match meta {
            Meta::NameValue(p) => p,
            // `min_len(y)` or `min_len(y(..))`: the length is missing.
            other => {
                let name = shown(other.path());
                return Err(syn::Error::new(
                    other.span(),
                    format!(
                        "`min_len({name})` needs the least length `{name}` may have: write \
                         `min_len({name} = N)`, e.g. `min_len({name} = 1)`"
                    ),
                ));
            }
        };
        let id = p
            .path
            .get_ident()
            .cloned()
            .ok_or_else(|| syn::Error::new(p.path.span(), "write `min_len(param = N)`"))?;
        if is_negative(&p.value) {
            return Err(syn::Error::new(
                p.value.span(),
                format!(
                    "`min_len({id} = ..)` is a length, at least 0: write a `usize` such as \
                     `min_len({id} = 1)`"
                ),
            ));
        }
        o.min_len.push((id, p.value));
    }
    Ok(())
}

fn parse_options(attr: TokenStream) -> syn::Result<Options> {
    let mut o = Options::default();
    let metas = Punctuated::<Meta, Token![,]>::parse_terminated.parse2(attr)?;
    for meta in metas {
        let key = meta.path().get_ident().map(|i| i.to_string());
        match (key.as_deref(), &meta) {
            (Some("same_len"), Meta::List(l)) => {
                let ids =
                    Punctuated::<Ident, Token![,]>::parse_terminated.parse2(l.tokens.clone())?;
                if ids.len() < 2 {
                    return Err(syn::Error::new(
                        l.span(),
                        "`same_len` needs at least two slice parameters",
                    ));
                }
                if let Some(twice) = named_twice(&ids) {
                    return Err(syn::Error::new(
                        twice.span(),
                        format!(
                            "`same_len` names `{twice}` twice: a slice always has its own length, \
                             so the check could never fail; name each slice once, and at least \
                             two different ones (`same_len(x, y)`)"
                        ),
                    ));
                }
                o.same_len.push(ids.into_iter().collect());
            }
            (Some("min_len"), Meta::List(l)) => parse_min_len(l, &mut o)?,
            (Some("launch_bounds"), Meta::List(l)) => o.bounds = Some(parse_launch_bounds(l)?),
            (Some("ptx"), Meta::NameValue(nv)) => match &nv.value {
                Expr::Path(p) => o.ptx = Some(p.path.clone()),
                other => {
                    return Err(syn::Error::new(
                        other.span(),
                        "`ptx` takes a path, e.g. `ptx = crate::PTX`",
                    ))
                }
            },
            _ => {
                return Err(syn::Error::new(
                    meta.span(),
                    format!(
                        "unknown or malformed #[kernel] option `{}`; {KNOWN_OPTIONS}",
                        shown(&meta)
                    ),
                ))
            }
        }
    }
    Ok(o)
}

/// Checks common to kernels and device functions; `kernel` adds the kernel-only ones.
fn check_signature(f: &ItemFn, kernel: bool) -> Vec<syn::Error> {
    let mut errs = Vec::new();
    let what = if kernel {
        "a #[kernel]"
    } else {
        "a #[device_fn]"
    };
    let sig = &f.sig;
    if let Some(a) = &sig.asyncness {
        errs.push(syn::Error::new(
            a.span(),
            format!("{what} cannot be `async`: GPU code has no executor; remove `async`"),
        ));
    }
    if kernel {
        errs.extend(check_kernel_signature(f));
    }
    errs
}

fn check_kernel_signature(f: &ItemFn) -> Vec<syn::Error> {
    let mut errs = Vec::new();
    let sig = &f.sig;
    let mut refuse = |span: Span, msg: &str| errs.push(syn::Error::new(span, msg));
    if let Some(c) = &sig.constness {
        refuse(c.span(), "a #[kernel] cannot be `const`");
    }
    if let Some(abi) = &sig.abi {
        refuse(
            abi.span(),
            "do not write an ABI on a #[kernel]: the macro adds `extern \"gpu-kernel\"` on the \
             GPU target itself",
        );
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        refuse(
            sig.generics.span(),
            "a #[kernel] cannot be generic: a PTX entry needs one concrete instantiation; \
             write one kernel per type (a `macro_rules!` can stamp them out), each calling a \
             generic #[device_fn]",
        );
    }
    if let ReturnType::Type(_, ty) = &sig.output {
        refuse(
            ty.span(),
            "a #[kernel] cannot return a value: write results through a `&mut [T]` parameter",
        );
    }
    if let Some(v) = &sig.variadic {
        refuse(v.span(), "a #[kernel] cannot be variadic");
    }
    for a in &f.attrs {
        let p = a.path();
        if p.is_ident("no_mangle") || p.is_ident("export_name") || p.is_ident("unsafe") {
            refuse(
                a.span(),
                "do not write #[no_mangle]/#[export_name] on a #[kernel]: the macro exports it \
                 under its own name",
            );
        }
    }
    let name = sig.ident.unraw().to_string();
    if !name.is_ascii() {
        refuse(
            sig.ident.span(),
            &format!(
                "a kernel's name is its PTX entry's name, which is ASCII only: rename `{name}` \
                 with ASCII letters, digits and `_`"
            ),
        );
    }
    errs
}

/// `#[kernel]` or `#[device_fn]` written again under the first one.
fn check_repeated(f: &ItemFn, what: &str) -> Option<syn::Error> {
    let again = f.attrs.iter().find_map(|a| {
        let last = a.path().segments.last()?.ident.to_string();
        matches!(last.as_str(), "kernel" | "device_fn").then_some((a, last))
    })?;
    let (attr, other) = again;
    let msg = if other == what {
        format!(
            "#[{what}] is written twice on `{}`: remove one",
            f.sig.ident
        )
    } else {
        format!(
            "`{}` has both #[{what}] and #[{other}]: a #[kernel] is an entry the host launches, \
             a #[device_fn] a helper kernels call; keep one",
            f.sig.ident
        )
    };
    Some(syn::Error::new(attr.span(), msg))
}

/// The first name in `ids` that an earlier one repeats.
fn named_twice(ids: &Punctuated<Ident, Token![,]>) -> Option<&Ident> {
    ids.iter()
        .enumerate()
        .find(|(k, id)| ids.iter().take(*k).any(|earlier| earlier == *id))
        .map(|(_, id)| id)
}

/// `same_len` and `min_len` name slice parameters of the kernel.
fn check_length_rules(o: &Options, params: &[Param]) -> Vec<syn::Error> {
    let slice = |id: &Ident| params.iter().any(|p| p.name == *id && p.is_slice());
    let named = o.same_len.iter().flatten().map(|id| (id, "same_len"));
    let named = named.chain(o.min_len.iter().map(|(id, _)| (id, "min_len")));
    named
        .filter(|(id, _)| !slice(id))
        .map(|(id, rule)| {
            syn::Error::new(
                id.span(),
                format!("`{rule}`: `{id}` is not a slice parameter of this kernel"),
            )
        })
        .collect()
}
