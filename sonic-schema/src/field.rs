//! How one typed value is written in a Redis hash field, and read back.

use std::collections::BTreeSet;

/// A value that has one string form in SONiC's DBs.
pub trait Field: Sized {
    /// What a reader is told when a value does not parse ("an integer", "up or down").
    const EXPECTED: &'static str;
    fn render(&self) -> String;
    fn parse(s: &str) -> Option<Self>;
    /// Appends the rendering (keys are built from several values without a string each).
    fn render_into(&self, out: &mut String) {
        out.push_str(&self.render());
    }
}

macro_rules! int_field {
    ($($t:ty),*) => {$(
        impl Field for $t {
            const EXPECTED: &'static str = concat!("a whole number that fits ", stringify!($t));
            fn render(&self) -> String {
                self.to_string()
            }
            fn parse(s: &str) -> Option<Self> {
                s.trim().parse().ok()
            }
            fn render_into(&self, out: &mut String) {
                use std::fmt::Write as _;
                let _ = write!(out, "{self}");
            }
        }
    )*};
}
int_field!(u8, u16, u32, u64, i32);

impl Field for f64 {
    const EXPECTED: &'static str = "a finite number";
    fn render(&self) -> String {
        // Shortest form that reads back as the same f64.
        format!("{self}")
    }
    fn parse(s: &str) -> Option<Self> {
        s.trim().parse::<f64>().ok().filter(|x| x.is_finite())
    }
}

impl Field for String {
    const EXPECTED: &'static str = "text";
    fn render(&self) -> String {
        self.clone()
    }
    fn render_into(&self, out: &mut String) {
        out.push_str(self);
    }
    fn parse(s: &str) -> Option<Self> {
        Some(s.to_string())
    }
}

impl Field for bool {
    const EXPECTED: &'static str = "true or false";
    fn render(&self) -> String {
        if *self { "true" } else { "false" }.to_string()
    }
    fn parse(s: &str) -> Option<Self> {
        match s.trim() {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        }
    }
}

/// SONiC's list of traffic classes or priorities: `3,4` or `3-4`, each in 0..=7.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClassList(pub BTreeSet<u8>);

impl ClassList {
    pub fn single(c: u8) -> Self {
        ClassList([c].into())
    }
    pub fn contains(&self, c: u8) -> bool {
        self.0.contains(&c)
    }
    pub fn iter(&self) -> impl Iterator<Item = u8> + '_ {
        self.0.iter().copied()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl FromIterator<u8> for ClassList {
    fn from_iter<I: IntoIterator<Item = u8>>(iter: I) -> Self {
        ClassList(iter.into_iter().collect())
    }
}

impl Field for ClassList {
    const EXPECTED: &'static str = "classes 0..7 as `3,4` or `3-4`";
    fn render(&self) -> String {
        let mut s = String::new();
        self.render_into(&mut s);
        s
    }
    fn render_into(&self, out: &mut String) {
        for (i, c) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push(char::from(b'0' + c.min(&9)));
        }
    }
    fn parse(s: &str) -> Option<Self> {
        let mut out = BTreeSet::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (lo, hi) = part.split_once('-').unwrap_or((part, part));
            let lo: u8 = lo.trim().parse().ok()?;
            let hi: u8 = hi.trim().parse().ok()?;
            if lo > hi || hi > 7 {
                return None;
            }
            out.extend(lo..=hi);
        }
        Some(ClassList(out))
    }
}

/// A cable length as CONFIG_DB `CABLE_LENGTH` writes it: whole metres with an `m`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Metres(pub u64);

impl Field for Metres {
    const EXPECTED: &'static str = "a length in whole metres such as `5m`";
    fn render(&self) -> String {
        format!("{}m", self.0)
    }
    fn parse(s: &str) -> Option<Self> {
        s.trim().strip_suffix('m')?.trim().parse().ok().map(Metres)
    }
}

/// Enumerations written as fixed words.
#[macro_export]
macro_rules! word_enum {
    ($(#[$m:meta])* $vis:vis enum $name:ident { $($(#[$vm:meta])* $v:ident = $s:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        $vis enum $name { $($(#[$vm])* $v),+ }
        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$v),+];
            pub const fn as_str(self) -> &'static str {
                match self { $($name::$v => $s),+ }
            }
        }
        impl $crate::Field for $name {
            const EXPECTED: &'static str = concat!("one of:" $(, " ", $s)+);
            fn render(&self) -> String {
                self.as_str().to_string()
            }
            fn parse(s: &str) -> Option<Self> {
                match s.trim() { $($s => Some($name::$v),)+ _ => None }
            }
        }
        $crate::slots!($name);
        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

/// A field of a row: a value, or an optional one (absent from the hash when `None`).
pub trait Slot: Sized {
    const OPTIONAL: bool;
    const EXPECTED: &'static str;
    fn put(&self, name: &str, out: &mut Vec<(String, String)>);
    /// `Err(None)`: missing; `Err(Some(text))`: present but bad.
    fn take(raw: Option<&str>) -> Result<Self, Option<String>>;
}

/// `T` and `Option<T>` as slots, for each field type (a blanket impl for both would overlap).
#[macro_export]
macro_rules! slots {
    ($($t:ty),* $(,)?) => {$(
        impl $crate::Slot for $t {
            const OPTIONAL: bool = false;
            const EXPECTED: &'static str = <$t as $crate::Field>::EXPECTED;
            fn put(&self, name: &str, out: &mut Vec<(String, String)>) {
                out.push((name.to_string(), $crate::Field::render(self)));
            }
            fn take(raw: Option<&str>) -> Result<Self, Option<String>> {
                let s = raw.ok_or(None)?;
                <$t as $crate::Field>::parse(s).ok_or_else(|| Some(s.to_string()))
            }
        }
        impl $crate::Slot for Option<$t> {
            const OPTIONAL: bool = true;
            const EXPECTED: &'static str = <$t as $crate::Field>::EXPECTED;
            fn put(&self, name: &str, out: &mut Vec<(String, String)>) {
                if let Some(v) = self {
                    out.push((name.to_string(), $crate::Field::render(v)));
                }
            }
            fn take(raw: Option<&str>) -> Result<Self, Option<String>> {
                match raw {
                    None => Ok(None),
                    Some(s) => <$t as $crate::Field>::parse(s)
                        .map(Some)
                        .ok_or_else(|| Some(s.to_string())),
                }
            }
        }
    )*};
}

slots!(u8, u16, u32, u64, i32, f64, String, bool, ClassList, Metres);
