//! The attributes of `lookahead-cuda-std` (imported as `cuda_std`), which builds kernels
//! written for Rust-CUDA's `cuda_std` with rustc's own `nvptx64-nvidia-cuda` backend. They
//! follow `cuda_std_macros` 0.2's documented behaviour:
//!
//! * [`macro@kernel`]: the function becomes a PTX entry under its own name. Parameters are
//!   passed as Rust-CUDA passes them: a slice `&[T]` / `&mut [T]` as a pointer and a length,
//!   everything else (raw pointers, scalars, `Copy` structs) as itself; every parameter must
//!   be `Copy`. The function stays callable as written.
//! * [`macro@gpu_only`]: on the host the function's body panics (it can only run on a GPU).
//! * [`macro@address_space`]: `shared` / `constant` statics live in the GPU's shared or
//!   constant memory (moved there by the builder at link time); `global` is where statics
//!   already are.
//! * [`macro@externally_visible`]: keeps a `#[no_mangle]` function in the PTX.
//!
//! Misuse is a compile error with a span, never a panic.

use std::sync::atomic::{AtomicUsize, Ordering};

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as Tokens};
use quote::{format_ident, quote};
use syn::spanned::Spanned;
use syn::{FnArg, Ident, ItemFn, ItemStatic, Pat, Type};

/// A PTX entry in Rust-CUDA's convention (see the crate docs). Optional hints such as
/// `#[kernel(grid_dim = 1d, block_dim = 1d)]` are accepted and, as in Rust-CUDA, not used.
#[proc_macro_attribute]
pub fn kernel(_hints: TokenStream, item: TokenStream) -> TokenStream {
    expand_kernel(item.into())
        .unwrap_or_else(|e| e.to_compile_error())
        .into()
}

/// On the GPU the function as written; on the host a function with the same signature whose
/// body panics, saying it can only run on a GPU.
#[proc_macro_attribute]
pub fn gpu_only(attr: TokenStream, item: TokenStream) -> TokenStream {
    if !attr.is_empty() {
        return syn::Error::new(Span::call_site(), "#[gpu_only] takes no arguments")
            .to_compile_error()
            .into();
    }
    let f = match syn::parse::<ItemFn>(item) {
        Ok(f) => f,
        Err(e) => return e.to_compile_error().into(),
    };
    let (attrs, vis, sig) = (&f.attrs, &f.vis, &f.sig);
    let msg = format!("`{}` can only be used on the GPU", sig.ident);
    let mut host_sig = sig.clone();
    host_sig.abi = None;
    quote! {
        #[cfg(target_arch = "nvptx64")]
        #f
        #[cfg(not(target_arch = "nvptx64"))]
        #(#attrs)*
        #[allow(unused_variables)]
        #vis #host_sig { ::core::unimplemented!(#msg) }
    }
    .into()
}

/// `#[address_space(shared)]`, `#[address_space(constant)]` or `#[address_space(global)]` on
/// a `static` or `static mut`: where on the GPU it lives. A shared static is one copy per
/// block and starts uninitialised (its initial value is not used), as in CUDA; a constant
/// one keeps its value in the constant bank. On the host it is an ordinary static.
#[proc_macro_attribute]
pub fn address_space(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand_address_space(attr.into(), item.into())
        .unwrap_or_else(|e| e.to_compile_error())
        .into()
}

