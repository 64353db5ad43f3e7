//! Kernel parameter kinds: what a parameter type lowers to on the GPU and what the host
//! launcher accepts for it.

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
memory only); with T one of the scalars; `RequestQueue` (a GPU-driven request queue, by value)";

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum ViewKind {
    Device,
    Managed,
}

pub enum Kind {
    Scalar,
    /// `RequestQueue` (`lookahead_device::requests`), passed by value.
    Queue,
    /// `&[T]` (`mutable` false) or `&mut [T]`.
    Slice {
        mutable: bool,
        elem: Type,
    },
    /// `DeviceSlice<T>` & co.
    View {
        mutable: bool,
        mem: ViewKind,
        name: Ident,
        elem: Type,
    },
}

pub struct Param {
    pub name: Ident,
    pub ty: Type,
    pub kind: Kind,
}

fn is_scalar(ty: &Type) -> bool {
    match ty {
        Type::Path(p) if p.qself.is_none() && p.path.segments.len() == 1 => {
            let seg = &p.path.segments[0];
            seg.arguments.is_empty() && SCALARS.iter().any(|s| seg.ident == s)
        }
        Type::Paren(p) => is_scalar(&p.elem),
        Type::Group(g) => is_scalar(&g.elem),
        _ => false,
    }
}

fn err(span: Span, name: &str, what: &str) -> syn::Error {
    syn::Error::new(
        span,
        format!("kernel parameter `{name}` {what}; {ACCEPTED}"),
    )
}

