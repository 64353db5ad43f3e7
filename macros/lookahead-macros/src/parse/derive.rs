//! The structs of `#[derive(DeviceCopy)]` and `#[derive(KernelParams)]`.

use proc_macro2::TokenStream;
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields, Ident, Type};

use super::params::{view_of, ViewKind};

/// A `#[derive(DeviceCopy)]` struct.
pub struct DeviceCopyStruct {
    pub input: DeriveInput,
    /// Its field types.
    pub fields: Vec<Type>,
}

/// A `#[derive(KernelParams)]` struct.
pub struct KernelParamsStruct {
    pub input: DeriveInput,
    /// Its field types.
    pub types: Vec<Type>,
    pub fields: Vec<(Ident, ParamField)>,
}

/// One field of a `#[derive(KernelParams)]` struct.
pub enum ParamField {
    /// A view: bound from an allocation at launch.
    View {
        mutable: bool,
        mem: ViewKind,
        view: Ident,
        elem: Type,
    },
    /// A `DeviceCopy` value, copied as it is.
    Value(Type),
}

impl DeviceCopyStruct {
    pub fn parse(input: TokenStream) -> syn::Result<Self> {
        let input: DeriveInput = syn::parse2(input)?;
        let fields = checked_struct(&input, "DeviceCopy")?;
        Ok(DeviceCopyStruct { input, fields })
    }
}

impl KernelParamsStruct {
    pub fn parse(input: TokenStream) -> syn::Result<Self> {
        let input: DeriveInput = syn::parse2(input)?;
        let types = checked_struct(&input, "KernelParams")?;
        let Data::Struct(data) = &input.data else {
            unreachable!("checked_struct accepts structs only")
        };
        let Fields::Named(named) = &data.fields else {
            return Err(syn::Error::new(
                input.ident.span(),
                "#[derive(KernelParams)] needs named fields (`struct Inputs { x: \
                 DeviceSlice<f32>, n: u32 }`): the launcher's argument struct has one field \
                 per name",
            ));
        };
        let mut fields = Vec::new();
        for f in &named.named {
            let kind = match view_of(&f.ty) {
                Some(Ok((mutable, mem, view, elem))) => ParamField::View {
                    mutable,
                    mem,
                    view,
                    elem,
                },
                Some(Err(e)) => return Err(e),
                None => ParamField::Value(f.ty.clone()),
            };
            let ident = f.ident.clone().expect("named field");
            fields.push((ident, kind));
        }
        Ok(KernelParamsStruct {
            input,
            types,
            fields,
        })
    }
}

/// The layout checks both derives share: a struct with `#[repr(C)]` (or `transparent`), no
/// generics; returns its field types.
fn checked_struct(input: &DeriveInput, derive: &str) -> syn::Result<Vec<Type>> {
    let name = &input.ident;
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new(
            name.span(),
            format!("#[derive({derive})] works on structs only: `{name}` is not a struct"),
        ));
    };
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new(
            input.generics.span(),
            format!(
                "#[derive({derive})] structs cannot be generic: a kernel parameter needs one \
                 concrete layout; write one struct per element type"
            ),
        ));
    }
    if !has_c_layout(input) {
        return Err(syn::Error::new(
            name.span(),
            format!(
                "#[derive({derive})] needs `#[repr(C)]` on `{name}`: the host and the GPU \
                 compile the struct separately and must agree on where each field is; add \
                 `#[repr(C)]`"
            ),
        ));
    }
    Ok(data.fields.iter().map(|f| f.ty.clone()).collect())
}

fn has_c_layout(input: &DeriveInput) -> bool {
    let mut c = false;
    for a in input.attrs.iter().filter(|a| a.path().is_ident("repr")) {
        let _ = a.parse_nested_meta(|m| {
            c |= m.path.is_ident("C") || m.path.is_ident("transparent");
            if m.input.peek(syn::token::Paren) {
                // `align(8)` and the like: skip the argument.
                let _args;
                syn::parenthesized!(_args in m.input);
            }
            Ok(())
        });
    }
    c
}
