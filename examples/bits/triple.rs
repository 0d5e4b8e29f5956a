//! The target triple a hosted bit-check program (`examples/bits.rs`, `examples/bits_model.rs`)
//! prints in its lines.

/// The triple this program was built for. Cargo's `TARGET` is not given to examples, so it is
/// rebuilt from the `cfg` of the build.
pub fn triple() -> String {
    let arch = std::env::consts::ARCH;
    if cfg!(target_os = "wasi") {
        format!("{arch}-wasip1")
    } else if cfg!(all(target_os = "linux", target_env = "musl")) {
        format!("{arch}-unknown-linux-musl")
    } else if cfg!(target_os = "linux") {
        format!("{arch}-unknown-linux-gnu")
    } else if cfg!(target_os = "macos") {
        format!("{arch}-apple-darwin")
    } else {
        format!("{arch}-{}", std::env::consts::OS)
    }
}
