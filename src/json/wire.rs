//! [`wire!`](crate::wire!): a type the worker and its objects send or
//! store, declared once: the Rust type, its writer ([`super::Write`]) and
//! its reader ([`FromScan`](crate::input::scan::FromScan)), in serde's
//! default shape, which stored rows and the version before still speak.
//! A field `= value` is left out when it holds it and read as it when
//! absent, `=> value` only read so, an `Option` read as `None`; `as "key"`
//! names it on the wire. `write struct` declares a struct only written.

/// A field with a default (`= value`) is left out when it holds it. An
/// `Option`'s default is `None` and a `Vec`'s empty, whatever is written:
/// each is told by one test, not by comparing values, which would bring
/// every element type's equality into the wasm.
pub trait Omit {
    fn omitted(&self, default: impl FnOnce() -> Self) -> bool;
}

impl<T> Omit for Option<T> {
    fn omitted(&self, _: impl FnOnce() -> Self) -> bool {
        self.is_none()
    }
}

impl<T> Omit for Vec<T> {
    fn omitted(&self, _: impl FnOnce() -> Self) -> bool {
        self.is_empty()
    }
}

macro_rules! omit_by_value {
    ($($t:ty),*) => {$(
        impl Omit for $t {
            fn omitted(&self, default: impl FnOnce() -> Self) -> bool {
                *self == default()
            }
        }
    )*};
}

omit_by_value!(bool, u32, u64);