/// Keeps a `#[no_mangle]` function in the PTX even when no kernel calls it (for linking
/// with other PTX): the function must be `#[no_mangle]`.
#[proc_macro_attribute]
pub fn externally_visible(_attr: TokenStream, item: TokenStream) -> TokenStream {
    let f = match syn::parse::<ItemFn>(item) {
        Ok(f) => f,
        Err(e) => return e.to_compile_error().into(),
    };
    if !f.attrs.iter().any(|a| a.path().is_ident("no_mangle")) {
        return syn::Error::new(
            f.sig.ident.span(),
            "#[externally_visible] needs #[no_mangle] on the function: its name is what other PTX links against",
        )
        .to_compile_error()
        .into();
    }
    // Exported `#[no_mangle]` functions are kept by the builder's link step as they are.
    quote!(#f).into()
}

/// One parameter as the entry receives it, and how the function gets it back.
struct Lowered {
    entry: Tokens,
    rebuild: Tokens,
    copy_check: Option<Type>,
}

fn lower(arg: &FnArg) -> syn::Result<Lowered> {
    let FnArg::Typed(pt) = arg else {
        return Err(syn::Error::new(
            arg.span(),
            "a #[kernel] cannot take `self`: write it as a free function",
        ));
    };
    let name = match &*pt.pat {
        Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => p.ident.clone(),
        other => {
            return Err(syn::Error::new(
                other.span(),
                "#[kernel] parameters are plain names (`a: &[f32]`)",
            ))
        }
    };
    let ty = &*pt.ty;
    if let Type::Reference(r) = ty {
        if let Type::Slice(s) = &*r.elem {
            let elem = &s.elem;
            let (p, n) = (format_ident!("{}_ptr", name), format_ident!("{}_len", name));
            let (ptr_ty, make) = match r.mutability {
                Some(_) => (
                    quote!(*mut #elem),
                    quote!(::core::slice::from_raw_parts_mut(#p, #n)),
                ),
                None => (
                    quote!(*const #elem),
                    quote!(::core::slice::from_raw_parts(#p, #n)),
                ),
            };
            return Ok(Lowered {
                entry: quote!(#p: #ptr_ty, #n: usize),
                rebuild: quote!(unsafe { #make }),
                copy_check: None,
            });
        }
    }
    Ok(Lowered {
        entry: quote!(#name: #ty),
        rebuild: quote!(#name),
        copy_check: Some(ty.clone()),
    })
}

fn expand_kernel(item: Tokens) -> syn::Result<Tokens> {
    let f: ItemFn = syn::parse2(item)
        .map_err(|e| syn::Error::new(e.span(), format!("#[kernel] goes on a function: {e}")))?;
    let sig = &f.sig;
    if let syn::ReturnType::Type(_, ty) = &sig.output {
        return Err(syn::Error::new(
            ty.span(),
            "a #[kernel] returns nothing: write results through a pointer or `&mut [T]` parameter",
        ));
    }
    if !sig.generics.params.is_empty() {
        return Err(syn::Error::new(
            sig.generics.span(),
            "a #[kernel] cannot be generic: a PTX entry has one concrete signature",
        ));
    }
    let mut lowered = Vec::new();
    for arg in &sig.inputs {
        lowered.push(lower(arg)?);
    }
    let name = &sig.ident;
    let export = name.to_string();
    let entry = format_ident!("__cuda_std_entry_{}", name);
    let params = lowered.iter().map(|l| &l.entry);
    let args = lowered.iter().map(|l| &l.rebuild);
    let checks = lowered
        .iter()
        .filter_map(|l| l.copy_check.as_ref())
        .map(|ty| {
            quote! {
                const _: fn() = || {
                    fn kernel_parameter<T: ::cuda_std::__private::KernelParameter>() {}
                    kernel_parameter::<#ty>();
                };
            }
        });
    // The kernel's lint attributes (`#[allow(improper_ctypes_definitions)]`) are about its
    // signature, which the entry carries.
    let lints = (f.attrs.iter()).filter(|a| {
        ["allow", "warn", "deny", "forbid", "expect"]
            .iter()
            .any(|lint| a.path().is_ident(lint))
    });
    Ok(quote! {
        #[inline(always)]
        #[allow(clippy::missing_safety_doc)]
        #f

        #(#checks)*

        #[cfg(target_arch = "nvptx64")]
        #(#lints)*
        #[export_name = #export]
        #[allow(non_snake_case, clippy::missing_safety_doc, clippy::too_many_arguments)]
        pub unsafe extern "gpu-kernel" fn #entry(#(#params),*) {
            #[allow(unused_unsafe)]
            unsafe { #name(#(#args),*) }
        }
    })
}

fn expand_address_space(attr: Tokens, item: Tokens) -> syn::Result<Tokens> {
    let space: Ident = syn::parse2(attr).map_err(|e| {
        syn::Error::new(
            e.span(),
            "write #[address_space(shared)], #[address_space(constant)] or #[address_space(global)]",
        )
    })?;
    let st: ItemStatic = syn::parse2(item).map_err(|e| {
        syn::Error::new(
            e.span(),
            format!("#[address_space] goes on a `static` or `static mut`: {e}"),
        )
    })?;
    let prefix = match space.to_string().as_str() {
        "shared" => "__lookahead_addrspace_shared__",
        "constant" => "__lookahead_addrspace_constant__",
        "global" => return Ok(quote!(#st)),
        "local" => {
            return Err(syn::Error::new(
                space.span(),
                "`local` statics are not supported: local memory is per thread, so use a local variable",
            ))
        }
        other => {
            return Err(syn::Error::new(
                space.span(),
                format!("unknown address space `{other}`: shared, constant or global"),
            ))
        }
    };
    // Unique per use, also for statics of the same name in different functions.
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let krate = std::env::var("CARGO_CRATE_NAME").unwrap_or_default();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let symbol = format!("{prefix}{krate}_{}_{n}", st.ident);
    Ok(quote! {
        #[cfg_attr(target_arch = "nvptx64", export_name = #symbol)]
        #st
    })
}
