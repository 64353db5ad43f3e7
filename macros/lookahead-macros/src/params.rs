//! Kernel parameter kinds: what a parameter type lowers to on the GPU and what the host
//! launcher accepts for it.
//!
//! Every name this module makes up (lowered pointers and lengths, bound values) has the
//! mixed-site span, so it never clashes with a parameter name the user wrote.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{FnArg, GenericArgument, Ident, Pat, PathArguments, Type};

pub const SCALARS: &[&str] = &[
    "f32", "f64", "i8", "i16", "i32", "i64", "isize", "u8", "u16", "u32", "u64", "usize",
];

pub const ACCEPTED: &str = "accepted kinds: scalars (f32, f64, i8, i16, i32, i64, isize, \
u8, u16, u32, u64, usize); `&[T]` / `&mut [T]` (device or managed memory); `DeviceSlice<T>` / \
`DeviceSliceMut<T>` (device memory only); `ManagedSlice<T>` / `ManagedSliceMut<T>` (managed \
memory only), with `T` a DeviceCopy type; by value, arrays `[T; N]` and structs with \
`#[derive(DeviceCopy)]` or `#[derive(KernelParams)]`";

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum ViewKind {
    Device,
    Managed,
}

pub enum Kind {
    /// A primitive scalar, passed by value; the launcher takes exactly that type.
    Scalar,
    /// `&[T]` (`mutable` false) or `&mut [T]`.
    Slice { mutable: bool, elem: Type },
    /// `DeviceSlice<T>` & co.
    View {
        mutable: bool,
        mem: ViewKind,
        name: Ident,
        elem: Type,
    },
    /// Any other type, passed by value: a `KernelParam` (DeviceCopy or KernelParams struct,
    /// array); the launcher takes a `KernelValue` of it.
    Value,
}

pub struct Param {
    pub name: Ident,
    pub ty: Type,
    pub kind: Kind,
}

fn strip(ty: &Type) -> &Type {
    match ty {
        Type::Paren(p) => strip(&p.elem),
        Type::Group(g) => strip(&g.elem),
        _ => ty,
    }
}

fn is_scalar(ty: &Type) -> bool {
    match strip(ty) {
        Type::Path(p) if p.qself.is_none() && p.path.segments.len() == 1 => {
            let seg = &p.path.segments[0];
            seg.arguments.is_empty() && SCALARS.iter().any(|s| seg.ident == s)
        }
        _ => false,
    }
}

/// `Some((mutable, memory, view name, element type))` when `ty` is one of the four view
/// types (`Some(Err)` when it is one with the wrong arguments), `None` otherwise.
pub fn view_of(ty: &Type) -> Option<syn::Result<(bool, ViewKind, Ident, Type)>> {
    let Type::Path(p) = strip(ty) else {
        return None;
    };
    let seg = p.path.segments.last()?;
    let (mutable, mem) = match seg.ident.to_string().as_str() {
        "DeviceSlice" => (false, ViewKind::Device),
        "DeviceSliceMut" => (true, ViewKind::Device),
        "ManagedSlice" => (false, ViewKind::Managed),
        "ManagedSliceMut" => (true, ViewKind::Managed),
        _ => return None,
    };
    let id = &seg.ident;
    let elem = match &seg.arguments {
        PathArguments::AngleBracketed(a) if a.args.len() == 1 => match &a.args[0] {
            GenericArgument::Type(t) => Ok(t.clone()),
            other => Err(syn::Error::new(
                other.span(),
                format!("`{id}` needs one element type: `{id}<T>`"),
            )),
        },
        _ => Err(syn::Error::new(
            seg.span(),
            format!("`{id}` needs one element type: `{id}<T>`"),
        )),
    };
    Some(elem.map(|e| (mutable, mem, seg.ident.clone(), e)))
}

fn err(span: Span, name: &str, what: &str) -> syn::Error {
    syn::Error::new(
        span,
        format!("kernel parameter `{name}` {what}; {ACCEPTED}"),
    )
}

