//! Kernel parameter structs declared once, used on both sides.
//!
//! [`abi_struct!`](crate::abi_struct) turns one field list into
//! - a `#[repr(C)]` Rust struct (device pointers as `u64`) that the host passes by
//!   value as the kernel's single parameter, and
//! - an [`Abi`] value, whose [`Abi::cuda`] emits the same struct for CUDA with a
//!   `static_assert` on every field offset and on the size.
//!
//! The offsets come from C's rules (each field at the next multiple of its alignment;
//! the size rounded up to the largest alignment). Rust computes them in
//! [`Abi::offsets`]; a test of each struct compares them with `core::mem::offset_of!`
//! of the Rust mirror, and NVRTC checks the `static_assert`s when the kernel compiles.

use std::fmt::Write as _;

/// The type of one parameter field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AbiType {
    /// A device pointer (`u64` in Rust); the CUDA type is the field's `c_type`.
    Ptr,
    /// `int` / `i32`.
    I32,
    /// `long long` / `i64`.
    I64,
    /// `float` / `f32`.
    F32,
}

impl AbiType {
    /// Size in bytes (= alignment for these scalar types).
    pub const fn size(self) -> usize {
        match self {
            AbiType::Ptr | AbiType::I64 => 8,
            AbiType::I32 | AbiType::F32 => 4,
        }
    }
}

/// One field of a parameter struct.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbiField {
    /// The field name, the same on both sides.
    pub name: &'static str,
    /// Its type.
    pub ty: AbiType,
    /// The CUDA type as written (`const float*`, `int`, ...).
    pub c_type: &'static str,
    /// One line of documentation, emitted as a comment.
    pub doc: &'static str,
}

/// A parameter struct: its CUDA name and its fields in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Abi {
    /// The CUDA struct name.
    pub name: &'static str,
    /// The fields, in declaration order.
    pub fields: &'static [AbiField],
}

impl Abi {
    /// The C offset of each field.
    pub fn offsets(&self) -> Vec<usize> {
        let mut at = 0usize;
        self.fields
            .iter()
            .map(|f| {
                at = at.next_multiple_of(f.ty.size());
                let here = at;
                at += f.ty.size();
                here
            })
            .collect()
    }

    /// The C size of the struct.
    pub fn size(&self) -> usize {
        let align = self.fields.iter().map(|f| f.ty.size()).max().unwrap_or(1);
        let end = match (self.fields.last(), self.offsets().last()) {
            (Some(f), Some(&o)) => o + f.ty.size(),
            _ => 0,
        };
        end.next_multiple_of(align)
    }

    /// The CUDA definition, with the offsets and the size checked at compile time.
    pub fn cuda(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "// Kernel parameters, generated from the Rust field list `{}` (abi_struct!);\n\
             // the host passes the #[repr(C)] mirror by value.",
            self.name
        );
        let _ = writeln!(s, "struct {} {{", self.name);
        for f in self.fields {
            let _ = writeln!(s, "    {} {};  // {}", f.c_type, f.name, f.doc);
        }
        let _ = writeln!(s, "}};");
        // NVRTC has neither <cstddef> nor __builtin_offsetof; __INTADDR__ is the EDG
        // front end's constant-folding offsetof (a wrong offset fails to compile).
        for (f, off) in self.fields.iter().zip(self.offsets()) {
            let _ = writeln!(
                s,
                "static_assert(__INTADDR__(&(({}*)0)->{}) == {off}, \"{}.{}: offset differs from the host's\");",
                self.name, f.name, self.name, f.name
            );
        }
        let _ = writeln!(
            s,
            "static_assert(sizeof({}) == {}, \"{}: size differs from the host's\");",
            self.name,
            self.size(),
            self.name
        );
        s
    }
}

/// The Rust type of an [`AbiType`] (implementation detail of [`abi_struct!`](crate::abi_struct)).
#[doc(hidden)]
#[macro_export]
macro_rules! abi_rust_type {
    (Ptr) => {
        u64
    };
    (I32) => {
        i32
    };
    (I64) => {
        i64
    };
    (F32) => {
        f32
    };
}

/// Declares a kernel parameter struct once for both sides:
///
/// ```
/// fragmask_kernels::abi_struct! {
///     /// Example parameters.
///     pub struct ExampleParams as "FmExampleParams" {
///         /// Input.
///         input: Ptr("const float*"),
///         /// Elements.
///         count: I32("int"),
///     }
/// }
/// let abi = ExampleParams::ABI;
/// assert_eq!(abi.offsets(), vec![0, 8]);
/// assert_eq!(abi.size(), 16);
/// assert_eq!(ExampleParams::rust_offsets().to_vec(), abi.offsets());
/// assert!(abi.cuda().contains("const float* input;"));
/// ```
#[macro_export]
macro_rules! abi_struct {
    (
        $(#[$meta:meta])*
        pub struct $name:ident as $cname:literal {
            $( #[doc = $doc:literal] $field:ident : $kind:ident ($ctype:literal) ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default, PartialEq)]
        pub struct $name {
            $( #[doc = $doc] pub $field: $crate::abi_rust_type!($kind), )*
        }

        impl $name {
            /// The field list, for emitting the CUDA struct.
            pub const ABI: $crate::family::abi::Abi = $crate::family::abi::Abi {
                name: $cname,
                fields: &[ $( $crate::family::abi::AbiField {
                    name: stringify!($field),
                    ty: $crate::family::abi::AbiType::$kind,
                    c_type: $ctype,
                    doc: $doc.trim_ascii(),
                }, )* ],
            };

            /// The offsets of the Rust mirror, field by field (compare with
            /// [`Abi::offsets`]($crate::family::abi::Abi::offsets)).
            pub fn rust_offsets() -> Vec<usize> {
                vec![ $( core::mem::offset_of!($name, $field), )* ]
            }
        }
    };
}
