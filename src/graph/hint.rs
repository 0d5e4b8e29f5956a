//! `ScheduleHint`: the compile-time statement of which axes of an op are independent.

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

use super::attr::{Attr, AttrMap};

/// The metadata key a hint is stored under, on a graph node and in the exported module header.
pub const SCHEDULE_KEY: &str = "skainet.schedule";

/// Which dimensions of an op may run in parallel, and (advisory) with how many tasks.
///
/// `parallel_dims` is structural and authoritative; `parallelism` is advisory: it is stated
/// only when a user asked for it, and no compiler consumes it (the core count is a run-time
/// property of the device).
///
/// A dimension name is a plain identifier, `[A-Za-z_][A-Za-z0-9_]*`, compared with other
/// names ignoring ASCII case (see [`normalize_dim`](super::normalize_dim)) and otherwise
/// exactly: `Heads` is `heads`, but `heads ` or `rows"]}` is no name at all, so nothing a hint
/// holds can break the syntax of the exported module's header.
///
/// ```
/// use skainet_schedule::graph::ScheduleHint;
/// let hint = ScheduleHint::parallel(["batch", "heads"]).unwrap().with_parallelism(8).unwrap();
/// assert_eq!(hint.parallel_dims(), ["batch", "heads"]);
/// assert_eq!(hint.parallelism(), Some(8));
/// assert_eq!(ScheduleHint::from_map(&hint.to_map()), Some(hint));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ScheduleHint {
    parallel_dims: Vec<String>,
    parallelism: Option<usize>,
}

/// Why a [`ScheduleHint`] could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HintError {
    /// No dimension was named.
    NoDims,
    /// A dimension name was empty or only whitespace.
    BlankDim {
        /// Its position in the list.
        index: usize,
    },
    /// A dimension name was not a plain identifier (`[A-Za-z_][A-Za-z0-9_]*`).
    InvalidDim {
        /// Its position in the list.
        index: usize,
        /// The name, as given.
        dim: String,
    },
    /// The same dimension was named twice (ignoring ASCII case).
    DuplicateDim {
        /// The repeated name.
        dim: String,
    },
    /// `parallelism` was zero.
    ZeroParallelism,
}

impl fmt::Display for HintError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoDims => write!(f, "schedule hint: parallel_dims is empty"),
            Self::BlankDim { index } => {
                write!(f, "schedule hint: parallel_dims[{index}] is blank")
            }
            Self::InvalidDim { index, dim } => write!(
                f,
                "schedule hint: parallel_dims[{index}] = {dim:?} is not an identifier ([A-Za-z_][A-Za-z0-9_]*)"
            ),
            Self::DuplicateDim { dim } => {
                write!(f, "schedule hint: parallel_dims names {dim:?} twice")
            }
            Self::ZeroParallelism => write!(f, "schedule hint: parallelism must be > 0, got 0"),
        }
    }
}

impl core::error::Error for HintError {}