fn tokens(t: &impl quote::ToTokens) -> String {
    quote!(#t).to_string().replace(' ', "")
}

pub fn classify(arg: &FnArg) -> syn::Result<Param> {
    let pt = match arg {
        FnArg::Receiver(r) => {
            return Err(syn::Error::new(
                r.span(),
                "a kernel cannot take `self`: write it as a free function",
            ))
        }
        FnArg::Typed(pt) => pt,
    };
    let name = match &*pt.pat {
        Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => pi.ident.clone(),
        other => {
            return Err(syn::Error::new(
                other.span(),
                "kernel parameters must be plain names (`x: &[f32]`), not patterns",
            ))
        }
    };
    let ty = (*pt.ty).clone();
    let kind = kind_of(&name.to_string(), &ty)?;
    Ok(Param { name, ty, kind })
}

fn kind_of(n: &str, ty: &Type) -> syn::Result<Kind> {
    if is_scalar(ty) {
        return Ok(Kind::Scalar);
    }
    match strip(ty) {
        Type::Reference(r) => reference_kind(n, r),
        Type::Path(p) if p.qself.is_none() => {
            if let Some(view) = view_of(ty) {
                let (mutable, mem, name, elem) = view?;
                return Ok(Kind::View {
                    mutable,
                    mem,
                    name,
                    elem,
                });
            }
            let id = p.path.segments.last().map(|s| s.ident.to_string());
            match id.as_deref().and_then(refused_path) {
                Some(what) => Err(err(ty.span(), n, &what)),
                None => Ok(Kind::Value),
            }
        }
        Type::Array(_) => Ok(Kind::Value),
        Type::Ptr(p) => Err(err(
            p.span(),
            n,
            "is a raw pointer: kernels take slices, so the launcher can pass and check the length (a raw pointer may be a field of a DeviceCopy struct)",
        )),
        Type::ImplTrait(_) => Err(err(
            ty.span(),
            n,
            "is `impl Trait`, a generic parameter: kernels must be concrete (write one kernel per type)",
        )),
        Type::Tuple(_) => Err(err(
            ty.span(),
            n,
            "is a tuple (pass its fields as separate parameters, or group them in a #[derive(DeviceCopy)] struct)",
        )),
        _ => Err(err(
            ty.span(),
            n,
            &format!(
                "has type `{}`, which is not a device-representable kernel parameter",
                tokens(ty)
            ),
        )),
    }
}

fn reference_kind(n: &str, r: &syn::TypeReference) -> syn::Result<Kind> {
    if let Some(lt) = &r.lifetime {
        return Err(syn::Error::new(
            lt.span(),
            format!("kernel parameter `{n}`: leave out the lifetime; a kernel's slices live for the whole launch"),
        ));
    }
    match strip(&r.elem) {
        Type::Slice(s) => Ok(Kind::Slice {
            mutable: r.mutability.is_some(),
            elem: (*s.elem).clone(),
        }),
        Type::Array(a) => {
            let (elem, len) = (tokens(&a.elem), tokens(&a.len));
            Err(syn::Error::new(
                r.span(),
                format!("kernel parameter `{n}` is a reference to an array: pass the array by value (`{n}: [{elem}; {len}]`, copied into the kernel's parameters, for small constant data) or a slice (`{n}: &[{elem}]`, in GPU memory)"),
            ))
        }
        Type::Path(p) if p.path.is_ident("str") => Err(syn::Error::new(
            r.span(),
            format!("kernel parameter `{n}` is a `&str`: kernels take no text; pass its bytes as `{n}: &[u8]` (`s.as_bytes()` on the host, copied to the GPU)"),
        )),
        other => Err(err(
            other.span(),
            n,
            &format!(
                "is a reference to a single value (`&{}`), which a kernel cannot take: pass a DeviceCopy value by value (`{n}: {}`), or a slice `&[T]` / `&mut [T]`",
                tokens(other),
                tokens(other)
            ),
        )),
    }
}

/// The message for a path type that is certainly not a kernel parameter, or `None`.
fn refused_path(id: &str) -> Option<String> {
    Some(match id {
        "Vec" | "String" | "Box" | "Rc" | "Arc" => format!(
            "has type `{id}`, which owns host memory and is not `Copy`: it cannot be passed to the GPU"
        ),
        "bool" | "char" => {
            format!("has type `{id}`, which has no fixed device representation (use u8 or u32)")
        }
        "f16" | "i128" | "u128" => format!("has type `{id}`, which kernels do not support"),
        "CudaSlice" | "UnifiedSlice" | "ManagedBuffer" => format!(
            "has the host type `{id}`: declare the device view (`&[T]`, `&mut [T]`, `ManagedSlice<T>`...) and pass the `{id}` to the launcher"
        ),
        _ => return None,
    })
}

/// The launcher's target memory: `<__On as LaunchOn>::Memory`.
pub fn memory() -> TokenStream {
    quote!(<__On as ::lookahead::launch::LaunchOn>::Memory)
}

fn space() -> TokenStream {
    let m = memory();
    quote!(<#m as ::lookahead::launch::TargetMemory>)
}

/// The argument list the launcher builds (a mixed-site name).
pub fn args_ident() -> Ident {
    Ident::new("__lk_args", Span::mixed_site())
}

impl Param {
    fn ptr_ident(&self) -> Ident {
        format_ident!("{}__ptr", self.name, span = Span::mixed_site())
    }
    pub fn len_ident(&self) -> Ident {
        format_ident!("{}__len", self.name, span = Span::mixed_site())
    }

    pub fn is_slice(&self) -> bool {
        matches!(self.kind, Kind::Slice { .. } | Kind::View { .. })
    }

    /// The element type of a slice or view.
    fn elem(&self) -> Option<(&Type, bool)> {
        match &self.kind {
            Kind::Slice { mutable, elem } | Kind::View { mutable, elem, .. } => {
                Some((elem, *mutable))
            }
            _ => None,
        }
    }

    /// A compile-time check of the parameter's type (with its span): slice elements are
    /// `DeviceCopy`, by-value types `KernelParam`.
    pub fn type_check(&self) -> TokenStream {
        let check = quote!(::lookahead_device::param::check);
        match (&self.kind, self.elem()) {
            (_, Some((elem, _))) => {
                quote_spanned!(elem.span()=> const _: () = #check::device_copy::<#elem>();)
            }
            (Kind::Value, _) => {
                let ty = &self.ty;
                quote_spanned!(ty.span()=> const _: () = #check::kernel_param::<#ty>();)
            }
            _ => quote!(),
        }
    }

    /// Parameters of the PTX entry.
    pub fn lowered(&self) -> TokenStream {
        let (name, ty) = (&self.name, &self.ty);
        let (p, l) = (self.ptr_ident(), self.len_ident());
        match self.elem() {
            Some((elem, true)) => quote!(#p: *mut #elem, #l: usize),
            Some((elem, false)) => quote!(#p: *const #elem, #l: usize),
            None => quote!(#name: #ty),
        }
    }

    /// The expression rebuilding the typed value inside the entry.
    pub fn rebuild(&self) -> TokenStream {
        let name = &self.name;
        let (p, l) = (self.ptr_ident(), self.len_ident());
        let v = quote!(::lookahead_device::view);
        match &self.kind {
            Kind::Scalar | Kind::Value => quote!(#name),
            Kind::Slice { mutable: false, .. } => quote!(#v::slice_from_raw(#p, #l)),
            Kind::Slice { mutable: true, .. } => quote!(#v::slice_from_raw_mut(#p, #l)),
            Kind::View {
                name: view, elem, ..
            } => quote!(#v::#view::<#elem>::from_raw_parts(#p, #l)),
        }
    }

    /// The host launcher's parameter (`__On` is the launcher's `LaunchOn` type parameter).
    pub fn host_param(&self) -> TokenStream {
        let (name, ty) = (&self.name, &self.ty);
        let span = ty.span();
        let l = quote!(::lookahead::launch);
        let mem = memory();
        let marker = |kind: &ViewKind| match kind {
            ViewKind::Device => quote!(+ #l::DeviceMemory),
            ViewKind::Managed => quote!(+ #l::ManagedMemory),
        };
        let (elem, mutable, extra) = match &self.kind {
            Kind::Scalar => return quote!(#name: #ty),
            Kind::Value => return quote_spanned!(span=> #name: impl #l::KernelValue<#ty, #mem>),
            Kind::Slice { mutable, elem } => (elem, *mutable, quote!()),
            Kind::View {
                mutable, mem, elem, ..
            } => (elem, *mutable, marker(mem)),
        };
        if mutable {
            quote_spanned!(span=> #name: &mut (impl #l::KernelSliceMut<#elem, #mem> #extra + ?Sized))
        } else {
            quote_spanned!(span=> #name: &(impl #l::KernelSlice<#elem, #mem> #extra + ?Sized))
        }
    }

    /// `let NAME__len = <length>;` for slices, before the length rules are checked.
    pub fn host_len(&self) -> TokenStream {
        let name = &self.name;
        let l = self.len_ident();
        let mem = memory();
        let m = quote!(::lookahead::launch);
        match self.elem() {
            Some((elem, true)) => {
                quote!(let #l: usize = #m::KernelSliceMut::<#elem, #mem>::kernel_len(&*#name);)
            }
            Some((elem, false)) => {
                quote!(let #l: usize = #m::KernelSlice::<#elem, #mem>::kernel_len(&*#name);)
            }
            None => quote!(),
        }
    }

    /// Statements binding this argument and appending its lowered parameters to the list.
    pub fn push(&self) -> TokenStream {
        let (name, ty) = (&self.name, &self.ty);
        let (p, l) = (self.ptr_ident(), self.len_ident());
        let (m, mem, space, args) = (quote!(::lookahead::launch), memory(), space(), args_ident());
        match (&self.kind, self.elem()) {
            // SAFETY (every push): scalars, addresses and lengths have no padding, and a
            // by-value type is checked to be a `KernelParam` (`type_check`).
            (Kind::Scalar, _) => quote!(unsafe { #space::push(&mut #args, &#name) };),
            (Kind::Value, _) => quote! {
                let #p: #ty = #m::KernelValue::<#ty, #mem>::bind(#name, &mut #args);
                unsafe { #space::push(&mut #args, &#p) };
            },
            (_, Some((elem, false))) => quote! {
                let #p: u64 = #m::KernelSlice::<#elem, #mem>::bind(#name, &mut #args);
                unsafe { #space::push(&mut #args, &#p) };
                unsafe { #space::push(&mut #args, &#l) };
            },
            (_, Some((elem, true))) => quote! {
                let #p: u64 = #m::KernelSliceMut::<#elem, #mem>::bind_mut(&mut *#name, &mut #args);
                unsafe { #space::push(&mut #args, &#p) };
                unsafe { #space::push(&mut #args, &#l) };
            },
            _ => unreachable!("slices and views have an element type"),
        }
    }

    /// For the emulator's entry: `let <lowered>: <type> = params.get(i);` for each lowered
    /// parameter, numbering from `*next`.
    pub fn read_params(&self, params: &Ident, next: &mut usize) -> TokenStream {
        let (name, ty) = (&self.name, &self.ty);
        let (p, l) = (self.ptr_ident(), self.len_ident());
        let i = *next;
        match self.elem() {
            None => {
                *next += 1;
                // SAFETY: the launcher pushed parameter `i` from a `#ty`.
                quote!(let #name: #ty = unsafe { #params.get::<#ty>(#i) };)
            }
            Some((elem, mutable)) => {
                *next += 2;
                let j = i + 1;
                let ptr_ty = if mutable {
                    quote!(*mut #elem)
                } else {
                    quote!(*const #elem)
                };
                // SAFETY: the launcher pushed an address and a length here.
                quote! {
                    let #p: #ptr_ty = unsafe { #params.get::<u64>(#i) } as usize as #ptr_ty;
                    let #l: usize = unsafe { #params.get::<usize>(#j) };
                }
            }
        }
    }
}
