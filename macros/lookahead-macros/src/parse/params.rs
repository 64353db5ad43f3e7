//! Kernel parameters: which kind each declared type is, or why it cannot be a parameter.

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{FnArg, GenericArgument, Ident, Pat, PathArguments, Type};

use super::shown;

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

impl Param {
    pub fn is_slice(&self) -> bool {
        matches!(self.kind, Kind::Slice { .. } | Kind::View { .. })
    }

    /// The element type of a slice or view, and whether it is writable.
    pub fn elem(&self) -> Option<(&Type, bool)> {
        match &self.kind {
            Kind::Slice { mutable, elem } | Kind::View { mutable, elem, .. } => {
                Some((elem, *mutable))
            }
            _ => None,
        }
    }
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
            "is a raw pointer: kernels take slices, so the launcher can pass and check the \
             length (a raw pointer may be a field of a DeviceCopy struct)",
        )),
        Type::ImplTrait(_) => Err(err(
            ty.span(),
            n,
            "is `impl Trait`, a generic parameter: kernels must be concrete (write one kernel \
             per type)",
        )),
        Type::Tuple(_) => Err(err(
            ty.span(),
            n,
            "is a tuple (pass its fields as separate parameters, or group them in a \
             #[derive(DeviceCopy)] struct)",
        )),
        _ => Err(err(
            ty.span(),
            n,
            &format!(
                "has type `{}`, which is not a device-representable kernel parameter",
                shown(ty)
            ),
        )),
    }
}

fn reference_kind(n: &str, r: &syn::TypeReference) -> syn::Result<Kind> {
    if let Some(lt) = &r.lifetime {
        return Err(syn::Error::new(
            lt.span(),
            format!(
                "kernel parameter `{n}`: leave out the lifetime; a kernel's slices live for \
                 the whole launch"
            ),
        ));
    }
    match strip(&r.elem) {
        Type::Slice(s) => Ok(Kind::Slice {
            mutable: r.mutability.is_some(),
            elem: (*s.elem).clone(),
        }),
        Type::Array(a) => {
            let (elem, len) = (shown(&a.elem), shown(&a.len));
            Err(syn::Error::new(
                r.span(),
                format!(
                    "kernel parameter `{n}` is a reference to an array: pass the array by \
                     value (`{n}: [{elem}; {len}]`, copied into the kernel's parameters, for \
                     small constant data) or a slice (`{n}: &[{elem}]`, in GPU memory)"
                ),
            ))
        }
        Type::Path(p) if p.path.is_ident("str") => Err(syn::Error::new(
            r.span(),
            format!(
                "kernel parameter `{n}` is a `&str`: kernels take no text; pass its bytes as \
                 `{n}: &[u8]` (`s.as_bytes()` on the host, copied to the GPU)"
            ),
        )),
        other => Err(err(
            other.span(),
            n,
            &format!(
                "is a reference to a single value (`&{}`), which a kernel cannot take: pass a \
                 DeviceCopy value by value (`{n}: {}`), or a slice `&[T]` / `&mut [T]`",
                shown(other),
                shown(other)
            ),
        )),
    }
}

/// The message for a path type that is certainly not a kernel parameter, or `None`.
fn refused_path(id: &str) -> Option<String> {
    Some(match id {
        "Vec" | "String" | "Box" | "Rc" | "Arc" => format!(
            "has type `{id}`, which owns host memory and is not `Copy`: it cannot be passed to \
             the GPU"
        ),
        "bool" | "char" => {
            format!("has type `{id}`, which has no fixed device representation (use u8 or u32)")
        }
        "f16" | "i128" | "u128" => format!("has type `{id}`, which kernels do not support"),
        "CudaSlice" | "UnifiedSlice" | "ManagedBuffer" => format!(
            "has the host type `{id}`: declare the device view (`&[T]`, `&mut [T]`, \
             `ManagedSlice<T>`...) and pass the `{id}` to the launcher"
        ),
        _ => return None,
    })
}
