//! Attribute values: the small typed maps that carry op parameters and node metadata, and
//! the map form of a [`ScheduleHint`](super::hint::ScheduleHint).

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;

/// A map of named attributes, ordered by name so every rendering of it is deterministic.
pub type AttrMap = BTreeMap<String, Attr>;

/// One attribute value.
#[derive(Debug, Clone, PartialEq)]
pub enum Attr {
    /// A boolean.
    Bool(bool),
    /// A signed integer.
    Int(i64),
    /// A floating-point number.
    Float(f64),
    /// A string.
    Str(String),
    /// A list of values.
    List(Vec<Attr>),
    /// A nested map.
    Map(AttrMap),
}

impl Attr {
    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The integer, if this is one.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Self::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Self::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The float, if this is one (integers convert).
    pub fn as_float(&self) -> Option<f64> {
        match self {
            Self::Float(x) => Some(*x),
            Self::Int(i) => Some(*i as f64),
            _ => None,
        }
    }

    /// The list, if this is one.
    pub fn as_list(&self) -> Option<&[Attr]> {
        match self {
            Self::List(l) => Some(l),
            _ => None,
        }
    }

    /// The map, if this is one.
    pub fn as_map(&self) -> Option<&AttrMap> {
        match self {
            Self::Map(m) => Some(m),
            _ => None,
        }
    }
}

impl From<bool> for Attr {
    fn from(v: bool) -> Self {
        Self::Bool(v)
    }
}
impl From<i64> for Attr {
    fn from(v: i64) -> Self {
        Self::Int(v)
    }
}
impl From<f64> for Attr {
    fn from(v: f64) -> Self {
        Self::Float(v)
    }
}
impl From<&str> for Attr {
    fn from(v: &str) -> Self {
        Self::Str(v.into())
    }
}
impl From<String> for Attr {
    fn from(v: String) -> Self {
        Self::Str(v)
    }
}
impl From<AttrMap> for Attr {
    fn from(v: AttrMap) -> Self {
        Self::Map(v)
    }
}