fn element(name: &str, elem: &Type, outer: &str) -> syn::Result<Type> {
    if is_scalar(elem) {
        Ok(elem.clone())
    } else {
        Err(err(
            elem.span(),
            name,
            &format!(
                "has element type `{}` in `{outer}`, which is not device-representable here",
                quote!(#elem).to_string().replace(' ', "")
            ),
        ))
    }
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
    let n = name.to_string();
    let ty = (*pt.ty).clone();
    let kind = match &ty {
        t if is_scalar(t) => Kind::Scalar,
        Type::Reference(r) => {
            if let Some(lt) = &r.lifetime {
                return Err(syn::Error::new(
                    lt.span(),
                    format!("kernel parameter `{n}`: leave out the lifetime; a kernel's slices live for the whole launch"),
                ));
            }
            match &*r.elem {
                Type::Slice(s) => Kind::Slice {
                    mutable: r.mutability.is_some(),
                    elem: element(&n, &s.elem, "a slice")?,
                },
                other => {
                    return Err(err(
                        other.span(),
                        &n,
                        "is a reference to a single value, which a kernel cannot take (pass a one-element slice `&[T]` / `&mut [T]` instead)",
                    ))
                }
            }
        }
        Type::Ptr(p) => {
            return Err(err(
                p.span(),
                &n,
                "is a raw pointer: kernels take slices, so the launcher can pass and check the length",
            ))
        }
        Type::Path(p) if p.qself.is_none() => {
            let seg = p.path.segments.last().ok_or_else(|| err(p.span(), &n, "has an empty type"))?;
            let id = seg.ident.to_string();
            if id == "RequestQueue" && seg.arguments.is_empty() {
                return Ok(Param { name, ty, kind: Kind::Queue });
            }
            let view = match id.as_str() {
                "DeviceSlice" => Some((false, ViewKind::Device)),
                "DeviceSliceMut" => Some((true, ViewKind::Device)),
                "ManagedSlice" => Some((false, ViewKind::Managed)),
                "ManagedSliceMut" => Some((true, ViewKind::Managed)),
                _ => None,
            };
            match view {
                Some((mutable, mem)) => {
                    let elem = match &seg.arguments {
                        PathArguments::AngleBracketed(a) if a.args.len() == 1 => match &a.args[0] {
                            GenericArgument::Type(t) => element(&n, t, &id)?,
                            other => {
                                return Err(err(other.span(), &n, &format!("needs one element type: `{id}<T>`")))
                            }
                        },
                        _ => return Err(err(seg.span(), &n, &format!("needs one element type: `{id}<T>`"))),
                    };
                    Kind::View { mutable, mem, name: seg.ident.clone(), elem }
                }
                None => {
                    let what = match id.as_str() {
                        "Vec" | "String" | "Box" | "Rc" | "Arc" => format!(
                            "has type `{id}`, which owns host memory and is not `Copy`: it cannot be passed to the GPU"
                        ),
                        "bool" | "char" => format!("has type `{id}`, which has no fixed device representation (use u8 or u32)"),
                        "f16" | "i128" | "u128" => format!("has type `{id}`, which kernels do not support"),
                        "CudaSlice" | "UnifiedSlice" => format!(
                            "has the host type `{id}`: declare the device view (`&[T]`, `&mut [T]`, `ManagedSlice<T>`...) and pass the `{id}` to the launcher"
                        ),
                        _ => format!(
                            "has type `{}`, which is not a device-representable kernel parameter",
                            quote!(#ty).to_string().replace(' ', "")
                        ),
                    };
                    return Err(err(ty.span(), &n, &what));
                }
            }
        }
        Type::ImplTrait(_) => {
            return Err(err(
                ty.span(),
                &n,
                "is `impl Trait`, a generic parameter: kernels must be concrete (write one kernel per type)",
            ))
        }
        Type::Array(_) => {
            return Err(err(ty.span(), &n, "is an array passed by value (pass a slice `&[T]`)"))
        }
        Type::Tuple(_) => return Err(err(ty.span(), &n, "is a tuple (pass its fields as separate parameters)")),
        _ => {
            return Err(err(
                ty.span(),
                &n,
                &format!(
                    "has type `{}`, which is not a device-representable kernel parameter",
                    quote!(#ty).to_string().replace(' ', "")
                ),
            ))
        }
    };
    Ok(Param { name, ty, kind })
}

impl Param {
    pub fn ptr_ident(&self) -> Ident {
        format_ident!("{}__ptr", self.name)
    }
    pub fn len_ident(&self) -> Ident {
        format_ident!("{}__len", self.name)
    }

    /// Parameters of the PTX entry.
    pub fn lowered(&self) -> TokenStream {
        let name = &self.name;
        let (p, l) = (self.ptr_ident(), self.len_ident());
        match &self.kind {
            Kind::Scalar => {
                let ty = &self.ty;
                quote!(#name: #ty)
            }
            Kind::Queue => quote!(#name: ::lookahead_device::requests::RequestQueue),
            Kind::Slice { mutable, elem } | Kind::View { mutable, elem, .. } => {
                if *mutable {
                    quote!(#p: *mut #elem, #l: usize)
                } else {
                    quote!(#p: *const #elem, #l: usize)
                }
            }
        }
    }

    /// The expression rebuilding the typed value inside the entry.
    pub fn rebuild(&self) -> TokenStream {
        let name = &self.name;
        let (p, l) = (self.ptr_ident(), self.len_ident());
        match &self.kind {
            Kind::Scalar | Kind::Queue => quote!(#name),
            Kind::Slice { mutable: false, .. } => {
                quote!(::lookahead_device::view::slice_from_raw(#p, #l))
            }
            Kind::Slice { mutable: true, .. } => {
                quote!(::lookahead_device::view::slice_from_raw_mut(#p, #l))
            }
            Kind::View {
                name: view, elem, ..
            } => {
                quote!(::lookahead_device::view::#view::<#elem>::from_raw_parts(#p, #l))
            }
        }
    }

    pub fn is_slice(&self) -> bool {
        !matches!(self.kind, Kind::Scalar | Kind::Queue)
    }

    /// The host launcher's parameter (`__On` is the launcher's `LaunchOn` type parameter).
    pub fn host_param(&self) -> TokenStream {
        let name = &self.name;
        let span = self.ty.span();
        let l = quote!(::lookahead::launch);
        let mem = memory();
        match &self.kind {
            Kind::Scalar => {
                let ty = &self.ty;
                quote!(#name: #ty)
            }
            Kind::Queue => quote!(#name: ::lookahead_device::requests::RequestQueue),
            Kind::Slice {
                mutable: false,
                elem,
            } => {
                quote_spanned!(span=> #name: &(impl #l::KernelSlice<#elem, #mem> + ?Sized))
            }
            Kind::Slice {
                mutable: true,
                elem,
            } => {
                quote_spanned!(span=> #name: &mut (impl #l::KernelSliceMut<#elem, #mem> + ?Sized))
            }
            Kind::View {
                mutable,
                mem: kind,
                elem,
                ..
            } => {
                let marker = match kind {
                    ViewKind::Device => quote!(#l::DeviceMemory),
                    ViewKind::Managed => quote!(#l::ManagedMemory),
                };
                if *mutable {
                    quote_spanned!(span=> #name: &mut (impl #l::KernelSliceMut<#elem, #mem> + #marker + ?Sized))
                } else {
                    quote_spanned!(span=> #name: &(impl #l::KernelSlice<#elem, #mem> + #marker + ?Sized))
                }
            }
        }
    }

    /// Statements appending this argument to the argument list `args`.
    pub fn push(&self) -> TokenStream {
        let name = &self.name;
        let l = self.len_ident();
        let m = quote!(::lookahead::launch);
        let mem = memory();
        let space = quote!(<#mem as #m::MemorySpace>);
        match &self.kind {
            Kind::Scalar | Kind::Queue => quote!(#space::push(&mut args, &#name);),
            Kind::Slice {
                mutable: false,
                elem,
            }
            | Kind::View {
                mutable: false,
                elem,
                ..
            } => {
                quote!(#m::KernelSlice::<#elem, #mem>::push_arg(#name, &mut args); #space::push(&mut args, &#l);)
            }
            Kind::Slice {
                mutable: true,
                elem,
            }
            | Kind::View {
                mutable: true,
                elem,
                ..
            } => {
                quote!(#m::KernelSliceMut::<#elem, #mem>::push_arg_mut(&mut *#name, &mut args); #space::push(&mut args, &#l);)
            }
        }
    }

    /// `let NAME__len = <length>;` for slices.
    pub fn host_len(&self) -> TokenStream {
        let name = &self.name;
        let l = self.len_ident();
        let m = quote!(::lookahead::launch);
        let mem = memory();
        match &self.kind {
            Kind::Scalar => quote!(),
            // By value: wrapped once, before the argument list borrows it.
            Kind::Queue => quote!(let #name = #m::ByValue(#name);),
            Kind::Slice {
                mutable: false,
                elem,
            }
            | Kind::View {
                mutable: false,
                elem,
                ..
            } => {
                quote!(let #l: usize = #m::KernelSlice::<#elem, #mem>::kernel_len(&*#name);)
            }
            Kind::Slice {
                mutable: true,
                elem,
            }
            | Kind::View {
                mutable: true,
                elem,
                ..
            } => {
                quote!(let #l: usize = #m::KernelSliceMut::<#elem, #mem>::kernel_len(&*#name);)
            }
        }
    }

    /// For the emulator's entry: `let <lowered>: <type> = params.get(i);` for each lowered
    /// parameter, numbering from `*next`.
    pub fn read_params(&self, next: &mut usize) -> TokenStream {
        let name = &self.name;
        let (p, l) = (self.ptr_ident(), self.len_ident());
        let mut get = || {
            let i = *next;
            *next += 1;
            quote!(params.get(#i))
        };
        match &self.kind {
            Kind::Scalar => {
                let ty = &self.ty;
                let g = get();
                quote!(let #name: #ty = #g;)
            }
            Kind::Queue => {
                let g = get();
                quote!(let #name: ::lookahead_device::requests::RequestQueue = #g;)
            }
            Kind::Slice { mutable, elem } | Kind::View { mutable, elem, .. } => {
                let (gp, gl) = (get(), get());
                let ptr_ty = if *mutable {
                    quote!(*mut #elem)
                } else {
                    quote!(*const #elem)
                };
                quote!(let #p: #ptr_ty = #gp; let #l: usize = #gl;)
            }
        }
    }
}

/// The launcher's memory space: `<__On as LaunchOn>::Memory`.
fn memory() -> TokenStream {
    quote!(<__On as ::lookahead::launch::LaunchOn>::Memory)
}
