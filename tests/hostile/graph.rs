//! The graph builder against foreign handles, hint names that are not identifiers and
//! shapes no tensor can have.
