//! `#[prefetch_next]` where the kernel's macro cannot rewrite it although it sits inside the
//! kernel: in a function nested in the body, or in a `macro_rules!` defined there. Left in
//! place, rustc would first reject the attribute on an expression (E0658) and our own message
//! would then wrongly say the loop is outside a kernel; reported here, the kernel's errors
//! replace its code and the user sees only these.

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use syn::visit::Visit;
use syn::{Attribute, Item};

use crate::parse::loops::is_prefetch_attr;

/// The errors for every `#[prefetch_next]` in `item`, an item of a kernel's body.
pub fn errors(item: &Item) -> Vec<syn::Error> {
    let mut f = Finder { errors: Vec::new() };
    f.visit_item(item);
    f.errors
}

struct Finder {
    errors: Vec<syn::Error>,
}

/// A nested `#[device_fn]` (or `#[kernel]`) rewrites, or reports, its own loops.
fn has_own_macro(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| {
        (a.path().segments.last()).is_some_and(|s| s.ident == "device_fn" || s.ident == "kernel")
    })
}

impl<'ast> Visit<'ast> for Finder {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if has_own_macro(&f.attrs) {
            return;
        }
        let mut inner = NestedFn {
            name: f.sig.ident.to_string(),
            errors: &mut self.errors,
        };
        inner.visit_block(&f.block);
    }

    fn visit_item_macro(&mut self, m: &'ast syn::ItemMacro) {
        if m.mac.path.is_ident("macro_rules") {
            let name = m
                .ident
                .as_ref()
                .map_or("the macro".to_string(), |i| format!("`{i}!`"));
            find_in_tokens(&m.mac.tokens, &name, &mut self.errors);
        }
    }
}

/// The body of a plain function nested in a kernel (and what it nests in turn).
struct NestedFn<'e> {
    name: String,
    errors: &'e mut Vec<syn::Error>,
}

impl<'ast> Visit<'ast> for NestedFn<'_> {
    fn visit_attribute(&mut self, a: &'ast Attribute) {
        if is_prefetch_attr(a) {
            self.errors.push(syn::Error::new_spanned(
                a,
                format!(
                    "#[prefetch_next] on a loop of `{0}`, a function nested in the kernel: the \
                     kernel's macro rewrites only the kernel's own body; mark `{0}` with \
                     #[device_fn], or move the loop into the kernel's body",
                    self.name
                ),
            ));
        }
    }

    fn visit_item(&mut self, item: &'ast Item) {
        self.errors.extend(errors(item));
    }
}

/// Finds `# [prefetch_next ...]` in a `macro_rules!` body.
fn find_in_tokens(tokens: &TokenStream, name: &str, errors: &mut Vec<syn::Error>) {
    let trees: Vec<TokenTree> = tokens.clone().into_iter().collect();
    for (i, t) in trees.iter().enumerate() {
        let TokenTree::Group(g) = t else { continue };
        let after_pound =
            i > 0 && matches!(&trees[i - 1], TokenTree::Punct(p) if p.as_char() == '#');
        let names_prefetch = g.delimiter() == Delimiter::Bracket
            && (g.stream().into_iter().next())
                .is_some_and(|t| matches!(t, TokenTree::Ident(i) if i == "prefetch_next"));
        if after_pound && names_prefetch {
            errors.push(syn::Error::new(
                g.span(),
                format!(
                    "#[prefetch_next] in {name}, a `macro_rules!`: the kernel's macro rewrites \
                     its body before {name} expands, so it never sees this loop; write the \
                     loop in the kernel's body or in a #[device_fn]"
                ),
            ));
        } else {
            find_in_tokens(&g.stream(), name, errors);
        }
    }
}