/// Declares a struct or an enum with its writer and its reader; see the
/// [module](crate::json::wire).
#[macro_export]
macro_rules! wire {
    // A struct only written (a view an answer shows), which may borrow.
    (
        $(#[$meta:meta])*
        $vis:vis write struct $name:ident $(<$lt:lifetime>)? {
            $(
                $(#[$fmeta:meta])*
                $fvis:vis $field:ident $(as $key:literal)? : $ty:ty $(= $default:expr)?
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name $(<$lt>)? {
            $($(#[$fmeta])* $fvis $field: $ty,)*
        }

        $crate::wire!(@writer $name $(<$lt>)? {$($field [$($key)?]: $ty $(= $default)?),*});
    };

    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[$fmeta:meta])*
                $fvis:vis $field:ident $(as $key:literal)? : $ty:ty
                    $(= $default:expr)? $(=> $absent:expr)?
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $($(#[$fmeta])* $fvis $field: $ty,)*
        }

        $crate::wire!(@writer $name {$($field [$($key)?]: $ty $(= $default)?),*});

        impl $crate::input::scan::FromScan for $name {
            fn from_scan(scan: &mut $crate::input::scan::Scan<'_>) -> $crate::input::scan::Read<Self> {
                $crate::wire!(@fields scan, $name {
                    $($field [$($key)?]: $ty $(= $default)? $(= $absent)?),*
                })
            }
        }
    };

    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $(
                $(#[$vmeta:meta])*
                $variant:ident
                    $(($($item:ty),+))?
                    $({$($(#[$fmeta:meta])* $field:ident: $fty:ty $(=> $absent:expr)?),* $(,)?})?
                    = $tag:literal
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $(
                $(#[$vmeta])*
                $variant $(($($item),+))? $({$($(#[$fmeta])* $field: $fty),*})?,
            )*
        }

        impl $name {
            /// The variant's name on the wire.
            pub fn name(&self) -> &'static str {
                match self {
                    $(Self::$variant { .. } => $tag,)*
                }
            }
        }

        impl $crate::json::Write for $name {
            fn write(&self, out: &mut $crate::json::Text) {
                match self {
                    $(
                        Self::$variant { .. } => $crate::wire!(
                            @write self, out, $tag, $variant $(($($item),+))? $({$($field),*})?
                        ),
                    )*
                }
            }
        }

        impl $crate::input::scan::FromScan for $name {
            fn from_scan(scan: &mut $crate::input::scan::Scan<'_>) -> $crate::input::scan::Read<Self> {
                let (tag, object) = scan.tag()?;
                let Some(object) = object else {
                    $($crate::wire!(@unit &*tag, $tag, $variant $(($($item),+))? $({$($field),*})?);)*
                    return Err($crate::input::scan::Malformed);
                };
                let value = $(
                    if *tag == *$tag {
                        $crate::wire!(
                            @value scan, $variant
                            $(($($item),+))? $({$($field: $fty $(=> $absent)?),*})?
                        )
                    } else
                )* {
                    return Err($crate::input::scan::Malformed);
                };
                object.close(scan)?;
                Ok(value)
            }
        }
    };

    // A struct's writer: its fields in the order declared.
    (@writer $name:ident $(<$lt:lifetime>)? {
        $($field:ident [$($key:literal)?]: $ty:ty $(= $default:expr)?),*
    }) => {
        impl $(<$lt>)? $crate::json::Write for $name $(<$lt>)? {
            fn write(&self, out: &mut $crate::json::Text) {
                let mut fields = out.object();
                $(
                    if $crate::wire!(@written [&self.$field, $ty] $($default)?) {
                        fields.field($crate::wire!(@key $field $($key)?), &self.$field);
                    }
                )*
                fields.end();
            }
        }
    };

    (@key $field:ident) => { stringify!($field) };
    (@key $field:ident $key:literal) => { $key };

    (@written [$value:expr, $ty:ty]) => { true };
    (@written [$value:expr, $ty:ty] $default:expr) => {
        !$crate::json::wire::Omit::omitted($value, || -> $ty { $default })
    };

    // An enum's variant written: its bare name, or an object of one key.
    (@write $this:expr, $out:ident, $tag:literal, $variant:ident) => {
        $out.str($tag)
    };
    (@write $this:expr, $out:ident, $tag:literal, $variant:ident ($a:ty, $b:ty)) => {
        if let Self::$variant(a, b) = $this {
            $out.tagged($tag, &(a, b))
        }
    };
    (@write $this:expr, $out:ident, $tag:literal, $variant:ident ($a:ty)) => {
        if let Self::$variant(a) = $this {
            $out.tagged($tag, a)
        }
    };
    (@write $this:expr, $out:ident, $tag:literal, $variant:ident {$($field:ident),*}) => {
        if let Self::$variant { $($field),* } = $this {
            let mut outer = $out.object();
            let mut fields = outer.at($tag).object();
            $(fields.field(stringify!($field), $field);)*
            fields.end();
            outer.end();
        }
    };

    // A unit variant read from its bare name.
    (@unit $found:expr, $tag:literal, $variant:ident) => {
        if $found == $tag {
            return Ok(Self::$variant);
        }
    };
    (@unit $found:expr, $tag:literal, $variant:ident $body:tt) => {};

    // A variant's value read from the object of one key around it (a unit
    // variant's is `null`).
    (@value $scan:ident, $variant:ident) => {
        match $scan.null() {
            true => Self::$variant,
            false => return Err($crate::input::scan::Malformed),
        }
    };
    (@value $scan:ident, $variant:ident ($a:ty, $b:ty)) => {{
        let (a, b) = <($a, $b) as $crate::input::scan::FromScan>::from_scan($scan)?;
        Self::$variant(a, b)
    }};
    (@value $scan:ident, $variant:ident ($a:ty)) => {
        Self::$variant($crate::input::scan::FromScan::from_scan($scan)?)
    };
    (@value $scan:ident, $variant:ident {$($field:ident: $fty:ty $(=> $absent:expr)?),*}) => {
        $crate::wire!(@fields $scan, Self::$variant {$($field []: $fty $(= $absent)?),*})?
    };

    // An object's fields read into a struct or a struct variant: each into
    // an `Option` as its key comes (`Open::field` skips the others), then
    // all taken at once. The reading is a closure of its own, so that an
    // error inside it drops nothing of the struct's: one way out for every
    // error, not one per field, each dropping the fields before it.
    (@fields $scan:ident, $($path:ident)::+ {
        $($field:ident [$($key:literal)?]: $ty:ty $(= $default:expr)?),*
    }) => {{
        const NAMES: &[&str] = &[$($crate::wire!(@key $field $($key)?)),*];
        $(let mut $field: Option<$ty> = None;)*
        let filled = (|| {
            let mut object = $scan.object()?;
            while let Some(at) = object.field($scan, NAMES)? {
                let mut place = 0;
                $(
                    if at == place {
                        $field = Some($crate::input::scan::FromScan::from_scan($scan)?);
                    }
                    place += 1;
                )*
                let _ = place;
            }
            Ok(())
        })();
        filled?;
        match ($($crate::wire!(@present $field: $ty $(= $default)?),)*) {
            ($(Some($field),)*) => Ok($($path)::+ { $($field,)* }),
            _ => Err($crate::input::scan::Malformed),
        }
    }};
    (@present $field:ident: $ty:ty) => {
        match $field {
            Some(value) => Some(value),
            None => <$ty as $crate::input::scan::FromScan>::absent(),
        }
    };
    (@present $field:ident: $ty:ty = $default:expr) => {
        Some(match $field {
            Some(value) => value,
            None => $default,
        })
    };
}