impl ScheduleHint {
    /// A hint naming the parallel dimensions, without a parallelism.
    ///
    /// # Errors
    ///
    /// [`HintError::NoDims`], [`HintError::BlankDim`], [`HintError::InvalidDim`] or
    /// [`HintError::DuplicateDim`].
    pub fn parallel<I, S>(dims: I) -> Result<Self, HintError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::new(dims, None)
    }

    /// A hint with an optional (advisory) parallelism.
    ///
    /// # Errors
    ///
    /// As [`parallel`](Self::parallel), plus [`HintError::ZeroParallelism`].
    pub fn new<I, S>(dims: I, parallelism: Option<usize>) -> Result<Self, HintError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let parallel_dims: Vec<String> = dims.into_iter().map(Into::into).collect();
        if parallel_dims.is_empty() {
            return Err(HintError::NoDims);
        }
        for (index, dim) in parallel_dims.iter().enumerate() {
            if dim.trim().is_empty() {
                return Err(HintError::BlankDim { index });
            }
            if !is_dim_name(dim) {
                return Err(HintError::InvalidDim {
                    index,
                    dim: dim.clone(),
                });
            }
            if parallel_dims[..index]
                .iter()
                .any(|d| d.eq_ignore_ascii_case(dim))
            {
                return Err(HintError::DuplicateDim { dim: dim.clone() });
            }
        }
        if parallelism == Some(0) {
            return Err(HintError::ZeroParallelism);
        }
        Ok(Self {
            parallel_dims,
            parallelism,
        })
    }

    /// The same hint with an advisory parallelism.
    ///
    /// # Errors
    ///
    /// [`HintError::ZeroParallelism`] when `parallelism == 0`.
    pub fn with_parallelism(mut self, parallelism: usize) -> Result<Self, HintError> {
        if parallelism == 0 {
            return Err(HintError::ZeroParallelism);
        }
        self.parallelism = Some(parallelism);
        Ok(self)
    }

    /// The same hint without a parallelism.
    pub fn without_parallelism(mut self) -> Self {
        self.parallelism = None;
        self
    }

    /// The parallel dimensions, in the order given.
    pub fn parallel_dims(&self) -> &[String] {
        &self.parallel_dims
    }

    /// The advisory parallelism, if one was stated.
    pub fn parallelism(&self) -> Option<usize> {
        self.parallelism
    }

    /// The map form: `{parallel_dims: [..], parallelism: N}` (`parallelism` only when stated).
    pub fn to_map(&self) -> AttrMap {
        let mut map = AttrMap::new();
        map.insert(
            "parallel_dims".to_string(),
            Attr::List(
                self.parallel_dims
                    .iter()
                    .map(|d| Attr::Str(d.clone()))
                    .collect(),
            ),
        );
        if let Some(p) = self.parallelism {
            map.insert("parallelism".to_string(), Attr::Int(p as i64));
        }
        map
    }

    /// Reads the map form back; `None` for anything that is not a valid hint (missing or
    /// mistyped keys, unknown keys, invalid values).
    pub fn from_map(map: &AttrMap) -> Option<Self> {
        if map
            .keys()
            .any(|k| k != "parallel_dims" && k != "parallelism")
        {
            return None;
        }
        let dims = map
            .get("parallel_dims")?
            .as_list()?
            .iter()
            .map(|d| d.as_str().map(String::from))
            .collect::<Option<Vec<_>>>()?;
        let parallelism = match map.get("parallelism") {
            None => None,
            Some(p) => Some(usize::try_from(p.as_int()?).ok()?),
        };
        Self::new(dims, parallelism).ok()
    }
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
fn is_dim_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn each_invalid_hint_has_its_own_error() {
        assert_eq!(
            ScheduleHint::parallel(Vec::<String>::new()),
            Err(HintError::NoDims)
        );
        assert_eq!(
            ScheduleHint::parallel(["heads", " "]),
            Err(HintError::BlankDim { index: 1 })
        );
        assert_eq!(
            ScheduleHint::parallel(["heads", "rows]"]),
            Err(HintError::InvalidDim {
                index: 1,
                dim: "rows]".into()
            })
        );
        assert_eq!(
            ScheduleHint::parallel(["heads", "heads"]),
            Err(HintError::DuplicateDim {
                dim: "heads".into()
            })
        );
        assert_eq!(
            ScheduleHint::new(["heads"], Some(0)),
            Err(HintError::ZeroParallelism)
        );
        assert_eq!(
            ScheduleHint::parallel(["heads"])
                .unwrap()
                .with_parallelism(0),
            Err(HintError::ZeroParallelism)
        );
    }

    #[test]
    fn map_form_round_trips_with_and_without_parallelism() {
        let with = ScheduleHint::new(["batch", "heads"], Some(8)).unwrap();
        let map = with.to_map();
        assert_eq!(
            map.get("parallel_dims"),
            Some(&Attr::List(vec![Attr::from("batch"), Attr::from("heads")]))
        );
        assert_eq!(map.get("parallelism"), Some(&Attr::Int(8)));
        assert_eq!(ScheduleHint::from_map(&map), Some(with.clone()));

        let without = with.without_parallelism();
        assert!(!without.to_map().contains_key("parallelism"));
        assert_eq!(ScheduleHint::from_map(&without.to_map()), Some(without));
    }

    #[test]
    fn garbage_maps_give_none() {
        let mut empty = AttrMap::new();
        assert_eq!(ScheduleHint::from_map(&empty), None);
        empty.insert("parallel_dims".into(), Attr::from("heads"));
        assert_eq!(ScheduleHint::from_map(&empty), None, "dims not a list");

        let mut m = ScheduleHint::parallel(["rows"]).unwrap().to_map();
        m.insert("parallelism".into(), Attr::Int(-2));
        assert_eq!(ScheduleHint::from_map(&m), None, "negative parallelism");
        m.insert("parallelism".into(), Attr::Int(0));
        assert_eq!(ScheduleHint::from_map(&m), None, "zero parallelism");
        m.insert("parallelism".into(), Attr::from("8"));
        assert_eq!(ScheduleHint::from_map(&m), None, "string parallelism");

        let mut extra = ScheduleHint::parallel(["rows"]).unwrap().to_map();
        extra.insert("tile".into(), Attr::Int(4));
        assert_eq!(ScheduleHint::from_map(&extra), None, "unknown key");

        let mut bad_item = AttrMap::new();
        bad_item.insert("parallel_dims".into(), Attr::List(vec![Attr::Int(1)]));
        assert_eq!(ScheduleHint::from_map(&bad_item), None, "non-string dim");
    }
}
